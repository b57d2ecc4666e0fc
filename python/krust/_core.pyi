"""The Rust core of krust (network, storage, replica manager), as seen from Python.

This stub is the contract between `crates/krust-python` and `python/krust`.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, final, type_check_only

__all__ = [
    "ArrowBatch",
    "BridgeRequest",
    "Core",
    "DataLossError",
    "KafkaClient",
    "KafkaClientError",
    "KafkaConfigError",
    "NotControllerError",
    "PartitionReader",
    "__version__",
    "check_client_settings",
    "config_table",
    "configure_logging",
    "decompress_telemetry",
]

__version__: str  # the crate version from Cargo.toml

# The TypedDicts below exist for type checkers only (hence @type_check_only): the extension takes
# and returns plain dicts of these shapes.

@type_check_only
class PartitionImage(TypedDict):
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]

@type_check_only
class TopicImage(TypedDict):
    name: str
    topic_id: bytes  # 16 bytes (a Kafka Uuid)
    internal: bool
    configs: dict[str, str]  # topic-level overrides only, Kafka names (e.g. "segment.bytes")
    partitions: list[PartitionImage]

@type_check_only
class BrokerImage(TypedDict):
    node_id: int
    host: str
    port: int
    rack: str | None
    listeners: dict[str, tuple[str, int]]

@type_check_only
class MetadataImage(TypedDict):
    cluster_id: str
    controller_id: int
    metadata_offset: int
    brokers: list[BrokerImage]
    topics: list[TopicImage]
    supported_features: dict[str, tuple[int, int]]  # this broker's (min, max) level per feature
    finalized_features: dict[str, int]  # level per feature (FeatureLevelRecords; KIP-584)
    # Every topic config's broker default by topic key name (e.g. "segment.bytes"), from the
    # static and dynamic broker configs; absent: the static broker settings.
    log_defaults: NotRequired[dict[str, str]]

@type_check_only
class MetadataDelta(TypedDict):
    """One committed change: only what it created, changed or deleted."""

    metadata_offset: int
    controller_id: int
    brokers: list[BrokerImage] | None  # every unfenced broker, when any broker changed
    topics: list[TopicImage]  # created or changed topics, with only new or changed partitions
    deleted_topic_ids: list[bytes]
    finalized_features: dict[str, int] | None  # every finalized level, when any changed
    # Present when a dynamic broker config changed: the new broker defaults of every topic config
    # (as in MetadataImage); every hosted partition without an override takes them, live.
    log_defaults: NotRequired[dict[str, str]]
    # True when ACLs changed: the core forgets its cached authorization decisions.
    acls_changed: NotRequired[bool]

@type_check_only
class StoredRecord(TypedDict):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    producer_id: int  # -1, or the transactional producer the record belongs to
    control: int | None  # a transaction marker's type: 0 ABORT, 1 COMMIT

@final
class BridgeRequest:
    """One Python-owned request (or an internal request from the core) crossing the bridge,
    with the session of its connection (see docs/session-and-routing.md)."""

    @property
    def api_key(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def principal(self) -> str:
        """The client's KafkaPrincipal, e.g. "User:ANONYMOUS"."""
    @property
    def listener_name(self) -> str:
        """The listener the request came in on; "krust-internal" for the core's own requests."""
    @property
    def security_protocol(self) -> str:
        """The listener's security protocol, e.g. "PLAINTEXT"."""
    @property
    def client_host(self) -> str: ...
    @property
    def client_port(self) -> int: ...
    @property
    def internal(self) -> bool:
        """True only for requests the core itself made; no client can set it."""
    @property
    def client_software_name(self) -> str:
        """The client software name its connection's ApiVersions named (KIP-511), or "unknown"."""
    @property
    def client_software_version(self) -> str:
        """The client software version its connection's ApiVersions named, or "unknown"."""
    @property
    def body(self) -> bytes:
        """The request body after the request header, exactly as on the wire."""
    def respond(self, body: bytes, throttle_ms: int = 0) -> None:
        """Send the encoded response body (no header); callable once, from any thread. The
        connection is then not read for `throttle_ms` (the throttle time the body carries)."""
    def close_connection(self) -> None:
        """Answer nothing and close the client's connection (Kafka's reaction to a bad request)."""

def config_table() -> dict[str, Any]:
    """config_keys.toml as the core embeds it: {"broker": [...], "topic": [...], "group": [...],
    "client_metrics": [...]}."""

def decompress_telemetry(compression_type: int, data: bytes, max_bytes: int) -> bytes:
    """A PushTelemetry payload decompressed with Kafka's codec id (0 none, 1 gzip, 2 snappy,
    3 lz4, 4 zstd). OverflowError past `max_bytes` of output; ValueError for an unknown codec
    or bytes that do not decompress."""

def configure_logging(levels: str, format: str) -> None:
    """Send the core's log lines to stderr, filtered by `levels` (a tracing EnvFilter such as
    "info,krust_server::network=debug") in `format` "text" or "json". The first call in a
    process installs the logger; ValueError for a filter or format that does not parse.
    Without a call, opening a Core installs KRUST_LOG (default info) as text."""

@final
class Core:
    """One broker's Rust core. `settings` holds validated values under Kafka's config names."""

    def __new__(cls, settings: Mapping[str, object]) -> Core:
        """Open (and if needed recover) every log under log.dirs. Does not listen yet."""
    def apply_metadata(self, image: MetadataImage) -> None:
        """Install the full image (once, at start-up): create or update every partition placed
        here. A failed log dir goes offline instead of failing the call; RuntimeError names
        partitions that could not be applied for another reason (the rest is applied)."""
    def set_scram_credentials(
        self, credentials: list[tuple[str, int, bytes, bytes, bytes, int]]
    ) -> None:
        """Replace the SCRAM credentials SASL/SCRAM listeners authenticate against: (user,
        mechanism type as in UserScramCredentialRecord, salt, stored key, server key,
        iterations) for every credential of the metadata image."""
    def apply_metadata_delta(self, delta: MetadataDelta) -> None:
        """Apply one committed change: touch only the topics and partitions it names (become
        leader or follower, config changes, deletions), in the order of the changes. A change
        that only adds topics returns before their logs exist (they are created next, as
        Kafka's brokers do after its controller answered); any other change returns once
        applied, with failures as for `apply_metadata`."""
    def internal_append(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Append (key, value) records as one flushed batch; returns its base offset. With
        `producer` (producer id, epoch) the batch belongs to that producer's transaction."""
    def internal_read(
        self, topic: str, partition: int, start_offset: int, max_bytes: int
    ) -> list[StoredRecord]:
        """Read records from `start_offset` on (at most about `max_bytes` of batches)."""
    def log_end_offset(self, topic: str, partition: int) -> int: ...
    def log_start_offset(self, topic: str, partition: int) -> int: ...
    def serve(
        self,
        handler: Callable[[BridgeRequest], None],
        python_apis: Mapping[int, tuple[int, int, str]],  # versions and exposure
        authorize: Callable[
            [str, str, str, str, str | None, int, int, list[tuple[int, int, int, str]]],
            list[bool] | None,
        ]
        | None = None,
        on_listening: Callable[[], object] | None = None,
    ) -> None:
        """Listen and serve until SIGINT/SIGTERM or `shutdown()`; the GIL is released meanwhile.
        `on_listening` is called once every listener is bound.

        `python_apis` maps each Python-owned api key to its (min, max) version; the core sends
        those requests to `handler` and advertises the ranges in ApiVersions. The keys in
        `internal_only` are served only for the core's own requests: not advertised, and a
        client asking for one has its connection closed.

        `handler` is called on the core's dedicated bridge thread, one request at a time; it must
        return quickly (hand the work to the Python event loop) and answer via `respond` later.

        `authorize` (None: no authorization, no check at all) decides the native handlers'
        authorization cache misses: it is called on the core's dedicated authorizer thread with
        (principal, listener_name, security_protocol, client_host, client_id, api_key,
        api_version, actions), each action (operation, resource type, pattern type, resource
        name) as Kafka codes, and returns one bool per action, or None when the plugin failed
        (everything denied, nothing cached). See docs/authorization.md.

        Raises OSError if it cannot listen, or once every log dir has failed (docs/partitions.md).
        """
    def invalidate_authorizations(self) -> None:
        """Forget every cached authorization decision (the authorizer plugin asked)."""
    def set_active_controller(self, leader: int) -> None:
        """The controller quorum's leader is `leader` (-1: none known)."""
    def set_broker_epoch(self, epoch: int) -> None:
        """This broker's epoch from its registration (AlterPartition requests carry it)."""
    def send_to_controller(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send a request body to the active controller; its response body (blocking)."""
    def next_producer_id(self) -> int:
        """A new producer id from this broker's block (blocking: may ask the controller)."""
    def send_to_broker(self, node_id: int, api_key: int, version: int, body: bytes) -> bytes:
        """Send a request body to broker `node_id` over the inter-broker listener; its response
        body (blocking). Raises ConnectionError when the broker cannot be reached in time."""
    def write_txn_markers(
        self, markers: Sequence[tuple[str, int, int, int, int, bool]]
    ) -> list[int]:
        """Append transaction markers (topic, partition, producer id, producer epoch,
        coordinator epoch, commit) as their partitions' leader and wait for the in-sync
        replicas; their Kafka error codes, in order (blocking)."""
    def shutdown(self) -> None:
        """Ask `serve` to stop (stop accepting, finish in-flight requests)."""
    def charge_request_time(self, user: str, client_id: str, seconds: float) -> int:
        """Charge `seconds` of a Python-served request against the client's
        request_percentage (`user`: the principal's name); its throttle time in ms."""
    def set_client_quotas(
        self, quotas: Sequence[tuple[list[tuple[str, str | None]], dict[str, float]]]
    ) -> None:
        """Install the metadata image's client quotas: each entity's (type, name; None for the
        default) pairs and its quota values by key. ValueError for an unknown entity type."""
    def set_client_telemetry_metrics(self, text: str) -> None:
        """What clients pushed (KIP-714) as Prometheus text: every scrape of the metrics
        endpoint ends with it, until the next call replaces it."""
    def set_connection_limits(
        self,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        max_creation_rate: int,
    ) -> None:
        """max.connections, max.connections.per.ip, its overrides by ip address and
        max.connection.creation.rate, applied to new connections from now on. ValueError for
        an override that is not an ip address."""
    def set_replication_throttled_rates(self, leader: int, follower: int) -> None:
        """leader.replication.throttled.rate and follower.replication.throttled.rate in force
        (bytes/s), applied from the next replica fetch on."""
    def set_alter_log_dirs_throttled_rate(self, rate: int) -> None:
        """replica.alter.log.dirs.io.max.bytes.per.second in force (bytes/s): what moving
        replicas between this broker's log dirs may copy, from the next second on."""
    def reconfigure_cleaner(
        self,
        threads: int,
        dedupe_buffer_size: int,
        backoff_ms: int,
        io_max_bytes_per_second: float,
    ) -> None:
        """log.cleaner.threads, log.cleaner.dedupe.buffer.size, log.cleaner.backoff.ms and
        log.cleaner.io.max.bytes.per.second in force; a running cleaner restarts its threads
        with them (Kafka's LogCleaner.reconfigure). OSError if a thread cannot start."""
    def use_quota_callback(self) -> None:
        """From now on `client.quota.callback.class` decides every client's quotas."""
    def take_unresolved_quota_clients(self, timeout_s: float) -> list[tuple[str, str]]:
        """The (principal name, client id) pairs the callback must be asked about, waiting
        up to `timeout_s` for one (the GIL is released meanwhile)."""
    def set_quota_callback_limits(
        self,
        limits: Sequence[tuple[tuple[str, str], tuple[float | None, float | None, float | None]]],
    ) -> None:
        """The callback's answers: per client its producer_byte_rate, consumer_byte_rate and
        request_percentage (None: unlimited)."""
    def reset_quota_callback_limits(self) -> None:
        """The callback's quotas changed: every client seen so far is asked about again."""
    def start_quorum(
        self,
        apply: Callable[[list[tuple[int, int, bytes]]], None],
        snapshot: Callable[[], list[bytes] | None],
        load_snapshot: Callable[[int, list[bytes]], None],
        leader_changed: Callable[[int, int], None],
    ) -> None:
        """Join the controller quorum over controller.quorum.voters (docs/quorum.md). The
        callbacks run on one dedicated thread, in log order: load_snapshot(end_offset, records)
        with the newest snapshot (before this returns) and with one installed from the leader;
        apply([(offset, epoch, record)]) with committed records (its return acknowledges them);
        snapshot() for the image's records at the last applied offset (None inside a metadata
        transaction: the quorum waits for its end); leader_changed(leader id or -1, epoch)."""
    def propose(self, records: Sequence[bytes]) -> int:
        """Append `records` as consecutive metadata log entries through the quorum's leader;
        the offset of the last once committed. Blocking (call it via asyncio.to_thread).
        Raises NotControllerError if this node is not the leader."""
    def quorum_status(self) -> QuorumStatus:
        """The quorum as this node sees it (DescribeQuorum's fields)."""
    def trigger_metadata_snapshot(self) -> None:
        """Write a snapshot of the applied image (through the `snapshot` callback)."""
    def close(self) -> None:
        """Flush logs, write checkpoints and the clean-shutdown marker."""

# The native Kafka client the Spark data source (spark/pyspark_krust) reads and writes with. It
# talks to any Kafka-protocol broker; every call releases the GIL while it waits or decodes.

class KafkaClientError(Exception):
    """A Kafka request failed (the message says which broker, topic, partition and why)."""

class KafkaConfigError(ValueError):
    """A client setting is malformed or not supported; the message starts with its Kafka key
    (`ssl.truststore.location: cannot read ...`)."""

def check_client_settings(settings: dict[str, str]) -> None:
    """Check Kafka client security settings (security.protocol, ssl.*, sasl.*; PEM files are
    read) without connecting; raises KafkaConfigError naming the first bad one."""

class NotControllerError(Exception):
    """This node is not the active controller (the quorum's leader)."""

    leader_id: int
    """The leader's node id, -1 if unknown."""

@type_check_only
class QuorumReplica(TypedDict):
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int

@type_check_only
class QuorumStatus(TypedDict):
    node_id: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    is_leader: bool
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]

class DataLossError(KafkaClientError):
    """Offsets asked for are no longer in the log (retention or DeleteRecords removed them)."""

@final
class ArrowBatch:
    """A record batch built in Rust: `pyarrow.record_batch(batch)` imports it without a copy."""

    @property
    def num_rows(self) -> int: ...
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """The Arrow PyCapsule protocol: (schema capsule, struct array capsule)."""

@final
class KafkaClient:
    """Metadata, offsets and an idempotent producer over one set of connections."""

    def __new__(cls, bootstrap_servers: str, settings: dict[str, str] | None = None) -> KafkaClient:
        """`settings`: Kafka client security keys (security.protocol, ssl.*, sasl.*), used for
        every connection; KafkaConfigError names a bad one."""
    def partition_counts(self, topics: list[str] | None = None) -> list[tuple[str, int]]:
        """(topic, partition count) of each named topic that exists; None: every topic."""
    def list_offsets(
        self, topic: str, partitions: list[int], spec: str | int, read_committed: bool = False
    ) -> list[int | None]:
        """Per partition: the offset "earliest", "latest" or a timestamp (ms) names; None when
        no record is at or after the timestamp."""
    def produce(
        self,
        batch: object,
        topic: str | None = None,
        acks: str = "all",
        compression: str = "none",
    ) -> int:
        """Produce the rows of an Arrow record batch (columns value, and optionally key, topic,
        partition, headers, as Spark's Kafka sink); `topic` overrides the topic column. `acks`
        is "all" (or "-1") or "1"; `compression` none, gzip, snappy, lz4 or zstd. Returns the
        number of records written."""
    def init_transactions(self, transactional_id: str, transaction_timeout_ms: int = 60000) -> None:
        """Become the transactional producer of `transactional_id` (fencing older producers of
        it, aborting their open transaction); records produced then belong to a transaction."""
    def send_offsets_to_transaction(
        self, group: str, topic: str, partition: int, offset: int, metadata: str | None = None
    ) -> None:
        """Commit `group`'s offset for `topic`-`partition` within the open transaction."""
    def commit_transaction(self) -> None:
        """Commit the open transaction (records and offsets)."""
    def abort_transaction(self) -> None:
        """Abort the open transaction."""
    def committed_offset(
        self, group: str, topic: str, partition: int
    ) -> tuple[int, str | None] | None:
        """(offset, metadata) `group` committed for `topic`-`partition`, None if none; waits for
        pending transactional offset commits (require_stable)."""

@final
class PartitionReader:
    """Offsets [start, end) of one partition as Arrow batches of Spark's Kafka source schema;
    `read_committed` leaves out aborted transactions (and reads up to the last stable offset)."""

    def __new__(
        cls,
        bootstrap_servers: str,
        topic: str,
        partition: int,
        start: int,
        end: int,
        include_headers: bool = False,
        read_committed: bool = False,
        settings: dict[str, str] | None = None,
    ) -> PartitionReader: ...
    def next_batch(self) -> ArrowBatch | None:
        """The next batch of rows, or None once the whole range was read."""
