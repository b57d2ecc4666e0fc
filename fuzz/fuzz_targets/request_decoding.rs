//! Arbitrary request frames through the broker's header parsing and native body decoding:
//! any input must yield a request or an error, never a panic.
#![no_main]

use bytes::Bytes;
use krust_server::dispatch::parse_header;
use krust_server::handlers::NativeRequest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    if let Ok((api_key, header, body)) = parse_header(Bytes::copy_from_slice(frame)) {
        let _ = NativeRequest::decode(api_key, header.request_api_version, body);
    }
});
