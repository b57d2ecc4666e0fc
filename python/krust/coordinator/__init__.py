"""The runtime the group and transaction coordinators share: clock, key partitioner, internal-log
writer and loader, partition loading (docs/coordinator-runtime.md). Not here: anything of one
coordinator's protocol (krust.group, krust.transaction) nor test clocks (tests/unit/doubles)."""
