"""The HTTP client's request timeout counts the time its event loop could run, not the time a long
synchronous scheduling cycle held it: a 1000-member gang simulated over 50 placements held the loop
for ~45 s, and the binds of the gang before it, answered meanwhile, timed out and were retried."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

import pytest
from aiohttp import web
from kubernetes import client as k8s_client

from scheduler.api.client import ApiError
from scheduler.api.http import Connection, HttpApiClient, LoopStalls, within
from tests.unit.local_http import serve


def _hold_the_loop(seconds: float) -> None:
    """A synchronous scheduling cycle: nothing else on the loop runs meanwhile."""
    time.sleep(seconds)


async def _server(delay: float) -> tuple[web.AppRunner, str]:
    async def answer(_request: web.Request) -> web.Response:
        await asyncio.sleep(delay)
        return web.json_response({"kind": "Status", "status": "Success"})

    return await serve("POST", "/bind", answer)


def _client(host: str, timeout: float) -> HttpApiClient:
    configuration = k8s_client.Configuration()
    configuration.host = host
    return HttpApiClient(Connection(configuration), request_timeout=timeout)


async def test_a_request_answered_while_the_loop_was_held_is_not_timed_out() -> None:
    runner, host = await _server(0.05)
    client = _client(host, 0.5)
    try:
        request = asyncio.ensure_future(client.request("POST", "/bind", {}))
        await asyncio.sleep(0.01)  # sent
        _hold_the_loop(1.2)  # a scheduling cycle holding the loop for longer than the timeout
        assert await request == {"kind": "Status", "status": "Success"}
    finally:
        await client.close()
        await runner.cleanup()


async def test_a_server_slower_than_the_timeout_still_times_out() -> None:
    runner, host = await _server(5.0)
    client = _client(host, 0.4)
    try:
        began = time.monotonic()
        with pytest.raises(ApiError, match="timed out"):
            await client.request("POST", "/bind", {}, max_retries=0)
        assert time.monotonic() - began < 2.0
    finally:
        await client.close()
        await runner.cleanup()


async def test_within_counts_only_the_time_the_loop_ran() -> None:
    stalls = LoopStalls()
    never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(within(0.6, never, stalls))
    await asyncio.sleep(0.05)
    _hold_the_loop(1.0)  # held: not counted
    await asyncio.sleep(0.2)
    assert not waiting.done()
    assert stalls.total >= 1.0 - LoopStalls.TICK  # counted from the tick that was due
    with pytest.raises(TimeoutError):
        await waiting  # then the rest of its 0.6 s of loop time runs out
    assert never.cancelled()


async def test_within_returns_as_soon_as_the_result_is_there() -> None:
    async def quick() -> int:
        await asyncio.sleep(0.01)
        return 7

    assert await within(5.0, quick(), LoopStalls()) == 7


async def _cancelled_slowly(cleaning: asyncio.Event, seconds: float, fails_with: Exception | None = None) -> int:
    """A request whose cancellation takes `seconds` (a connection's cleanup), `cleaning` set when
    it starts. With `fails_with` it outlasts further cancellations and then ends with that error
    instead (aiohttp turns a cancelled connect into a timeout)."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        cleaning.set()
        if fails_with is None:
            await asyncio.sleep(seconds)
            raise
        loop = asyncio.get_running_loop()
        ends = loop.time() + seconds
        while loop.time() < ends:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)
        raise fails_with from None
    return 1


async def test_within_does_not_swallow_its_callers_cancellation_while_it_cleans_up() -> None:
    """Timed out, `within` waits for the request it cancelled; the caller cancelled meanwhile ends
    cancelled, not with the TimeoutError."""
    cleaning = asyncio.Event()
    caller = asyncio.ensure_future(within(0.05, _cancelled_slowly(cleaning, 0.3), LoopStalls()))
    await cleaning.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert caller.cancelled()


async def test_a_cancelled_caller_ends_cancelled_and_its_request_logs_no_unretrieved_error() -> None:
    """Shutdown cancels a bind while it waits; the request, cancelled in turn, fails on its own
    (aiohttp turns a cancelled connect into a timeout). The caller ends cancelled, not with the
    request's error, and asyncio logs no "Task exception was never retrieved" for the request."""
    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(str(context.get("message"))))
    cleaning = asyncio.Event()

    try:
        request = _cancelled_slowly(cleaning, 0.2, ConnectionError("connect timed out"))
        caller = asyncio.ensure_future(within(0.05, request, LoopStalls()))
        await cleaning.wait()
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        assert caller.cancelled()  # not the request's ConnectionError
        await asyncio.sleep(0.4)  # the left-behind request ends
        del caller
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(None)
