//! Writing a response frame to a client socket: memory parts with ordinary writes, record bytes
//! with sendfile(2) straight from the page cache, as Kafka does with `transferTo`.

use std::io;

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::request::response_frame::{FramePart, ResponseFrame};
use krust_storage::FileSlice;

/// The most one sendfile call is asked for (Linux sends at most 0x7ffff000 bytes per call).
const MAX_SENDFILE_BYTES: usize = 1 << 30;

pub async fn write_frame(stream: &mut TcpStream, frame: &ResponseFrame) -> io::Result<()> {
    for part in frame.parts() {
        match part {
            FramePart::Bytes(bytes) => stream.write_all(bytes).await?,
            FramePart::File(slice) => send_file(stream, slice).await?,
        }
    }
    Ok(())
}

async fn send_file(stream: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let Some((file, start)) = slice.file_and_position() else {
        return Ok(());
    };
    let end = start + slice.len() as u64;
    let mut offset = start;
    while offset < end {
        stream.writable().await?;
        let count = usize::try_from(end - offset)
            .unwrap_or(usize::MAX)
            .min(MAX_SENDFILE_BYTES);
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, file, Some(&mut offset), count).map_err(io::Error::from)
        });
        match sent {
            // Segments are only appended to while the broker runs; a short file means it was
            // truncated under the read, and the frame can no longer be completed.
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the segment file ends before the fetched range",
                ))
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
