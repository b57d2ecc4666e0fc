"""SIGTERM while a consumer long-polls: exit 0 within seconds, clean-shutdown marker, no loss."""

from __future__ import annotations

import threading
import time

from .clients import CLIENTS_BY_NAME, consume_all, produce_samples
from .clients.confluent import assigned_consumer, create_topic
from .records import assert_read_back

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
SHUTDOWN_LIMIT_S = 5.0
confluent = CLIENTS_BY_NAME["confluent-kafka"]


class PollingConsumer(threading.Thread):
    """A consumer that keeps polling (long fetches at the log end) until told to stop."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        # A fetch waits longer than the shutdown may take: the broker must not wait it out.
        self.consumer = assigned_consumer(bootstrap, topic, 0, **{"fetch.wait.max.ms": 20_000})
        self.received = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while not self.stopping.is_set() and time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.received += 1
        self.consumer.close()


def test_sigterm_while_consumer_polls_exits_cleanly_and_restarts(broker) -> None:
    create_topic(broker.bootstrap, "polled")
    produced = produce_samples(confluent, broker.bootstrap, "polled", count=10, codec="none")
    polling = PollingConsumer(broker.bootstrap, "polled")
    polling.start()
    deadline = time.monotonic() + 30
    while polling.received < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert polling.received == 10, "the consumer did not catch up before the shutdown"
    time.sleep(0.5)  # let it park in a long poll at the log end

    took_s = broker.stop(timeout_s=SHUTDOWN_LIMIT_S)
    polling.stopping.set()
    polling.join(timeout=30)

    assert took_s < SHUTDOWN_LIMIT_S
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.restart()
    # The marker is consumed at start-up, so a later crash is not mistaken for a clean stop.
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert_read_back(produced, consume_all(confluent, broker.bootstrap, "polled", 10))
