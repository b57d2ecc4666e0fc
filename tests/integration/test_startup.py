"""Start-up: an empty broker's Python services (the controller's apis, the coordinators) are
built after the port opens (docs/python-services.md, "Start-up order"), yet the broker
advertises exactly the apis and versions it did when everything was installed before, and
requests for them sent the moment the port opens are answered."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from . import wire
from .broker_process import HOST, BrokerProcess

# The ApiVersions table of a broker with default settings, as advertised when every service
# was installed before the port opened (api key: min, max). A change here is a protocol change.
ADVERTISED = {
    **{0: (3, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6)},
    **{11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1)},
    **{18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5)},
    **{25: (0, 4), 26: (0, 5), 27: (1, 1), 28: (0, 4), 29: (1, 3), 30: (2, 3), 31: (1, 3)},
    **{32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2)},
    **{43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1)},
    **{50: (0, 0), 51: (0, 0), 55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 65: (0, 0)},
    **{66: (0, 2), 68: (0, 1), 69: (0, 1), 74: (0, 1), 75: (0, 0)},
}


def test_api_versions_advertises_every_api_it_did_before(broker: BrokerProcess) -> None:
    with wire.connect(HOST, broker.port) as sock:
        answer = wire.api_versions(sock, 0, correlation_id=1)
    assert answer.error_code == 0
    assert answer.ranges == ADVERTISED


FIND_COORDINATOR = 10
CREATE_TOPICS = 19
NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 0, 14, 15
PORT_OPEN_TIMEOUT_S = 30.0


def first_connection(port: int) -> socket.socket:
    """A connection made as soon as the port accepts one."""
    deadline = time.monotonic() + PORT_OPEN_TIMEOUT_S
    while True:
        try:
            return wire.connect(HOST, port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def started_unready(tmp_path: Path) -> BrokerProcess:
    """A broker whose start returns at once, before its port opens."""
    broker = BrokerProcess(tmp_path)
    broker.wait_ready = lambda timeout_s=0.0: None  # type: ignore[method-assign]
    broker.start()
    return broker


def test_a_coordinator_request_sent_as_the_port_opens_is_answered(tmp_path: Path) -> None:
    broker = started_unready(tmp_path)
    try:
        with first_connection(broker.port) as sock:
            # FindCoordinator v0 for group "g": the group coordinator may still be loading.
            header = wire.request_header(FIND_COORDINATOR, 0, correlation_id=5)
            sock.sendall(wire.frame(header + wire.string("g")))
            answer = wire.read_response(sock, 5)
            error_code = answer.int16()
        assert error_code in (NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
        assert broker.unexpected_exit() is None
    finally:
        broker.kill9()


def test_a_topic_created_as_the_port_opens_is_created(tmp_path: Path) -> None:
    broker = started_unready(tmp_path)
    try:
        with first_connection(broker.port) as sock:
            # CreateTopics v2: "early", 2 partitions, replication factor 1, no assignments or
            # configs; timeout 30 s; not validate-only.
            topic = wire.string("early") + wire.int32(2) + wire.int16(1) + wire.int32(0) * 2
            body = wire.array([topic]) + wire.int32(30_000) + b"\x00"
            sock.sendall(wire.frame(wire.request_header(CREATE_TOPICS, 2, 7) + body))
            answer = wire.read_response(sock, 7)
            answer.int32()  # throttle time
            created = [
                (answer.string(), answer.int16(), answer.string()) for _ in range(answer.int32())
            ]
        assert created == [("early", NONE, None)]
        assert broker.unexpected_exit() is None
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("early", 10)
        assert len(metadata.topics["early"].partitions) == 2
    finally:
        broker.kill9()


def test_a_broker_starts_without_hypothesis_where_it_is_installed(tmp_path: Path) -> None:
    """kio registers hypothesis strategies wherever hypothesis is importable (it is here), and
    hypothesis would then build its unicode tables into its storage directory at every start
    (seconds of CPU): the broker leaves hypothesis alone."""
    storage = tmp_path / "hypothesis-storage"
    broker = BrokerProcess(tmp_path, env={"HYPOTHESIS_STORAGE_DIRECTORY": str(storage)})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("hypothesis-free", 1)])["hypothesis-free"].result(30)
        assert broker.unexpected_exit() is None
        assert not storage.exists()
    finally:
        broker.kill9()
