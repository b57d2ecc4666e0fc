"""Resolving the options to concrete offsets: which partitions a query reads and where each
starts and ends, asked of the brokers on the driver."""

from __future__ import annotations

from collections.abc import Iterable

from krust._core import KafkaClient

from .options import (
    ASSIGN,
    EARLIEST,
    LATEST,
    SUBSCRIBE,
    ByTimestamp,
    KrustOptionError,
    OffsetChoice,
    Subscription,
)

TopicPartition = tuple[str, int]
# A Spark offset in the connector's JSON form: {"topic": {"0": 23}}.
PartitionOffsets = dict[TopicPartition, int]


def subscribed_partitions(client: KafkaClient, subscription: Subscription) -> list[TopicPartition]:
    """The partitions the subscription names, as they exist now."""
    if subscription.pattern is not None:
        pattern = subscription.pattern
        # Java's Pattern.matcher(topic).matches(): the whole name must match.
        matching = [
            (topic, count)
            for topic, count in client.partition_counts(None)
            if pattern.fullmatch(topic)
        ]
        return [(topic, p) for topic, count in matching for p in range(count)]
    if subscription.topics:
        counts = dict(client.partition_counts(list(subscription.topics)))
        missing = [t for t in subscription.topics if t not in counts]
        if missing:
            raise KrustOptionError(f"option {SUBSCRIBE}: topic {', '.join(missing)} does not exist")
        return [(topic, p) for topic in subscription.topics for p in range(counts[topic])]
    topics = sorted({topic for topic, _ in subscription.assigned})
    counts = dict(client.partition_counts(topics))
    absent = [
        f"{topic}-{partition}"
        for topic, partition in subscription.assigned
        if not 0 <= partition < counts.get(topic, 0)
    ]
    if absent:
        raise KrustOptionError(f"option {ASSIGN}: partition {', '.join(absent)} does not exist")
    return list(subscription.assigned)


def resolve(
    client: KafkaClient,
    partitions: Iterable[TopicPartition],
    choice: OffsetChoice,
    option: str,
    *,
    read_committed: bool,
) -> PartitionOffsets:
    """Concrete offsets for `partitions`: earliest/latest asked of the brokers, JSON offsets as
    given (-2/-1 asked too). JSON must name every partition, as the connector requires.
    `read_committed`: latest is the last stable offset, not the high watermark."""
    partitions = list(partitions)
    if isinstance(choice, ByTimestamp):
        return by_timestamp(client, partitions, choice, read_committed=read_committed)
    wanted: dict[TopicPartition, str | int] = {}
    if isinstance(choice, str):
        wanted = dict.fromkeys(partitions, choice)
    else:
        for topic, partition in partitions:
            offset = choice.get(topic, {}).get(partition)
            if offset is None:
                raise KrustOptionError(
                    f"option {option} gives offsets but none for {topic}-{partition}: name "
                    "every partition (-2 for earliest, -1 for latest)"
                )
            wanted[(topic, partition)] = {EARLIEST: "earliest", LATEST: "latest"}.get(
                offset, offset
            )
        unknown = {
            f"{topic}-{partition}" for topic, parts in choice.items() for partition in parts
        } - {f"{topic}-{partition}" for topic, partition in partitions}
        if unknown:
            raise KrustOptionError(
                f"option {option} names partitions the query does not read: "
                f"{', '.join(sorted(unknown))}"
            )
    resolved: PartitionOffsets = {}
    for spec in ("earliest", "latest"):
        by_topic: dict[str, list[int]] = {}
        for (topic, partition), wanted_spec in wanted.items():
            if wanted_spec == spec:
                by_topic.setdefault(topic, []).append(partition)
        for topic, parts in by_topic.items():
            for partition, offset in zip(
                parts, client.list_offsets(topic, parts, spec, read_committed), strict=True
            ):
                resolved[(topic, partition)] = 0 if offset is None else offset
    for key, wanted_offset in wanted.items():
        if isinstance(wanted_offset, int):
            resolved[key] = wanted_offset
    return resolved


def check_start_not_past_end(starts: PartitionOffsets, ends: PartitionOffsets) -> None:
    """A batch query whose start is past its end fails, in the words of Spark's connector
    (RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET), rather than reading no rows."""
    for (topic, partition), start in sorted(starts.items()):
        end = ends.get((topic, partition))
        if end is not None and start > end:
            raise KrustOptionError(
                f"The resolved start offset {start} is greater than the resolved end offset "
                f"{end} for topic {topic} partition {partition}: the start options "
                "(startingOffsets, startingTimestamp, startingOffsetsByTimestamp) name an offset "
                "past the end options' (endingOffsets, latest by default)"
            )


def by_timestamp(
    client: KafkaClient,
    partitions: list[TopicPartition],
    choice: ByTimestamp,
    *,
    read_committed: bool,
) -> PartitionOffsets:
    """Each partition's first offset at or after its timestamp (ListOffsets by timestamp)."""
    resolved: PartitionOffsets = {}
    for topic, partition in partitions:
        if choice.everywhere is not None:
            timestamp = choice.everywhere
        else:
            given = (choice.per_partition or {}).get(topic, {}).get(partition)
            if given is None:
                raise KrustOptionError(
                    f"option {choice.option} gives no timestamp for {topic}-{partition}: name "
                    "every partition"
                )
            timestamp = given
        [offset] = client.list_offsets(topic, [partition], timestamp, read_committed)
        if offset is None and choice.if_none == "error":
            raise KrustOptionError(
                f"option {choice.option}: no record of {topic}-{partition} has a timestamp at "
                f"or after {timestamp} (startingOffsetsByTimestampStrategy=latest starts such "
                "partitions at their end)"
            )
        if offset is None:
            [offset] = client.list_offsets(topic, [partition], "latest", read_committed)
        resolved[(topic, partition)] = 0 if offset is None else offset
    return resolved


def to_json_offsets(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The connector's JSON form: partitions as strings, sorted for stable checkpoints."""
    json_form: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        json_form.setdefault(topic, {})[str(partition)] = offset
    return json_form


def from_json_offsets(json_form: dict[str, dict[str, int]]) -> PartitionOffsets:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in json_form.items()
        for partition, offset in partitions.items()
    }
