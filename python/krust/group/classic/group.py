"""A classic group: Kafka's state machine, its members, the protocol vote and the leader.

This module holds the state and its invariants only; what happens on a JoinGroup or a timeout is
decided by the GroupManager (group_manager.py).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Sequence

from krust.coordinator.wire import Reader, RecordFormatError
from krust.group.classic.member import ClassicGroupMember, Protocols
from krust.group.records import GroupMetadataValue, MemberMetadata
from krust.group.results import (
    CoordinatorError,
    ErrorCode,
    JoinedMember,
    JoinGroupResult,
    SyncGroupResult,
)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, protocol_type: str | None = None) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        # None for a "simple" group: one that only stores offsets committed without membership.
        self.protocol_type = protocol_type
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them.
        self.pending_join_members: set[str] = set()
        # Members that got their JoinGroup response but have not sent SyncGroup yet.
        self.pending_sync_members: set[str] = set()
        # An initial rebalance (from Empty) waits longer while new members keep arriving.
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None

    # -- state ---------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # -- membership ----------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(
        self, member: ClassicGroupMember, join_future: asyncio.Future[JoinGroupResult] | None
    ) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_future = join_future
        self.members[member.member_id] = member
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_future = join_future

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """Give a static member a new member id; whoever still uses the old id is fenced."""
        old = self.members.pop(old_member_id)
        old.complete_join(JoinGroupResult(ErrorCode.fenced_instance_id, member_id=old_member_id))
        old.complete_sync(SyncGroupResult(ErrorCode.fenced_instance_id))
        new = ClassicGroupMember(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """Raise UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID if the instance id has a newer member."""
        if group_instance_id is not None:
            known_member_id = self.static_members.get(group_instance_id)
            if known_member_id is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if known_member_id != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            raise CoordinatorError(ErrorCode.unknown_member_id)

    def num_awaiting_join(self) -> int:
        return sum(1 for member in self.members.values() if member.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else promote a member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------------------

    def _candidate_protocols(self) -> set[str]:
        counts = Counter(name for m in self.members.values() for name in m.protocol_names())
        return {name for name, count in counts.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocol_names: Sequence[str]) -> bool:
        if self.is_in(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and bool(
            self._candidate_protocols().intersection(protocol_names)
        )

    def select_protocol(self) -> str:
        """Kafka's vote: each member names its favourite common protocol; the most votes wins.

        A tie goes to the protocol that was voted for first (members in join order).
        """
        candidates = self._candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """KIP-496: whether a member may consume `topic` (unknown counts as yes for consumers)."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(_subscription_topics(member.metadata(self.protocol_name)))
        except RecordFormatError:
            return None
        return frozenset(topics)

    # -- responses and records -----------------------------------------------------------------

    def joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def assignments(self) -> dict[str, bytes]:
        return {member_id: member.assignment for member_id, member in self.members.items()}

    def to_record(self, assignments: dict[str, bytes]) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=(
                self.state_timestamp_ms if self.state_timestamp_ms is not None else -1
            ),
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def stable(
        cls, group_id: str, now_ms: int, generation_id: int, members: list[ClassicGroupMember]
    ) -> ClassicGroup:
        """A Stable consumer-type group of these members at this generation, its protocol
        voted (a consumer group downgraded to a classic one, KIP-848)."""
        group = cls(group_id, now_ms, CONSUMER_PROTOCOL_TYPE)
        group.generation_id = generation_id
        for member in members:
            group.add(member, None)
        group.state = GroupState.STABLE
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """The group as Kafka's loader rebuilds it: Stable with its members, or Empty."""
        timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        group = cls(group_id, 0, value.protocol_type or None)
        group.state_timestamp_ms = timestamp
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        for record in value.members:
            member = ClassicGroupMember(
                member_id=record.member_id,
                group_instance_id=record.group_instance_id,
                client_id=record.client_id,
                client_host=record.client_host,
                rebalance_timeout_ms=record.rebalance_timeout_ms,
                session_timeout_ms=record.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=((value.protocol or "", record.subscription),),
                assignment=record.assignment,
            )
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        if group.members:
            group.state = GroupState.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        return group


def _subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription; version 0 is a prefix of every version."""
    reader = Reader(metadata)
    reader.int16()
    count = reader.int32()
    if count < 0:
        raise RecordFormatError("null topic array in consumer subscription")
    return [reader.string() for _ in range(count)]
