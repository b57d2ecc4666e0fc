//! A cheap structural walk over an uncompressed batch's records.
//!
//! Each record is: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint | headers.
//! The walk checks that every length stays inside its record and that the records fill the
//! batch exactly, without allocating or copying anything.

use crate::error::BatchError;

/// The per-record facts the broker needs: where the record sits in time and offset space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
}

/// Iterates the records of an uncompressed batch's records area.
pub struct RecordWalk<'a> {
    buf: &'a [u8],
    position: usize,
    failed: bool,
}

impl<'a> RecordWalk<'a> {
    pub fn new(records_area: &'a [u8]) -> Self {
        Self {
            buf: records_area,
            position: 0,
            failed: false,
        }
    }

    fn next_record(&mut self) -> Result<RecordInfo, BatchError> {
        let mut cursor = Cursor {
            buf: self.buf,
            position: self.position,
        };
        let length = cursor.varint()?;
        let length = usize::try_from(length).map_err(|_| invalid("negative record length"))?;
        let end = cursor
            .position
            .checked_add(length)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| invalid("record length runs past the batch"))?;
        let mut body = Cursor {
            buf: &self.buf[..end],
            position: cursor.position,
        };
        body.take(1)?;
        let timestamp_delta = body.varlong()?;
        let offset_delta = body.varint()?;
        body.skip_bytes_field()?;
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
        if body.position != end {
            return Err(invalid("record length does not match its fields"));
        }
        self.position = end;
        Ok(RecordInfo {
            timestamp_delta,
            offset_delta,
        })
    }
}

impl Iterator for RecordWalk<'_> {
    type Item = Result<RecordInfo, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.buf.len() {
            return None;
        }
        let item = self.next_record();
        self.failed = item.is_err();
        Some(item)
    }
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidRecord(reason.to_string())
}

struct Cursor<'a> {
    buf: &'a [u8],
    position: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<(), BatchError> {
        let end = self
            .position
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| invalid("record field runs past the record"))?;
        self.position = end;
        Ok(())
    }

    fn unsigned(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = *self
                .buf
                .get(self.position)
                .ok_or_else(|| invalid("varint runs past the record"))?;
            self.position += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(invalid("varint is too long"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let raw = self.unsigned(5)?;
        let raw = u32::try_from(raw).map_err(|_| invalid("varint overflows 32 bits"))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Skips a varint-length-prefixed byte field; -1 means null.
    fn skip_bytes_field(&mut self) -> Result<(), BatchError> {
        match self.varint()? {
            -1 => Ok(()),
            n if n < 0 => Err(invalid("negative field length")),
            n => self.take(n as usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::{put_varlong, TestBatch};
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
                offset_delta: 3
            }
        );
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
