//! What a request costs a client against its quotas (KIP-219): a Produce's or Fetch's bytes
//! against the byte rate, every native request's handling time against request_percentage;
//! the larger throttle time wins.

use std::time::Duration;

use kafka_protocol::messages::{
    AlterReplicaLogDirsResponse, ApiKey, ApiVersionsResponse, DeleteRecordsResponse,
    DescribeClusterResponse, DescribeLogDirsResponse, DescribeProducersResponse,
    DescribeTopicPartitionsResponse, InitProducerIdResponse, ListOffsetsResponse, MetadataResponse,
    OffsetForLeaderEpochResponse,
};

use crate::clock::now_ms;
use crate::quota::{ClientQuotaManager, ClientQuotaType};
use crate::request::request_context::{RequestContext, Throttle};
use crate::server_context::ServerContext;

/// Kafka's request quota measures handling time as a percentage of one second.
const NANOS_TO_PERCENT: f64 = 100.0 / 1e9;

/// What a request was charged: how long its client is throttled (0: not at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaCharge {
    pub throttle_ms: i64,
}

impl QuotaCharge {
    pub const NONE: QuotaCharge = QuotaCharge { throttle_ms: 0 };

    /// The response's throttle_time_ms.
    pub fn throttle_time_ms(self) -> i32 {
        i32::try_from(self.throttle_ms).unwrap_or(i32::MAX)
    }

    /// How the connection is held back: at once for clients that throttle themselves (Produce
    /// v6+, Fetch v8+), by delaying the response for older ones.
    pub fn throttle(self, ctx: &RequestContext<'_>) -> Throttle {
        let self_throttling = match ctx.api_key {
            ApiKey::Produce => ctx.version() >= 6,
            ApiKey::Fetch => ctx.version() >= 8,
            _ => true,
        };
        Throttle {
            time: Duration::from_millis(u64::try_from(self.throttle_ms).unwrap_or(0)),
            before_send: !self_throttling,
        }
    }
}

/// Takes back `bytes` recorded by `charge` (a throttled Fetch sends no records).
pub fn refund(
    context: &ServerContext,
    ctx: &RequestContext<'_>,
    quota_type: ClientQuotaType,
    bytes: usize,
) {
    let user = ctx.session.principal.name.as_str();
    context
        .quotas
        .unrecord(quota_type, user, ctx.client_id(), bytes as f64, now_ms());
}

/// The most bytes a Fetch may return to the client: one quota window's worth of its
/// consumer_byte_rate (Kafka's getMaxValueInQuotaWindow), `usize::MAX` when unlimited.
pub fn max_fetch_bytes(context: &ServerContext, ctx: &RequestContext<'_>) -> usize {
    let user = ctx.session.principal.name.as_str();
    context
        .quotas
        .max_value_in_window(ClientQuotaType::Fetch, user, ctx.client_id())
        .map_or(usize::MAX, |bytes| bytes as usize)
}

/// A response that carries Kafka's throttle_time_ms.
pub trait ThrottleTime {
    fn set_throttle_time_ms(&mut self, ms: i32);
}

macro_rules! throttle_time_field {
    ($($response:ty),* $(,)?) => {
        $(impl ThrottleTime for $response {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        })*
    };
}

throttle_time_field!(
    AlterReplicaLogDirsResponse,
    ApiVersionsResponse,
    DeleteRecordsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    DescribeTopicPartitionsResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetForLeaderEpochResponse,
);

/// Charges a request's handling time against its client's request_percentage and puts the
/// throttle time in its response; how the connection is then held back.
pub fn charge_request_time<T: ThrottleTime>(
    context: &ServerContext,
    ctx: &RequestContext<'_>,
    response: &mut T,
) -> Throttle {
    if !context.quotas.enabled() {
        return QuotaCharge::NONE.throttle(ctx);
    }
    let charge = QuotaCharge {
        throttle_ms: request_time_throttle_ms(context, ctx, now_ms()),
    };
    response.set_throttle_time_ms(charge.throttle_time_ms());
    charge.throttle(ctx)
}

fn request_time_throttle_ms(context: &ServerContext, ctx: &RequestContext<'_>, now: i64) -> i64 {
    let user = ctx.session.principal.name.as_str();
    charge_handling_time(
        &context.quotas,
        user,
        ctx.client_id(),
        ctx.handling_time(),
        now,
    )
}

/// Records `handling` against the client's request_percentage; its throttle time in ms.
pub fn charge_handling_time(
    quotas: &ClientQuotaManager,
    user: &str,
    client_id: &str,
    handling: Duration,
    now: i64,
) -> i64 {
    let percent = handling.as_nanos() as f64 * NANOS_TO_PERCENT;
    // Kafka caps a request-time throttle at one quota window.
    let max = quotas.window().window_ms;
    quotas.record_and_throttle_ms(
        ClientQuotaType::Request,
        user,
        client_id,
        percent,
        now,
        Some(max),
    )
}

/// Records `bytes` against the client's `quota_type` byte rate and, when `count_time`, the
/// request's handling time against its request_percentage.
pub fn charge(
    context: &ServerContext,
    ctx: &RequestContext<'_>,
    quota_type: ClientQuotaType,
    bytes: usize,
    count_time: bool,
) -> QuotaCharge {
    let quotas = &context.quotas;
    if !quotas.enabled() {
        return QuotaCharge::NONE;
    }
    let user = ctx.session.principal.name.as_str();
    let client_id = ctx.client_id();
    let now = now_ms();
    let byte_throttle =
        quotas.record_and_throttle_ms(quota_type, user, client_id, bytes as f64, now, None);
    let request_throttle = if count_time {
        request_time_throttle_ms(context, ctx, now)
    } else {
        0
    };
    QuotaCharge {
        throttle_ms: byte_throttle.max(request_throttle),
    }
}
