"""Broker registration, heartbeats and fencing as KRaft runs them (KIP-631): Kafka's
ClusterControlManager and BrokerHeartbeatManager, as planning over a MetadataImage plus the
active controller's in-memory sessions.

A broker registers (BrokerRegistration) fenced, with its broker epoch the offset of its
RegisterBrokerRecord. Its heartbeats (BrokerHeartbeat) keep its session alive; it is unfenced
once its metadata has reached that record and it asks to be. A broker whose session lapses
(`broker.session.timeout.ms` without a heartbeat) is fenced: it leaves every ISR and its
partitions get new leaders. A broker that wants to shut down is in controlled shutdown until
it leads nothing and the other brokers have seen that; then it is told to stop."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from krust.controller.bootstrap import SECURITY_PROTOCOL_IDS
from krust.controller.image import BrokerImage, MetadataImage
from krust.controller.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    METADATA_VERSION_FEATURE,
    UNFENCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    RegisterBrokerRecord,
)
from krust.controller.replication import fence_broker_updates, leads_any, unfence_broker_updates

# Brokers that send no metadata.version range support only the first KRaft one.
MINIMUM_KRAFT_METADATA_VERSION = 1


class BrokerState(enum.Enum):
    """Kafka's BrokerControlState: where a heartbeat leaves a broker."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW)


@dataclass
class Session:
    """What the active controller knows of a broker between heartbeats."""

    fenced: bool
    last_contact_ms: int
    metadata_offset: int = -1
    # The metadata offset of the leadership changes of its controlled shutdown; -1: none.
    controlled_shutdown_offset: int = -1


class BrokerHeartbeatManager:
    """Broker sessions on the active controller, on an injected millisecond clock.

    `local_node`, if given, is the broker inside this process: it sends no heartbeats, so
    its session never lapses and it never holds back another broker's shutdown."""

    def __init__(
        self, session_timeout_ms: int, clock: Callable[[], int], local_node: int | None = None
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.clock = clock
        self.local_node = local_node
        self.sessions: dict[int, Session] = {}

    def session(self, broker: BrokerImage) -> Session:
        """The broker's session; one starts now for a broker this controller has not heard
        from yet (it just became active), as Kafka gives each a full session to reach it."""
        session = self.sessions.get(broker.node_id)
        if session is None:
            session = Session(broker.fenced, self.clock())
            self.sessions[broker.node_id] = session
        return session

    def has_valid_session(self, broker: BrokerImage, now_ms: int) -> bool:
        if broker.fenced:
            return False
        if broker.node_id == self.local_node:
            return True
        session = self.session(broker)
        return session.last_contact_ms + self.session_timeout_ms >= now_ms

    def stale_brokers(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session has lapsed."""
        return [
            b.node_id
            for b in image.brokers.values()
            if not b.fenced and not self.has_valid_session(b, now_ms)
        ]

    def next_expiry_ms(self, image: MetadataImage) -> int:
        """When the next unfenced broker's session lapses, if none heartbeats before."""
        expiries = [
            self.session(b).last_contact_ms + self.session_timeout_ms + 1
            for b in image.brokers.values()
            if not b.fenced and b.node_id != self.local_node
        ]
        return min(expiries, default=self.clock() + self.session_timeout_ms)

    def register(self, broker_id: int, fenced: bool, new_incarnation: bool) -> None:
        previous = None if new_incarnation else self.sessions.get(broker_id)
        session = Session(fenced, self.clock())
        if previous is not None and previous.fenced == fenced:
            session.metadata_offset = previous.metadata_offset
            session.controlled_shutdown_offset = previous.controlled_shutdown_offset
        self.sessions[broker_id] = session

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        session = self.sessions[broker_id]
        session.last_contact_ms = self.clock()
        session.metadata_offset = metadata_offset
        session.fenced = fenced
        if fenced:
            # A fenced broker leaves controlled shutdown; its next heartbeat stops it.
            session.controlled_shutdown_offset = -1

    def fenced(self, broker_id: int) -> None:
        session = self.sessions.get(broker_id)
        if session is not None:
            session.fenced = True
            session.controlled_shutdown_offset = -1

    def entered_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        session = self.sessions[broker_id]
        if session.controlled_shutdown_offset < 0:
            session.controlled_shutdown_offset = offset

    def state(self, broker: BrokerImage) -> BrokerState:
        session = self.session(broker)
        if broker.fenced:
            return BrokerState.FENCED
        if session.controlled_shutdown_offset < 0:
            return BrokerState.UNFENCED
        return BrokerState.CONTROLLED_SHUTDOWN

    def lowest_active_offset(self, image: MetadataImage) -> int | None:
        """The lowest metadata offset the active (unfenced, not shutting down) brokers have
        reported; None when there is none."""
        offsets = [
            self.session(b).metadata_offset
            for b in image.brokers.values()
            if not b.fenced
            and b.node_id != self.local_node
            and self.session(b).controlled_shutdown_offset < 0
        ]
        return min(offsets, default=None)


class RegistrationError(Exception):
    """A registration refused, with Kafka's error code; the message is for the log."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class Registration:
    """A BrokerRegistration request's content."""

    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]
    rack: str | None
    is_migrating_zk_broker: bool = False


def plan_register_broker(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    request: Registration,
    next_offset: int,
    unclean: Callable[[str], bool],
) -> list[MetadataRecord]:
    """The records of a registration (the RegisterBrokerRecord last; for a new incarnation
    its offset is the broker epoch). Raises RegistrationError as Kafka refuses."""
    if request.cluster_id != image.cluster_id:
        raise RegistrationError(
            ErrorCode.inconsistent_cluster_id,
            f"Expected cluster ID {image.cluster_id}, but got cluster ID {request.cluster_id}",
        )
    existing = image.brokers.get(request.broker_id)
    previous = existing.registration.incarnation_id if existing and existing.registration else None
    new_incarnation = request.incarnation_id != previous
    if (
        existing is not None
        and new_incarnation
        and heartbeats.has_valid_session(existing, heartbeats.clock())
    ):
        raise RegistrationError(
            ErrorCode.duplicate_broker_registration,
            "Another broker is registered with that broker id.",
        )
    if request.is_migrating_zk_broker:
        raise RegistrationError(
            ErrorCode.broker_id_not_registered,
            "Controller does not support registering ZK brokers.",
        )
    for listener in request.listeners:
        if listener.security_protocol not in SECURITY_PROTOCOL_IDS.values():
            raise RegistrationError(
                ErrorCode.invalid_registration,
                f"Unknown security protocol {listener.security_protocol} in listener "
                f"{listener.name}",
            )
    features = _checked_features(image.features, request.features, request.broker_id)
    records: list[MetadataRecord] = []
    if existing is not None and new_incarnation and not existing.fenced:
        # The old incarnation is gone (its session lapsed): stop counting it in ISRs now
        # rather than at the next sweep, so no partition waits on a replica that restarted.
        records += fence_broker_updates(image, request.broker_id, unclean)
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=next_offset + len(records),
        end_points=request.listeners,
        features=features,
        rack=request.rack,
        fenced=True,
        in_controlled_shutdown=False,
    )
    if not new_incarnation and existing is not None:
        record = replace(
            record,
            broker_epoch=existing.epoch,
            fenced=existing.fenced,
            in_controlled_shutdown=existing.in_controlled_shutdown,
        )
    records.append(record)
    return records


def _checked_features(
    finalized: Mapping[str, int], features: Sequence[BrokerFeature], broker_id: int
) -> tuple[BrokerFeature, ...]:
    """The broker's supported feature ranges, each checked against the finalized level
    (Kafka's processRegistrationFeature); absent ranges count as Kafka counts them."""
    checked = list(features)
    names = {feature.name for feature in features}
    if METADATA_VERSION_FEATURE not in names:
        checked.append(
            BrokerFeature(
                name=METADATA_VERSION_FEATURE,
                min_supported_version=MINIMUM_KRAFT_METADATA_VERSION,
                max_supported_version=MINIMUM_KRAFT_METADATA_VERSION,
            )
        )
    for name, level in finalized.items():
        if name not in names and name != METADATA_VERSION_FEATURE and level != 0:
            checked.append(
                BrokerFeature(name=name, min_supported_version=0, max_supported_version=0)
            )
    for feature in checked:
        default = 1 if feature.name == METADATA_VERSION_FEATURE else 0
        level = finalized.get(feature.name, default)
        if not feature.min_supported_version <= level <= feature.max_supported_version:
            raise RegistrationError(
                ErrorCode.unsupported_version,
                f"Unable to register because the broker does not support finalized version "
                f"{level} of {feature.name}. The broker wants a version between "
                f"{feature.min_supported_version} and {feature.max_supported_version}, "
                "inclusive.",
            )
    return tuple(f for f in checked if f.name in names or f.name == METADATA_VERSION_FEATURE)


@dataclass(frozen=True)
class Heartbeat:
    """A BrokerHeartbeat request's content."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool


@dataclass(frozen=True)
class HeartbeatReply:
    records: list[MetadataRecord]
    state: BrokerState
    is_caught_up: bool


class StaleBrokerEpoch(Exception):
    """A heartbeat or AlterPartition from a broker epoch that is no longer registered."""


def check_broker_epoch(image: MetadataImage, broker_id: int, epoch: int) -> BrokerImage:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise StaleBrokerEpoch(f"No broker registration found for broker id {broker_id}")
    if broker.epoch != epoch:
        raise StaleBrokerEpoch(
            f"Expected broker epoch {broker.epoch}, but got broker epoch {epoch}"
        )
    return broker


def plan_heartbeat(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    request: Heartbeat,
    unclean: Callable[[str], bool],
) -> HeartbeatReply:
    """The broker's next state and the records that take it there (Kafka's
    processBrokerHeartbeat); raises StaleBrokerEpoch. Touches its session."""
    broker = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    current = heartbeats.state(broker)
    following = _next_state(image, heartbeats, broker, current, request)
    records: list[MetadataRecord] = []
    if following != current:
        records = _transition(image, broker, following, unclean)
    heartbeats.touch(broker.node_id, following.fenced, request.current_metadata_offset)
    return HeartbeatReply(
        records, following, request.current_metadata_offset >= broker.registration_offset
    )


def _next_state(
    image: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    broker: BrokerImage,
    current: BrokerState,
    request: Heartbeat,
) -> BrokerState:
    """Kafka's BrokerHeartbeatManager.calculateNextBrokerState."""
    if current is BrokerState.FENCED:
        if request.want_shut_down:
            return BrokerState.SHUTDOWN_NOW
        if not request.want_fence and request.current_metadata_offset >= broker.registration_offset:
            return BrokerState.UNFENCED
        return BrokerState.FENCED
    if current is BrokerState.UNFENCED:
        if request.want_fence:
            return BrokerState.SHUTDOWN_NOW if request.want_shut_down else BrokerState.FENCED
        if request.want_shut_down:
            if leads_any(image, broker.node_id):
                return BrokerState.CONTROLLED_SHUTDOWN
            return BrokerState.SHUTDOWN_NOW
        return BrokerState.UNFENCED
    if leads_any(image, broker.node_id):
        return BrokerState.CONTROLLED_SHUTDOWN
    # Stop only once every active broker has seen the leadership changes.
    lowest = heartbeats.lowest_active_offset(image)
    shutdown_offset = heartbeats.session(broker).controlled_shutdown_offset
    if lowest is None or shutdown_offset <= lowest:
        return BrokerState.SHUTDOWN_NOW
    return BrokerState.CONTROLLED_SHUTDOWN


def _transition(
    image: MetadataImage, broker: BrokerImage, state: BrokerState, unclean: Callable[[str], bool]
) -> list[MetadataRecord]:
    broker_id, epoch = broker.node_id, broker.epoch
    records: list[MetadataRecord] = []
    if state.fenced:
        records += fence_broker_updates(image, broker_id, unclean)
        if not broker.fenced:
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=epoch, fenced=FENCE
                )
            )
    elif state is BrokerState.UNFENCED:
        records.append(
            BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=UNFENCE)
        )
        records += unfence_broker_updates(image, broker_id, unclean)
    else:
        if not broker.in_controlled_shutdown:
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id,
                    broker_epoch=epoch,
                    in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
                )
            )
        records += fence_broker_updates(image, broker_id, unclean)
    return records


def plan_fence(
    image: MetadataImage, broker_id: int, unclean: Callable[[str], bool]
) -> list[MetadataRecord]:
    """Fence a broker whose session lapsed: new leaders for what it led, out of every ISR."""
    broker = image.brokers[broker_id]
    return _transition(image, broker, BrokerState.FENCED, unclean)
