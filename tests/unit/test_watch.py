"""The Reflector's relist against the fake client: pages (limit/continue), replace semantics, the
expired-token fallback, and slices of bounded work between yields to the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.api.watch import DISPATCH_SLICE_SECONDS, Reflector

NODES = "/api/v1/nodes"


def node(name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.deleted = asyncio.Event()

    def __call__(self, kind: str, obj: Mapping[str, Any]) -> None:
        self.events.append((kind, obj["metadata"]["name"]))
        if kind == "DELETED":
            self.deleted.set()


def fake_with(count: int, path: str = NODES) -> FakeApiClient:
    return FakeApiClient(collections={path: [node(f"n{i}") for i in range(count)]}, list_resource_version="77")


async def test_a_list_asks_for_pages_of_500_and_hands_over_every_object() -> None:
    fake = fake_with(1234)
    seen = Recorder()
    reflector = Reflector(fake, NODES, seen)
    await reflector.list()
    assert seen.events == [("ADDED", f"n{i}") for i in range(1234)]
    assert [read.split("?")[1].split("&")[0] for read in fake.reads] == ["limit=500"] * 3
    # The second and third pages continue the first; the token is quoted ("=" in base64).
    assert "continue=" not in fake.reads[0]
    assert all("&continue=" in read and "%3D" in read for read in fake.reads[1:])
    assert reflector.resource_version == "77"
    assert reflector.relists == 1


async def test_a_collection_path_with_a_query_keeps_it() -> None:
    path = "/api/v1/pods?fieldSelector=status.phase!%3DSucceeded"
    fake = fake_with(3, path)
    reflector = Reflector(fake, path, Recorder(), page_size=2)
    await reflector.list()
    assert fake.reads[0] == f"{path}&limit=2"
    assert fake.reads[1].startswith(f"{path}&limit=2&continue=")
    assert len(fake.reads) == 2


async def test_a_relist_deletes_what_vanished_and_adds_what_appeared_across_pages() -> None:
    fake = fake_with(1200)
    seen = Recorder()
    reflector = Reflector(fake, NODES, seen)
    await reflector.list()
    items = fake.collections[NODES]
    del items[1100]  # on the third page
    del items[3]  # on the first
    items.append(node("new"))
    fake.list_resource_version = "90"
    seen.events.clear()
    await reflector.list()
    assert sorted(e for e in seen.events if e[0] == "DELETED") == [("DELETED", "n1100"), ("DELETED", "n3")]
    assert seen.events[-3] == ("ADDED", "new")
    assert sum(kind == "ADDED" for kind, _ in seen.events) == 1199
    assert reflector.resource_version == "90"


async def test_an_expired_continue_token_falls_back_to_one_full_list() -> None:
    fake = fake_with(1200)
    fake.continue_errors.append(ApiError(410, "The provided continue parameter is too old", "Expired"))
    seen = Recorder()
    reflector = Reflector(fake, NODES, seen)
    await reflector.list()
    assert len(fake.reads) == 3
    assert fake.reads[2] == NODES  # no limit: the whole collection at once, as client-go's pager
    assert seen.events == [("ADDED", f"n{i}") for i in range(1200)]  # each once: nothing before the last page
    assert reflector.resource_version == "77"


async def test_a_list_that_fails_half_way_tells_the_handler_nothing() -> None:
    fake = fake_with(1200)
    seen = Recorder()
    reflector = Reflector(fake, NODES, seen)
    await reflector.list()
    seen.events.clear()
    del fake.collections[NODES][0]
    fake.continue_errors.append(ApiError(500, "etcd is down", "InternalError"))
    with pytest.raises(ApiError, match="etcd is down"):
        await reflector.list()
    assert seen.events == []
    assert reflector.relists == 1
    await reflector.list()
    assert ("DELETED", "n0") in seen.events


class SlowHandler:
    """A handler that works `cost` seconds per object, and a ticker task counting how many calls
    run between two turns of the event loop (`between`: one count per turn)."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.between = [0]
        self.last: str | None = None

    def __call__(self, kind: str, obj: Mapping[str, Any]) -> None:
        until = time.perf_counter() + self.cost
        while time.perf_counter() < until:
            pass
        self.between[-1] += 1
        self.last = obj["metadata"]["name"]

    async def tick(self) -> None:
        while True:
            self.between.append(0)
            await asyncio.sleep(0)


async def test_a_large_page_is_handed_over_in_slices_that_let_other_tasks_run() -> None:
    """A page the server did not cut (or a full list after an expired token) must not hold the loop
    either: the handler's work is cut into slices of DISPATCH_SLICE_SECONDS."""
    count, cost = 2000, 0.0002
    fake = fake_with(count)
    handler = SlowHandler(cost)
    reflector = Reflector(fake, NODES, handler, page_size=count)
    ticking = asyncio.create_task(handler.tick())
    try:
        await reflector.list()
    finally:
        ticking.cancel()
        await asyncio.gather(ticking, return_exceptions=True)
    assert len(fake.reads) == 1
    assert sum(handler.between) == count
    # 0.4 s of handler work; no stretch longer than a slice (plus the call that crosses its end).
    assert max(handler.between) <= DISPATCH_SLICE_SECONDS / cost + 1
    assert len(handler.between) >= count * cost / DISPATCH_SLICE_SECONDS


async def test_a_watch_that_expires_relists_in_pages() -> None:
    fake = fake_with(700)
    seen = Recorder()
    reflector = Reflector(fake, NODES, seen)
    await reflector.list()
    del fake.collections[NODES][650]
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    fake.watch_events[NODES] = [[gone]]
    fake.reads.clear()
    task = asyncio.create_task(reflector.run(listed=True))
    try:
        await asyncio.wait_for(seen.deleted.wait(), timeout=10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert "watch=1" in fake.reads[0] and "resourceVersion=77" in fake.reads[0]
    assert [read.split("?")[1][:9] for read in fake.reads[1:3]] == ["limit=500", "limit=500"]
    assert seen.events[-1] == ("DELETED", "n650")
    assert reflector.relists == 2


async def test_a_burst_of_watch_events_is_handed_over_in_slices_that_let_other_tasks_run() -> None:
    """A read that brings hundreds of events (churn, a 10000-member gang's updates), each handler
    costly (a bound pod's event runs hints over the waiting pods): the loop is let run between
    slices of DISPATCH_SLICE_SECONDS, so a lease renewal, a probe or SIGTERM never waits for the
    whole burst (StarvationPodGroup's scheduler missed its SIGTERM)."""
    count, cost = 2000, 0.0002
    fake = FakeApiClient(collections={NODES: []}, list_resource_version="5")
    fake.watch_events[NODES] = [[{"type": "ADDED", "object": node(f"n{i}", str(10 + i))} for i in range(count)]]
    handler = SlowHandler(cost)
    reflector = Reflector(fake, NODES, handler)
    await reflector.list()
    ticking = asyncio.create_task(handler.tick())
    watching = asyncio.create_task(reflector.watch_once())
    try:
        async with asyncio.timeout(10):
            while handler.last != f"n{count - 1}":  # noqa: ASYNC110 - the ticker must run too
                await asyncio.sleep(0.01)
    finally:
        for task in (watching, ticking):
            task.cancel()
        await asyncio.gather(watching, ticking, return_exceptions=True)
    assert sum(handler.between) == count
    assert max(handler.between) <= DISPATCH_SLICE_SECONDS / cost + 1
    assert reflector.resource_version == str(10 + count - 1)
