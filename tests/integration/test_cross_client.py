"""Records written by one client are read unchanged by every other client."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .clients import ALL_CLIENTS, KafkaClient, consume_all, produce_samples
from .clients.confluent import create_topic
from .records import CODECS, ProducedBatch, assert_read_back

RECORDS_PER_TOPIC = 30
# One codec per writer so the matrix also crosses codecs between implementations.
WRITER_CODECS = {client.name: CODECS[(i + 1) % len(CODECS)] for i, client in enumerate(ALL_CLIENTS)}

WrittenBy = Callable[[KafkaClient], tuple[str, ProducedBatch]]


@pytest.fixture(scope="module")
def written_by(module_broker) -> WrittenBy:
    """The topic a client wrote and what it wrote there; each writer produces once per module.

    A writer that failed fails only the tests reading its topic, with its original error.
    """
    outcomes: dict[str, tuple[str, ProducedBatch] | Exception] = {}

    def write_once(writer: KafkaClient) -> tuple[str, ProducedBatch]:
        if writer.name not in outcomes:
            topic = f"cross-written-by-{writer.name}"
            try:
                create_topic(module_broker.bootstrap, topic)
                produced = produce_samples(
                    writer,
                    module_broker.bootstrap,
                    topic,
                    count=RECORDS_PER_TOPIC,
                    codec=WRITER_CODECS[writer.name],
                )
                outcomes[writer.name] = (topic, produced)
            except Exception as error:
                outcomes[writer.name] = error
        outcome = outcomes[writer.name]
        if isinstance(outcome, Exception):
            raise AssertionError(f"{writer.name} could not write its topic") from outcome
        return outcome

    return write_once


MATRIX = [
    pytest.param(writer, reader, id=f"{writer.name}->{reader.name}")
    for writer in ALL_CLIENTS
    for reader in ALL_CLIENTS
    if reader is not writer
]


@pytest.mark.parametrize(("writer", "reader"), MATRIX)
def test_reader_sees_records_of_another_client(
    module_broker, written_by: WrittenBy, writer: KafkaClient, reader: KafkaClient
) -> None:
    topic, produced = written_by(writer)

    consumed = consume_all(reader, module_broker.bootstrap, topic, RECORDS_PER_TOPIC)

    assert_read_back(produced, consumed)
