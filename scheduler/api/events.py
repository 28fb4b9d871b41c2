"""The event recorder: events.k8s.io/v1 Events with client-go's tools/events semantics.

Owns the isomorphic-event cache (one entry per type, action, reason, reporting controller and
instance, regarding and related object), the series it grows (the second occurrence PATCHes
`series: {count: 2}`; later ones only count in memory until the 30-minute refresh or the 6-minute
finish writes them), a bounded queue of events to write (1000, newest dropped when full, as
client-go's broadcaster), a small pool of writers and client-go's retry rule (transport errors:
up to 12 tries, 10 s ± 25 % apart; a status the server returned: never retried, except an
AlreadyExists when a series falls back to a create).

Must never: block or fail its caller (`eventf` only queues), take part in any decision (an Event is
best effort: a pod's condition and binding never wait for one), or write through anything but the
ApiClient it is given (app.py gives it a client with its own small connection pool, so Events
never compete with binds for connections).
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler.api.client import ApiClient, ApiError
from scheduler.logs import Repeats
from scheduler.model.objects import Pod
from scheduler.model.podgroups import PodGroup

log = structlog.get_logger("events")

MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP_SECONDS = 10.0
FINISH_SECONDS = 6 * 60.0
REFRESH_SECONDS = 30 * 60.0
MAX_QUEUED_EVENTS = 1000
NOTE_LENGTH_LIMIT = 1024
TRUNCATED_SUFFIX = " ..."
# Each write is bounded so that a black-holed connection frees its writer (and counts as a
# transport error, like client-go's).
WRITE_TIMEOUT_SECONDS = 30.0
# Concurrent Event writes; app.py gives the event client as many connections.
EVENT_WRITERS = 4

NORMAL = "Normal"
WARNING = "Warning"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def truncate_note(message: str) -> str:
    """kube-scheduler's truncateMessage: at most 1024 bytes, cut ones ending in " ..."."""
    data = message.encode()
    if len(data) <= NOTE_LENGTH_LIMIT:
        return message
    cut = data[: NOTE_LENGTH_LIMIT - len(TRUNCATED_SUFFIX)]
    return cut.decode(errors="ignore") + TRUNCATED_SUFFIX


def micro_time(seconds: float) -> str:
    """metav1.MicroTime's wire form (RFC 3339, microseconds, UTC)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(regarding_name: str, seconds: float) -> str:
    """client-go's GenerateEventName: `<name>.<unix nanoseconds in hex>`, a UUID-like name if invalid."""
    name = f"{regarding_name}.{int(seconds * 1e9):x}"
    if len(name) <= 253 and _DNS_SUBDOMAIN.match(name):
        return name
    return f"{random.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """core/v1 ObjectReference as client-go's reference.GetReference fills it."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    resource_version: str

    @classmethod
    def to_pod(cls, pod: Pod) -> ObjectReference:
        return cls("Pod", pod.namespace, pod.name, pod.uid, "v1", pod.resource_version)

    @classmethod
    def to_object(cls, obj: Pod | PodGroup) -> ObjectReference:
        """A pod, or a PodGroup (pod-group preemption names the group as the preemptor)."""
        if isinstance(obj, PodGroup):
            return cls(obj.kind, obj.namespace, obj.name, obj.uid, obj.api_version, obj.resource_version)
        return cls.to_pod(obj)

    def to_json(self) -> dict[str, str]:
        ref = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "apiVersion": self.api_version,
            "resourceVersion": self.resource_version,
        }
        return {k: v for k, v in ref.items() if v}


@dataclass(frozen=True, slots=True)
class EventKey:
    """What makes two events isomorphic (client-go's eventKey: the note is not part of it)."""

    type: str
    action: str
    reason: str
    reporting_controller: str
    reporting_instance: str
    regarding: ObjectReference
    related: ObjectReference | None


@dataclass(slots=True)
class Event:
    """One events.k8s.io/v1 Event as the recorder keeps it (and writes it)."""

    key: EventKey
    name: str
    namespace: str
    event_time: float
    note: str
    series_count: int = 0  # 0: no series yet
    series_last_observed: float = 0.0

    def body(self) -> dict[str, Any]:
        key = self.key
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "eventTime": micro_time(self.event_time),
            "reportingController": key.reporting_controller,
            "reportingInstance": key.reporting_instance,
            "action": key.action,
            "reason": key.reason,
            "regarding": key.regarding.to_json(),
            "note": self.note,
            "type": key.type,
        }
        if key.related is not None:
            body["related"] = key.related.to_json()
        if self.series_count:
            body["series"] = self.series_patch()["series"]
        return body

    def series_patch(self) -> dict[str, Any]:
        """The two-way strategic merge of this event without and with its series."""
        return {"series": {"count": self.series_count, "lastObservedTime": micro_time(self.series_last_observed)}}

    def snapshot(self) -> Event:
        return Event(
            self.key,
            self.name,
            self.namespace,
            self.event_time,
            self.note,
            self.series_count,
            self.series_last_observed,
        )


class EventRecorder:
    """Records events for one reporting controller (kube-scheduler: one per profile, named after it)."""

    def __init__(self, broadcaster: EventBroadcaster, reporting_controller: str, reporting_instance: str) -> None:
        self._broadcaster = broadcaster
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance

    def eventf(
        self,
        regarding: Pod | PodGroup,
        related: Pod | PodGroup | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """Queue an event; returns at once and never raises (events are best effort)."""
        if event_type not in (NORMAL, WARNING):
            log.error("unsupported event type", event_type=event_type, reason=reason)
            return
        ref = ObjectReference.to_object(regarding)
        key = EventKey(
            event_type,
            action,
            reason,
            self.reporting_controller,
            self.reporting_instance,
            ref,
            ObjectReference.to_object(related) if related is not None else None,
        )
        now = self._broadcaster.clock()
        self._broadcaster.submit(Event(key, event_name(ref.name, now), ref.namespace or "default", now, note))


class EventBroadcaster:
    """The sink side: the isomorphic cache, the write queue, its writers and the series upkeep."""

    def __init__(
        self,
        client: ApiClient,
        *,
        writers: int = EVENT_WRITERS,
        max_queued: int = MAX_QUEUED_EVENTS,
        retry_sleep: float = RETRY_SLEEP_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._writers = writers
        self._queue: asyncio.Queue[tuple[Event, int]] = asyncio.Queue(maxsize=max_queued)
        self._retry_sleep = retry_sleep
        self.clock = clock
        self.cache: dict[EventKey, Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._retries: set[asyncio.Task[None]] = set()
        self._running_writers = 0
        self._closed = False
        self.dropped = 0
        self._failures = Repeats()  # by HTTP status, and "unreachable"

    def new_recorder(self, reporting_controller: str) -> EventRecorder:
        """reportingInstance as kube-scheduler's: `<controller>-<hostname>`."""
        return EventRecorder(self, reporting_controller, f"{reporting_controller}-{socket.gethostname()}")

    # ---- queueing ------------------------------------------------------------------------

    def submit(self, event: Event) -> None:
        """Fold the event into its isomorphic one; queue what has to be written."""
        if self._closed:
            return
        cached = self.cache.get(event.key)
        if cached is None:
            self.cache[event.key] = event
            self._enqueue(event.snapshot(), 0)
            return
        first_repeat = cached.series_count == 0
        cached.series_count = 2 if first_repeat else cached.series_count + 1
        cached.series_last_observed = event.event_time
        if first_repeat:
            self._enqueue(cached.snapshot(), 0)

    def _enqueue(self, event: Event, tries: int) -> None:
        try:
            self._queue.put_nowait((event, tries))
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full, events dropped", dropped=self.dropped, reason=event.key.reason)
            return
        if self._running_writers < self._writers:
            self._running_writers += 1
            self._spawn(self._write_queued())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _write_queued(self) -> None:
        try:
            while not self._queue.empty():
                event, tries = self._queue.get_nowait()
                if not await self._record(event):
                    continue
                if tries + 1 >= MAX_TRIES_PER_EVENT:
                    log.error(
                        "unable to write event (retry limit exceeded)", event_name=event.name, reason=event.key.reason
                    )
                    continue
                retry = self._spawn(self._retry_later(event, tries + 1))
                self._retries.add(retry)
                retry.add_done_callback(self._retries.discard)
        finally:
            self._running_writers -= 1

    async def _retry_later(self, event: Event, tries: int) -> None:
        await asyncio.sleep(self._retry_sleep * random.uniform(1.0, 1.25))
        if not self._closed:
            self._enqueue(event, tries)

    # ---- writing -------------------------------------------------------------------------

    async def _record(self, event: Event) -> bool:
        """One attempt at writing the event (client-go's recordEvent); True means retry later."""
        is_series = event.series_count > 0
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_SECONDS):
                if is_series:
                    try:
                        await self._client.patch_event(event.namespace, event.name, event.series_patch())
                        return False
                    except ApiError as exc:
                        if not exc.not_found:
                            raise
                await self._client.create_event(event.namespace, event.body())
            return False
        except ApiError as exc:
            if exc.status == 0:
                self._unreachable(event, str(exc))
                return True
            if exc.conflict and exc.reason == "AlreadyExists" and is_series:
                return True
            self._rejected(event, exc)
            return False
        except TimeoutError:
            self._unreachable(event, f"timed out after {WRITE_TIMEOUT_SECONDS:.0f} s")
            return True
        except Exception as exc:  # a writer must never die: the queue behind it would stall
            log.error("unable to write event", event_name=event.name, error=str(exc), exc_info=True)
            return False

    def _unreachable(self, event: Event, error: str) -> None:
        seen = self._failures.count("unreachable")
        if seen is not None:
            log.warning(
                "unable to write event (may retry after sleeping)", event_name=event.name, error=error, failed=seen
            )

    def _rejected(self, event: Event, exc: ApiError) -> None:
        """Log the first rejection per HTTP status, then every 100th: a denied verb fails every event."""
        seen = self._failures.count(exc.status)
        if seen is not None:
            log.warning(
                "server rejected event (will not retry)",
                event_name=event.name,
                reason=event.key.reason,
                regarding=f"{event.key.regarding.namespace}/{event.key.regarding.name}",
                error=str(exc),
                rejected=seen,
            )

    # ---- series upkeep -------------------------------------------------------------------

    async def refresh_series(self) -> None:
        """Re-write every series with its current count (client-go's 30-minute heartbeat)."""
        for event in list(self.cache.values()):
            if event.series_count:
                await self._record(event.snapshot())

    async def finish_series(self) -> None:
        """Write out series quiet for 6 minutes and forget them; forget single events that old."""
        horizon = self.clock() - FINISH_SECONDS
        for key, event in list(self.cache.items()):
            if event.series_count:
                if event.series_last_observed < horizon and not await self._record(event.snapshot()):
                    self.cache.pop(key, None)
            elif event.event_time < horizon:
                self.cache.pop(key, None)

    async def run(self) -> None:
        """The periodic upkeep, as client-go starts it with the sink (both run at once, then on period)."""
        loop = asyncio.get_running_loop()
        next_refresh = next_finish = loop.time()
        while True:
            now = loop.time()
            if now >= next_finish:
                await self.finish_series()
                next_finish = loop.time() + FINISH_SECONDS
            if now >= next_refresh:
                await self.refresh_series()
                next_refresh = loop.time() + REFRESH_SECONDS
            await asyncio.sleep(max(0.0, min(next_finish, next_refresh) - loop.time()))

    # ---- lifecycle -----------------------------------------------------------------------

    async def drain(self) -> None:
        """Wait until every queued event (and every pending retry) has been written or dropped."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        """Shut down as client-go's broadcaster does: accept nothing more, drop what is queued and
        every pending retry; only the writes in flight finish (each bounded by WRITE_TIMEOUT_SECONDS)."""
        self._closed = True
        while not self._queue.empty():
            self._queue.get_nowait()
        for task in list(self._retries):
            task.cancel()
