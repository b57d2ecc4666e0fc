"""krust.Broker and krust.AsyncBroker: a real broker in a child process, for Python tests."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import krust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from krust.testing import embedded, embedded_requests

from .kafka_cli import METADATA_QUORUM_COMMAND, run_java_tool
from .process_checks import process_alive

ADMIN_TIMEOUT_S = 30.0


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory tempfile (hence krust.Broker) creates temporary directories in."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def produce_and_consume(bootstrap: str, topic: str) -> bytes:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"hello")
    assert producer.flush(ADMIN_TIMEOUT_S) == 0
    return first_value(bootstrap, topic)


def first_value(bootstrap: str, topic: str, group_protocol: str = "consumer") -> bytes:
    """The first record's value, read by a member of group g."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g",
            "group.protocol": group_protocol,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        message = None
        while message is None:
            message = consumer.poll(1.0)
        assert message.error() is None, message.error()
        value: bytes = message.value()
        return value
    finally:
        consumer.close()


def test_a_broker_serves_clients_and_leaves_nothing_behind(temp_root: Path) -> None:
    with krust.Broker() as broker:
        pid = broker.pid
        topic = broker.create_topic("greetings")
        assert produce_and_consume(broker.bootstrap_servers, topic) == b"hello"
        assert broker.data_dir.is_relative_to(temp_root)
        assert broker.bootstrap_servers in broker.log  # its start-up line

    assert not broker.running
    assert not process_alive(pid)
    assert list(temp_root.iterdir()) == []
    assert broker.bootstrap_servers in broker.log  # the log outlives its file


def test_config_keywords_and_the_config_mapping_act() -> None:
    with krust.Broker(num_partitions=3, config={"log.retention.ms": 1234}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("auto-created", b"x")
        assert producer.flush(ADMIN_TIMEOUT_S) == 0
        broker.create_topic("compacted", partitions=2, config={"cleanup.policy": "compact"})

        topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        resource = ConfigResource(ConfigResource.Type.TOPIC, "compacted")
        configs = admin.describe_configs([resource])[resource].result(timeout=ADMIN_TIMEOUT_S)

    assert len(topics["auto-created"].partitions) == 3
    assert len(topics["compacted"].partitions) == 2
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "1234"


def test_a_topic_that_exists_is_a_clear_error() -> None:
    with krust.Broker() as broker:
        broker.create_topic("once")
        with pytest.raises(krust.BrokerError, match="TOPIC_ALREADY_EXISTS"):
            broker.create_topic("once")


def test_a_broker_that_cannot_start_raises_with_its_log(temp_root: Path) -> None:
    broker = krust.Broker(no_such_key=1)
    with pytest.raises(krust.BrokerError) as raised:
        broker.start()

    assert "exited with status 2 before it was ready" in str(raised.value)
    assert "unknown configuration key 'no.such.key'" in str(raised.value)
    assert not process_alive(broker.pid)
    assert list(temp_root.iterdir()) == []


def test_a_given_data_dir_is_kept_and_locked(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = krust.Broker(data_dir)
    with broker:
        broker.create_topic("kept")
        # A second broker on the same data dir would serve it on the same port: refused.
        with pytest.raises(krust.BrokerError, match=f"port {broker.port}: it is in use"):
            krust.Broker(data_dir).start()

    assert (data_dir / "kept-0").is_dir()
    # A later broker on it serves what the first one stored.
    with krust.Broker(data_dir) as again, pytest.raises(krust.BrokerError, match="EXISTS"):
        again.create_topic("kept")


def bind_fails_without_reuse(port: int) -> bool:
    """Whether a plain bind of `port` fails: after a stop with clients connected, the
    broker's side of their connections lingers in TIME_WAIT for a minute."""
    with socket.socket() as sock:
        try:
            sock.bind((embedded.HOST, port))
        except OSError:
            return True
        return False


def test_a_data_dir_restarts_at_once_on_its_port_after_clients_were_connected(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    broker = krust.Broker(data_dir)
    with broker:
        topic = broker.create_topic("kept")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic, b"before")
        assert producer.flush(ADMIN_TIMEOUT_S) == 0
        # The producer stays connected while the broker stops: the broker closes first.
    assert bind_fails_without_reuse(broker.port)

    with krust.Broker(data_dir) as again:
        assert again.port == broker.port
        assert first_value(again.bootstrap_servers, topic, group_protocol="classic") == b"before"
    del producer


def test_the_controller_listener_serves_bootstrap_controller_tools() -> None:
    with krust.Broker() as broker:
        assert broker.controller_port not in (0, broker.port)
        run = run_java_tool(
            METADATA_QUORUM_COMMAND,
            "--bootstrap-controller",
            broker.bootstrap_controllers,
            "describe",
            "--status",
        )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f'"CONTROLLER://{broker.bootstrap_controllers}"' in run.stdout, run.stdout
    with pytest.raises(ValueError, match=r"controller\.listener\.names is set by krust\.Broker"):
        krust.Broker(config={"controller.listener.names": "OTHER"})


def test_a_forgotten_broker_does_not_outlive_the_interpreter(temp_root: Path) -> None:
    script = "import krust; b = krust.Broker().start(); print(b.pid, flush=True)"
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(temp_root)},
        check=True,
    )

    assert not process_alive(int(run.stdout))
    assert list(temp_root.iterdir()) == []


def test_a_broker_whose_caller_is_killed_stops_and_removes_its_directory(
    temp_root: Path,
) -> None:
    script = (
        "import sys, time, krust; b = krust.Broker().start(); b.create_topic('t');"
        " print(b.pid, flush=True); time.sleep(600)"
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temp_root)},
    )
    try:
        assert caller.stdout is not None
        broker_pid = int(caller.stdout.readline())
        assert len(list(temp_root.iterdir())) == 1
    finally:
        caller.kill()
        caller.wait()

    deadline = time.monotonic() + 30
    while (process_alive(broker_pid) or list(temp_root.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(broker_pid)
    assert list(temp_root.iterdir()) == []


def test_the_async_broker_serves_aiokafka_without_blocking_the_loop(temp_root: Path) -> None:
    async def scenario() -> tuple[int, bytes, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        ticker = asyncio.create_task(tick())
        async with krust.AsyncBroker(num_partitions=1) as broker:
            ticks_during_start = ticks
            ticker.cancel()
            topic = await broker.create_topic("async-orders")
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            await producer.start()
            await producer.send_and_wait(topic, b"async hello")
            await producer.stop()
            consumer = AIOKafkaConsumer(
                topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
            )
            await consumer.start()
            record = await consumer.getone()
            await consumer.stop()
            pid = broker.pid
        return ticks_during_start, record.value, pid

    ticks_during_start, value, pid = asyncio.run(scenario())

    assert ticks_during_start > 0  # the loop ran other tasks while the broker started
    assert value == b"async hello"
    assert not process_alive(pid)
    assert list(temp_root.iterdir()) == []


def test_a_port_taken_before_the_broker_binds_it_is_not_mistaken_for_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another broker takes the free port found for ours before ours binds it: ours exits
    with "Address already in use", the other one answers Metadata meanwhile (for another
    cluster), and ours starts again on another port."""
    with krust.Broker() as other:
        real_free_port, taken = embedded.free_port, iter([other.port])

        def free_port(other_than: int = 0) -> int:
            """The other broker's port first, then free ones."""
            return next(taken, 0) or real_free_port(other_than)

        monkeypatch.setattr(embedded, "free_port", free_port)
        with krust.Broker() as broker:
            topic = broker.create_topic("mine")
            admin = AdminClient({"bootstrap.servers": other.bootstrap_servers})
            other_topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics

        assert broker.port != other.port
        assert topic not in other_topics


def test_an_interrupted_start_leaves_nothing_behind(
    temp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_args: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded_requests, "metadata_answers", interrupted)
    broker = krust.Broker()
    with pytest.raises(KeyboardInterrupt):
        broker.start()

    assert not process_alive(broker.pid)
    assert list(temp_root.iterdir()) == []


def test_a_broker_that_died_says_so_with_its_log(temp_root: Path) -> None:
    with krust.Broker() as broker:
        os.kill(broker.pid, signal.SIGKILL)
        while broker.running:
            time.sleep(0.01)
        with pytest.raises(krust.BrokerError, match="not running; its log") as raised:
            broker.create_topic("late")
        assert broker.bootstrap_servers in str(raised.value)

    assert list(temp_root.iterdir()) == []


def test_a_cancelled_async_start_leaves_nothing_behind(temp_root: Path) -> None:
    async def scenario() -> krust.AsyncBroker:
        broker = krust.AsyncBroker()
        starting = asyncio.create_task(broker.start())
        await asyncio.sleep(0.01)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        return broker

    broker = asyncio.run(scenario())

    assert not broker.running
    assert list(temp_root.iterdir()) == []
