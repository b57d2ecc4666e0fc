"""The Python end of the bridge: Python-owned requests in, kio-decoded, handled, encoded, answered.

The core calls `Dispatcher.submit` on its bridge thread; the work moves to the one asyncio
loop every service runs on (a daemon thread), so a handler may wait (a JoinGroup waits for
its rebalance) without holding up the core or other requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta

from krust.bridge.protocol import encode_entity, request_schema
from krust.bridge.routes import CoreRoutes, Exposure

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestContext:
    """Who sent a request and which API version it speaks (the core's session of its
    connection; see docs/session-and-routing.md)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int = 0
    principal: str = "User:ANONYMOUS"
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    internal: bool = False
    """True only for the core's own requests (e.g. topic auto-creation); no client can set it."""
    client_software_name: str = "unknown"
    client_software_version: str = "unknown"
    """What the connection's ApiVersions request named (KIP-511); "unknown" until it does."""


Handler = Callable[[Any, RequestContext], Awaitable[Any]]
"""A kio request entity and its context in, a kio response entity of the same version out."""

ChargeRequestTime = Callable[[str, str, float], int]
"""(user, client id, seconds a request was handled) -> its throttle time in ms: the client's
request_percentage (krust._core.Core.charge_request_time)."""

T = TypeVar("T")


class BridgeRequest(Protocol):
    """What `Dispatcher.submit` needs of `krust._core.BridgeRequest` (tests pass fakes)."""

    @property
    def api_key(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def client_host(self) -> str: ...
    @property
    def client_port(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def listener_name(self) -> str: ...
    @property
    def security_protocol(self) -> str: ...
    @property
    def internal(self) -> bool: ...
    @property
    def client_software_name(self) -> str: ...
    @property
    def client_software_version(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    def respond(self, body: bytes, throttle_ms: int = 0) -> None: ...
    def close_connection(self) -> None: ...


class HandlerTime(Generic[T]):
    """Awaits `awaitable` and adds up the time it runs between its suspensions: what Kafka's
    request quota counts (a request handler thread's time), not the time it waits, e.g. a
    JoinGroup parked until its rebalance completes."""

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        steps = self._awaitable.__await__()
        step: Callable[[], Any] = functools.partial(steps.send, None)
        while True:
            started = time.perf_counter()
            try:
                yielded = step()
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            finally:
                self.seconds += time.perf_counter() - started
            try:
                value = yield yielded
            except BaseException as error:
                step = functools.partial(steps.throw, error)
            else:
                step = functools.partial(steps.send, value)


@dataclass(frozen=True)
class _Route:
    min_version: int
    max_version: int
    handler: Handler | None  # None: reserved, its service is not installed yet
    exposure: Exposure


class BadRequest(Exception):
    """A request that cannot be answered; its connection gets closed."""


class Dispatcher:
    """Routes bridge requests by api key to async handlers on one event loop thread."""

    def __init__(self, charge_request_time: ChargeRequestTime | None = None) -> None:
        self._charge_request_time = charge_request_time
        self.loop = asyncio.new_event_loop()
        self._routes: dict[int, _Route] = {}
        # Set once a reserved route gets its handler; its requests wait for that.
        self._installed: dict[int, asyncio.Event] = {}
        self._routes_fixed = False
        self._in_flight: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name="krust-services", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def register(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        handler: Handler,
        *,
        exposure: Exposure = Exposure.CLIENTS,
    ) -> None:
        """Route versions min..max of `api_key` to `handler`, served to whom `exposure`
        says. A reserved api gets its handler, if the versions and exposure are the ones
        reserved; once the core has the table (`core_routes`), only reserved ones can."""
        route = _Route(min_version, max_version, handler, exposure)
        reserved = self._routes.get(api_key)
        if reserved is not None and reserved.handler is None:
            if dataclasses.replace(reserved, handler=handler) != route:
                raise ValueError(
                    f"api key {api_key}: registered v{min_version}..{max_version} "
                    f"({exposure.value}), reserved v{reserved.min_version}.."
                    f"{reserved.max_version} ({reserved.exposure.value})"
                )
            self._routes[api_key] = route
            self.loop.call_soon_threadsafe(self._installed[api_key].set)
            return
        if self._routes_fixed:
            raise ValueError(f"api key {api_key} was not reserved before the core got the table")
        self._add(api_key, route)

    def reserve(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        *,
        exposure: Exposure = Exposure.CLIENTS,
    ) -> None:
        """Advertise versions min..max of `api_key` now, for a service that registers the
        handler later (docs/python-services.md, "Start-up order"); its requests wait."""
        self._add(api_key, _Route(min_version, max_version, None, exposure))
        self._installed[api_key] = asyncio.Event()

    def reserved(self) -> set[int]:
        """The reserved api keys that have no handler yet."""
        return {key for key, route in self._routes.items() if route.handler is None}

    def _add(self, api_key: int, route: _Route) -> None:
        if api_key in self._routes:
            raise ValueError(f"api key {api_key} already has a handler")
        if not 0 <= route.min_version <= route.max_version:
            raise ValueError(f"bad version range {route.min_version}..{route.max_version}")
        self._routes[api_key] = route

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return {key: (r.min_version, r.max_version) for key, r in self._routes.items()}

    def core_routes(self) -> CoreRoutes:
        """What the core routes here: versions and exposure by api key. The table is fixed
        from then on: later registrations can only fill reserved routes."""
        self._routes_fixed = True
        return {
            key: (r.min_version, r.max_version, r.exposure.value) for key, r in self._routes.items()
        }

    def submit(self, request: BridgeRequest) -> None:
        """Hand a request to the event loop; called on the core's bridge thread, never raises."""
        try:
            self.loop.call_soon_threadsafe(self._start, request)
        except Exception as error:  # the loop is closed: shutting down
            logger.warning("dropping a request during shutdown: %s", error)
            _close_quietly(request)

    def _start(self, request: BridgeRequest) -> None:
        task = self.loop.create_task(self._handle(request))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _handle(self, request: BridgeRequest) -> None:
        try:
            response, throttle_ms = await self._serve(request)
        except asyncio.CancelledError:
            _close_quietly(request)
            raise
        except Exception as error:
            logger.error(
                "api %s v%s (correlation id %s, client %r from %s) failed, closing the "
                "connection: %s: %s",
                _attribute(request, "api_key"),
                _attribute(request, "api_version"),
                _attribute(request, "correlation_id"),
                _attribute(request, "client_id"),
                _attribute(request, "client_host"),
                type(error).__name__,
                error,
            )
            logger.debug("handler failure", exc_info=True)
            _close_quietly(request)
            return
        try:
            request.respond(response, throttle_ms)
        except Exception as error:
            logger.warning("could not send a response: %s", error)

    async def _serve(self, request: BridgeRequest) -> tuple[bytes, int]:
        """The encoded response, and the throttle time it carries."""
        api_key, version = request.api_key, request.api_version
        route = self._routes.get(api_key)
        if route is None or not route.min_version <= version <= route.max_version:
            raise BadRequest("no handler for this api key and version")
        if route.exposure is Exposure.INTERNAL and not request.internal:
            raise BadRequest("this api serves only the broker's own requests")
        if route.handler is None:
            await self._installed[api_key].wait()
            route = self._routes[api_key]
        assert route.handler is not None
        request_type = request_schema(api_key, version)
        body = request.body
        entity, _ = entity_reader(request_type)(body, 0)
        context = RequestContext(
            api_key,
            version,
            request.correlation_id,
            request.client_id,
            request.client_host,
            client_port=request.client_port,
            principal=request.principal,
            listener_name=request.listener_name,
            security_protocol=request.security_protocol,
            internal=request.internal,
            client_software_name=request.client_software_name,
            client_software_version=request.client_software_version,
        )
        handling = HandlerTime(route.handler(entity, context))
        response = await handling
        if (response.__api_key__, response.__version__) != (api_key, version):
            raise BadRequest(
                f"the handler answered with api {response.__api_key__} v{response.__version__}"
            )
        throttle_ms = 0
        if self._charge_request_time is not None and not request.internal:
            user = request.principal.partition(":")[2]
            throttle_ms = self._charge_request_time(user, request.client_id or "", handling.seconds)
            if throttle_ms > 0 and hasattr(response, "throttle_time"):
                throttle = i32Timedelta.parse(timedelta(milliseconds=throttle_ms))
                response = dataclasses.replace(response, throttle_time=throttle)
        return encode_entity(response), throttle_ms

    def run(self, coroutine: Awaitable[Any], timeout: float | None = None) -> Any:
        """Run a coroutine on the loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(_awaited(coroutine), self.loop).result(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what is in flight (their connections close), stop the loop and its thread."""
        if self.loop.is_closed():
            return

        def stop() -> None:
            for task in self._in_flight:
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        self.loop.call_soon_threadsafe(stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _attribute(request: object, name: str) -> object:
    try:
        return getattr(request, name)
    except Exception:
        return "?"


def _close_quietly(request: BridgeRequest) -> None:
    try:
        request.close_connection()
    except Exception as error:
        logger.warning("could not close a connection: %s", error)
