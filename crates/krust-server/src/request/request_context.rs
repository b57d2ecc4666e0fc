//! What a handler is given about a request (header, session, queue slot) and what it returns.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use parking_lot::Mutex;
use tokio::sync::SemaphorePermit;

use crate::metrics::RequestTimes;
use crate::request::response_frame::{encode_frame, ResponseFrame, SplicedRecords};
use crate::security::session::Session;

/// Splits a request frame into its api key, parsed header and body; an error closes the
/// connection. Pure, so the fuzz target exercises exactly this path.
pub fn parse_header(frame: Bytes) -> Result<(ApiKey, RequestHeader, Bytes), String> {
    if frame.len() < 8 {
        return Err(format!(
            "request frame of {} bytes is too short",
            frame.len()
        ));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(raw_key).map_err(|_| format!("unknown api key {raw_key}"))?;
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, api_key.request_header_version(version))
        .map_err(|e| format!("malformed request header: {e}"))?;
    Ok((api_key, header, body))
}

/// What the connection does after a request.
pub enum Outcome {
    /// Write this complete response frame (size prefix included).
    Respond(ResponseFrame),
    /// Write nothing (a Produce with acks=0).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(String),
    /// A client over its quota (KIP-219): the response (None for acks=0), and for how long
    /// the connection is not read.
    Throttled {
        response: Option<ResponseFrame>,
        throttle: Throttle,
    },
}

/// How a throttled client's connection is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub time: Duration,
    /// Clients too old to throttle themselves (KIP-219) get their response only after the
    /// throttle time; newer ones get it at once and the connection is muted afterwards.
    pub before_send: bool,
}

impl Outcome {
    /// This outcome, held back by `throttle` when its time is not zero.
    pub fn throttled(self, throttle: Throttle) -> Outcome {
        if throttle.time.is_zero() {
            return self;
        }
        match self {
            Outcome::Respond(frame) => Outcome::Throttled {
                response: Some(frame),
                throttle,
            },
            Outcome::NoResponse => Outcome::Throttled {
                response: None,
                throttle,
            },
            other => other,
        }
    }
}

/// A request's place among the `queued.max.requests` being handled broker-wide.
///
/// As in Kafka, the bound applies to complete requests waiting to be handled: a request that
/// parks (a long-poll Fetch, an acks=all Produce, a JoinGroup waiting in Python) gives its
/// place back, the way Kafka's purgatory holds requests outside its request queue. From then
/// on its time counts as remote time (RequestMetrics).
#[derive(Default)]
pub struct RequestSlot<'a> {
    permit: Mutex<Option<SemaphorePermit<'a>>>,
    times: Option<&'a RequestTimes>,
}

impl<'a> RequestSlot<'a> {
    pub fn new(permit: SemaphorePermit<'a>) -> Self {
        RequestSlot {
            permit: Mutex::new(Some(permit)),
            times: None,
        }
    }

    /// The same slot, noting in `times` when the request parks.
    pub fn timed(self, times: &'a RequestTimes) -> Self {
        RequestSlot {
            times: Some(times),
            ..self
        }
    }

    /// The time the request has been handled so far, parked time left out.
    fn handling_time(&self, now: Instant) -> Duration {
        self.times.map_or(Duration::ZERO, |t| t.local_until(now))
    }

    fn release(&self) {
        self.permit.lock().take();
        if let Some(times) = self.times {
            times.park();
        }
    }
}

/// The parsed request header plus who sent it.
pub struct RequestContext<'a> {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub session: &'a Session,
    /// The request's size in bytes (its frame without the size prefix), as quotas count it.
    pub size: usize,
    slot: RequestSlot<'a>,
}

impl<'a> RequestContext<'a> {
    pub fn new(
        header: RequestHeader,
        api_key: ApiKey,
        session: &'a Session,
        size: usize,
        slot: RequestSlot<'a>,
    ) -> Self {
        RequestContext {
            header,
            api_key,
            session,
            size,
            slot,
        }
    }

    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// Called before waiting on something outside the broker's control (purgatory, Python):
    /// the request stops counting against queued.max.requests.
    pub fn park(&self) {
        self.slot.release();
    }

    /// The time spent handling the request so far, not counting time parked (what Kafka's
    /// request quota meters).
    pub fn handling_time(&self) -> Duration {
        self.slot.handling_time(Instant::now())
    }

    /// The client id of the header ("" when it has none), as quotas see it.
    pub fn client_id(&self) -> &str {
        self.header.client_id.as_deref().unwrap_or("")
    }
}

/// Encodes a native handler's response as a whole frame for this request.
pub fn respond<T: Encodable>(request: &RequestContext<'_>, response: &T) -> Outcome {
    respond_with_records(request, response, None)
}

/// Like `respond`, encoding the body as `codec_version`: a version whose frame equals an
/// older one the codec knows (ListOffsets v11 is v10's frame).
pub fn respond_as<T: Encodable>(
    request: &RequestContext<'_>,
    response: &T,
    codec_version: i16,
) -> Outcome {
    encode_response(request, response, codec_version, None)
}

/// Like `respond`, for a response whose records fields are placeholders of `spliced`.
pub fn respond_with_records<T: Encodable>(
    request: &RequestContext<'_>,
    response: &T,
    spliced: Option<SplicedRecords>,
) -> Outcome {
    encode_response(request, response, request.version(), spliced)
}

fn encode_response<T: Encodable>(
    request: &RequestContext<'_>,
    response: &T,
    codec_version: i16,
    spliced: Option<SplicedRecords>,
) -> Outcome {
    let header_version = request.api_key.response_header_version(request.version());
    framed(encode_frame(
        request.header.correlation_id,
        header_version,
        response,
        codec_version,
        spliced,
    ))
}

/// A frame, or the reason it could not be encoded (which closes the connection).
pub fn framed(encoded: Result<ResponseFrame, String>) -> Outcome {
    match encoded {
        Ok(frame) => Outcome::Respond(frame),
        Err(reason) => Outcome::Close(reason),
    }
}
