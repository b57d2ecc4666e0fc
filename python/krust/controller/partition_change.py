"""One partition's next leader, ISR and replicas, as one PartitionChangeRecord: Kafka's
PartitionChangeBuilder and PartitionReassignmentReplicas (KIP-631, KIP-455, KIP-704).

Every change a controller makes to a partition goes through `PartitionChangeBuilder`: the
caller sets the targets (ISR, replicas, a reassignment's adding/removing replicas, the leader
recovery state) and the election wanted; `build()` completes a reassignment the target ISR
allows, elects the leader and returns the record, or None when nothing changes. Replaying the
record bumps the partition epoch, and the leader epoch whenever the record names a leader."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from krust.controller.image import PartitionImage
from krust.controller.records import NO_LEADER_CHANGE, PartitionChangeRecord

NO_LEADER = -1
RECOVERED = 0
RECOVERING = 1  # Kafka's LeaderRecoveryState after an unclean election (KIP-704)


class Election(enum.Enum):
    """Which leaders an election may choose (Kafka's PartitionChangeBuilder.Election)."""

    PREFERRED = "preferred"  # the first replica if it can lead, else as ONLINE
    ONLINE = "online"  # keep a leader that can lead, else the first ISR member that can
    UNCLEAN = "unclean"  # as ONLINE, else any replica that can lead, ISR or not


@dataclass(frozen=True)
class ReassignmentReplicas:
    """A reassignment in progress: the replica list (targets first, then those being removed)
    and the replicas being added and removed (Kafka's PartitionReassignmentReplicas)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @staticmethod
    def between(current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
        removing = tuple(sorted(set(current) - set(target)))
        adding = tuple(sorted(set(target) - set(current)))
        return ReassignmentReplicas(tuple(target) + removing, adding, removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def completed(self, isr: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The (replicas, ISR) once done, if `isr` holds every target replica; else None."""
        if not self.in_progress:
            return None
        kept_isr = tuple(r for r in isr if r not in self.removing)
        replicas = tuple(r for r in self.replicas if r not in self.removing)
        if not kept_isr or not replicas or not set(replicas) <= set(kept_isr):
            return None
        return replicas, kept_isr

    def original(self) -> tuple[int, ...]:
        """The replicas before the reassignment began."""
        return tuple(r for r in self.replicas if r not in self.adding)


def reassignment_of(partition: PartitionImage) -> ReassignmentReplicas:
    return ReassignmentReplicas(
        partition.replicas, partition.adding_replicas, partition.removing_replicas
    )


class PartitionChangeBuilder:
    """Targets for one partition in, its PartitionChangeRecord (or None) out."""

    def __init__(
        self,
        partition: PartitionImage,
        topic_id: uuid.UUID,
        is_acceptable_leader: Callable[[int], bool],
        election: Election = Election.ONLINE,
    ) -> None:
        self._partition = partition
        self._topic_id = topic_id
        self._acceptable = is_acceptable_leader
        self.election = election
        self.target_isr: tuple[int, ...] = partition.isr
        self.target_replicas: tuple[int, ...] = partition.replicas
        self.target_adding: tuple[int, ...] = partition.adding_replicas
        self.target_removing: tuple[int, ...] = partition.removing_replicas
        self.target_leader_recovery_state = partition.leader_recovery_state

    def _valid_leader(self, replica: int) -> bool:
        return replica in self.target_isr and self._acceptable(replica)

    def elect_leader(self) -> tuple[int, bool]:
        """The leader the election chooses and whether that election is unclean."""
        current = self._partition.leader
        if self.election is Election.PREFERRED and self._valid_leader(self.target_replicas[0]):
            return self.target_replicas[0], False
        if self._valid_leader(current):
            return current, False
        for replica in self.target_replicas:
            if self._valid_leader(replica):
                return replica, False
        if self.election is Election.UNCLEAN:
            for replica in self.target_replicas:
                if self._acceptable(replica):
                    return replica, True
        return NO_LEADER, False

    def _complete_reassignment(self) -> None:
        reassignment = ReassignmentReplicas(
            self.target_replicas, self.target_adding, self.target_removing
        )
        completed = reassignment.completed(self.target_isr)
        if completed is not None:
            self.target_replicas, self.target_isr = completed
            self.target_adding = self.target_removing = ()

    def build(self) -> PartitionChangeRecord | None:
        partition = self._partition
        self._complete_reassignment()
        leader = NO_LEADER_CHANGE
        isr: tuple[int, ...] | None = None
        recovery_state = -1
        elected, unclean = self.elect_leader()
        if elected != partition.leader:
            leader = elected
            if unclean:
                # The new leader may lack acknowledged records: it alone is in sync now, and
                # it recovers before others may join (KIP-704).
                isr = (elected,)
                if partition.leader_recovery_state != RECOVERING:
                    recovery_state = RECOVERING
        if leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(self.target_replicas):
            # Replicas leave: bump the leader epoch so they stop fetching from this leader.
            leader = partition.leader
        if isr is None and self.target_isr and self.target_isr != partition.isr:
            isr = self.target_isr
        if self.target_leader_recovery_state != partition.leader_recovery_state:
            recovery_state = self.target_leader_recovery_state

        def change(target: tuple[int, ...], current: tuple[int, ...]) -> tuple[int, ...] | None:
            return None if target == current else target

        record = PartitionChangeRecord(
            partition_id=partition.partition,
            topic_id=self._topic_id,
            isr=isr,
            leader=leader,
            replicas=change(self.target_replicas, partition.replicas)
            if self.target_replicas
            else None,
            removing_replicas=change(self.target_removing, partition.removing_replicas),
            adding_replicas=change(self.target_adding, partition.adding_replicas),
            leader_recovery_state=recovery_state,
        )
        unchanged = PartitionChangeRecord(partition_id=partition.partition, topic_id=self._topic_id)
        return None if record == unchanged else record
