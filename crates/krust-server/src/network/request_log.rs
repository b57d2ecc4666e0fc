//! Kafka's request log (`kafka.request.logger` at DEBUG): one line per answered request with
//! its api, version, correlation id, client id, client address, stage times and response size.
//! Enable it with the log level `kafka.request.logger=debug` (docs/logging.md).

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::metrics::RequestDurations;
use crate::security::session::Session;

/// The tracing target of the request log: Kafka's logger name.
pub const REQUEST_LOG_TARGET: &str = "kafka.request.logger";

/// A request's fixed header fields, read from the frame without decoding the request.
#[derive(Debug, PartialEq)]
pub struct RequestHeaderView {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The raw client id (None: null, or a header without one).
    pub client_id: Option<Bytes>,
}

impl RequestHeaderView {
    /// The header fields of a request frame, if it starts like a request of a known api.
    pub fn peek(frame: &Bytes) -> Option<Self> {
        let i16_at = |at: usize| Some(i16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
        let api_key = ApiKey::try_from(i16_at(0)?).ok()?;
        let version = i16_at(2)?;
        let correlation_id = i32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
        // Every request header since v1 has the client id (a nullable int16-sized string).
        let client_id = i16_at(8)
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| frame.get(10..10 + len).map(|_| frame.slice(10..10 + len)));
        Some(RequestHeaderView {
            api_key,
            version,
            correlation_id,
            client_id,
        })
    }
}

/// Logs one completed request at DEBUG (nothing is formatted when that level is off).
pub fn log_completed(
    header: &RequestHeaderView,
    session: &Session,
    durations: &RequestDurations,
    response_bytes: usize,
) {
    tracing::debug!(
        target: REQUEST_LOG_TARGET,
        api = ?header.api_key,
        version = header.version,
        correlation_id = header.correlation_id,
        client_id = %header
            .client_id
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default(),
        client_address = %session.client_address,
        listener = %session.listener_name,
        principal = %session.principal,
        total_time_ms = durations.total.as_secs_f64() * 1000.0,
        request_queue_time_ms = durations.queue.as_secs_f64() * 1000.0,
        local_time_ms = durations.local.as_secs_f64() * 1000.0,
        remote_time_ms = durations.remote.as_secs_f64() * 1000.0,
        response_send_time_ms = durations.send.as_secs_f64() * 1000.0,
        response_bytes,
        "Completed request"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_fields_are_read_without_decoding() {
        let mut frame = vec![0, 3, 0, 12, 0, 0, 0, 42, 0, 5];
        frame.extend_from_slice(b"kcat!trailing body");
        let header = RequestHeaderView::peek(&Bytes::from(frame)).unwrap();
        assert_eq!(header.api_key, ApiKey::Metadata);
        assert_eq!(header.version, 12);
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.client_id.as_deref(), Some(&b"kcat!"[..]));
    }

    #[test]
    fn a_null_or_cut_client_id_and_unknown_apis_are_handled() {
        let null_id = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff]);
        assert_eq!(RequestHeaderView::peek(&null_id).unwrap().client_id, None);
        let cut = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 9, b'a']);
        assert_eq!(RequestHeaderView::peek(&cut).unwrap().client_id, None);
        assert_eq!(
            RequestHeaderView::peek(&Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 0])),
            None
        );
        assert_eq!(
            RequestHeaderView::peek(&Bytes::from_static(&[0, 1, 0])),
            None
        );
    }
}
