//! A cheap structural walk over a batch's records, straight from the batch bytes or from a
//! decompressing stream.
//!
//! Each record is: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint | headers.
//! The walk checks that every length stays inside its record and that the records fill the
//! records area exactly. Nothing is allocated from a length on the wire: keys, values and
//! headers are skipped, so a stream is walked in a fixed-size buffer.

use std::io::{BufRead, BufReader, Read};

use crate::batch::{BatchHeader, Compression, RECORD_BATCH_OVERHEAD};
use crate::compression::corrupt;
use crate::error::BatchError;

/// The per-record facts the broker needs: where the record sits in time and offset space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// A non-null key (a compacted topic refuses records without one).
    pub has_key: bool,
}

/// Where a walk reads record bytes from.
pub trait ByteSource {
    /// Whether the records area is exhausted.
    fn at_end(&mut self) -> Result<bool, BatchError>;
    /// The next byte, or `None` at the end of the records area.
    fn next_byte(&mut self) -> Result<Option<u8>, BatchError>;
    /// Skips `n` bytes; false if the records area ends first.
    fn skip(&mut self, n: usize) -> Result<bool, BatchError>;
}

/// An uncompressed records area, walked in place.
pub struct SliceSource<'a> {
    buf: &'a [u8],
}

impl ByteSource for SliceSource<'_> {
    fn at_end(&mut self) -> Result<bool, BatchError> {
        Ok(self.buf.is_empty())
    }

    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        let Some((first, rest)) = self.buf.split_first() else {
            return Ok(None);
        };
        self.buf = rest;
        Ok(Some(*first))
    }

    fn skip(&mut self, n: usize) -> Result<bool, BatchError> {
        let fits = n <= self.buf.len();
        self.buf = &self.buf[n.min(self.buf.len())..];
        Ok(fits)
    }
}

/// A decompressed records area, read through a fixed-size buffer.
pub struct StreamSource<'a> {
    reader: BufReader<Box<dyn Read + 'a>>,
    compression: Compression,
}

impl StreamSource<'_> {
    fn available(&mut self) -> Result<&[u8], BatchError> {
        let compression = self.compression;
        self.reader.fill_buf().map_err(|e| corrupt(compression, &e))
    }
}

impl ByteSource for StreamSource<'_> {
    fn at_end(&mut self) -> Result<bool, BatchError> {
        Ok(self.available()?.is_empty())
    }

    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        let Some(byte) = self.available()?.first().copied() else {
            return Ok(None);
        };
        self.reader.consume(1);
        Ok(Some(byte))
    }

    fn skip(&mut self, mut n: usize) -> Result<bool, BatchError> {
        while n > 0 {
            let available = self.available()?.len();
            if available == 0 {
                return Ok(false);
            }
            let step = available.min(n);
            self.reader.consume(step);
            n -= step;
        }
        Ok(true)
    }
}

/// Iterates the records of a records area.
pub struct RecordWalk<S> {
    source: S,
    failed: bool,
}

impl<'a> RecordWalk<SliceSource<'a>> {
    /// Walks an uncompressed records area in place.
    pub fn new(records_area: &'a [u8]) -> Self {
        Self {
            source: SliceSource { buf: records_area },
            failed: false,
        }
    }
}

impl<'a> RecordWalk<StreamSource<'a>> {
    /// Walks the records area of a batch compressed with `compression`, decompressing as it
    /// goes.
    pub fn decompressing(compression: Compression, payload: &'a [u8]) -> Result<Self, BatchError> {
        let reader = crate::compression::decompressing_reader(compression, payload)?;
        Ok(Self {
            source: StreamSource {
                reader: BufReader::with_capacity(STREAM_BUFFER, reader),
                compression,
            },
            failed: false,
        })
    }
}

const STREAM_BUFFER: usize = 16 << 10;

/// The records of one whole batch (`batch` starts at its base offset field), walked in place
/// or through its codec's decompressor.
pub fn batch_records<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
) -> Result<Box<dyn Iterator<Item = Result<RecordInfo, BatchError>> + 'a>, BatchError> {
    let area = batch.get(RECORD_BATCH_OVERHEAD..).unwrap_or_default();
    Ok(match header.compression() {
        Compression::None => Box::new(RecordWalk::new(area)),
        compression => Box::new(RecordWalk::decompressing(compression, area)?),
    })
}

impl<S: ByteSource> RecordWalk<S> {
    fn next_record(&mut self) -> Result<RecordInfo, BatchError> {
        let length = zigzag_i32(unsigned(5, || self.source.next_byte(), "record length")?)?;
        let length = usize::try_from(length).map_err(|_| invalid("negative record length"))?;
        let mut body = Bounded {
            source: &mut self.source,
            remaining: length,
        };
        body.take(1)?;
        let timestamp_delta = body.varlong()?;
        let offset_delta = body.varint()?;
        let has_key = body.skip_bytes_field()?;
        body.skip_bytes_field()?;
        let headers = body.varint()?;
        if headers < 0 {
            return Err(invalid("negative header count"));
        }
        for _ in 0..headers {
            let key_length = body.varint()?;
            if key_length < 0 {
                return Err(invalid("null header key"));
            }
            body.take(key_length as usize)?;
            body.skip_bytes_field()?;
        }
        if body.remaining != 0 {
            return Err(invalid("record length does not match its fields"));
        }
        Ok(RecordInfo {
            timestamp_delta,
            offset_delta,
            has_key,
        })
    }
}

impl<S: ByteSource> Iterator for RecordWalk<S> {
    type Item = Result<RecordInfo, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match self.source.at_end() {
            Ok(true) => return None,
            Ok(false) => self.next_record(),
            Err(e) => Err(e),
        };
        self.failed = item.is_err();
        Some(item)
    }
}

/// One record of an uncompressed records area, borrowed from it: what the log cleaner needs
/// to keep or drop it and to write it again, and what a consumer reads.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    /// `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The record's bytes after its offset delta (key, value, headers), as stored.
    pub tail: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// A record with a null value.
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// The record's headers in stored order (keys may repeat), each a key and a nullable value.
    pub fn headers(&self) -> impl Iterator<Item = Result<Header<'a>, BatchError>> {
        let mut rest = SliceSource { buf: self.tail };
        let count = bytes_field(&mut rest)
            .and_then(|_key| bytes_field(&mut rest))
            .and_then(|_value| zigzag_i32(unsigned(5, || rest.next_byte(), "header count")?))
            .and_then(|count| usize::try_from(count).map_err(|_| invalid("negative header count")));
        let mut remaining = 0;
        let mut failed = None;
        match count {
            Ok(count) => remaining = count,
            Err(e) => failed = Some(e),
        }
        std::iter::from_fn(move || {
            if let Some(e) = failed.take() {
                remaining = 0;
                return Some(Err(e));
            }
            if remaining == 0 {
                return None;
            }
            remaining -= 1;
            let header = bytes_field(&mut rest).and_then(|key| {
                let key = key.ok_or_else(|| invalid("null header key"))?;
                Ok(Header {
                    key,
                    value: bytes_field(&mut rest)?,
                })
            });
            if header.is_err() {
                remaining = 0;
            }
            Some(header)
        })
    }
}

/// One record header: a key (Kafka requires it) and a nullable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// The records of an uncompressed records area (a batch's, already validated on append).
pub fn record_views(area: &[u8]) -> impl Iterator<Item = Result<RecordView<'_>, BatchError>> {
    let mut rest = SliceSource { buf: area };
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || rest.buf.is_empty() {
            return None;
        }
        let view = next_view(&mut rest);
        failed = view.is_err();
        Some(view)
    })
}

fn next_view<'a>(rest: &mut SliceSource<'a>) -> Result<RecordView<'a>, BatchError> {
    let length = zigzag_i32(unsigned(5, || rest.next_byte(), "record length")?)?;
    let length = usize::try_from(length).map_err(|_| invalid("negative record length"))?;
    if length > rest.buf.len() {
        return Err(invalid("record runs past the batch"));
    }
    let (body, after) = rest.buf.split_at(length);
    rest.buf = after;
    let mut body = SliceSource { buf: body };
    let attributes = body.next_byte()?.ok_or_else(|| invalid("empty record"))?;
    let raw = unsigned(10, || body.next_byte(), "timestamp delta")?;
    let timestamp_delta = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
    let offset_delta = zigzag_i32(unsigned(5, || body.next_byte(), "offset delta")?)?;
    let tail = body.buf;
    let key = bytes_field(&mut body)?;
    let value = bytes_field(&mut body)?;
    Ok(RecordView {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        tail,
    })
}

/// A varint-length-prefixed byte field of a record in a slice; -1 is null.
fn bytes_field<'a>(source: &mut SliceSource<'a>) -> Result<Option<&'a [u8]>, BatchError> {
    let length = zigzag_i32(unsigned(5, || source.next_byte(), "field length")?)?;
    if length == -1 {
        return Ok(None);
    }
    let length = usize::try_from(length).map_err(|_| invalid("negative field length"))?;
    if length > source.buf.len() {
        return Err(invalid("record field runs past the record"));
    }
    let (field, rest) = source.buf.split_at(length);
    source.buf = rest;
    Ok(Some(field))
}

/// A zigzag varint (varlong) as the record format writes it.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidRecord(reason.to_string())
}

fn unsigned(
    max_bytes: usize,
    mut next: impl FnMut() -> Result<Option<u8>, BatchError>,
    what: &str,
) -> Result<u64, BatchError> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let byte = next()?.ok_or_else(|| invalid(&format!("{what} varint runs past the end")))?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(invalid("varint is too long"))
}

fn zigzag_i32(raw: u64) -> Result<i32, BatchError> {
    let raw = u32::try_from(raw).map_err(|_| invalid("varint overflows 32 bits"))?;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// One record's body: reads may not run past its declared length.
struct Bounded<'s, S> {
    source: &'s mut S,
    remaining: usize,
}

impl<S: ByteSource> Bounded<'_, S> {
    fn take(&mut self, n: usize) -> Result<(), BatchError> {
        if n > self.remaining || !self.source.skip(n)? {
            return Err(invalid("record field runs past the record"));
        }
        self.remaining -= n;
        Ok(())
    }

    fn byte(&mut self) -> Result<Option<u8>, BatchError> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        self.source.next_byte()
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        zigzag_i32(unsigned(5, || self.byte(), "record field")?)
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let raw = unsigned(10, || self.byte(), "record field")?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Skips a varint-length-prefixed byte field (-1 means null); whether it was not null.
    fn skip_bytes_field(&mut self) -> Result<bool, BatchError> {
        match self.varint()? {
            -1 => Ok(false),
            n if n < 0 => Err(invalid("negative field length")),
            n => self.take(n as usize).map(|()| true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::batch::RECORD_BATCH_OVERHEAD;

    #[test]
    fn walks_builder_records() {
        let bytes = TestBatch::simple(4, 100).encode();
        let infos: Vec<_> = RecordWalk::new(&bytes[RECORD_BATCH_OVERHEAD..])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(infos.len(), 4);
        assert_eq!(
            infos[3],
            RecordInfo {
                timestamp_delta: 3,
                offset_delta: 3,
                has_key: true,
            }
        );
    }

    #[test]
    fn views_borrow_keys_values_and_tails() {
        let mut batch = TestBatch::simple(3, 100);
        batch.records[1].value = None;
        batch.records[2].key = None;
        let bytes = batch.encode();
        let views: Vec<_> = record_views(&bytes[RECORD_BATCH_OVERHEAD..])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(views.len(), 3);
        assert_eq!(views[0].key, Some(&b"k0"[..]));
        assert!(!views[0].is_tombstone() && views[1].is_tombstone());
        assert_eq!((views[2].key, views[2].offset_delta), (None, 2));
        assert_eq!(views[2].timestamp_delta, 2);
        assert!(record_views(&bytes[RECORD_BATCH_OVERHEAD..bytes.len() - 1]).any(|v| v.is_err()));
    }

    /// One record (no key, value "v") with `headers`, as a records area.
    fn area_with_headers(headers: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
        let mut body = vec![0u8];
        for v in [0, 0, -1, 1] {
            put_varlong(&mut body, v);
        }
        body.push(b'v');
        put_varlong(&mut body, headers.len() as i64);
        for (key, value) in headers {
            put_varlong(&mut body, key.len() as i64);
            body.extend_from_slice(key);
            match value {
                Some(v) => {
                    put_varlong(&mut body, v.len() as i64);
                    body.extend_from_slice(v);
                }
                None => put_varlong(&mut body, -1),
            }
        }
        let mut area = Vec::new();
        put_varlong(&mut area, body.len() as i64);
        area.extend_from_slice(&body);
        area
    }

    #[test]
    fn headers_keep_order_and_repeated_keys() {
        let area = area_with_headers(&[(b"h", Some(b"1")), (b"h", None), (b"g", Some(b""))]);
        let view = record_views(&area).next().unwrap().unwrap();
        assert_eq!(view.value, Some(&b"v"[..]));
        let headers: Vec<_> = view.headers().collect::<Result<_, _>>().unwrap();
        let expected = [
            Header {
                key: b"h",
                value: Some(b"1"),
            },
            Header {
                key: b"h",
                value: None,
            },
            Header {
                key: b"g",
                value: Some(b""),
            },
        ];
        assert_eq!(headers, expected);
    }

    #[test]
    fn a_truncated_header_is_an_error_not_a_panic() {
        let mut area = area_with_headers(&[(b"key", Some(b"value"))]);
        // Claim two headers where one is stored: the second runs past the record.
        let count_at = area.len() - (1 + 3 + 1 + 5) - 1;
        area[count_at] = 4;
        let view = record_views(&area).next().unwrap().unwrap();
        let headers: Vec<_> = view.headers().collect();
        assert_eq!(headers.len(), 2);
        assert!(headers[0].is_ok() && headers[1].is_err());
    }

    #[test]
    fn rejects_a_length_past_the_end() {
        let mut area = Vec::new();
        put_varlong(&mut area, 50);
        area.extend_from_slice(&[0; 10]);
        let first = RecordWalk::new(&area).next().unwrap();
        assert!(matches!(first, Err(BatchError::InvalidRecord(_))));
    }

    #[test]
    fn rejects_a_record_whose_fields_do_not_fill_it() {
        let mut body = vec![0u8];
        for v in [0, 0, -1, -1, 0] {
            put_varlong(&mut body, v);
        }
        body.push(0);
        let mut area = Vec::new();
        put_varlong(&mut area, body.len() as i64);
        area.extend_from_slice(&body);
        let first = RecordWalk::new(&area).next().unwrap();
        assert!(first.is_err());
    }

    #[test]
    fn never_panics_on_garbage() {
        let garbage: Vec<u8> = (0..=255u8).cycle().take(2000).collect();
        for start in 0..200 {
            for item in RecordWalk::new(&garbage[start..]) {
                if item.is_err() {
                    break;
                }
            }
        }
    }
}
