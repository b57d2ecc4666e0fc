"""`krust.AsyncBroker`: `krust.Broker` for asyncio test suites.

Each blocking step (waiting for the child to answer, for it to exit, for a topic's leaders)
runs in a worker thread, so the event loop keeps serving the test's own tasks meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from krust.testing.embedded import START_TIMEOUT_S, STOP_TIMEOUT_S, TOPIC_TIMEOUT_S, Broker


class AsyncBroker:
    """`async with krust.AsyncBroker(num_partitions=3) as broker:`; the arguments are
    `krust.Broker`'s."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int = 0,
        config: Mapping[str, object] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        **keywords: object,
    ) -> None:
        self.broker = Broker(
            data_dir, port=port, config=config, start_timeout=start_timeout, **keywords
        )
        # Orders a stop after a start still running in a worker thread.
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self.broker.running

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def controller_port(self) -> int:
        return self.broker.controller_port

    @property
    def bootstrap_controllers(self) -> str:
        return self.broker.bootstrap_controllers

    @property
    def pid(self) -> int:
        return self.broker.pid

    @property
    def data_dir(self) -> Path:
        return self.broker.data_dir

    @property
    def log(self) -> str:
        return self.broker.log

    async def start(self) -> AsyncBroker:
        try:
            await asyncio.to_thread(self._locked_start)
        except asyncio.CancelledError:
            # The worker thread cannot be interrupted and goes on starting the broker: stop
            # it once started, so that a cancelled start leaves no broker behind.
            await asyncio.to_thread(self._locked_stop, STOP_TIMEOUT_S)
            raise
        return self

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        await asyncio.to_thread(self._locked_stop, timeout)

    def _locked_start(self) -> None:
        with self._lock:
            self.broker.start()

    def _locked_stop(self, timeout: float) -> None:
        with self._lock:
            self.broker.stop(timeout)

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        timeout: float = TOPIC_TIMEOUT_S,
    ) -> str:
        return await asyncio.to_thread(
            self.broker.create_topic, name, partitions, replication_factor, config, timeout
        )

    async def __aenter__(self) -> AsyncBroker:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<krust.AsyncBroker {self.bootstrap_servers} {state}>"
