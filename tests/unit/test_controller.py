"""The controller over a fake core: bootstrap, restart, and every topic operation's outcomes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from krust.bridge.context import BrokerContext
from krust.bridge.dispatcher import Dispatcher, RequestContext
from krust.bridge.protocol import build_entity, encode_entity
from krust.config.broker import BrokerConfig, load_config
from krust.config.errors import ConfigError
from krust.controller.apis import ControllerApis, install
from krust.controller.controller import Controller, TopicCreationError
from krust.controller.meta_properties import META_PROPERTIES
from krust.controller.publisher import METADATA_TOPIC
from krust.controller.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    decode_record,
    encode_record,
)
from krust.controller.topics import MAX_RECORDS_PER_USER_OP
from krust.security.authorization import Authorization

from .conftest import FakeCore, FakeRequest, LoopRunner


@pytest.fixture
def log_dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


def make_config(log_dirs: list[Path], *overrides: str) -> BrokerConfig:
    dirs = ",".join(str(d) for d in log_dirs)
    base = [f"log.dirs={dirs}", "listeners=PLAINTEXT://127.0.0.1:19092"]
    return load_config(None, {}, [*base, *overrides])


@pytest.fixture
def config(log_dirs: list[Path]) -> BrokerConfig:
    return make_config(log_dirs)


@pytest.fixture
def controller(config: BrokerConfig, fake_core: FakeCore) -> Controller:
    return Controller.open(config, fake_core)


def context(
    api_key: int, version: int, client_id: str = "admin", internal: bool = False
) -> RequestContext:
    return RequestContext(api_key, version, 1, client_id, "127.0.0.1", internal=internal)


def create(
    run: LoopRunner,
    controller: Controller,
    *topics: dict[str, Any],
    version: int = 7,
    validate_only: bool = False,
) -> Any:
    request_type = load_request_schema(19, version)
    request = build_entity(
        request_type, {"topics": list(topics), "timeout": 1000, "validate_only": validate_only}
    )
    return run(ControllerApis(controller).create_topics(request, context(19, version)))


def topic(name: str, partitions: int = 1, factor: int = -1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor, **fields}


def error_of(response: Any, index: int = 0) -> ErrorCode:
    return response.topics[index].error_code


def metadata_records(core: FakeCore) -> list[Any]:
    return [decode_record(entry["value"]) for entry in core.logs[(METADATA_TOPIC, 0)]]


def test_first_start_formats_dirs_and_registers_this_broker(
    controller: Controller, fake_core: FakeCore, log_dirs: list[Path]
) -> None:
    metas = [(d / META_PROPERTIES).read_text() for d in log_dirs]
    assert all("version=1" in m and "node.id=1" in m for m in metas)
    cluster_ids = {line for m in metas for line in m.splitlines() if line.startswith("cluster.")}
    assert cluster_ids == {f"cluster.id={controller.image.cluster_id}"}
    assert len(controller.image.cluster_id) == 22
    directory_ids = {line for m in metas for line in m.splitlines() if "directory.id" in line}
    assert len(directory_ids) == 2

    begin, metadata_version, group_version, registration, end = metadata_records(fake_core)
    # One metadata transaction (KIP-868): the records apply together or not at all.
    assert isinstance(begin, BeginTransactionRecord) and isinstance(end, EndTransactionRecord)
    assert metadata_version == FeatureLevelRecord(name="metadata.version", feature_level=14)
    assert group_version == FeatureLevelRecord(name="group.version", feature_level=1)
    assert isinstance(registration, RegisterBrokerRecord)
    assert registration.broker_epoch == 3  # the offset of the registration record
    assert [(e.name, e.host, e.port) for e in registration.end_points] == [
        ("PLAINTEXT", "127.0.0.1", 19092)
    ]
    assert fake_core.last_image["brokers"] == [
        {
            "node_id": 1,
            "host": "127.0.0.1",
            "port": 19092,
            "rack": None,
            "listeners": {"PLAINTEXT": ("127.0.0.1", 19092)},
        }
    ]
    assert fake_core.last_image["cluster_id"] == controller.image.cluster_id
    assert controller.image.features == {"metadata.version": 14, "group.version": 1}


def test_create_topic_appends_records_and_applies_the_image(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    configs = [{"name": "segment.bytes", "value": "1048576"}]
    response = create(run, controller, topic("orders", 3, 1, configs=configs))
    (result,) = response.topics
    assert result.error_code is ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    image_topic = controller.image.topics["orders"]
    assert result.topic_id == image_topic.topic_id
    assert dict(image_topic.configs) == {"segment.bytes": "1048576"}
    core_topic = next(t for t in fake_core.last_image["topics"] if t["name"] == "orders")
    assert core_topic["topic_id"] == result.topic_id.bytes
    assert core_topic["configs"] == {"segment.bytes": "1048576"}
    assert [p["leader"] for p in core_topic["partitions"]] == [1, 1, 1]
    assert fake_core.last_image["metadata_offset"] == controller.image.metadata_offset
    effective = {c.name: (c.value, c.config_source) for c in result.configs}
    assert effective["segment.bytes"] == ("1048576", 1)
    assert effective["retention.ms"] == ("604800000", 5)
    assert effective["cleanup.policy"] == ("delete", 5)


def test_broker_config_shows_as_static_config_source(
    run: LoopRunner, log_dirs: list[Path], fake_core: FakeCore
) -> None:
    controller = Controller.open(make_config(log_dirs, "log.retention.hours=1"), fake_core)
    (result,) = create(run, controller, topic("t")).topics
    effective = {c.name: (c.value, c.config_source) for c in result.configs}
    assert effective["retention.ms"] == ("3600000", 4)


def test_defaults_apply_for_minus_one(
    run: LoopRunner, log_dirs: list[Path], fake_core: FakeCore
) -> None:
    controller = Controller.open(make_config(log_dirs, "num.partitions=4"), fake_core)
    (result,) = create(run, controller, topic("t", -1, -1)).topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)


def test_restart_replays_the_same_topics_with_the_same_ids(
    run: LoopRunner, controller: Controller, config: BrokerConfig, fake_core: FakeCore
) -> None:
    create(run, controller, topic("a", 2, configs=[{"name": "cleanup.policy", "value": "compact"}]))
    create(run, controller, topic("b", 1))
    run(ControllerApis(controller).delete_topics(delete_request(6, names=["b"]), context(20, 6)))
    before = controller.image

    restarted_core = fake_core.reopen()
    after = Controller.open(config, restarted_core).image
    assert after.cluster_id == before.cluster_id
    assert after.topics.keys() == {"a"}
    assert after.topics["a"] == before.topics["a"]
    assert restarted_core.last_image["topics"] == fake_core.last_image["topics"]
    registrations = [
        r for r in metadata_records(restarted_core) if isinstance(r, RegisterBrokerRecord)
    ]
    assert len(registrations) == 2
    # The registration is the last record before its transaction's end marker.
    assert registrations[1].broker_epoch == after.metadata_offset - 1


def test_a_configured_cluster_id_is_used_and_must_match_later(
    log_dirs: list[Path], fake_core: FakeCore
) -> None:
    chosen = "MkU3OEVBNTcwNTJENDM2Qg"
    controller = Controller.open(make_config(log_dirs, f"cluster.id={chosen}"), fake_core)
    assert controller.image.cluster_id == chosen
    with pytest.raises(ConfigError) as caught:
        Controller.open(
            make_config(log_dirs, "cluster.id=AAAAAAAAAAAAAAAAAAAAAA"), fake_core.reopen()
        )
    assert caught.value.key == "cluster.id"


def test_a_different_node_id_on_the_same_dirs_is_refused(
    controller: Controller, log_dirs: list[Path], fake_core: FakeCore
) -> None:
    with pytest.raises(ConfigError) as caught:
        Controller.open(make_config(log_dirs, "node.id=2"), fake_core.reopen())
    assert caught.value.key == "node.id"


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (topic("bad name"), ErrorCode.invalid_topic_exception),
        (topic("."), ErrorCode.invalid_topic_exception),
        (topic(".."), ErrorCode.invalid_topic_exception),
        (topic(""), ErrorCode.invalid_topic_exception),
        (topic("x" * 250), ErrorCode.invalid_topic_exception),
        (topic("ünicode"), ErrorCode.invalid_topic_exception),
        (topic("t", 0), ErrorCode.invalid_partitions),
        (topic("t", -2), ErrorCode.invalid_partitions),
        (topic("t", 1, 0), ErrorCode.invalid_replication_factor),
        (topic("t", 1, -3), ErrorCode.invalid_replication_factor),
        (topic("t", 1, 2), ErrorCode.invalid_replication_factor),
        (topic("t", 2**31 - 1, 1), ErrorCode.policy_violation),
        (topic("t", configs=[{"name": "no.such.config", "value": "1"}]), ErrorCode.invalid_config),
        (
            topic("t", configs=[{"name": "segment.bytes", "value": "tiny"}]),
            ErrorCode.invalid_config,
        ),
        (topic("t", configs=[{"name": "segment.bytes", "value": "13"}]), ErrorCode.invalid_config),
        # KIP-1030: Kafka 4 refuses segments under 1 MiB.
        (
            topic("t", configs=[{"name": "segment.bytes", "value": "1048575"}]),
            ErrorCode.invalid_config,
        ),
        # Passed Kafka's bound (4) but not the core's (one 12-byte time-index entry).
        (
            topic("t", configs=[{"name": "segment.index.bytes", "value": "8"}]),
            ErrorCode.invalid_config,
        ),
        (
            topic("t", configs=[{"name": "index.interval.bytes", "value": "-1"}]),
            ErrorCode.invalid_config,
        ),
        (topic("t", configs=[{"name": "retention.ms", "value": None}]), ErrorCode.invalid_config),
        (
            topic("t", configs=[{"name": "remote.storage.enable", "value": "true"}]),
            ErrorCode.invalid_config,
        ),
        (
            topic("t", 1, -1, assignments=[{"partition_index": 0, "broker_ids": [1]}]),
            ErrorCode.invalid_request,
        ),
        (
            topic("t", -1, 1, assignments=[{"partition_index": 0, "broker_ids": [1]}]),
            ErrorCode.invalid_request,
        ),
        (
            topic("t", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [2]}]),
            ErrorCode.invalid_replica_assignment,
        ),
        (
            topic("t", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [1, 1]}]),
            ErrorCode.invalid_replica_assignment,
        ),
        (
            topic("t", -1, -1, assignments=[{"partition_index": 0, "broker_ids": []}]),
            ErrorCode.invalid_replica_assignment,
        ),
        (
            topic("t", -1, -1, assignments=[{"partition_index": 1, "broker_ids": [1]}]),
            ErrorCode.invalid_replica_assignment,
        ),
        (
            topic(
                "t",
                -1,
                -1,
                assignments=[
                    {"partition_index": 0, "broker_ids": [1]},
                    {"partition_index": 0, "broker_ids": [1]},
                ],
            ),
            ErrorCode.invalid_replica_assignment,
        ),
    ],
)
def test_create_topic_errors(
    run: LoopRunner, controller: Controller, fake_core: FakeCore, spec: dict, error: ErrorCode
) -> None:
    log_end = fake_core.log_end_offset(METADATA_TOPIC, 0)
    response = create(run, controller, spec)
    assert error_of(response) is error
    assert response.topics[0].error_message
    assert fake_core.log_end_offset(METADATA_TOPIC, 0) == log_end
    assert controller.image.topics == {}


def test_existing_and_colliding_names_are_refused(run: LoopRunner, controller: Controller) -> None:
    assert error_of(create(run, controller, topic("a.b"))) is ErrorCode.none
    assert error_of(create(run, controller, topic("a.b"))) is ErrorCode.topic_already_exists
    assert error_of(create(run, controller, topic("a_b"))) is ErrorCode.invalid_topic_exception


def test_duplicates_in_one_request_fail_alone(run: LoopRunner, controller: Controller) -> None:
    response = create(run, controller, topic("dup"), topic("ok"), topic("dup"))
    results = {t.name: t.error_code for t in response.topics}
    assert results == {"dup": ErrorCode.invalid_request, "ok": ErrorCode.none}
    assert controller.image.topics.keys() == {"ok"}


def test_validate_only_creates_nothing(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    log_end = fake_core.log_end_offset(METADATA_TOPIC, 0)
    response = create(run, controller, topic("t", 2), validate_only=True)
    assert error_of(response) is ErrorCode.none
    assert response.topics[0].num_partitions == 2
    assert controller.image.topics == {}
    assert fake_core.log_end_offset(METADATA_TOPIC, 0) == log_end


def test_explicit_assignment_is_used(run: LoopRunner, controller: Controller) -> None:
    assignments = [{"partition_index": i, "broker_ids": [1]} for i in (1, 0)]
    response = create(run, controller, topic("t", -1, -1, assignments=assignments))
    assert error_of(response) is ErrorCode.none
    partitions = controller.image.topics["t"].partitions
    assert {p: (v.replicas, v.isr, v.leader) for p, v in partitions.items()} == {
        0: ((1,), (1,), 1),
        1: ((1,), (1,), 1),
    }


@pytest.mark.parametrize("version", [2, 4, 5, 6])
def test_older_create_topics_versions_answer_in_their_own_shape(
    run: LoopRunner, controller: Controller, version: int
) -> None:
    response = create(run, controller, topic(f"v{version}"), version=version)
    assert type(response) is load_response_schema(19, version)
    assert error_of(response) is ErrorCode.none
    encode_entity(response)


def delete_request(
    version: int, names: list[str] = (), ids: list[tuple[str | None, uuid.UUID]] = ()
) -> Any:
    request_type = load_request_schema(20, version)
    if version >= 6:
        topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
        topics += [{"name": n, "topic_id": i} for n, i in ids]
        return build_entity(request_type, {"topics": topics, "timeout": 1000})
    return build_entity(request_type, {"topic_names": list(names), "timeout": 1000})


def delete(run: LoopRunner, controller: Controller, version: int, **kwargs: Any) -> list[Any]:
    request = delete_request(version, **kwargs)
    return list(
        run(ControllerApis(controller).delete_topics(request, context(20, version))).responses
    )


def test_delete_by_name_and_by_id(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    create(run, controller, topic("a"), topic("b"))
    b_id = controller.image.topics["b"].topic_id
    (result,) = delete(run, controller, 1, names=["a"])
    assert (result.name, result.error_code) == ("a", ErrorCode.none)
    (result,) = delete(run, controller, 6, ids=[(None, b_id)])
    assert (result.name, result.topic_id, result.error_code) == ("b", b_id, ErrorCode.none)
    assert controller.image.topics == {}
    assert fake_core.last_image["topics"] == []
    create(run, controller, topic("b"))
    assert controller.image.topics["b"].topic_id != b_id


def test_delete_errors(run: LoopRunner, controller: Controller) -> None:
    create(run, controller, topic("a"))
    a_id = controller.image.topics["a"].topic_id
    results = delete(
        run,
        controller,
        6,
        names=["missing", "a", "a"],
        ids=[(None, uuid.uuid4()), ("a", a_id), (None, uuid.UUID(int=0))],
    )
    errors = sorted((r.name or "", r.error_code) for r in results)
    assert errors == [
        ("", ErrorCode.invalid_request),
        ("", ErrorCode.unknown_topic_id),
        ("a", ErrorCode.invalid_request),
        ("a", ErrorCode.invalid_request),
        ("missing", ErrorCode.unknown_topic_or_partition),
    ]
    assert "a" in controller.image.topics


def test_internal_topics_cannot_be_deleted(run: LoopRunner, controller: Controller) -> None:
    run(controller.ensure_topic("__consumer_offsets", 3, 1, {}, internal=True))
    (result,) = delete(run, controller, 4, names=["__consumer_offsets"])
    assert result.error_code is ErrorCode.invalid_topic_exception
    assert "__consumer_offsets" in controller.image.topics


@pytest.mark.parametrize(
    ("version", "error"),
    [(1, ErrorCode.invalid_request), (3, ErrorCode.topic_deletion_disabled)],
)
def test_deletion_can_be_disabled(
    run: LoopRunner, log_dirs: list[Path], fake_core: FakeCore, version: int, error: ErrorCode
) -> None:
    controller = Controller.open(make_config(log_dirs, "delete.topic.enable=false"), fake_core)
    create(run, controller, topic("a"))
    (result,) = delete(run, controller, version, names=["a"])
    assert result.error_code is error
    assert "a" in controller.image.topics


def create_partitions(
    run: LoopRunner, controller: Controller, *topics: dict, validate_only: bool = False
) -> dict[str, ErrorCode]:
    request_type = load_request_schema(37, 3)
    request = build_entity(
        request_type, {"topics": list(topics), "timeout": 1000, "validate_only": validate_only}
    )
    response = run(ControllerApis(controller).create_partitions(request, context(37, 3)))
    return {r.name: r.error_code for r in response.results}


def test_create_partitions_only_increases(run: LoopRunner, controller: Controller) -> None:
    create(run, controller, topic("t", 2))
    new = {"name": "t", "count": 4, "assignments": None}
    assert create_partitions(run, controller, new, validate_only=True) == {"t": ErrorCode.none}
    assert len(controller.image.topics["t"].partitions) == 2
    assert create_partitions(run, controller, new) == {"t": ErrorCode.none}
    assert sorted(controller.image.topics["t"].partitions) == [0, 1, 2, 3]
    for count in (4, 3):
        same = {"name": "t", "count": count, "assignments": None}
        assert create_partitions(run, controller, same) == {"t": ErrorCode.invalid_partitions}


def test_create_partitions_errors(run: LoopRunner, controller: Controller) -> None:
    create(run, controller, topic("t", 1))
    assert create_partitions(run, controller, {"name": "nope", "count": 2}) == {
        "nope": ErrorCode.unknown_topic_or_partition
    }
    two_for_one = {"name": "t", "count": 2, "assignments": [{"broker_ids": [1]}] * 2}
    assert create_partitions(run, controller, two_for_one) == {
        "t": ErrorCode.invalid_replica_assignment
    }
    unknown_broker = {"name": "t", "count": 2, "assignments": [{"broker_ids": [9]}]}
    assert create_partitions(run, controller, unknown_broker) == {
        "t": ErrorCode.invalid_replica_assignment
    }
    duplicate = {"name": "t", "count": 2}
    assert create_partitions(run, controller, duplicate, duplicate) == {
        "t": ErrorCode.invalid_request
    }
    too_many = {"name": "t", "count": MAX_RECORDS_PER_USER_OP + 5}
    assert create_partitions(run, controller, too_many) == {"t": ErrorCode.policy_violation}
    assert len(controller.image.topics["t"].partitions) == 1


def allocate(
    run: LoopRunner, controller: Controller, internal: bool = True, epoch: int = -1
) -> Any:
    request_type = load_request_schema(67, 0)
    request = build_entity(request_type, {"broker_id": 1, "broker_epoch": epoch})
    # The client id the core sends does not make a request internal: only the core's flag does.
    request_context = context(67, 0, "krust-internal", internal=internal)
    return run(ControllerApis(controller).allocate_producer_ids(request, request_context))


def test_producer_id_blocks_are_durable_and_never_reused(
    run: LoopRunner, controller: Controller, config: BrokerConfig, fake_core: FakeCore
) -> None:
    first = allocate(run, controller)
    second = allocate(run, controller)
    assert (first.producer_id_start, first.producer_id_len) == (0, 1000)
    assert second.producer_id_start == 1000
    assert ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=2000) in (
        metadata_records(fake_core)
    )
    restarted = Controller.open(config, fake_core.reopen())
    assert allocate(run, restarted).producer_id_start == 2000


def test_producer_ids_only_for_brokers_and_a_current_epoch(
    run: LoopRunner, controller: Controller
) -> None:
    # A broker over the controller listener (no authorizer: every principal may).
    assert allocate(run, controller, internal=False).error_code is ErrorCode.none

    class Denying:
        async def allowed(self, *args: Any) -> bool:
            return False

    controller.authorization = Denying()  # type: ignore[assignment]
    refused = allocate(run, controller, internal=False)
    assert refused.error_code is ErrorCode.cluster_authorization_failed
    controller.authorization = Authorization(None)
    stale = allocate(run, controller, epoch=99)
    assert stale.error_code is ErrorCode.stale_broker_epoch
    epoch = controller.image.brokers[1].epoch
    assert allocate(run, controller, epoch=epoch).error_code is ErrorCode.none


def test_ensure_topic_creates_once_and_marks_internal(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    created = run(controller.ensure_topic("__consumer_offsets", 5, 1, {"segment.bytes": "1048576"}))
    assert len(created.partitions) == 5 and created.internal
    again = run(controller.ensure_topic("__consumer_offsets", 9, 1, {}))
    assert again.topic_id == created.topic_id and len(again.partitions) == 5
    run(controller.ensure_topic("my-internal", 1, 1, {}, internal=True))
    assert controller.image.topics["my-internal"].internal
    with pytest.raises(TopicCreationError) as caught:
        run(controller.ensure_topic("other", 1, 3, {}))
    assert caught.value.error is ErrorCode.invalid_replication_factor


def test_a_failed_append_changes_nothing(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    images = len(fake_core.images)
    fake_core.fail_appends = True
    with pytest.raises(OSError):
        create(run, controller, topic("t"))
    assert controller.image.topics == {} and len(fake_core.images) == images
    fake_core.fail_appends = False
    assert error_of(create(run, controller, topic("t"))) is ErrorCode.none


def test_requests_through_the_bridge(config: BrokerConfig, fake_core: FakeCore) -> None:
    dispatcher = Dispatcher()
    try:
        controller = Controller.open(config, fake_core)
        install(BrokerContext(config, fake_core, controller, dispatcher, controller.authorization))
        assert dispatcher.supported_versions() == {
            19: (2, 7),
            20: (1, 6),
            37: (0, 3),
            57: (0, 2),
            67: (0, 0),
            32: (1, 4),
            33: (0, 2),
            44: (0, 1),
            74: (0, 1),
            29: (1, 3),
            30: (2, 3),
            31: (1, 3),
            48: (0, 1),
            49: (0, 1),
            50: (0, 0),
            51: (0, 0),
            43: (0, 2),
            45: (0, 1),
            46: (0, 0),
            56: (2, 3),
            62: (0, 4),
            63: (0, 1),
        }
        request_type = load_request_schema(19, 7)
        body = encode_entity(
            build_entity(request_type, {"topics": [topic("wire", 2, 1)], "timeout": 1000})
        )
        request = FakeRequest(body, api_key=19, api_version=7)
        dispatcher.submit(request)
        response, _ = entity_reader(load_response_schema(19, 7))(request.wait().response, 0)
        assert response.topics[0].error_code is ErrorCode.none
        assert response.topics[0].topic_id == controller.image.topics["wire"].topic_id
    finally:
        dispatcher.close()


def test_a_restart_ends_a_transaction_a_crash_left_open(
    controller: Controller, config: BrokerConfig, fake_core: FakeCore
) -> None:
    # A crash kept only the first records of a commit (each is its own entry): the log ends
    # inside its transaction.
    torn = [
        BeginTransactionRecord(name="2 records"),
        ProducerIdsRecord(broker_id=1, next_producer_id=5000),
    ]
    fake_core.internal_append(METADATA_TOPIC, 0, [(None, encode_record(r)) for r in torn])

    restarted = Controller.open(config, fake_core.reopen())

    assert restarted.image.next_producer_id == 0
    after_torn = metadata_records(fake_core)[-len(torn) - 5 :]
    assert [type(r) for r in after_torn[len(torn) :]] == [
        NoOpRecord,
        AbortTransactionRecord,
        BeginTransactionRecord,
        RegisterBrokerRecord,
        EndTransactionRecord,
    ]
    assert restarted.image.brokers[1].epoch == restarted.image.metadata_offset - 1


class LaggingCore(FakeCore):
    """A quorum whose replay lags its log, as a newly elected leader's can: the entries in
    `lag` are in the log but replayed only when the next proposal commits (committing a
    leader's first record commits everything before it)."""

    def __init__(self) -> None:
        super().__init__()
        self.lag: list[tuple[int, int, bytes]] = []

    def append(self, *records: Any, replayed: bool) -> None:
        """Records the last leader committed, replayed here now or only with the next
        proposal."""
        values = [encode_record(record) for record in records]
        base = self.internal_append(METADATA_TOPIC, 0, [(None, value) for value in values])
        entries = [(base + i, 1, value) for i, value in enumerate(values)]
        if replayed:
            self._quorum_apply(entries)
        else:
            self.lag.extend(entries)

    def propose(self, records: Any) -> int:
        held, self.lag = self.lag, []
        if held:
            self._quorum_apply(held)
        return super().propose(records)


@pytest.mark.parametrize(
    ("begin_replayed", "ended"),
    [(True, True), (True, False), (False, False)],
    ids=["ended", "left-open", "left-open-unseen"],
)
def test_a_new_active_controller_ends_only_a_transaction_its_log_leaves_open(
    run: LoopRunner, config: BrokerConfig, begin_replayed: bool, ended: bool
) -> None:
    core = LaggingCore()
    controller = Controller.open(config, core)
    # The last active controller's transaction, of which this node has replayed at most the
    # first record when it is elected; its end is in the log or not.
    core.append(BeginTransactionRecord(name="last"), replayed=begin_replayed)
    end = [EndTransactionRecord()] if ended else []
    core.append(ProducerIdsRecord(broker_id=1, next_producer_id=5000), *end, replayed=False)

    async def take_up_duties() -> None:
        controller.watch_leadership()
        assert controller._duties is not None
        await controller._duties

    run(take_up_duties())

    records = metadata_records(core)
    aborts = [r for r in records if isinstance(r, AbortTransactionRecord)]
    assert len(aborts) == (0 if ended else 1)
    assert controller.image.next_producer_id == (5000 if ended else 0)
    # The log replays from scratch to the same image (every node's replay would have stopped
    # at an abort after the transaction's end).
    restarted = Controller.open(config, core.reopen())
    assert restarted.image.next_producer_id == controller.image.next_producer_id
