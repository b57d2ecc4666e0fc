//! Reading one size-prefixed request frame (Kafka's `NetworkReceive`), bounded in time and
//! memory: a client that claims a large size but sends slowly, or not at all, costs only what
//! it actually sent and is dropped after connections.max.idle.ms without bytes.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The buffer a frame starts with; it doubles as bytes arrive, never past the claimed size.
const INITIAL_FRAME_CAPACITY: usize = 8 * 1024;

/// Why no complete request frame was read.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error("the client closed the connection")]
    Closed,
    #[error("no bytes received for {0:?} (connections.max.idle.ms)")]
    Idle(Duration),
    #[error("request size {size} exceeds socket.request.max.bytes ({max})")]
    TooLarge { size: i32, max: usize },
    #[error("the client closed the connection {received} bytes into a {expected}-byte frame")]
    Truncated { received: usize, expected: usize },
    #[error("reading a request failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the next request frame (without its size prefix). `idle` is counted from the last
/// bytes received, as Kafka's idle connection expiry does.
pub async fn receive_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    idle: Duration,
    max_size: usize,
) -> Result<Bytes, ReceiveError> {
    let mut prefix = BytesMut::with_capacity(4);
    read_until_full(reader, &mut prefix, 4, idle).await?;
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let expected = usize::try_from(size)
        .ok()
        .filter(|size| *size <= max_size)
        .ok_or(ReceiveError::TooLarge {
            size,
            max: max_size,
        })?;
    // Read into spare capacity: zeroing a buffer the socket overwrites costs a pass over every
    // produced byte.
    let mut frame = BytesMut::with_capacity(expected.min(INITIAL_FRAME_CAPACITY));
    read_until_full(reader, &mut frame, expected, idle)
        .await
        .map_err(|error| match error {
            ReceiveError::Closed => ReceiveError::Truncated {
                received: 4,
                expected: expected + 4,
            },
            ReceiveError::Truncated { received, .. } => ReceiveError::Truncated {
                received: received + 4,
                expected: expected + 4,
            },
            other => other,
        })?;
    Ok(frame.freeze())
}

/// Fills `buffer` to `expected` bytes, growing it at most to twice what has arrived.
async fn read_until_full<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    expected: usize,
    idle: Duration,
) -> Result<(), ReceiveError> {
    while buffer.len() < expected {
        if buffer.len() == buffer.capacity() {
            let remaining = expected - buffer.len();
            buffer.reserve(remaining.min(buffer.len().max(INITIAL_FRAME_CAPACITY)));
        }
        let mut limited = (&mut *reader).take((expected - buffer.len()) as u64);
        let read = tokio::time::timeout(idle, limited.read_buf(buffer))
            .await
            .map_err(|_| ReceiveError::Idle(idle))??;
        if read == 0 {
            return Err(match buffer.len() {
                0 => ReceiveError::Closed,
                received => ReceiveError::Truncated { received, expected },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const IDLE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_frame_arriving_in_pieces_is_assembled() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let sent = body.clone();
        let writer = tokio::spawn(async move {
            client
                .write_all(&(sent.len() as i32).to_be_bytes())
                .await
                .unwrap();
            client.write_all(&sent).await.unwrap();
            client.write_all(&3i32.to_be_bytes()).await.unwrap();
            client.write_all(b"abc").await.unwrap();
        });
        let first = receive_frame(&mut server, IDLE, 1 << 20).await.unwrap();
        assert_eq!(&first[..], &body[..]);
        let second = receive_frame(&mut server, IDLE, 1 << 20).await.unwrap();
        assert_eq!(&second[..], b"abc");
        writer.await.unwrap();
        assert!(matches!(
            receive_frame(&mut server, IDLE, 1 << 20).await,
            Err(ReceiveError::Closed)
        ));
    }

    #[tokio::test]
    async fn a_claimed_size_is_not_allocated_before_its_bytes_arrive() {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(b"x").await.unwrap();
        let mut frame = BytesMut::with_capacity(INITIAL_FRAME_CAPACITY);
        let stalled = read_until_full(
            &mut server,
            &mut frame,
            100 << 20,
            Duration::from_millis(50),
        );
        assert!(matches!(stalled.await, Err(ReceiveError::Idle(_))));
        assert_eq!(frame.len(), 1);
        assert!(frame.capacity() <= 2 * INITIAL_FRAME_CAPACITY);
    }

    #[tokio::test]
    async fn a_stalled_partial_frame_times_out() {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&(100i32).to_be_bytes()).await.unwrap();
        client.write_all(b"x").await.unwrap();
        let result = receive_frame(&mut server, Duration::from_millis(50), 1 << 20).await;
        assert!(matches!(result, Err(ReceiveError::Idle(_))));
    }

    #[tokio::test]
    async fn sizes_beyond_the_limit_or_negative_are_refused() {
        for size in [-1i32, 1 << 20 | 1] {
            let (mut client, mut server) = tokio::io::duplex(64);
            client.write_all(&size.to_be_bytes()).await.unwrap();
            let result = receive_frame(&mut server, IDLE, 1 << 20).await;
            assert!(matches!(result, Err(ReceiveError::TooLarge { .. })));
        }
    }

    #[tokio::test]
    async fn a_connection_closed_mid_frame_is_truncated() {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&(10i32).to_be_bytes()).await.unwrap();
        client.write_all(b"abc").await.unwrap();
        drop(client);
        let result = receive_frame(&mut server, IDLE, 1 << 20).await;
        assert!(matches!(
            result,
            Err(ReceiveError::Truncated {
                received: 7,
                expected: 14
            })
        ));
    }
}
