"""A tiny order service, the application `test_orders.py` tests against a real krust broker.

Orders are JSON records keyed by customer (so one customer's orders keep their order); the
billing side totals each customer's orders.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaError, Message, Producer

FLUSH_TIMEOUT_S = 30.0
POLL_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, value: bytes) -> Order:
        return cls(**json.loads(value))


def place_orders(bootstrap_servers: str, topic: str, orders: Iterable[Order]) -> None:
    """Publish the orders; raise if any was not delivered."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for order in orders:
        producer.produce(topic, key=order.customer, value=order.to_json(), on_delivery=delivered)
    undelivered = producer.flush(FLUSH_TIMEOUT_S)
    if failures or undelivered:
        raise RuntimeError(f"orders not delivered: {failures or undelivered}")


def totals_by_customer(
    bootstrap_servers: str, topic: str, group_id: str, orders: int, timeout_s: float = 30.0
) -> dict[str, int]:
    """Read `orders` orders as consumer group `group_id`; each customer's total in cents."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            # The KIP-848 protocol: no initial rebalance delay, members join at once.
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    totals: Counter[str] = Counter()
    read = 0
    deadline = time.monotonic() + timeout_s
    try:
        consumer.subscribe([topic])
        while read < orders:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {read} of {orders} orders in {timeout_s} s")
            message = consumer.poll(POLL_TIMEOUT_S)
            if message is None:
                continue
            if message.error() is not None:
                raise RuntimeError(f"consume failed: {message.error()}")
            order = Order.from_json(message.value())
            totals[order.customer] += order.amount_cents
            read += 1
    finally:
        consumer.close()
    return dict(totals)
