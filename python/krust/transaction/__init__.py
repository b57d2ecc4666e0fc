"""The transaction coordinator (KIP-98, KIP-447, KIP-890) and `__transaction_state`
(docs/transaction-coordinator.md). Not here: a partition leader's side of WriteTxnMarkers
(krust.group.api_txn_markers) nor the shared coordinator runtime (krust.coordinator)."""
