//! Request frames through the broker's header parsing and native body decoding, the exact
//! path every client request takes: valid headers for every native api and version (and a
//! few past them), then a body of pieces an attacker picks — forged array counts (classic and
//! compact), strings, record batches (compressed, forged), and fillers that grow the frame up
//! to `socket.request.max.bytes`. Any frame must yield a request or an error, never a panic or
//! an abort; a decoded Produce request's records also go through batch validation.
#![no_main]

use arbitrary::Arbitrary;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use krust_fuzz::FuzzBatch;
use krust_server::request::request_context::parse_header;
use krust_server::handlers::NativeRequest;
use krust_storage::LogConfig;
use libfuzzer_sys::fuzz_target;

/// `socket.request.max.bytes`' default: the largest frame the broker reads.
const MAX_FRAME: usize = 104_857_600;
const NOW: i64 = 1_700_000_000_000;
/// A 100 MiB frame takes a while to build and decode: one value in 65,536 asks for it (not
/// 0 or 0xffff, which mutations produce all the time), so most runs stay fast.
const HUGE: u16 = 0x4b52;

#[derive(Arbitrary, Debug)]
enum Api {
    ApiVersions,
    Metadata,
    Produce,
    Fetch,
    ListOffsets,
    DescribeCluster,
    InitProducerId,
    OffsetForLeaderEpoch,
    DescribeLogDirs,
    DescribeProducers,
    DescribeTopicPartitions,
}

#[derive(Arbitrary, Debug)]
enum Piece {
    Bytes(Vec<u8>),
    /// An INT32 array count or NULLABLE_BYTES length.
    Count(i32),
    /// A compact (UNSIGNED_VARINT, n + 1) count or length.
    CompactCount(u32),
    Int16(i16),
    Int64(i64),
    String(Option<String>),
    /// A record batch behind its length, classic or compact.
    Batch {
        batch: FuzzBatch,
        compact: bool,
    },
    /// `size` copies of `byte`, or (when `huge` is `HUGE`, rarely) as many as fill the frame
    /// to `socket.request.max.bytes`.
    Filler {
        byte: u8,
        size: u16,
        huge: u16,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    api: Api,
    version: u8,
    correlation_id: i32,
    client_id: Option<String>,
    body: Vec<Piece>,
}

fn api_key(api: &Api) -> ApiKey {
    match api {
        Api::ApiVersions => ApiKey::ApiVersions,
        Api::Metadata => ApiKey::Metadata,
        Api::Produce => ApiKey::Produce,
        Api::Fetch => ApiKey::Fetch,
        Api::ListOffsets => ApiKey::ListOffsets,
        Api::DescribeCluster => ApiKey::DescribeCluster,
        Api::InitProducerId => ApiKey::InitProducerId,
        Api::OffsetForLeaderEpoch => ApiKey::OffsetForLeaderEpoch,
        Api::DescribeLogDirs => ApiKey::DescribeLogDirs,
        Api::DescribeProducers => ApiKey::DescribeProducers,
        Api::DescribeTopicPartitions => ApiKey::DescribeTopicPartitions,
    }
}

fn put_unsigned_varint(out: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn frame(input: &Input) -> Option<Bytes> {
    let key = api_key(&input.api);
    // Versions 0..=20 cover every native api's range and the unsupported ones just past it.
    let version = i16::from(input.version % 21);
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(input.correlation_id)
        .with_client_id(input.client_id.clone().map(StrBytes::from_string));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .ok()?;
    for piece in &input.body {
        match piece {
            Piece::Bytes(b) => out.put_slice(b),
            Piece::Count(n) => out.put_i32(*n),
            Piece::CompactCount(n) => put_unsigned_varint(&mut out, *n),
            Piece::Int16(n) => out.put_i16(*n),
            Piece::Int64(n) => out.put_i64(*n),
            Piece::String(None) => out.put_i16(-1),
            Piece::String(Some(s)) => {
                out.put_i16(s.len() as i16);
                out.put_slice(s.as_bytes());
            }
            Piece::Batch { batch, compact } => {
                let bytes = batch.encode(NOW);
                if *compact {
                    put_unsigned_varint(&mut out, bytes.len() as u32 + 1);
                } else {
                    out.put_i32(bytes.len() as i32);
                }
                out.put_slice(&bytes);
            }
            Piece::Filler { byte, size, huge } => {
                let size = match huge {
                    &HUGE => MAX_FRAME.saturating_sub(out.len()),
                    _ => usize::from(*size),
                };
                out.put_bytes(*byte, size);
            }
        }
        if out.len() > MAX_FRAME {
            return None;
        }
    }
    Some(out.freeze())
}

/// The broker's decoding path, in one place so a change of its signature is a one-line edit.
fn decode(frame: Bytes) -> Option<NativeRequest> {
    let (api_key, header, body) = parse_header(frame).ok()?;
    NativeRequest::decode(api_key, header.request_api_version, body).ok()
}

fuzz_target!(|input: Input| {
    let Some(frame) = frame(&input) else { return };
    if let Some(NativeRequest::Produce(request)) = decode(frame) {
        for topic in &request.topic_data {
            for partition in &topic.partition_data {
                if let Some(records) = &partition.records {
                    let _ = krust_storage::fuzzing::validate_records(
                        records,
                        &LogConfig::default(),
                        NOW,
                    );
                }
            }
        }
    }
});
