"""The server-side assignors of KIP-848 consumer groups, by the name a member asks for in
ConsumerGroupHeartbeat (`ServerAssignor`) or the broker's `group.consumer.assignors` lists.

The types they exchange live in group_spec.py (imported from here); the assignors in
uniform.py and range.py. See docs/consumer-group-assignors.md.
"""

from collections.abc import Mapping

from krust.group.consumer.group_spec import (
    Assignment,
    GroupSpec,
    MemberAssignments,
    MemberSubscription,
    PartitionAssignor,
    PartitionAssignorError,
    TopicMetadata,
)
from krust.group.consumer.range import RangeAssignor
from krust.group.consumer.uniform import UniformAssignor

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "GroupSpec",
    "MemberAssignments",
    "MemberSubscription",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "TopicMetadata",
    "UniformAssignor",
]

ASSIGNORS: Mapping[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}
"""Kafka's built-in assignors by name; `uniform` is the default (first in Kafka's list)."""
