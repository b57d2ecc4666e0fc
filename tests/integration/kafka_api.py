"""Any Kafka request at any version, through kafka-python's schema-generated messages.

kafka-python 3 builds its request and response classes from Kafka's own JSON schemas, so a
test can send exactly the version it names (the newest ones included) and read every field
of the answer, without hand-written framing for flexible versions.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer import ProduceRequest

from . import wire

_CORRELATION_ID = 7


def call(
    sock: socket.socket, request: ApiMessage, version: int, client_id: str = wire.CLIENT_ID
) -> Any:
    """Sends `request` as `version` on `sock` and decodes the answer of the same version."""
    request.with_header(correlation_id=_CORRELATION_ID, client_id=client_id)
    sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
    response_class = request.header.get_response_class()
    response = response_class.decode(wire.read_frame(sock), version=version, header=True)
    assert response.header.correlation_id == _CORRELATION_ID
    return response


def call_broker(
    port: int, request: ApiMessage, version: int, client_id: str = wire.CLIENT_ID
) -> Any:
    """`call` on a fresh connection to the broker on 127.0.0.1:`port`."""
    with wire.connect("127.0.0.1", port) as sock:
        return call(sock, request, version, client_id)


def produce(
    port: int,
    version: int,
    topic: str | uuid.UUID,
    batches: dict[int, bytes],
    acks: int = -1,
    client_id: str = wire.CLIENT_ID,
) -> Any:
    """One Produce request with a batch per partition, naming the topic by name or (v13+) id."""
    data = ProduceRequest.TopicProduceData
    named = {"topic_id": topic} if isinstance(topic, uuid.UUID) else {"name": topic}
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            data(
                **named,
                partition_data=[
                    data.PartitionProduceData(index=index, records=batch)
                    for index, batch in batches.items()
                ],
            )
        ],
    )
    return call_broker(port, request, version, client_id)
