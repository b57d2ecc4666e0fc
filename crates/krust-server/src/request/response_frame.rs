//! Response frames: the size prefix, the response header and the encoded body, with the record
//! bytes of a Fetch left in their segment files so the connection can send them with sendfile
//! instead of copying them through the encoder.
//!
//! kafka-protocol encodes a `records` field by writing its length and then `put_slice` of its
//! bytes. A Fetch response is encoded with a placeholder in each records field: a slice of one
//! untouched anonymous mapping, exactly as long as the file range it stands for. The encoder
//! recognises those slices by address, in encoding order, and puts the file range in the frame
//! in their place. The placeholder pages are never read, so they cost address space only.

use std::collections::VecDeque;
use std::io;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use krust_storage::FileSlice;
use memmap2::MmapOptions;

/// One piece of a response frame.
#[derive(Debug)]
pub enum FramePart {
    Bytes(Bytes),
    File(FileSlice),
}

impl FramePart {
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(bytes) => bytes.len(),
            Self::File(slice) => slice.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A complete response frame (size prefix included), in the order its parts go on the wire.
#[derive(Debug)]
pub struct ResponseFrame {
    parts: Vec<FramePart>,
}

impl ResponseFrame {
    pub fn parts(&self) -> &[FramePart] {
        &self.parts
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(FramePart::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole frame in memory, file ranges read in (for tests and non-socket transports).
    pub fn to_bytes(&self) -> io::Result<BytesMut> {
        let mut out = BytesMut::with_capacity(self.len());
        for part in &self.parts {
            match part {
                FramePart::Bytes(bytes) => out.extend_from_slice(bytes),
                FramePart::File(slice) => out.extend_from_slice(&slice.read_bytes()?),
            }
        }
        Ok(out)
    }
}

/// File ranges to splice into a response, and the placeholders that stand for them.
pub struct SplicedRecords {
    backing: Bytes,
    slices: VecDeque<FileSlice>,
}

impl SplicedRecords {
    /// Room for placeholders of up to `max_len` bytes each.
    pub fn with_max_len(max_len: usize) -> io::Result<Self> {
        let backing = if max_len == 0 {
            Bytes::new()
        } else {
            Bytes::from_owner(
                MmapOptions::new()
                    .len(max_len)
                    .map_anon()?
                    .make_read_only()?,
            )
        };
        Ok(Self {
            backing,
            slices: VecDeque::new(),
        })
    }

    /// The placeholder for `slice`; call in the order the response encodes its records fields.
    pub fn placeholder(&mut self, slice: FileSlice) -> Bytes {
        if slice.is_empty() {
            return Bytes::new();
        }
        let placeholder = self.backing.slice(..slice.len());
        self.slices.push_back(slice);
        placeholder
    }

    fn is_placeholder(&self, bytes: &[u8]) -> bool {
        !bytes.is_empty() && std::ptr::eq(bytes.as_ptr(), self.backing.as_ptr())
    }
}

/// Encodes `body` as a whole frame; records fields that are placeholders of `spliced` become
/// file parts.
pub fn encode_frame<T: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &T,
    version: i16,
    spliced: Option<SplicedRecords>,
) -> Result<ResponseFrame, String> {
    let mut encoder = FrameEncoder::new(spliced);
    encoder.current.extend_from_slice(&[0; 4]);
    encoder
        .current
        .extend_from_slice(&correlation_id.to_be_bytes());
    // A v1 response header adds an empty tagged-field section.
    if header_version >= 1 {
        encoder.current.put_u8(0);
    }
    if encoder.spliced.is_none() {
        if let Ok(size) = body.compute_size(version) {
            encoder.current.reserve(size);
        }
    }
    body.encode(&mut encoder, version)
        .map_err(|error| format!("cannot encode the response: {error}"))?;
    encoder.finish()
}

/// Frames a body that is already encoded (a response from Python).
pub fn frame_encoded_body(correlation_id: i32, header_version: i16, body: &[u8]) -> ResponseFrame {
    let mut frame = BytesMut::with_capacity(9 + body.len());
    frame.extend_from_slice(
        &((body.len() + 4 + usize::from(header_version >= 1)) as i32).to_be_bytes(),
    );
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    if header_version >= 1 {
        frame.put_u8(0);
    }
    frame.extend_from_slice(body);
    ResponseFrame {
        parts: vec![FramePart::Bytes(frame.freeze())],
    }
}

/// Frames bytes that already hold a response's header and body (a forwarded response).
pub fn frame_header_and_body(header_and_body: &[u8]) -> ResponseFrame {
    let mut frame = BytesMut::with_capacity(4 + header_and_body.len());
    frame.extend_from_slice(&(header_and_body.len() as i32).to_be_bytes());
    frame.extend_from_slice(header_and_body);
    ResponseFrame {
        parts: vec![FramePart::Bytes(frame.freeze())],
    }
}

/// A `ByteBufMut` that writes into memory except where a placeholder is put.
struct FrameEncoder {
    parts: Vec<FramePart>,
    current: BytesMut,
    /// Bytes in `parts` (everything before `current`).
    written: usize,
    spliced: Option<SplicedRecords>,
    /// Set when a placeholder does not match the next file range, or the encoder is asked to
    /// reach back into a part already handed over (response codecs never do: only record-batch
    /// encoding uses gaps). Such a frame is refused rather than sent wrong.
    malformed: bool,
    scratch: Vec<u8>,
}

impl FrameEncoder {
    fn new(spliced: Option<SplicedRecords>) -> Self {
        Self {
            parts: Vec::new(),
            current: BytesMut::with_capacity(256),
            written: 0,
            spliced,
            malformed: false,
            scratch: Vec::new(),
        }
    }

    fn splice_next(&mut self, placeholder_len: usize) {
        let Some(slice) = self.spliced.as_mut().and_then(|s| s.slices.pop_front()) else {
            self.malformed = true;
            return;
        };
        if slice.len() != placeholder_len {
            self.malformed = true;
        }
        let before = self.current.split().freeze();
        self.written += before.len() + slice.len();
        self.parts.push(FramePart::Bytes(before));
        self.parts.push(FramePart::File(slice));
    }

    fn finish(mut self) -> Result<ResponseFrame, String> {
        let left_over = self.spliced.as_ref().is_some_and(|s| !s.slices.is_empty());
        if self.malformed || left_over {
            return Err("the response's records did not line up with its file ranges".into());
        }
        let size = self.offset() - 4;
        let size = i32::try_from(size).map_err(|_| format!("response of {size} bytes"))?;
        match self.parts.first_mut() {
            Some(FramePart::Bytes(first)) => {
                let mut head = std::mem::take(first)
                    .try_into_mut()
                    .unwrap_or_else(|shared| BytesMut::from(shared.as_ref()));
                head[..4].copy_from_slice(&size.to_be_bytes());
                *first = head.freeze();
            }
            _ => self.current[..4].copy_from_slice(&size.to_be_bytes()),
        }
        if !self.current.is_empty() {
            self.parts.push(FramePart::Bytes(self.current.freeze()));
        }
        Ok(ResponseFrame { parts: self.parts })
    }
}

// SAFETY: every method delegates to `current`, a `BytesMut`, whose own implementation upholds
// the trait's contract; `put_slice` only appends through `extend_from_slice` or hands over
// `current`'s initialised bytes.
unsafe impl BufMut for FrameEncoder {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, count: usize) {
        // SAFETY: the caller initialised `count` bytes of `chunk_mut`, which is `current`'s.
        unsafe { self.current.advance_mut(count) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if self.spliced.as_ref().is_some_and(|s| s.is_placeholder(src)) {
            self.splice_next(src.len());
        } else {
            self.current.extend_from_slice(src);
        }
    }
}

impl ByteBufMut for FrameEncoder {
    fn offset(&self) -> usize {
        self.written + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        match offset.checked_sub(self.written) {
            Some(in_current) => self.current.resize(in_current, 0),
            None => self.malformed = true,
        }
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        if r.start >= self.written && r.end <= self.offset() {
            return &mut self.current[r.start - self.written..r.end - self.written];
        }
        self.malformed = true;
        self.scratch.resize(r.len(), 0);
        &mut self.scratch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Decodable, StrBytes};
    use std::io::Write;
    use std::sync::Arc;

    fn file_with(contents: &[u8]) -> Arc<std::fs::File> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(contents).unwrap();
        Arc::new(file)
    }

    fn response_with(records: Vec<Bytes>) -> FetchResponse {
        let partitions = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_records(Some(r))
            })
            .collect();
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(partitions)])
    }

    #[test]
    fn spliced_file_ranges_encode_exactly_like_in_memory_records() {
        let contents: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let file = file_with(&contents);
        let ranges = [(10usize, 1000usize), (2000, 0), (1500, 3000)];
        for version in [4, 11, 12, 16] {
            let expected_records: Vec<Bytes> = ranges
                .iter()
                .map(|(at, len)| Bytes::copy_from_slice(&contents[*at..at + len]))
                .collect();
            let expected =
                encode_frame(7, 1, &response_with(expected_records), version, None).unwrap();
            let max = ranges.iter().map(|(_, len)| *len).max().unwrap();
            let mut spliced = SplicedRecords::with_max_len(max).unwrap();
            let placeholders = ranges
                .iter()
                .map(|(at, len)| {
                    spliced.placeholder(FileSlice::new(Arc::clone(&file), *at as u64, *len))
                })
                .collect();
            let frame =
                encode_frame(7, 1, &response_with(placeholders), version, Some(spliced)).unwrap();
            let files = frame
                .parts()
                .iter()
                .filter(|p| matches!(p, FramePart::File(_)))
                .count();
            assert_eq!(files, 2, "v{version}");
            assert_eq!(
                frame.to_bytes().unwrap(),
                expected.to_bytes().unwrap(),
                "v{version}"
            );
            let mut body = frame.to_bytes().unwrap().freeze().slice(4 + 4 + 1..);
            let decoded = FetchResponse::decode(&mut body, version).unwrap();
            let first = decoded.responses[0].partitions[0].records.clone().unwrap();
            assert_eq!(first.as_ref(), &contents[10..1010]);
        }
    }

    #[test]
    fn a_placeholder_without_its_range_is_refused() {
        let mut spliced = SplicedRecords::with_max_len(16).unwrap();
        let file = file_with(&[1; 32]);
        let placeholder = spliced.placeholder(FileSlice::new(file, 0, 16));
        let response = response_with(vec![placeholder.clone(), placeholder]);
        assert!(encode_frame(1, 1, &response, 12, Some(spliced)).is_err());
    }

    #[test]
    fn the_size_prefix_counts_every_part() {
        let file = file_with(&[9; 100]);
        let mut spliced = SplicedRecords::with_max_len(100).unwrap();
        let placeholder = spliced.placeholder(FileSlice::new(file, 0, 100));
        let frame =
            encode_frame(1, 1, &response_with(vec![placeholder]), 12, Some(spliced)).unwrap();
        let bytes = frame.to_bytes().unwrap();
        let declared = i32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(declared + 4, bytes.len());
    }
}
