"""Feature flags against Kafka's own kafka-features tool and raw ApiVersions/UpdateFeatures
requests: the supported and finalized levels krust reports, and UpdateFeatures' answers."""

from __future__ import annotations

import re
from pathlib import Path

from kio.schema.errors import ErrorCode

from .broker_process import BrokerProcess
from .groups_support import RawGroupConnection
from .kafka_cli import DUMP_LOG_SEGMENTS, FEATURE_COMMAND, ToolRun, run_tool, tool_output

API_VERSIONS = 18
UPDATE_FEATURES = 57
DESCRIBE_LINE = re.compile(
    r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
    r"FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)"
)


def features(broker: BrokerProcess, *args: str) -> ToolRun:
    return run_tool(FEATURE_COMMAND, broker.bootstrap, *args)


def describe(broker: BrokerProcess) -> dict[str, tuple[str, str, str, str]]:
    """feature -> (supported min, supported max, finalized level, epoch), as the tool prints."""
    run = features(broker, "describe")
    assert run.returncode == 0, run.stderr
    return {m[1]: (m[2], m[3], m[4], m[5]) for m in DESCRIBE_LINE.finditer(run.stdout)}


def test_kafka_features_describe_lists_every_feature_with_its_levels(broker) -> None:
    described = describe(broker)
    epoch = described["metadata.version"][3]
    assert described == {
        "metadata.version": ("3.6-IV0", "3.6-IV2", "3.6-IV2", epoch),
        "kraft.version": ("0", "0", "0", epoch),
        "group.version": ("0", "1", "1", epoch),
        "transaction.version": ("0", "0", "0", epoch),
        "eligible.leader.replicas.version": ("0", "0", "0", epoch),
        "share.version": ("0", "0", "0", epoch),
        "streams.version": ("0", "0", "0", epoch),
    }
    assert int(epoch) >= 1  # the metadata offset of the image the levels come from


def test_an_upgrade_is_a_durable_record_and_moves_the_epoch(broker) -> None:
    before = int(describe(broker)["metadata.version"][3])
    run = features(broker, "upgrade", "--feature", "metadata.version=14")
    assert (run.returncode, run.stdout.strip()) == (0, "metadata.version was upgraded to 14.")
    after = describe(broker)["metadata.version"]
    assert after[2] == "3.6-IV2"

    broker.stop()
    broker.restart()
    assert describe(broker)["metadata.version"][2] == "3.6-IV2"
    broker.stop()
    # Kafka's own metadata decoder reads the FeatureLevelRecord inside its metadata transaction
    # (KIP-868): BeginTransactionRecord, FeatureLevelRecord, EndTransactionRecord. The epoch
    # described after the update is the newest offset, so at least the transaction's end (a
    # broker's own registration records may follow it on a loaded machine).
    dumped = dump_metadata_log(broker.data_dir)
    payloads = {
        int(offset): payload
        for offset, payload in re.findall(r"^\| offset: (\d+) .* payload: (.*)$", dumped, re.M)
    }
    feature = (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,'
        '"data":{"name":"metadata.version","featureLevel":14}}'
    )
    offset = next(
        (o for o, payload in sorted(payloads.items()) if o > before and payload == feature), None
    )
    assert offset is not None, dumped
    assert "BEGIN_TRANSACTION_RECORD" in payloads[offset - 1], dumped
    assert "END_TRANSACTION_RECORD" in payloads[offset + 1], dumped
    assert int(after[3]) >= offset + 1


def dump_metadata_log(data_dir: Path) -> str:
    segments = sorted((data_dir / "__cluster_metadata-0").glob("*.log"))
    files = ",".join(map(str, segments))
    return tool_output(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", files)


def test_kafka_features_refusals_and_allowed_changes(broker) -> None:
    prefix = "The update failed for all features since the following feature had an error: "
    run = features(broker, "upgrade", "--feature", "transaction.version=1")
    assert run.returncode == 1
    assert run.stdout.strip() == (
        f"Could not upgrade transaction.version to 1. {prefix}Invalid update version 1 for "
        "feature transaction.version. Local controller 1 does not support this feature."
    )
    assert "1 out of 1 operation(s) failed." in run.stderr
    run = features(broker, "downgrade", "--feature", "metadata.version=13")
    assert run.returncode == 1
    assert run.stdout.strip() == (
        f"Could not downgrade metadata.version to 13. {prefix}Unsupported metadata.version "
        "downgrade from 14 to 13. Refusing to perform the requested downgrade because it might "
        "delete metadata information."
    )
    run = features(broker, "downgrade", "--unsafe", "--feature", "metadata.version=13")
    assert "Unsafe metadata downgrade is not supported in this version." in run.stdout
    run = features(broker, "upgrade", "--feature", "metadata.version=15")
    assert "Local controller 1 only supports versions 12-14" in run.stdout

    epoch = describe(broker)["group.version"][3]
    run = features(broker, "disable", "--feature", "group.version", "--dry-run")
    assert (run.returncode, run.stdout.strip()) == (0, "group.version can be disabled.")
    assert describe(broker)["group.version"][3] == epoch  # a dry run writes nothing
    run = features(broker, "disable", "--feature", "group.version")
    assert (run.returncode, run.stdout.strip()) == (0, "group.version was disabled.")
    assert describe(broker)["group.version"] == ("0", "1", "0", str(int(epoch) + 3))
    run = features(broker, "upgrade", "--feature", "group.version=1")
    assert (run.returncode, run.stdout.strip()) == (0, "group.version was upgraded to 1.")
    assert describe(broker)["group.version"] == ("0", "1", "1", str(int(epoch) + 6))


def test_apiversions_v3_omits_features_with_a_supported_minimum_of_zero(broker) -> None:
    connection = RawGroupConnection(broker.port)
    try:
        v3 = connection.send(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        v4 = connection.send(
            API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"}
        )
    finally:
        connection.close()
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [
        ("metadata.version", 12, 14)
    ]
    assert len(v4.supported_features) == 7
    assert sorted(
        (f.name, f.min_version_level, f.max_version_level) for f in v4.finalized_features
    ) == [("group.version", 1, 1), ("metadata.version", 14, 14)]
    assert v4.finalized_features_epoch >= 1 and not v4.zk_migration_ready


def update(connection: RawGroupConnection, version: int, **feature: object) -> object:
    fields = {"timeout": 1000, "feature_updates": [feature], "validate_only": False}
    return connection.send(UPDATE_FEATURES, version, fields)


def test_update_features_every_version_answers_as_kafka_does(broker) -> None:
    connection = RawGroupConnection(broker.port)
    try:
        v0 = update(
            connection, 0, feature="metadata.version", max_version_level=14, allow_downgrade=False
        )
        v1 = update(connection, 1, feature="kraft.version", max_version_level=0, upgrade_type=1)
        v2 = update(connection, 2, feature="share.version", max_version_level=0, upgrade_type=2)
        unknown = update(connection, 2, feature="foo.bar", max_version_level=0, upgrade_type=2)
        bad_type = update(
            connection, 1, feature="metadata.version", max_version_level=14, upgrade_type=7
        )
    finally:
        connection.close()
    # Per-feature results only on success and only before v2.
    assert [(r.feature, r.error_code, r.error_message) for r in v0.results] == [
        ("metadata.version", ErrorCode.none, "NONE")
    ]
    assert [(r.feature, r.error_code) for r in v1.results] == [("kraft.version", ErrorCode.none)]
    assert (v2.error_code, v2.error_message) == (ErrorCode.none, None)
    assert unknown.error_code == ErrorCode.invalid_update_version
    assert unknown.error_message.endswith(
        "Invalid update version 0 for feature foo.bar. Feature foo.bar not found."
    )
    assert bad_type.error_code == ErrorCode.invalid_update_version and bad_type.results == ()
    assert bad_type.error_message.endswith(
        "The controller does not support the given upgrade type."
    )
