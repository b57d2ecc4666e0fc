"""The coordinator runtime shared by the group and (later) the transaction coordinator.

- `clock`: the injected time source (real or fake) with scheduled callbacks.
- `partitioner`: Kafka's mapping of a key to a partition of the internal topic.
- `log`: appending records to and reading them from an internal topic partition.
- `loader`: replaying a partition, skipping what does not parse.
- `partitions`: which partitions this broker leads, loading and unloading them.

See docs/coordinator-runtime.md.
"""
