//! The partition leader's part in transactions and idempotence: producer ids allocated by the
//! controller and KIP-890 verification with the transaction coordinator. The coordinator itself
//! is Python (`krust.transaction`); the Broker's WriteTxnMarkers side lives in `broker`.

pub mod producer_ids;
pub mod transaction_verification;
