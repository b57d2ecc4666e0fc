"""The metadata publisher's side of snapshots: never one inside a metadata transaction."""

from __future__ import annotations

from pathlib import Path

from krust.controller.image import MetadataImage
from krust.controller.publisher import MetadataPublisher
from krust.controller.records import (
    BeginTransactionRecord,
    EndTransactionRecord,
    TopicRecord,
    decode_record,
    encode_record,
)

from .cluster_images import TOPIC_ID
from .conftest import FakeCore
from .test_controller import make_config


def test_no_snapshot_is_taken_inside_a_metadata_transaction(
    tmp_path: Path, fake_core: FakeCore
) -> None:
    config = make_config([tmp_path / "data"])
    publisher = MetadataPublisher(config, fake_core, MetadataImage.empty("cluster", 1))
    begin = [BeginTransactionRecord(name="create"), TopicRecord(name="t", topic_id=TOPIC_ID)]
    publisher.apply([(offset, 1, encode_record(r)) for offset, r in enumerate(begin)])
    # The image does not hold the open transaction's topic: a snapshot now would lose it.
    assert publisher.snapshot() is None
    publisher.apply([(2, 1, encode_record(EndTransactionRecord()))])
    snapshot = publisher.snapshot()
    assert snapshot is not None
    assert TopicRecord(name="t", topic_id=TOPIC_ID) in [decode_record(v) for v in snapshot]
