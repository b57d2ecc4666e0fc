//! Routes a request frame by api key: to a native handler, or across the bridge to Python.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::bridge::{BridgeCall, BridgeReply};
use crate::handlers::{self, api_versions, NativeRequest};
use crate::response_frame::{encode_frame, frame_encoded_body, ResponseFrame, SplicedRecords};
use crate::server::ServerContext;

/// What the connection does after a request.
pub enum Outcome {
    /// Write this complete response frame (size prefix included).
    Respond(ResponseFrame),
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
        return framed(encode_frame(header.correlation_id, 0, &body, 0, None));
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
            Outcome::Respond(frame_encoded_body(
                request.header.correlation_id,
                header_version,
                &body,
            ))
        }
        Ok(BridgeReply::CloseConnection) => {
            Outcome::Close(format!("{:?} request was rejected", request.api_key))
        }
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// Encodes a native handler's response as a whole frame for this request.
pub fn respond<T: Encodable>(request: &RequestContext<'_>, response: &T) -> Outcome {
    respond_with_records(request, response, None)
}

/// Like `respond`, for a response whose records fields are placeholders of `spliced`.
pub fn respond_with_records<T: Encodable>(
    request: &RequestContext<'_>,
    response: &T,
    spliced: Option<SplicedRecords>,
) -> Outcome {
    let version = request.version();
    let header_version = request.api_key.response_header_version(version);
    framed(encode_frame(
        request.header.correlation_id,
        header_version,
        response,
        version,
        spliced,
    ))
}

fn framed(encoded: Result<ResponseFrame, String>) -> Outcome {
    match encoded {
        Ok(frame) => Outcome::Respond(frame),
        Err(reason) => Outcome::Close(reason),
    }
}
