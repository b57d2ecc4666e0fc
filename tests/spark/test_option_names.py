"""Option names are checked on the driver, without Spark: a misspelled option is refused and
the closest known one named; the connector's options keep working."""

from __future__ import annotations

import pytest
from pyspark_krust.options import KrustOptionError, check_option_names, write_options


@pytest.mark.parametrize(
    ("name", "reading", "message"),
    [
        (
            "maxOffsetsPerTriger",
            True,
            "unknown option maxOffsetsPerTriger: did you mean maxOffsetsPerTrigger?",
        ),
        ("startingOfsets", True, "unknown option startingOfsets: did you mean startingOffsets?"),
        ("topics", False, "unknown option topics: did you mean topic?"),
        ("zzzz", True, "unknown option zzzz"),
        ("subscribe", False, "option subscribe has no meaning in writes"),
        (
            "maxTriggerDelay",
            True,
            "option maxTriggerDelay of Spark's Kafka connector is not supported",
        ),
    ],
)
def test_an_unknown_option_is_refused_naming_the_closest(
    name: str, reading: bool, message: str
) -> None:
    with pytest.raises(KrustOptionError) as raised:
        check_option_names({name: "1"}, reading=reading)
    assert str(raised.value).startswith(message)


def test_the_connectors_options_are_accepted_in_any_case() -> None:
    check_option_names(
        {
            "KAFKA.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SSL",
            "SUBSCRIBE": "t",
            "maxoffsetspertrigger": "10",
            "failOnDataLoss": "false",
            "kafkaConsumer.pollTimeoutMs": "512",
            "groupIdPrefix": "g",
            "checkpointLocation": "/tmp/c",
        },
        reading=True,
    )
    check_option_names({"topic": "t", "kafka.acks": "1", "path": "p"}, reading=False)


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topic": "t", "exactlyOnce": "true"}, False, "option exactlyOnce is for writeStream"),
        (
            {"topic": "t", "exactlyOnce": "true", "kafka.acks": "1"},
            True,
            "option exactlyOnce needs kafka.acks=all, not 1",
        ),
        ({"exactlyOnce": "true"}, True, "option exactlyOnce needs the option topic"),
        ({"topic": "t", "exactlyOnce": "yes"}, True, "option exactlyOnce must be true or false"),
    ],
)
def test_exactly_once_needs_a_stream_a_topic_and_acks_all(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(KrustOptionError) as raised:
        write_options({"kafka.bootstrap.servers": "b:9092", **options}, streaming=streaming)
    assert str(raised.value).startswith(message)


def test_exactly_once_writes_are_configured() -> None:
    options = write_options(
        {"kafka.bootstrap.servers": "b:9092", "topic": "t", "exactlyOnce": "true"}, streaming=True
    )
    assert options.exactly_once and options.transactional_id_prefix == "krust-spark-"
