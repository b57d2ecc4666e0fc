"""Kafka's classic group protocol: a classic group's state machine and members, the JoinGroup,
SyncGroup, Heartbeat and LeaveGroup logic and the rebalance timers. Not here: the api handlers
(krust.group.api_*), offsets (krust.group.offset_manager) nor KIP-848 groups (group.consumer)."""
