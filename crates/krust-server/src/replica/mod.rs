//! This broker's replicas as a whole (Kafka's `ReplicaManager` side): the replica manager (with
//! replica moves between log dirs), the replica fetcher, AlterPartition to the controller, and
//! the requests waiting on replication (purgatory). One partition's own state machine lives in `partition`.

pub mod alter_partition;
pub mod purgatory;
pub mod replica_fetcher;
pub mod replica_manager;
