"""Requests this node sends to the active controller over the core's controller channel
(BrokerRegistration, BrokerHeartbeat, CreateTopics of internal topics), built and read with
kio."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from kio.serial import entity_reader

from krust.bridge.protocol import build_entity, encode_entity, request_schema, response_schema


class ControllerSender(Protocol):
    def send_to_controller(self, api_key: int, version: int, body: bytes) -> bytes: ...
    def set_broker_epoch(self, epoch: int) -> None: ...


async def request_controller(
    core: ControllerSender, api_key: int, version: int, fields: Mapping[str, Any]
) -> Any:
    """The decoded response of the request `fields` describe (see krust.bridge.protocol); the
    channel's errors (no controller within its timeout) propagate."""
    body = encode_entity(build_entity(request_schema(api_key, version), fields))
    raw = await asyncio.to_thread(core.send_to_controller, api_key, version, body)
    response: Any = entity_reader(response_schema(api_key, version))(raw, 0)[0]
    return response
