"""Each real client writes keyed records with headers under every codec and reads them back."""

from __future__ import annotations

import pytest

from .clients import ALL_CLIENTS, KafkaClient, consume_all, produce_samples
from .clients.confluent import create_topic
from .records import CODECS, assert_read_back

RECORDS_PER_TOPIC = 40


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", ALL_CLIENTS, ids=lambda client: client.name)
def test_client_reads_back_what_it_wrote(module_broker, client: KafkaClient, codec: str) -> None:
    topic = f"roundtrip-{client.name}-{codec}"
    create_topic(module_broker.bootstrap, topic)

    produced = produce_samples(
        client, module_broker.bootstrap, topic, count=RECORDS_PER_TOPIC, codec=codec
    )
    consumed = consume_all(client, module_broker.bootstrap, topic, RECORDS_PER_TOPIC)

    assert_read_back(produced, consumed)
