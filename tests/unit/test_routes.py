"""The gate between the core and the services' dispatcher: requests that arrive before the
dispatcher exists are held, then passed on in the order they came; if the services never
start, their connections are closed rather than left waiting."""

from __future__ import annotations

import threading

from krust.bridge.routes import RequestGate


class HeldRequest:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close_connection(self) -> None:
        self.closed = True


def test_requests_before_the_dispatcher_are_passed_on_in_order_then_each_as_it_comes() -> None:
    gate = RequestGate()
    passed: list[str] = []
    early = [HeldRequest(f"early-{n}") for n in range(3)]
    for request in early:
        gate.submit(request)
    assert passed == []

    gate.open(lambda request: passed.append(request.name))
    gate.submit(HeldRequest("late"))

    assert passed == ["early-0", "early-1", "early-2", "late"]
    assert not any(request.closed for request in early)


def test_requests_racing_the_opening_are_neither_lost_nor_reordered() -> None:
    gate = RequestGate()
    passed: list[int] = []
    submitter = threading.Thread(target=lambda: [gate.submit(n) for n in range(10_000)])
    submitter.start()
    gate.open(passed.append)
    submitter.join()

    assert passed == list(range(10_000))


def test_closing_a_gate_that_never_opened_closes_the_held_connections() -> None:
    gate = RequestGate()
    held = [HeldRequest("a"), HeldRequest("b")]
    for request in held:
        gate.submit(request)

    gate.close()

    assert all(request.closed for request in held)
