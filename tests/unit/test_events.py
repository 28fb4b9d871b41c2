"""The events.k8s.io/v1 recorder against the fake ApiClient (client-go tools/events semantics).

Cases ported from client-go v0.37.2 tools/events/eventseries_test.go (TestEventSeriesf,
TestEventSeriesWithEventSinkImplRace, TestFinishSeries, TestRefreshExistingEventSeries) plus
kube-scheduler's truncateMessage.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from scheduler.api.client import ApiError
from scheduler.api.events import (
    FINISH_SECONDS,
    MAX_TRIES_PER_EVENT,
    NOTE_LENGTH_LIMIT,
    EventBroadcaster,
    event_name,
    micro_time,
    truncate_note,
)
from scheduler.api.fake import FakeApiClient
from scheduler.model.objects import Pod


def pod(name: str = "foo", rv: str = "1") -> Pod:
    return Pod.from_raw(
        {
            "metadata": {"name": name, "namespace": "baz", "uid": f"uid-{name}", "resourceVersion": rv},
            "spec": {"containers": []},
        }
    )


class Clock:
    """Wall-clock seconds that a test moves; each reading adds a microsecond (distinct event names)."""

    def __init__(self, now: float = 1_764_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


def setup(**kwargs: Any) -> tuple[EventBroadcaster, FakeApiClient, Clock]:
    client = FakeApiClient()
    clock = Clock()
    return EventBroadcaster(client, retry_sleep=0.0, clock=clock, **kwargs), client, clock


def only_event(client: FakeApiClient) -> dict[str, Any]:
    assert len(client.stored_events) == 1, client.stored_events
    return next(iter(client.stored_events.values()))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("short", "short"),
        ("x" * NOTE_LENGTH_LIMIT, "x" * NOTE_LENGTH_LIMIT),
        ("x" * (NOTE_LENGTH_LIMIT + 1), "x" * (NOTE_LENGTH_LIMIT - 4) + " ..."),
        # kube counts bytes; a multi-byte character cut in half is dropped, never half-written.
        ("é" * 600, "é" * 510 + " ..."),
    ],
)
def test_truncate_note_as_kube_scheduler(message: str, expected: str) -> None:
    assert truncate_note(message) == expected
    assert len(truncate_note(message).encode()) <= NOTE_LENGTH_LIMIT


def test_event_name_and_micro_time() -> None:
    assert event_name("foo", 1.5) == f"foo.{1_500_000_000:x}"
    assert len(event_name("x" * 250, 1.5)) == 32  # too long for a name: random hex, as client-go's UUID
    assert micro_time(1_764_000_000.25) == "2025-11-24T16:00:00.250000Z"


async def test_first_event_is_created_with_kube_fields() -> None:
    broadcaster, client, clock = setup()
    recorder = broadcaster.new_recorder("my-scheduler")
    recorder.eventf(pod(), None, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes are available")
    recorded_at = clock.now
    await broadcaster.drain()
    event = only_event(client)
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["metadata"] == {"name": event_name("foo", recorded_at), "namespace": "baz"}
    assert event["eventTime"] == micro_time(recorded_at)
    assert event["reportingController"] == "my-scheduler"
    assert event["reportingInstance"] == f"my-scheduler-{socket.gethostname()}"
    assert event["action"] == "Scheduling"
    assert event["reason"] == "FailedScheduling"
    assert event["type"] == "Warning"
    assert event["note"] == "0/1 nodes are available"
    assert event["regarding"] == {
        "kind": "Pod",
        "namespace": "baz",
        "name": "foo",
        "uid": "uid-foo",
        "apiVersion": "v1",
        "resourceVersion": "1",
    }
    assert "series" not in event and "related" not in event


async def test_isomorphic_event_becomes_a_series_and_later_ones_count_in_memory() -> None:
    """TestEventSeriesf: the 2nd isomorphic event PATCHes series count 2; the note is not part of the key."""
    broadcaster, client, clock = setup()
    recorder = broadcaster.new_recorder("eventTest")
    recorder.eventf(pod(), None, "Normal", "test", "started", "some verbose message: 1")
    await broadcaster.drain()
    clock.now += 5
    recorder.eventf(pod(), None, "Normal", "test", "started", "some verbose message: 2")
    await broadcaster.drain()
    event = only_event(client)
    assert event["series"] == {"count": 2, "lastObservedTime": micro_time(clock.now)}
    assert event["note"] == "some verbose message: 1"
    assert client.event_writes == 2
    for _ in range(4):  # six in all: no more writes until the series upkeep
        clock.now += 5
        recorder.eventf(pod(), None, "Normal", "test", "started", "again")
    await broadcaster.drain()
    assert client.event_writes == 2
    assert only_event(client)["series"]["count"] == 2
    await broadcaster.refresh_series()  # TestRefreshExistingEventSeries: the heartbeat writes the count
    assert only_event(client)["series"] == {"count": 6, "lastObservedTime": micro_time(clock.now)}
    assert len(broadcaster.cache) == 1


async def test_non_isomorphic_events_are_separate() -> None:
    broadcaster, client, _ = setup()
    recorder = broadcaster.new_recorder("eventTest")
    recorder.eventf(pod(), None, "Normal", "test", "started", "m")
    recorder.eventf(pod(), None, "Normal", "test", "stopped", "m")  # other action
    recorder.eventf(pod(rv="2"), None, "Normal", "test", "started", "m")  # other resourceVersion
    broadcaster.new_recorder("other").eventf(pod(), None, "Normal", "test", "started", "m")  # other controller
    recorder.eventf(pod(), pod("bar"), "Normal", "test", "started", "m")  # a related object
    await broadcaster.drain()
    assert len(client.events) == 5
    assert all("series" not in e for e in client.stored_events.values())


async def test_two_identical_events_in_a_row_make_one_series() -> None:
    """TestEventSeriesWithEventSinkImplRace: queued before any write, still one Event with a series."""
    broadcaster, client, _ = setup()
    recorder = broadcaster.new_recorder("test")
    recorder.eventf(pod(), None, "Normal", "reason", "action", "")
    recorder.eventf(pod(), None, "Normal", "reason", "action", "")
    await broadcaster.drain()
    assert only_event(client)["series"]["count"] == 2


async def test_series_whose_event_is_gone_is_created_again() -> None:
    broadcaster, client, _ = setup()
    recorder = broadcaster.new_recorder("test")
    recorder.eventf(pod(), None, "Normal", "reason", "action", "m")
    await broadcaster.drain()
    client.stored_events.clear()  # the apiserver's event TTL expired it
    recorder.eventf(pod(), None, "Normal", "reason", "action", "m")
    await broadcaster.drain()
    assert only_event(client)["series"]["count"] == 2
    assert len(client.events) == 2


async def test_finish_series_writes_quiet_series_and_forgets_old_events() -> None:
    """TestFinishSeries: a series quiet for 6 minutes is written and dropped; a fresh one stays."""
    broadcaster, client, clock = setup()
    quiet = broadcaster.new_recorder("quiet")
    active = broadcaster.new_recorder("active")
    single = broadcaster.new_recorder("single")
    for _ in range(10):
        quiet.eventf(pod(), None, "Normal", "test", "started", "m")
    single.eventf(pod(), None, "Normal", "test", "started", "m")
    await broadcaster.drain()
    clock.now += FINISH_SECONDS + 180
    active.eventf(pod(), None, "Normal", "test", "started", "m")
    active.eventf(pod(), None, "Normal", "test", "started", "m")
    await broadcaster.drain()
    writes = client.event_writes
    await broadcaster.finish_series()
    assert client.event_writes == writes + 1
    quiet_event = next(e for e in client.stored_events.values() if e["reportingController"] == "quiet")
    assert quiet_event["series"]["count"] == 10
    assert [k.reporting_controller for k in broadcaster.cache] == ["active"]
    # Forgotten: the next one starts a new Event.
    quiet.eventf(pod(), None, "Normal", "test", "started", "m")
    await broadcaster.drain()
    assert sum(e["reportingController"] == "quiet" for e in client.stored_events.values()) == 2


async def test_a_refused_event_is_not_retried() -> None:
    broadcaster, client, _ = setup()
    client.refuse_events = ApiError(403, 'events.events.k8s.io is forbidden: User "x" cannot create', "Forbidden")
    broadcaster.new_recorder("test").eventf(pod(), None, "Warning", "FailedScheduling", "Scheduling", "m")
    await broadcaster.drain()
    assert client.event_writes == 1
    assert client.events == []


async def test_transport_errors_are_retried_up_to_twelve_tries() -> None:
    broadcaster, client, _ = setup()
    client.event_errors = [ApiError(0, "connection refused")] * 3
    broadcaster.new_recorder("test").eventf(pod(), None, "Normal", "Scheduled", "Binding", "m")
    await broadcaster.drain()
    assert client.event_writes == 4
    assert len(client.events) == 1
    client.event_errors = [ApiError(0, "connection refused")] * 50
    broadcaster.new_recorder("test").eventf(pod("other"), None, "Normal", "Scheduled", "Binding", "m")
    await broadcaster.drain()
    assert client.event_writes == 4 + MAX_TRIES_PER_EVENT
    assert len(client.events) == 1


async def test_a_full_queue_drops_events_without_blocking() -> None:
    broadcaster, client, _ = setup(writers=1, max_queued=3)
    client.event_gate = asyncio.Event()
    recorder = broadcaster.new_recorder("test")
    for i in range(10):
        recorder.eventf(pod(f"p{i}"), None, "Normal", "Scheduled", "Binding", "m")
    await asyncio.sleep(0)  # the writer takes one event and waits on the slow apiserver
    assert broadcaster.dropped == 7
    client.event_gate.set()
    await broadcaster.drain()
    assert len(client.events) == 3


async def test_close_drops_queued_events_and_pending_retries() -> None:
    client = FakeApiClient()
    broadcaster = EventBroadcaster(client, retry_sleep=3600.0)
    client.event_errors = [ApiError(0, "connection refused")]
    broadcaster.new_recorder("test").eventf(pod(), None, "Normal", "Scheduled", "Binding", "m")
    await asyncio.sleep(0)  # written once, failed, waiting to retry
    client.event_gate = asyncio.Event()
    for i in range(10):
        broadcaster.new_recorder("test").eventf(pod(f"q{i}"), None, "Normal", "Scheduled", "Binding", "m")
    await asyncio.sleep(0)  # some writers are on the wire, the rest of the events queued
    in_flight = client.event_writes - 1
    broadcaster.close()
    client.event_gate.set()
    await asyncio.wait_for(broadcaster.drain(), timeout=5)
    assert client.event_writes == 1 + in_flight
    assert len(client.events) == in_flight < 10
    broadcaster.new_recorder("test").eventf(pod("after"), None, "Normal", "Scheduled", "Binding", "m")
    await broadcaster.drain()
    assert client.event_writes == 1 + in_flight


async def test_the_upkeep_finishes_and_refreshes_series_when_it_starts() -> None:
    """As client-go's StartRecordingToSink: both loops run at once, then on their periods."""
    broadcaster, client, clock = setup()
    recorder = broadcaster.new_recorder("test")
    for _ in range(3):
        recorder.eventf(pod(), None, "Normal", "test", "started", "m")
    await broadcaster.drain()
    clock.now += FINISH_SECONDS + 1
    upkeep = asyncio.ensure_future(broadcaster.run())
    try:
        for _ in range(10):
            await asyncio.sleep(0)
    finally:
        upkeep.cancel()
        await asyncio.gather(upkeep, return_exceptions=True)
    assert only_event(client)["series"]["count"] == 3
    assert broadcaster.cache == {}
