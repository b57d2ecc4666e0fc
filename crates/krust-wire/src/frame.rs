//! Kafka's framing: every request and response is a 4-byte big-endian size, then that many
//! bytes (a header, then the body). A response's size is checked against a limit before any
//! of it is read, so a corrupt or hostile size cannot make the reader allocate gigabytes.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Encodable, Request};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a frame could not be read.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("a frame of {size} bytes is larger than {limit} bytes")]
    TooLarge { size: usize, limit: usize },
}

/// A request the codec could not encode, with its reason (kept as text so kafka-protocol's
/// `anyhow` errors stay out of this crate's API).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct EncodeError(pub String);

/// The frame of `request` at `version` with `header` (whose header version the API
/// decides).
pub fn encode_request<R: Request>(
    header: &RequestHeader,
    request: &R,
    version: i16,
) -> Result<Bytes, EncodeError> {
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[0; 4]);
    header
        .encode(&mut frame, R::header_version(version))
        .and_then(|()| request.encode(&mut frame, version))
        .map_err(|e| EncodeError(e.to_string()))?;
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| EncodeError("a request of 2 GiB or more".to_string()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame.freeze())
}

/// The frame of a request `body` already encoded by its caller, after `header` in
/// `header_version`.
pub fn encode_raw(
    header: &RequestHeader,
    header_version: i16,
    body: &[u8],
) -> Result<Bytes, EncodeError> {
    let mut frame = BytesMut::with_capacity(64 + body.len());
    frame.extend_from_slice(&[0; 4]);
    header
        .encode(&mut frame, header_version)
        .map_err(|e| EncodeError(e.to_string()))?;
    frame.extend_from_slice(body);
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| EncodeError("a request of 2 GiB or more".to_string()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame.freeze())
}

/// Reads one frame's body (without its size) of at most `limit` bytes.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Bytes, FrameError> {
    let size = reader.read_i32().await?;
    // A negative size is as impossible to honour as a huge one.
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    if size > limit {
        return Err(FrameError::TooLarge { size, limit });
    }
    let mut body = vec![0u8; size];
    reader.read_exact(&mut body).await?;
    Ok(Bytes::from(body))
}

/// The correlation id at the start of a response frame (every response header version
/// begins with it).
pub fn correlation_id(frame: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(frame.get(..4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{ApiKey, MetadataRequest};

    use super::*;

    #[tokio::test]
    async fn a_frame_round_trips_and_an_oversized_one_is_refused_unread() {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(12)
            .with_correlation_id(7);
        let frame = encode_request(&header, &MetadataRequest::default(), 12).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4);
        let body = read_frame(&mut &frame[..], 1 << 20).await.unwrap();
        assert_eq!(body.len(), size);
        assert!(matches!(
            read_frame(&mut &frame[..], size - 1).await,
            Err(FrameError::TooLarge { limit, .. }) if limit == size - 1
        ));
        let negative = (-1i32).to_be_bytes();
        assert!(matches!(
            read_frame(&mut &negative[..], 1 << 20).await,
            Err(FrameError::TooLarge { .. })
        ));
        assert_eq!(correlation_id(&[0, 0, 0, 9, 1]), Some(9));
        assert_eq!(correlation_id(&[0, 0]), None);
    }
}
