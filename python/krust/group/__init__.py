"""The group coordinator (Kafka's classic group protocol) with offsets in `__consumer_offsets`.

See docs/group-coordinator.md for the state machine, the record formats and the partition mapping.
Its modules are imported where used (krust.group.install), not here: the broker's config checks
import krust.group.settings before the port opens, and must not pull in the coordinator.
"""
