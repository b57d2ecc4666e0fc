//! What a handler is given about a request (header, session, queue slot) and what it returns.

use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Encodable;
use parking_lot::Mutex;
use tokio::sync::SemaphorePermit;

use crate::metrics::RequestTimes;
use crate::response_frame::{encode_frame, ResponseFrame, SplicedRecords};
use crate::session::Session;

/// What the connection does after a request.
pub enum Outcome {
    /// Write this complete response frame (size prefix included).
    Respond(ResponseFrame),
    /// Write nothing (a Produce with acks=0).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(String),
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
    slot: RequestSlot<'a>,
}

impl<'a> RequestContext<'a> {
    pub fn new(
        header: RequestHeader,
        api_key: ApiKey,
        session: &'a Session,
        slot: RequestSlot<'a>,
    ) -> Self {
        RequestContext {
            header,
            api_key,
            session,
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
