//! Routes a request frame by api key: to a native handler, or across the bridge to Python.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::bridge::{BridgeCall, BridgeReply};
use crate::handlers::{self, api_versions, NativeRequest};
use crate::server::ServerContext;

/// What the connection does after a request.
pub enum Outcome {
    /// Write this complete response frame (size prefix included).
    Respond(BytesMut),
    /// Write nothing (a Produce with acks=0).
    NoResponse,
    /// Close the connection; the reason is logged.
    Close(String),
}

/// The parsed request header plus what handlers need to know about the client.
pub struct RequestContext<'a> {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub client_host: &'a str,
}

impl RequestContext<'_> {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
}

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

/// Handles one request frame (without its size prefix).
pub async fn handle_request(context: &ServerContext, frame: Bytes, client_host: &str) -> Outcome {
    let (api_key, header, body) = match parse_header(frame) {
        Ok(parsed) => parsed,
        Err(reason) => return Outcome::Close(reason),
    };
    let version = header.request_api_version;
    let Some((min, max)) = supported_range(context, api_key) else {
        return Outcome::Close(format!("unsupported api {api_key:?}"));
    };
    if api_key == ApiKey::ApiVersions && version > max {
        // KIP-511: answer in v0 so the client can pick a version we both support.
        let body = api_versions::unsupported_version_response(context);
        return frame_response(header.correlation_id, 0, &body, 0);
    }
    if version < min || version > max {
        return Outcome::Close(format!("unsupported version {version} of {api_key:?}"));
    }
    let request = RequestContext {
        header,
        api_key,
        client_host,
    };
    if context.bridge.python_apis().contains_key(&(api_key as i16)) {
        return forward_to_python(context, request, body).await;
    }
    match NativeRequest::decode(api_key, version, body) {
        Ok(decoded) => handlers::handle_native(context, &request, decoded).await,
        Err(reason) => Outcome::Close(reason),
    }
}

/// The versions of `api_key` this broker serves, natively or through Python.
pub fn supported_range(context: &ServerContext, api_key: ApiKey) -> Option<(i16, i16)> {
    api_versions::native_range(api_key)
        .or_else(|| context.bridge.python_apis().get(&(api_key as i16)).copied())
}

async fn forward_to_python(
    context: &ServerContext,
    request: RequestContext<'_>,
    body: Bytes,
) -> Outcome {
    let call = BridgeCall::from_client(&request.header, request.client_host, body);
    match context.bridge.call(call).await {
        Ok(BridgeReply::Response(body)) => {
            let header_version = request.api_key.response_header_version(request.version());
            let mut frame = start_frame(request.header.correlation_id, header_version);
            frame.extend_from_slice(&body);
            Outcome::Respond(finish_frame(frame))
        }
        Ok(BridgeReply::CloseConnection) => {
            Outcome::Close(format!("{:?} request was rejected", request.api_key))
        }
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// Encodes a native handler's response as a whole frame for this request.
pub fn respond<T: Encodable>(request: &RequestContext<'_>, response: &T) -> Outcome {
    let version = request.version();
    let header_version = request.api_key.response_header_version(version);
    frame_response(
        request.header.correlation_id,
        header_version,
        response,
        version,
    )
}

fn frame_response<T: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &T,
    version: i16,
) -> Outcome {
    let mut frame = start_frame(correlation_id, header_version);
    if let Ok(size) = body.compute_size(version) {
        frame.reserve(size);
    }
    match body.encode(&mut frame, version) {
        Ok(()) => Outcome::Respond(finish_frame(frame)),
        Err(error) => Outcome::Close(format!("cannot encode the response: {error}")),
    }
}

fn start_frame(correlation_id: i32, header_version: i16) -> BytesMut {
    let mut frame = BytesMut::with_capacity(256);
    frame.extend_from_slice(&[0; 4]);
    // A response header is a correlation id and, in v1, an empty tagged-field section.
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    if header_version >= 1 {
        frame.extend_from_slice(&[0]);
    }
    frame
}

fn finish_frame(mut frame: BytesMut) -> BytesMut {
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}
