"""The per-pod status writes of failed scheduling attempts, as kube's api_dispatcher keeps them.

Owns: the PodScheduled=False condition (and status.nominatedNodeName) a failed attempt writes, and
the FailedScheduling event that goes with it. One pending write per pod: a newer report supersedes
the one not yet sent, waits for the one on the wire, and a bind settles them first so that a stale
condition never lands after the pod was bound. At most `max_in_flight` patches are on the wire.

Must never: hold a condition back behind a refused or slow Event (the recorder only queues), write
anything but through the ApiClient, or decide about scheduling (it reports what it is told).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler.api.client import ApiClient, ApiError
from scheduler.api.events import WARNING, EventRecorder, truncate_note
from scheduler.logs import Repeats
from scheduler.model.objects import InvalidObject, Pod

log = structlog.get_logger("scheduler")

# kube's retry.DefaultBackoff, which its PatchPodStatus retries with: 4 tries, 10 ms x5, 10 % jitter.
PATCH_STATUS_TRIES = 4
PATCH_STATUS_BACKOFF = (0.010, 0.050, 0.250)


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def patch_retriable(error: ApiError) -> bool:
    """kube's RetriableWithConflict: internal error, unavailable, no connection, conflict."""
    return error.status in (0, 409, 500, 503)


def pod_scheduled_condition(pod: Pod, reason: str, message: str, now: str) -> dict[str, Any] | None:
    """The PodScheduled=False condition to write, or None when the pod already carries it.

    kube's UpdatePodCondition: lastTransitionTime kept while the status does not change; unchanged
    means same status, reason, message, lastProbeTime and lastTransitionTime (observedGeneration is
    not compared). observedGeneration is the pod's generation (PodObservedGenerationTracking, GA).
    """
    condition: dict[str, Any] = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    generation = (pod.raw.get("metadata") or {}).get("generation")
    if isinstance(generation, int) and generation > 0:
        condition["observedGeneration"] = generation
    old = next(
        (c for c in (pod.raw.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"), None
    )
    if old is None:
        return condition
    if old.get("status") == "False":
        condition["lastTransitionTime"] = old.get("lastTransitionTime")
    unchanged = (
        old.get("status") == "False"
        and old.get("reason") == reason
        and old.get("message") == message
        and old.get("lastProbeTime") is None
    )
    return None if unchanged else condition


@dataclasses.dataclass(slots=True)
class _StatusReport:
    """A pod's pending PodScheduled=False write; `writing` while a request is on the wire."""

    uid: str
    pod: Pod
    reason: str
    message: str
    nominated: str | None  # None: leave status.nominatedNodeName alone; "" clears it
    previous: _StatusReport | None
    writing: bool = False
    superseded: bool = False
    event_recorded: bool = False
    task: asyncio.Task[None] | None = None


class StatusDispatcher:
    """Failure reports of pods, one pending write per pod, written as tasks the owner tracks.

    `pending_pods` is the informers' latest view of the unscheduled pods (read to patch from the
    newest version; a patched pod the apiserver returned is adopted into it while the informer lags).
    `spawn` hands each write task to the owner, who waits for them on shutdown.
    """

    def __init__(
        self,
        client: ApiClient,
        pending_pods: MutableMapping[str, Pod],
        recorders: Mapping[str, EventRecorder],
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
        max_in_flight: int = 64,
    ) -> None:
        self._client = client
        self._pending_pods = pending_pods
        self._recorders = recorders
        self._spawn = spawn
        self._writes = asyncio.Semaphore(max_in_flight)
        self._reports: dict[str, _StatusReport] = {}
        self._failures = Repeats()

    def report(self, pod: Pod, reason: str, message: str, nominated: str | None) -> None:
        """FailedScheduling event (queued, best effort) and, independently, the PodScheduled=False
        condition (and nominatedNodeName: None leaves it, "" clears it)."""
        previous = self._reports.get(pod.uid)
        if previous is not None and previous.task is not None and not previous.task.done():
            previous.superseded = True
            if not previous.writing:
                previous.task.cancel()
                previous = previous.previous
        else:
            previous = None
        report = _StatusReport(pod.uid, pod, reason, message, nominated, previous)
        if previous is None:
            self._record_event(report)
        self._reports[pod.uid] = report
        report.task = self._spawn(self._write(report))
        # Even a report cancelled before it ran (superseded, or settled by a bind) has its event.
        report.task.add_done_callback(lambda _: self._record_event(report))

    async def settle(self, uid: str) -> None:
        """Before the pod is bound: cancel its pending report, or wait for the request of it already
        on the wire (its retries are dropped)."""
        report = self._reports.pop(uid, None)
        while report is not None:
            report.superseded = True
            if report.task is not None and not report.task.done():
                if not report.writing:
                    report.task.cancel()
                await asyncio.wait([report.task])
            report = report.previous

    def _record_event(self, report: _StatusReport) -> None:
        """The FailedScheduling event, about the latest view of the pod: like kube-scheduler's (whose
        status patch is synchronous), it regards the pod as the previous report left it."""
        if report.event_recorded:
            return
        report.event_recorded = True
        latest = self._pending_pods.get(report.uid)
        pod = latest if latest is not None and not latest.node_name else report.pod
        recorder = self._recorders.get(pod.scheduler_name)
        if recorder is not None:
            recorder.eventf(pod, None, WARNING, "FailedScheduling", "Scheduling", truncate_note(report.message))

    async def _write(self, report: _StatusReport) -> None:
        try:
            if report.previous is not None and report.previous.task is not None:
                # A write of this pod is on the wire: the event and the patch follow it.
                await asyncio.wait([report.previous.task])
                report.previous = None
                self._record_event(report)
            await self._patch(report)
        finally:
            if self._reports.get(report.uid) is report:
                del self._reports[report.uid]

    def _adopt_written(self, sent_from: Pod, written: Mapping[str, Any] | None) -> None:
        """Take the pod the apiserver returned for our patch as the pending view while the informer
        has not moved past the version the patch was made from: the next report then regards and
        patches the pod as it is (kube-scheduler's synchronous patch gives it the same view)."""
        latest = self._pending_pods.get(sent_from.uid)
        if written is None or latest is None or latest.resource_version != sent_from.resource_version:
            return
        try:
            self._pending_pods[sent_from.uid] = Pod.from_raw(written)
        except InvalidObject:
            return

    async def _patch(self, report: _StatusReport) -> None:
        """kube's updatePod + PatchPodStatus: skip what the pod already says, retry transient errors.

        Each try computes the patch from the informer's latest view of the pod and sends it with that
        view's resourceVersion, so a pod bound (or changed) since gets a 409 instead of a stale
        PodScheduled=False over its PodScheduled=True; the next try sees the newer view.
        """
        for attempt in range(PATCH_STATUS_TRIES):
            if attempt:
                delay = PATCH_STATUS_BACKOFF[attempt - 1]
                await asyncio.sleep(delay + random.uniform(0, 0.1 * delay))
            pod = self._pending_pods.get(report.uid, report.pod if attempt == 0 else None)
            if pod is None or pod.node_name or report.superseded:
                return  # deleted, bound, or a newer report / a bind took over
            condition = pod_scheduled_condition(pod, report.reason, report.message, _now_rfc3339())
            nominated = report.nominated
            if nominated is not None and nominated == ((pod.raw.get("status") or {}).get("nominatedNodeName") or ""):
                nominated = None
            if condition is None and nominated is None:
                return
            async with self._writes:
                if report.superseded:
                    return
                report.writing = True
                try:
                    written = await self._client.patch_pod_status(
                        pod, condition, nominated, resource_version=pod.resource_version
                    )
                    self._adopt_written(pod, written)
                    return
                except ApiError as exc:
                    if exc.not_found:
                        return
                    if not patch_retriable(exc) or attempt + 1 == PATCH_STATUS_TRIES:
                        failures = self._failures.count(exc.status)
                        if failures is not None:
                            log.warning("updating pod condition failed", pod=pod.key, error=str(exc), failures=failures)
                        return
                finally:
                    report.writing = False
