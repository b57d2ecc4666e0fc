"""Tests of the order service against a real broker: krust's pytest plugin (installed with
krust) gives every test a session-wide `kafka_broker` and a fresh `kafka_topic`."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from krust import Broker
from orders import Order, place_orders, totals_by_customer

ORDERS = [
    Order("o-1", "ada", 1250),
    Order("o-2", "grace", 990),
    Order("o-3", "ada", 300),
]
TOTALS = {"ada": 1550, "grace": 990}


def test_billing_totals_each_customers_orders(kafka_broker: Broker, kafka_topic: str) -> None:
    place_orders(kafka_broker.bootstrap_servers, kafka_topic, ORDERS)

    totals = totals_by_customer(kafka_broker.bootstrap_servers, kafka_topic, "billing", 3)

    assert totals == TOTALS


def test_billing_totals_orders_an_asyncio_shop_placed(
    kafka_broker: Broker, kafka_topic: str
) -> None:
    async def place_with_aiokafka() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
        await producer.start()
        try:
            for order in ORDERS:
                await producer.send_and_wait(
                    kafka_topic, order.to_json(), key=order.customer.encode()
                )
        finally:
            await producer.stop()

    asyncio.run(place_with_aiokafka())

    totals = totals_by_customer(kafka_broker.bootstrap_servers, kafka_topic, "billing", 3)

    assert totals == TOTALS


def test_an_asyncio_consumer_reads_placed_orders_in_order(
    kafka_broker: Broker, kafka_topic: str
) -> None:
    place_orders(kafka_broker.bootstrap_servers, kafka_topic, ORDERS)

    async def read_with_aiokafka() -> list[Order]:
        consumer = AIOKafkaConsumer(
            kafka_topic,
            bootstrap_servers=kafka_broker.bootstrap_servers,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            return [Order.from_json((await consumer.getone()).value) for _ in ORDERS]
        finally:
            await consumer.stop()

    assert asyncio.run(read_with_aiokafka()) == ORDERS
