"""The data source's options, checked once on the driver: every mistake names its option.

Names and meanings follow Spark's Kafka connector (`format("kafka")`), so a query moves from one
to the other by changing the format name.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from krust._core import KafkaClient, KafkaConfigError, check_client_settings

# Kafka's ListOffsets sentinels, as the connector's JSON offsets use them.
LATEST = -1
EARLIEST = -2

BOOTSTRAP = "kafka.bootstrap.servers"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
INCLUDE_HEADERS = "includeHeaders"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
MIN_PARTITIONS = "minPartitions"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
TOPIC = "topic"
ACKS = "kafka.acks"
COMPRESSION = "kafka.compression.type"
ISOLATION_LEVEL = "kafka.isolation.level"
EXACTLY_ONCE = "exactlyOnce"
TRANSACTIONAL_ID_PREFIX = "transactionalIdPrefix"

# The `kafka.*` options this source interprets itself; every other `kafka.*` option is a Kafka
# client setting (security.protocol, ssl.*, sasl.*) handed to the native client, which refuses
# by name any it does not support rather than silently dropping it.
SOURCE_KAFKA_OPTIONS = frozenset({BOOTSTRAP, ACKS, COMPRESSION, ISOLATION_LEVEL})
KAFKA_PREFIX = "kafka."
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
CHECKPOINT_LOCATION = "checkpointLocation"

READ_OPTIONS = frozenset(
    {
        SUBSCRIBE,
        SUBSCRIBE_PATTERN,
        ASSIGN,
        STARTING_OFFSETS,
        ENDING_OFFSETS,
        INCLUDE_HEADERS,
        STARTING_TIMESTAMP,
        STARTING_OFFSETS_BY_TIMESTAMP,
        STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
        ENDING_TIMESTAMP,
        ENDING_OFFSETS_BY_TIMESTAMP,
        MIN_PARTITIONS,
        MAX_OFFSETS_PER_TRIGGER,
        FAIL_ON_DATA_LOSS,
    }
)
WRITE_OPTIONS = frozenset({TOPIC, EXACTLY_ONCE, TRANSACTIONAL_ID_PREFIX})
# Options of Spark's connector that tune its Java consumer (retries of offset lookups, poll
# timeouts, the consumer group's prefix): this source has no such consumer, so they are
# accepted and have no effect, and a query moves between the two sources unchanged.
NO_EFFECT_OPTIONS = frozenset(
    {
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "kafkaConsumer.pollTimeoutMs",
        "groupIdPrefix",
    }
)
# Options of Spark's connector that change what is read and that this source does not offer.
UNSUPPORTED_OPTIONS = frozenset(
    {"minOffsetsPerTrigger", "maxTriggerDelay", "maxRecordsPerPartition"}
)
# What Spark itself puts among a query's options (`.load(path)`, `writeStream`'s checkpoint).
SPARK_OPTIONS = frozenset({"path", CHECKPOINT_LOCATION})


class KrustOptionError(ValueError):
    """An option of `format("krust")` is missing, malformed or contradicts another."""


# One partition's offset, or the same choice for every partition.
@dataclass(frozen=True)
class ByTimestamp:
    """Offsets looked up by record timestamp: each partition's first offset whose timestamp is
    at or after the one given (one for every partition, or one per partition)."""

    option: str
    # What a partition with no such record gets: "error" fails the query, "latest" its end.
    if_none: str
    everywhere: int | None = None
    per_partition: dict[str, dict[int, int]] | None = None


OffsetChoice = Literal["earliest", "latest"] | dict[str, dict[int, int]] | ByTimestamp


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of the three is set."""

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    assigned: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Cluster:
    """Where the brokers are and how every connection to them is secured."""

    bootstrap_servers: str
    # Kafka client settings without the `kafka.` prefix, e.g. {"security.protocol": "SSL"}.
    settings: Mapping[str, str]

    def client(self) -> KafkaClient:
        """A native client (it connects on first use)."""
        return KafkaClient(self.bootstrap_servers, dict(self.settings))


@dataclass(frozen=True)
class ReadOptions:
    cluster: Cluster
    subscription: Subscription
    starting: OffsetChoice
    ending: OffsetChoice
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    # kafka.isolation.level=read_committed: up to the last stable offset, no aborted records.
    read_committed: bool


@dataclass(frozen=True)
class WriteOptions:
    cluster: Cluster
    topic: str | None
    acks: str
    compression: str
    # writeStream only: each task writes in a Kafka transaction that records its batch id.
    exactly_once: bool
    transactional_id_prefix: str


def check_option_names(options: Mapping[str, str], *, reading: bool) -> None:
    """Refuses an option this source does not know, rather than ignoring it, naming the known
    option closest to it (`maxOffsetsPerTriger`: did you mean maxOffsetsPerTrigger?). `kafka.*`
    options are checked by the client settings' own check."""
    own, other = (READ_OPTIONS, WRITE_OPTIONS) if reading else (WRITE_OPTIONS, READ_OPTIONS)
    known = own | SOURCE_KAFKA_OPTIONS | NO_EFFECT_OPTIONS | SPARK_OPTIONS
    by_lower = {name.lower(): name for name in known}
    for name in options:
        lower = name.lower()
        if lower in by_lower or lower.startswith(KAFKA_PREFIX):
            continue
        if lower in {o.lower() for o in UNSUPPORTED_OPTIONS}:
            raise KrustOptionError(f"option {name} of Spark's Kafka connector is not supported")
        if lower in {o.lower() for o in other}:
            direction = "reads" if reading else "writes"
            raise KrustOptionError(f"option {name} has no meaning in {direction}")
        close = difflib.get_close_matches(lower, list(by_lower), n=1, cutoff=0.6)
        hint = f": did you mean {by_lower[close[0]]}?" if close else ""
        raise KrustOptionError(f"unknown option {name}{hint}")


def _lookup(options: Mapping[str, str], name: str) -> str | None:
    """Spark's options are case-insensitive; so is this lookup."""
    wanted = name.lower()
    for key, value in options.items():
        if key.lower() == wanted:
            return value
    return None


def _cluster(options: Mapping[str, str]) -> Cluster:
    """kafka.bootstrap.servers and the client settings, checked here on the driver (PEM files
    are read) so that a bad one fails the query before any task runs, naming its option."""
    servers = _lookup(options, BOOTSTRAP)
    if servers is None or not servers.strip():
        raise KrustOptionError(
            f"option {BOOTSTRAP} is required: the brokers to connect to, as host:port[,host:port]"
        )
    own = {name.lower() for name in SOURCE_KAFKA_OPTIONS}
    settings = {
        key.lower().removeprefix(KAFKA_PREFIX): value
        for key, value in options.items()
        if key.lower().startswith(KAFKA_PREFIX) and key.lower() not in own
    }
    try:
        check_client_settings(settings)
    except KafkaConfigError as e:
        raise KrustOptionError(f"option {KAFKA_PREFIX}{e}") from None
    return Cluster(servers.strip(), settings)


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _lookup(options, name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise KrustOptionError(f"option {name} must be true or false, not {raw!r}")
    return raw.strip().lower() == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = _lookup(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise KrustOptionError(f"option {name} must be a positive integer, not {raw!r}")
    return value


def _json(name: str, raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise KrustOptionError(f"option {name} is not valid JSON ({e}): {raw!r}") from None


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = {
        name: value
        for name in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)
        if (value := _lookup(options, name)) is not None
    }
    if len(given) != 1:
        named = ", ".join(given) if given else "none"
        raise KrustOptionError(
            f"exactly one of the options {SUBSCRIBE}, {SUBSCRIBE_PATTERN}, {ASSIGN} must be "
            f"given (given: {named})"
        )
    [(name, raw)] = given.items()
    if name == SUBSCRIBE:
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise KrustOptionError(f"option {SUBSCRIBE} names no topic: {raw!r}")
        return Subscription(topics=topics)
    if name == SUBSCRIBE_PATTERN:
        try:
            return Subscription(pattern=re.compile(raw))
        except re.error as e:
            raise KrustOptionError(f"option {SUBSCRIBE_PATTERN} is not a regex ({e})") from None
    parsed = _json(ASSIGN, raw)
    if not isinstance(parsed, dict) or not all(
        isinstance(parts, list) and all(type(p) is int for p in parts) for parts in parsed.values()
    ):
        raise KrustOptionError(
            f'option {ASSIGN} must be JSON like {{"topicA":[0,1],"topicB":[2]}}, not {raw!r}'
        )
    assigned = tuple((str(t), p) for t, parts in parsed.items() for p in parts)
    if not assigned:
        raise KrustOptionError(f"option {ASSIGN} assigns no partition: {raw!r}")
    return Subscription(assigned=assigned)


def _per_partition_json(
    name: str, raw: str, example: str, lowest: int
) -> dict[str, dict[int, int]]:
    """JSON `{"topic":{"0":n}}` with integers n >= `lowest`."""
    parsed = _json(name, raw)
    if not isinstance(parsed, dict):
        raise KrustOptionError(f"option {name} must be JSON like {example}")
    values: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise KrustOptionError(f"option {name}: topic {topic} needs an object like {example}")
        per_partition: dict[int, int] = {}
        for partition, value in partitions.items():
            if not str(partition).isdigit() or type(value) is not int:
                raise KrustOptionError(
                    f"option {name}: {topic} partition {partition!r} -> {value!r} is not "
                    f"an integer partition and value, as in {example}"
                )
            if value < lowest:
                raise KrustOptionError(
                    f"option {name}: {value} for {topic}-{partition} is below {lowest}"
                )
            per_partition[int(partition)] = value
        values[str(topic)] = per_partition
    return values


def parse_offsets(name: str, raw: str) -> OffsetChoice:
    """`earliest`, `latest`, or the connector's JSON `{"topic":{"0":23}}` (-2 earliest,
    -1 latest)."""
    if raw.strip().lower() in ("earliest", "latest"):
        return "earliest" if raw.strip().lower() == "earliest" else "latest"
    example = '{"topicA":{"0":23,"1":-2}} (-2 is earliest, -1 latest)'
    if not raw.strip().startswith("{"):
        raise KrustOptionError(f"option {name} must be earliest, latest or JSON like {example}")
    return _per_partition_json(name, raw, example, EARLIEST)


def _offsets(
    options: Mapping[str, str], names: tuple[str, str, str], default: str, if_none: str
) -> OffsetChoice:
    """The offsets named by the first of (timestamp, offsets by timestamp, offsets) options
    that is given: the connector's order of precedence."""
    timestamp_name, by_timestamp_name, offsets_name = names
    if (raw := _lookup(options, timestamp_name)) is not None:
        try:
            everywhere = int(raw)
        except ValueError:
            everywhere = -1
        if everywhere < 0:
            raise KrustOptionError(
                f"option {timestamp_name} must be a timestamp in ms since the epoch, not {raw!r}"
            )
        return ByTimestamp(timestamp_name, if_none, everywhere=everywhere)
    if (raw := _lookup(options, by_timestamp_name)) is not None:
        example = '{"topicA":{"0":1700000000000}} (ms since the epoch)'
        per_partition = _per_partition_json(by_timestamp_name, raw, example, 0)
        return ByTimestamp(by_timestamp_name, if_none, per_partition=per_partition)
    raw = _lookup(options, offsets_name)
    return parse_offsets(offsets_name, default if raw is None else raw)


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The options of `spark.read` (or `readStream`) `.format("krust")`."""
    check_option_names(options, reading=True)
    cluster = _cluster(options)
    subscription = _subscription(options)
    strategy = (_lookup(options, STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY) or "error").strip()
    if strategy.lower() not in ("error", "latest"):
        raise KrustOptionError(
            f"option {STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY} must be error or latest, "
            f"not {strategy!r}"
        )
    starting = _offsets(
        options,
        (STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS),
        "latest" if streaming else "earliest",
        strategy.lower(),
    )
    ending_names = (ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS)
    # An end with no record at or after its timestamp is the partition's end, as in Spark.
    ending = _offsets(options, ending_names, "latest", "latest")
    if streaming:
        for name in ending_names:
            if _lookup(options, name) is not None:
                raise KrustOptionError(f"option {name} is for batch queries only")
    if not streaming:
        if starting == "latest" or _has_sentinel(starting, LATEST):
            raise KrustOptionError(
                f"option {STARTING_OFFSETS} cannot be latest (-1) in a batch query"
            )
        if ending == "earliest" or _has_sentinel(ending, EARLIEST):
            raise KrustOptionError(
                f"option {ENDING_OFFSETS} cannot be earliest (-2) in a batch query"
            )
    max_offsets = _positive_int(options, MAX_OFFSETS_PER_TRIGGER)
    isolation = (_lookup(options, ISOLATION_LEVEL) or "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KrustOptionError(
            f"option {ISOLATION_LEVEL} must be read_uncommitted or read_committed, "
            f"not {isolation!r}"
        )
    return ReadOptions(
        cluster=cluster,
        subscription=subscription,
        starting=starting,
        ending=ending,
        include_headers=_flag(options, INCLUDE_HEADERS, False),
        min_partitions=_positive_int(options, MIN_PARTITIONS),
        max_offsets_per_trigger=max_offsets,
        fail_on_data_loss=_flag(options, FAIL_ON_DATA_LOSS, True),
        read_committed=isolation == "read_committed",
    )


def _has_sentinel(choice: OffsetChoice, sentinel: int) -> bool:
    return isinstance(choice, dict) and any(
        offset == sentinel for partitions in choice.values() for offset in partitions.values()
    )


def write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """The options of `df.write` (or `writeStream`) `.format("krust")`."""
    check_option_names(options, reading=False)
    acks = (_lookup(options, ACKS) or "all").strip().lower()
    if acks not in ("all", "-1", "1"):
        raise KrustOptionError(f"option {ACKS} must be all, -1 or 1, not {acks!r}")
    compression = (_lookup(options, COMPRESSION) or "none").strip().lower()
    if compression not in COMPRESSIONS:
        raise KrustOptionError(
            f"option {COMPRESSION} must be one of {', '.join(COMPRESSIONS)}, not {compression!r}"
        )
    topic = _lookup(options, TOPIC)
    topic = topic.strip() if topic is not None and topic.strip() else None
    exactly_once = _flag(options, EXACTLY_ONCE, False)
    if exactly_once and not streaming:
        raise KrustOptionError(
            f"option {EXACTLY_ONCE} is for writeStream: a batch write has no micro-batch id "
            "to recognise a replay by"
        )
    if exactly_once and acks != "all" and acks != "-1":
        raise KrustOptionError(f"option {EXACTLY_ONCE} needs {ACKS}=all, not {acks}")
    if exactly_once and topic is None:
        raise KrustOptionError(
            f"option {EXACTLY_ONCE} needs the option {TOPIC}: each task records its batch id "
            "as a consumer group offset on that topic"
        )
    return WriteOptions(
        cluster=_cluster(options),
        topic=topic,
        acks=acks,
        compression=compression,
        exactly_once=exactly_once,
        transactional_id_prefix=_lookup(options, TRANSACTIONAL_ID_PREFIX) or "krust-spark-",
    )
