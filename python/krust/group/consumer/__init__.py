"""KIP-848's consumer group type: members reconciled towards a broker-computed assignment, the
assignors, heartbeats and the group's records. Not here: the classic protocol (group.classic),
offsets (group.offset_manager) nor the api handlers (group.api_consumer_group)."""
