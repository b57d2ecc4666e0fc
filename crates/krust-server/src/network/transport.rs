//! The byte stream a connection is served over: plain TCP, or TLS over TCP. Each writes a
//! response frame its own way; the connection code is generic over both, so the plaintext
//! path is compiled exactly as before (sendfile for record bytes).

use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::send_frame;
use crate::request::response_frame::{FramePart, ResponseFrame};

/// Record bytes are copied through user space in pieces of this size under TLS.
const TLS_FILE_CHUNK: usize = 256 * 1024;

pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send {
    /// Writes a complete response frame.
    fn write_frame(&mut self, frame: &ResponseFrame)
        -> impl Future<Output = io::Result<()>> + Send;
}

impl Transport for TcpStream {
    fn write_frame(
        &mut self,
        frame: &ResponseFrame,
    ) -> impl Future<Output = io::Result<()>> + Send {
        send_frame::write_frame(self, frame)
    }
}

impl Transport for TlsStream<TcpStream> {
    /// rustls encrypts in user space, so record bytes cannot go by sendfile: they are read
    /// from the page cache into a buffer and written through the TLS stream (docs/security.md).
    async fn write_frame(&mut self, frame: &ResponseFrame) -> io::Result<()> {
        let mut buffer = Vec::new();
        for part in frame.parts() {
            match part {
                FramePart::Bytes(bytes) => self.write_all(bytes).await?,
                FramePart::File(slice) => {
                    let Some((file, start)) = slice.file_and_position() else {
                        continue;
                    };
                    let mut offset = 0;
                    while offset < slice.len() {
                        let count = (slice.len() - offset).min(TLS_FILE_CHUNK);
                        buffer.resize(count, 0);
                        file.read_exact_at(&mut buffer, start + offset as u64)?;
                        self.write_all(&buffer).await?;
                        offset += count;
                    }
                }
            }
        }
        self.flush().await
    }
}
