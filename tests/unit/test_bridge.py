"""The dispatcher: requests from the core's thread answered on the services' event loop."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.delete_topics.v4.response import DeleteTopicsResponse
from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta
from krust.bridge import Dispatcher, RequestContext
from krust.protocol import encode_entity, make_response

from .conftest import FakeRequest


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
    assert seen == [RequestContext(20, 4, 7, "test-client", "127.0.0.1")]


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
