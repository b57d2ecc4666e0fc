"""Creating a coordinator's internal topic on first use, as Kafka's coordinators do
(`__consumer_offsets` at the first FindCoordinator of a group, `__transaction_state` of a
transactional id): one creation at a time however many requests ask, and a failed one is
forgotten so that the next request tries again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class TopicCreation:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        create: Callable[[], Awaitable[Any]],
    ) -> None:
        """`create()` asks the controller for the topic (`ensure_topic`)."""
        self._loop = loop
        self._topic = topic
        self._create = create
        self._task: asyncio.Future[Any] | None = None

    async def run(self) -> bool:
        """Create the topic, or wait for the creation under way; False if it failed."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._create(), loop=self._loop)
        task = self._task
        try:
            await asyncio.shield(task)
        except Exception:
            log.exception("creating %s failed", self._topic)
            if self._task is task:
                self._task = None
            return False
        return True
