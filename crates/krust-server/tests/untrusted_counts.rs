//! Decoding reserves memory from counts on the wire only up to a fixed cap: a request of a few
//! MiB whose array count claims millions of elements used to reserve them all (bounded only by
//! the bytes remaining), hundreds of MiB per request. Measured with a counting allocator, so
//! this file holds one test (the allocator is process-wide).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Encodable;
use krust_server::handlers::NativeRequest;
use krust_server::request::request_context::parse_header;

struct LargestAllocation;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only records sizes.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

const BODY_BYTES: usize = 4 << 20;

#[test]
fn a_forged_count_in_a_large_request_reserves_at_most_a_fixed_cap() {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(3)
        .with_correlation_id(1)
        .encode(&mut frame, ApiKey::Produce.request_header_version(3))
        .unwrap();
    // transactional id (null), acks, timeout, then the topic array's count: one per byte left.
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.extend_from_slice(&1000i32.to_be_bytes());
    frame.extend_from_slice(&(BODY_BYTES as i32).to_be_bytes());
    // A null topic name: the first element already fails to decode.
    frame.resize(frame.len() + BODY_BYTES, 0xff);
    let (api_key, header, body) = parse_header(frame.freeze()).unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    let decoded = NativeRequest::decode(api_key, header.request_api_version, body);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(decoded.is_err());
    assert!(
        largest < 1 << 20,
        "decoding a {BODY_BYTES}-byte body allocated {largest} bytes at once"
    );
}
