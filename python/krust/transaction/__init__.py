"""The transaction coordinator (KIP-98, KIP-447, KIP-890) and `__transaction_state`.

See docs/transaction-coordinator.md.
"""
