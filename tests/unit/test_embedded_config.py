"""krust.Broker's keywords and config mapping as the broker's Kafka config keys."""

from __future__ import annotations

import pytest
from krust.testing.embedded import broker_config


def test_keywords_name_keys_with_dots_as_underscores() -> None:
    assert broker_config({"num_partitions": 3, "log_retention_ms": 1000}, {}) == {
        "num.partitions": "3",
        "log.retention.ms": "1000",
    }


def test_values_are_written_as_kafka_reads_them() -> None:
    config = broker_config(
        {"auto_create_topics_enable": False, "super_users": ["User:a", "User:b"]}, {}
    )

    assert config == {"auto.create.topics.enable": "false", "super.users": "User:a,User:b"}


def test_the_mapping_takes_any_key_and_wins_over_keywords() -> None:
    config = broker_config({"num_partitions": 3}, {"num.partitions": 5, "x-y.z": "v"})

    assert config == {"num.partitions": "5", "x-y.z": "v"}


@pytest.mark.parametrize(
    ("keywords", "mapping", "argument"),
    [
        ({"listeners": "PLAINTEXT://:9092"}, {}, "port"),
        ({"log_dirs": "/data"}, {}, "data_dir"),
        ({}, {"log.dir": "/data"}, "data_dir"),
    ],
)
def test_keys_the_broker_sets_itself_name_the_argument_to_use(
    keywords: dict[str, object], mapping: dict[str, object], argument: str
) -> None:
    with pytest.raises(ValueError, match=f"use its {argument} argument"):
        broker_config(keywords, mapping)
