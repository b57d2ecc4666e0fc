"""The controller sends the core only what each committed change changed (a metadata delta)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from krust.config.broker import BrokerConfig
from krust.controller.controller import Controller
from krust.controller.image import ImageBuilder
from krust.controller.records import TOPIC_RESOURCE, ConfigRecord

from .conftest import FakeCore, LoopRunner
from .test_controller import create, create_partitions, delete, make_config, topic


@pytest.fixture
def controller(tmp_path: Path, fake_core: FakeCore) -> Controller:
    config: BrokerConfig = make_config([tmp_path / "d1"])
    return Controller.open(config, fake_core)


def partitions_of(delta: dict[str, Any]) -> dict[str, list[int]]:
    return {t["name"]: [p["partition"] for p in t["partitions"]] for t in delta["topics"]}


def test_start_up_applies_the_full_image_once_and_no_delta(
    controller: Controller, fake_core: FakeCore
) -> None:
    assert len(fake_core.images) == 1
    assert fake_core.deltas == []
    assert fake_core.last_image == controller.core_image()


def test_creating_a_topic_sends_only_that_topic(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    create(run, controller, topic("first", 3))
    create(run, controller, topic("second", 2))
    (_, delta) = fake_core.deltas
    assert partitions_of(delta) == {"second": [0, 1]}
    assert delta["brokers"] is None and delta["deleted_topic_ids"] == []
    assert delta["metadata_offset"] == controller.image.metadata_offset
    # Deltas add up to the image a restart would apply in full.
    assert fake_core.last_image == controller.core_image()


def test_new_partitions_send_only_the_new_ones(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    create(run, controller, topic("t", 2))
    create_partitions(run, controller, {"name": "t", "count": 4, "assignments": None})
    assert partitions_of(fake_core.deltas[-1]) == {"t": [2, 3]}
    assert fake_core.last_image == controller.core_image()


def test_deleting_a_topic_sends_only_its_id(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    create(run, controller, topic("kept", 2), topic("gone", 2))
    gone = controller.image.topics["gone"].topic_id
    delete(run, controller, 6, names=["gone"])
    delta = fake_core.deltas[-1]
    assert delta["deleted_topic_ids"] == [gone.bytes]
    assert delta["topics"] == []
    assert fake_core.last_image == controller.core_image()


def test_a_config_change_sends_the_topic_without_partitions(
    run: LoopRunner, controller: Controller
) -> None:
    create(run, controller, topic("t", 3), topic("other", 1))
    builder = ImageBuilder(controller.image)
    change = ConfigRecord(
        resource_type=TOPIC_RESOURCE, resource_name="t", name="segment.bytes", value="2000000"
    )
    builder.replay(controller.image.metadata_offset + 1, change)
    delta = builder.core_delta(builder.build())
    assert partitions_of(delta) == {"t": []}
    assert delta["topics"][0]["configs"] == {"segment.bytes": "2000000"}


def test_a_topic_becoming_internal_is_sent_alone(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    create(run, controller, topic("mine", 2), topic("other", 1))
    run(controller.ensure_topic("mine", 2, 1, {}, internal=True))
    delta = fake_core.deltas[-1]
    assert partitions_of(delta) == {"mine": []}
    assert delta["topics"][0]["internal"] is True
    assert fake_core.last_image == controller.core_image()
