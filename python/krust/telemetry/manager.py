"""Kafka's ClientMetricsManager and ClientMetricsInstance (KIP-714): which subscriptions a client
instance matches, its instance id and subscription id, and the checks of its
GetTelemetrySubscriptions and PushTelemetry requests. Knows no wire format; the service turns
its answers into responses.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from krust.controller.client_metrics_configs import (
    ALL_METRICS,
    DEFAULT_INTERVAL_MS,
    Selector,
    Subscription,
)

# Kafka's order of preference: a client compresses with the first it supports.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
_KNOWN_COMPRESSION_TYPES = frozenset((0, *ACCEPTED_COMPRESSION_TYPES))
# Kafka's Uuid.RESERVED: no client instance may have these ids.
_RESERVED_IDS = frozenset((uuid.UUID(int=0), uuid.UUID(int=1)))
# Kafka's: at most this many instances are kept (LRU), each for at least a minute.
MAX_INSTANCES = 16384
CACHE_EXPIRY_MS = 60_000


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


@dataclass(frozen=True)
class ClientInfo:
    """What the broker knows of a client from its connection (Kafka's
    ClientMetricsInstanceMetadata, less the instance id)."""

    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: int

    def selectors(self, instance_id: uuid.UUID) -> dict[Selector, str]:
        return {
            Selector.CLIENT_INSTANCE_ID: str(instance_id),
            Selector.CLIENT_ID: self.client_id,
            Selector.CLIENT_SOFTWARE_NAME: self.software_name,
            Selector.CLIENT_SOFTWARE_VERSION: self.software_version,
            Selector.CLIENT_SOURCE_ADDRESS: self.source_address,
            Selector.CLIENT_SOURCE_PORT: str(self.source_port),
        }


def subscription_id(metrics: frozenset[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """A checksum of the subscribed metrics and interval, XORed with the instance id's hash,
    as Kafka computes it (the value is opaque to clients: only a change matters)."""
    checksum = zlib.crc32(("[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)).encode())
    most, least = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    folded = most ^ least
    id_hash = ((folded >> 32) ^ folded) & 0xFFFFFFFF
    value = checksum ^ id_hash
    return value - 2**32 if value >= 2**31 else value


@dataclass
class ClientInstance:
    """One client instance's subscription and request times (Kafka's ClientMetricsInstance)."""

    instance_id: uuid.UUID
    client: ClientInfo
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_get_ms: float | None = None
    last_push_ms: float | None = None
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    expires_at_ms: float = field(default=0.0)

    def may_get(self, now: float) -> bool:
        """A GetTelemetrySubscriptions is due one push interval after the last request."""
        last = max(
            (t for t in (self.last_get_ms, self.last_push_ms) if t is not None), default=None
        )
        if last is not None and now - last < self.push_interval_ms:
            return False
        self.last_get_ms = now
        return True

    def may_push(self, now: float) -> bool:
        """A push is due one interval after the last push, or at once after a
        GetTelemetrySubscriptions (clients jitter their first push)."""
        fetched_since = self.last_get_ms is not None and (
            self.last_push_ms is None or self.last_get_ms > self.last_push_ms
        )
        last_push = self.last_push_ms
        if not fetched_since and last_push is not None and now - last_push < self.push_interval_ms:
            return False
        self.last_push_ms = now
        return True


@dataclass(frozen=True)
class GetAnswer:
    error: ErrorCode
    instance: ClientInstance | None = None


class ClientMetricsManager:
    """Subscriptions (replaced whole from the metadata image) and the client instances."""

    def __init__(
        self,
        telemetry_max_bytes: int,
        clock: Callable[[], float] = _monotonic_ms,
        on_expired: Callable[[uuid.UUID], None] = lambda _id: None,
    ) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self._clock = clock
        self._on_expired = on_expired
        self._configs: Mapping[str, Mapping[str, str]] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self._version = 0
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._next_sweep_ms = 0.0

    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Take the image's subscriptions; instances re-evaluate theirs on their next request
        if anything changed (Kafka's subscriptionUpdateVersion)."""
        if configs == self._configs:
            return
        self._configs = configs
        self.subscriptions = {
            name: Subscription.from_configs(name, c) for name, c in configs.items()
        }
        self._version += 1

    @property
    def instance_count(self) -> int:
        """The client instances kept now (Kafka's `instance-count`)."""
        return len(self._instances)

    def instance(self, instance_id: uuid.UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in _RESERVED_IDS:
                return candidate

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now: float) -> ClientInstance:
        """The cached instance (re-evaluated if subscriptions changed since), or a new one;
        its expiry pushed back: max(a minute, three push intervals) from now."""
        if now >= self._next_sweep_ms:
            self.expire(now)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._evaluate(instance_id, client)
        elif instance.subscription_version < self._version:
            instance = self._evaluate(instance_id, instance.client)
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        while len(self._instances) > MAX_INSTANCES:
            evicted, _ = self._instances.popitem(last=False)
            self._on_expired(evicted)
        instance.expires_at_ms = now + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _evaluate(self, instance_id: uuid.UUID, client: ClientInfo) -> ClientInstance:
        """Kafka's createClientInstance: the union of the matching subscriptions' metrics
        (just `*` if any has it) at the lowest of their intervals."""
        selectors = client.selectors(instance_id)
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        for subscription in self.subscriptions.values():
            if subscription.matches(selectors):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        if ALL_METRICS in metrics:
            metrics = {ALL_METRICS}
        subscribed = frozenset(metrics)
        return ClientInstance(
            instance_id=instance_id,
            client=client,
            subscription_id=subscription_id(subscribed, interval, instance_id),
            subscription_version=self._version,
            metrics=tuple(sorted(subscribed)),
            push_interval_ms=interval,
        )

    def get_subscriptions(self, requested_id: uuid.UUID | None, client: ClientInfo) -> GetAnswer:
        """Kafka's processGetTelemetrySubscriptionRequest: a new instance id for a client that
        has none; THROTTLING_QUOTA_EXCEEDED before the push interval is over, unless the last
        push failed in a way the client recovers from by asking again."""
        now = self._clock()
        if requested_id is None or requested_id.int == 0:
            requested_id = self._new_instance_id()
        instance = self._instance(requested_id, client, now)
        recovering = instance.last_error in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        )
        if not instance.may_get(now) and not recovering:
            return GetAnswer(ErrorCode.throttling_quota_exceeded)
        instance.last_error = ErrorCode.none
        return GetAnswer(ErrorCode.none, instance)

    def check_push(
        self,
        instance_id: uuid.UUID | None,
        request_subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        client: ClientInfo,
    ) -> tuple[ErrorCode, ClientInstance | None]:
        """Kafka's validatePushRequest, in its order; the instance whose push may be exported
        when the error is NONE."""
        if instance_id is None or instance_id in _RESERVED_IDS:
            return ErrorCode.invalid_request, None
        now = self._clock()
        instance = self._instance(instance_id, client, now)
        error = self._push_error(instance, request_subscription_id, terminating, now)
        if error is ErrorCode.none and compression_type not in _KNOWN_COMPRESSION_TYPES:
            error = ErrorCode.unsupported_compression_type
        if error is ErrorCode.none and size > self.telemetry_max_bytes:
            error = ErrorCode.telemetry_too_large
        instance.terminating = terminating
        instance.last_error = error
        return error, instance

    @staticmethod
    def _push_error(
        instance: ClientInstance, request_subscription_id: int, terminating: bool, now: float
    ) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.invalid_request
        if not instance.may_push(now) and not terminating:
            return ErrorCode.throttling_quota_exceeded
        if request_subscription_id != instance.subscription_id:
            return ErrorCode.unknown_subscription_id
        return ErrorCode.none

    def expire(self, now: float | None = None) -> None:
        """Forget the instances that sent nothing for their expiry time."""
        now = self._clock() if now is None else now
        self._next_sweep_ms = now + 1000
        expired = [i for i, instance in self._instances.items() if instance.expires_at_ms <= now]
        for instance_id in expired:
            del self._instances[instance_id]
            self._on_expired(instance_id)
