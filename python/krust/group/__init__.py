"""The group coordinator (Kafka's classic group protocol) with offsets in `__consumer_offsets`.

See docs/group-coordinator.md for the state machine, the record formats and the partition mapping.
"""

from krust.group.coordinator import GroupCoordinator
from krust.group.install import install

__all__ = ["GroupCoordinator", "install"]
