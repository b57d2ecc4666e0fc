"""The bridge: requests from the core's thread answered on the services' event loop, and the
server wiring the core, the controller and the dispatcher together."""

from __future__ import annotations

import asyncio
import datetime
import errno
import importlib
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import krust
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.delete_topics.v4.response import DeleteTopicsResponse
from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta
from krust.bridge.dispatcher import Dispatcher, RequestContext
from krust.bridge.protocol import build_entity, encode_entity, make_response
from krust.bridge.routes import Exposure
from krust.config.broker import load_config
from krust.runtime import deferred_services, server

from .conftest import TIMEOUT, FakeCore, FakeRequest


def delete_topics_body(*names: str) -> bytes:
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=1))
    return encode_entity(DeleteTopicsRequest(topic_names=names, timeout=timeout))


async def echo_names(request: Any, context: RequestContext) -> Any:
    results = [{"name": name, "error_code": 3} for name in request.topic_names]
    return make_response(20, context.api_version, {"responses": results})


@pytest.fixture
def dispatcher() -> Iterator[Dispatcher]:
    dispatcher = Dispatcher()
    yield dispatcher
    dispatcher.close()


def decode_response(body: bytes) -> DeleteTopicsResponse:
    response, size = entity_reader(DeleteTopicsResponse)(body, 0)
    assert size == len(body)
    return response


def test_request_is_decoded_handled_and_answered(dispatcher: Dispatcher) -> None:
    seen: list[RequestContext] = []

    async def handler(request: Any, context: RequestContext) -> Any:
        seen.append(context)
        return await echo_names(request, context)

    dispatcher.register(20, 1, 6, handler)
    assert dispatcher.supported_versions() == {20: (1, 6)}
    request = FakeRequest(delete_topics_body("a", "b"))
    dispatcher.submit(request)
    response = decode_response(request.wait().response or b"")
    assert [r.name for r in response.responses] == ["a", "b"]
    assert not request.closed
    assert seen == [
        RequestContext(
            20,
            4,
            7,
            "test-client",
            "127.0.0.1",
            client_port=50000,
            principal="User:ANONYMOUS",
            listener_name="PLAINTEXT",
            security_protocol="PLAINTEXT",
            internal=False,
        )
    ]


def test_internal_only_apis_serve_only_the_cores_own_requests(dispatcher: Dispatcher) -> None:
    seen: list[bool] = []

    async def handler(request: Any, context: RequestContext) -> Any:
        seen.append(context.internal)
        return await echo_names(request, context)

    dispatcher.register(20, 1, 6, handler, exposure=Exposure.INTERNAL)
    dispatcher.register(19, 2, 7, echo_names)
    assert dispatcher.core_routes() == {20: (1, 6, "internal"), 19: (2, 7, "clients")}
    from_client = FakeRequest(delete_topics_body("a"))
    dispatcher.submit(from_client)
    assert from_client.wait().closed and from_client.response is None
    from_core = FakeRequest(delete_topics_body("a"), internal=True)
    dispatcher.submit(from_core)
    assert from_core.wait().response is not None
    assert seen == [True]


def test_handler_exception_closes_the_connection_and_later_requests_are_served(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    async def picky(request: Any, context: RequestContext) -> Any:
        if "bad" in request.topic_names:
            raise ValueError("boom")
        return await echo_names(request, context)

    dispatcher.register(20, 1, 6, picky)
    bad = FakeRequest(delete_topics_body("bad"))
    dispatcher.submit(bad)
    assert bad.wait().closed and bad.response is None
    assert any("boom" in record.getMessage() for record in caplog.records)
    good = FakeRequest(delete_topics_body("ok"))
    dispatcher.submit(good)
    assert good.wait().response is not None and not good.closed


@pytest.mark.parametrize(
    "request_",
    [
        FakeRequest(b"\xff\xff\xff"),  # undecodable body
        FakeRequest(delete_topics_body("a"), api_version=0),  # version not registered
        FakeRequest(delete_topics_body("a"), api_key=19),  # api key not registered
    ],
)
def test_unanswerable_requests_close_the_connection(
    dispatcher: Dispatcher, request_: FakeRequest
) -> None:
    dispatcher.register(20, 1, 6, echo_names)
    dispatcher.submit(request_)
    assert request_.wait().closed


def test_a_response_of_the_wrong_version_is_not_sent(dispatcher: Dispatcher) -> None:
    async def wrong_version(request: Any, context: RequestContext) -> Any:
        return make_response(20, 1, {"responses": []})

    dispatcher.register(20, 1, 6, wrong_version)
    request = FakeRequest(delete_topics_body("a"))
    dispatcher.submit(request)
    assert request.wait().closed


def test_a_waiting_handler_does_not_hold_up_others(dispatcher: Dispatcher) -> None:
    release = asyncio.Event()

    async def handler(request: Any, context: RequestContext) -> Any:
        if "slow" in request.topic_names:
            await release.wait()
        else:
            release.set()
        return await echo_names(request, context)

    dispatcher.register(20, 1, 6, handler)
    slow, fast = FakeRequest(delete_topics_body("slow")), FakeRequest(delete_topics_body("fast"))
    dispatcher.submit(slow)
    dispatcher.submit(fast)
    assert fast.wait().response is not None
    assert slow.wait().response is not None


def test_submit_after_close_closes_the_connection_without_raising() -> None:
    dispatcher = Dispatcher()
    dispatcher.register(20, 1, 6, echo_names)
    dispatcher.close()
    request = FakeRequest(delete_topics_body("a"))
    dispatcher.submit(request)
    assert request.wait().closed


def test_close_cancels_pending_handlers_and_closes_their_connections() -> None:
    dispatcher = Dispatcher()

    async def forever(request: Any, context: RequestContext) -> Any:
        await asyncio.Event().wait()

    dispatcher.register(20, 1, 6, forever)
    request = FakeRequest(delete_topics_body("a"))
    dispatcher.submit(request)
    dispatcher.run(asyncio.sleep(0.05))
    dispatcher.close()
    assert request.wait().closed


def test_registering_an_api_twice_or_a_bad_range_is_refused(dispatcher: Dispatcher) -> None:
    dispatcher.register(20, 1, 6, echo_names)
    with pytest.raises(ValueError):
        dispatcher.register(20, 1, 6, echo_names)
    with pytest.raises(ValueError):
        dispatcher.register(19, 5, 2, echo_names)


class ServingFakeCore(FakeCore):
    """`krust._core.Core` for server.run: serve() sends one CreateTopics through the bridge
    handler, then SIGTERM to this process, and returns once shutdown() was called."""

    instances: ClassVar[list[ServingFakeCore]] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__()
        self.settings = settings
        self.python_apis: dict[int, tuple[int, int, str]] = {}
        self.answer: FakeRequest | None = None
        self.shut_down = self.closed = False
        ServingFakeCore.instances.append(self)

    def serve(
        self,
        handler: Any,
        python_apis: dict[int, tuple[int, int, str]],
        authorize: Any = None,
        on_listening: Any = None,
    ) -> None:
        self.python_apis = dict(python_apis)
        if on_listening is not None:
            on_listening()
        body = encode_entity(
            build_entity(
                load_request_schema(19, 7),
                {"topics": [{"name": "served", "num_partitions": 1, "replication_factor": 1}]},
            )
        )
        self.answer = FakeRequest(body, api_key=19, api_version=7)
        handler(self.answer)
        self.answer.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + TIMEOUT
        while not self.shut_down and time.monotonic() < deadline:
            time.sleep(0.01)

    def shutdown(self) -> None:
        self.shut_down = True

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def serving_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """server.run gets ServingFakeCore for `krust._core.Core`."""
    fake_module = types.ModuleType("krust._core")
    fake_module.Core = ServingFakeCore  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "krust._core", fake_module)
    monkeypatch.setattr(krust, "_core", fake_module, raising=False)
    ServingFakeCore.instances.clear()


@pytest.mark.usefixtures("serving_core")
def test_server_wires_core_controller_and_bridge(tmp_path: Path) -> None:
    config = load_config(None, {}, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://h:1"])
    ready: list[bool] = []
    previous = signal.getsignal(signal.SIGTERM)

    server.run(config, on_ready=lambda: ready.append(True))

    (core,) = ServingFakeCore.instances
    assert ready == [True]
    assert core.settings["listeners"] == [("PLAINTEXT", "h", 1)]
    expected = {
        19: (2, 7, "forwarded"),
        20: (1, 6, "forwarded"),
        37: (0, 3, "forwarded"),
        67: (0, 0, "controller"),
        56: (2, 3, "controller"),
        62: (0, 4, "controller"),
        63: (0, 1, "controller"),
        43: (0, 2, "forwarded"),
        15: (0, 6, "clients"),
    }
    assert expected.items() <= core.python_apis.items()
    response, _ = entity_reader(load_response_schema(19, 7))(core.answer.response, 0)
    assert response.topics[0].error_code == 0
    assert any(topic["name"] == "served" for topic in core.last_image["topics"])
    assert core.shut_down and core.closed
    assert signal.getsignal(signal.SIGTERM) == previous


def test_a_python_served_request_is_charged_its_running_time_not_its_waiting() -> None:
    charged: list[tuple[str, str, float]] = []

    def charge(user: str, client_id: str, seconds: float) -> int:
        charged.append((user, client_id, seconds))
        return 250

    async def busy_then_parked(request: Any, context: RequestContext) -> Any:
        deadline = time.perf_counter() + 0.05
        while time.perf_counter() < deadline:  # runs: counted
            pass
        await asyncio.sleep(0.3)  # waits (a parked JoinGroup): not counted
        return await echo_names(request, context)

    dispatcher = Dispatcher(charge)
    try:
        dispatcher.register(20, 1, 6, busy_then_parked)
        request = FakeRequest(delete_topics_body("a"))
        dispatcher.submit(request)
        response = decode_response(request.wait().response or b"")
        internal = FakeRequest(delete_topics_body("a"), internal=True)
        dispatcher.submit(internal)
        internal.wait()
    finally:
        dispatcher.close()
    [(user, client_id, seconds)] = charged  # the core's own request is not charged
    assert (user, client_id) == ("ANONYMOUS", "test-client")
    assert 0.05 <= seconds < 0.3
    assert request.throttle_ms == 250
    assert response.throttle_time == datetime.timedelta(milliseconds=250)
    assert internal.throttle_ms == 0


def test_a_request_for_a_reserved_api_waits_for_its_handler_then_is_answered(
    dispatcher: Dispatcher,
) -> None:
    dispatcher.reserve(20, 1, 6, exposure=Exposure.FORWARDED)
    assert dispatcher.core_routes() == {20: (1, 6, "forwarded")}
    early = FakeRequest(delete_topics_body("early"))
    dispatcher.submit(early)
    assert dispatcher.reserved() == {20}
    dispatcher.register(20, 1, 6, echo_names, exposure=Exposure.FORWARDED)
    response = decode_response(early.wait().response or b"")
    assert [r.name for r in response.responses] == ["early"] and not early.closed
    assert dispatcher.reserved() == set()


def test_a_handler_must_fill_its_reservation_exactly(dispatcher: Dispatcher) -> None:
    dispatcher.reserve(20, 1, 6)
    dispatcher.core_routes()
    with pytest.raises(ValueError, match=r"reserved v1\.\.6"):
        dispatcher.register(20, 1, 5, echo_names)
    with pytest.raises(ValueError, match=r"reserved v1\.\.6"):
        dispatcher.register(20, 1, 6, echo_names, exposure=Exposure.INTERNAL)
    # The core routes only the table it was given: an api added later would never be served.
    with pytest.raises(ValueError, match="not reserved"):
        dispatcher.register(19, 2, 7, echo_names)
    dispatcher.register(20, 1, 6, echo_names)
    assert dispatcher.core_routes() == {20: (1, 6, "clients")}


@pytest.mark.usefixtures("serving_core")
def test_the_broker_stops_with_the_error_when_the_coordinators_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = types.ModuleType("krust.group.install")

    def install(ctx: Any) -> None:
        raise ImportError("no coordinator here")

    broken.install = install  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "krust.group.install", broken)
    config = load_config(None, {}, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://h:1"])

    with pytest.raises(ImportError, match="no coordinator here"):
        server.run(config)

    (core,) = ServingFakeCore.instances
    assert core.shut_down and core.closed
    # The CreateTopics the fake core sent while the services were being installed waited for
    # the controller's apis and was answered.
    assert core.answer is not None and core.answer.response is not None


@pytest.fixture
def coordinator_installers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The coordinators' install modules replaced by ones that record that they ran."""
    ran: list[str] = []
    for name in ("krust.group.install", "krust.transaction.install"):
        module = types.ModuleType(name)
        module.install = lambda ctx, name=name: ran.append(name) or name  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, module)
    return ran


def failing_imports(monkeypatch: pytest.MonkeyPatch, module: str, times: int) -> list[str]:
    """Importing `module` fails as it does when the process is out of file descriptors,
    `times` times; returns the failed attempts."""
    failed: list[str] = []
    real_import = importlib.import_module

    def import_(name: str, package: str | None = None) -> Any:
        if name == module and len(failed) < times:
            failed.append(name)
            raise OSError(errno.EMFILE, "Too many open files")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", import_)
    monkeypatch.setattr(deferred_services, "IMPORT_RETRY_S", 0.01)
    return failed


def test_coordinators_that_cannot_be_read_for_want_of_descriptors_load_on_a_later_try(
    monkeypatch: pytest.MonkeyPatch, coordinator_installers: list[str]
) -> None:
    failed = failing_imports(monkeypatch, "krust.group.install", times=2)
    ctx: Any = types.SimpleNamespace()
    installed: list[object] = []

    done = deferred_services.install(
        ctx, deferred_services.COORDINATORS, installed, threading.Event()
    )

    assert done and len(failed) == 2
    assert (
        installed == coordinator_installers == ["krust.transaction.install", "krust.group.install"]
    )


def test_a_stopping_broker_gives_up_reading_the_coordinators(
    monkeypatch: pytest.MonkeyPatch, coordinator_installers: list[str]
) -> None:
    failing_imports(monkeypatch, "krust.group.install", times=1_000_000)
    stopping = threading.Event()
    threading.Timer(0.05, stopping.set).start()
    ctx: Any = types.SimpleNamespace()
    installed: list[object] = []

    done = deferred_services.install(ctx, deferred_services.COORDINATORS, installed, stopping)

    assert not done and installed == coordinator_installers == []
