//! Positional reads of a segment's `.log` file: batch headers scanned forward through a small
//! buffer, and the byte ranges a fetch returns. Nothing here takes the log's lock.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{declared_size, BatchHeader, MAGIC_V2, RECORD_BATCH_OVERHEAD};

const SCAN_CHUNK: usize = 16 * 1024;

/// Walks the batch headers of a `.log` file between two positions.
///
/// It stops (returns `None`) at the end, at a partial batch, or at a header that cannot be a
/// v2 batch: readers never look past data that recovery would have cut off.
pub(crate) struct BatchScanner<'a> {
    file: &'a File,
    position: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> BatchScanner<'a> {
    pub(crate) fn new(file: &'a File, start: u64, end: u64) -> Self {
        Self {
            file,
            position: start,
            end,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// The next batch's position and header.
    pub(crate) fn next_header(&mut self) -> io::Result<Option<(u64, BatchHeader)>> {
        if self.position + RECORD_BATCH_OVERHEAD as u64 > self.end {
            return Ok(None);
        }
        let raw = self.window(self.position, RECORD_BATCH_OVERHEAD)?;
        let header = match BatchHeader::parse(raw) {
            Some(h) if h.magic == MAGIC_V2 => h,
            _ => return Ok(None),
        };
        let size = match declared_size(raw) {
            Some(Ok(size)) => size as u64,
            _ => return Ok(None),
        };
        if self.position + size > self.end {
            return Ok(None);
        }
        let position = self.position;
        self.position += size;
        Ok(Some((position, header)))
    }

    /// `len` bytes at `position`, from the buffer or a fresh positional read.
    ///
    /// Small batches share one buffered read; past a batch bigger than the buffer, only its
    /// successor's header is read, so scanning large batches does not copy their contents.
    fn window(&mut self, position: u64, len: usize) -> io::Result<&[u8]> {
        let buffered_end = self.buf_start + self.buf.len() as u64;
        if position < self.buf_start || position + len as u64 > buffered_end {
            let jumped_past_buffer = position >= buffered_end + SCAN_CHUNK as u64;
            let chunk = if jumped_past_buffer { len } else { SCAN_CHUNK };
            let want = chunk.max(len).min((self.end - position) as usize);
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, position)?;
            self.buf_start = position;
        }
        let at = (position - self.buf_start) as usize;
        Ok(&self.buf[at..at + len])
    }
}

/// A byte range of a segment file holding whole batches: what a fetch returns. The bytes are
/// left in the file so the network can send them straight from the page cache (sendfile);
/// `read_bytes` copies them out for callers that need them in memory.
#[derive(Clone, Debug)]
pub struct FileSlice {
    file: Option<Arc<File>>,
    position: u64,
    len: usize,
}

impl FileSlice {
    pub fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        Self {
            file: Some(file),
            position,
            len,
        }
    }

    pub fn empty() -> Self {
        Self {
            file: None,
            position: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file and the range's start, for a zero-copy send; `None` when empty.
    pub fn file_and_position(&self) -> Option<(&File, u64)> {
        self.file.as_deref().map(|file| (file, self.position))
    }

    /// Copies the range into memory.
    pub fn read_bytes(&self) -> io::Result<Bytes> {
        match &self.file {
            Some(file) if self.len > 0 => Ok(Bytes::from(read_at(file, self.position, self.len)?)),
            _ => Ok(Bytes::new()),
        }
    }
}

/// Reads exactly `len` bytes at `position`.
pub(crate) fn read_at(file: &File, position: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, position)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use std::io::Write;

    #[test]
    fn scans_whole_batches_and_stops_at_a_torn_tail() {
        let mut file = tempfile::tempfile().unwrap();
        let a = TestBatch::simple(2, 1).encode();
        let b = TestBatch::simple(300, 2).encode();
        file.write_all(&a).unwrap();
        file.write_all(&b).unwrap();
        file.write_all(&b[..100]).unwrap();
        let len = file.metadata().unwrap().len();
        let mut scanner = BatchScanner::new(&file, 0, len);
        let (p0, h0) = scanner.next_header().unwrap().unwrap();
        let (p1, h1) = scanner.next_header().unwrap().unwrap();
        assert_eq!((p0, h0.records_count), (0, 2));
        assert_eq!((p1, h1.records_count), (a.len() as u64, 300));
        assert!(scanner.next_header().unwrap().is_none());
        assert_eq!(read_at(&file, 0, a.len()).unwrap(), a);
    }

    #[test]
    fn scans_batches_larger_than_its_buffer_and_small_ones_after_them() {
        let mut file = tempfile::tempfile().unwrap();
        let big = TestBatch::simple(2_000, 1).encode();
        let small = TestBatch::simple(1, 2).encode();
        assert!(big.len() > 2 * SCAN_CHUNK);
        for batch in [&big, &big, &small, &small, &big] {
            file.write_all(batch).unwrap();
        }
        let len = file.metadata().unwrap().len();
        let mut scanner = BatchScanner::new(&file, 0, len);
        let mut counts = Vec::new();
        while let Some((_, header)) = scanner.next_header().unwrap() {
            counts.push(header.records_count);
        }
        assert_eq!(counts, [2_000, 2_000, 1, 1, 2_000]);
    }

    #[test]
    fn a_slice_reads_back_its_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        let a = TestBatch::simple(3, 1).encode();
        let b = TestBatch::simple(4, 2).encode();
        file.write_all(&a).unwrap();
        file.write_all(&b).unwrap();
        let slice = FileSlice::new(Arc::new(file), a.len() as u64, b.len());
        assert_eq!(slice.len(), b.len());
        assert_eq!(slice.read_bytes().unwrap(), b);
        assert!(FileSlice::empty().read_bytes().unwrap().is_empty());
    }
}
