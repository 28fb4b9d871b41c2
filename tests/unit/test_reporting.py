"""Failure reporting and the end of the binding cycle, against the fake ApiClient.

The PodScheduled condition never depends on an Event; nothing after an accepted Binding undoes it;
a pod's stale failure report never lands after its bind; the condition follows kube's
UpdatePodCondition / PatchPodStatus (v1.37.2 schedule_one.go updatePod, pkg/scheduler/util).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.api.client import ApiError
from scheduler.api.dispatcher import pod_scheduled_condition
from scheduler.api.events import EventBroadcaster
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.framework.events import ASSIGNED_POD_DELETE
from scheduler.framework.types import CycleState, NodeToStatus, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler

NAME = "secondary-scheduler"
FORBIDDEN = ApiError(403, 'events.events.k8s.io is forbidden: User "sched" cannot create resource', "Forbidden")
# kube-scheduler 1.37's message: the Filter part, then DefaultPreemption's PostFilter part.
UNFIT = (
    "0/1 nodes are available: 1 Insufficient cpu. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)


def raw_node(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def raw_pod(name: str = "p", cpu: str = "2", status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "7", **meta},
        "spec": {
            "schedulerName": NAME,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}],
        },
        "status": {"phase": "Pending", **(status or {})},
    }


def setup() -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    sched = build_scheduler(default_config(), full_registry(), client, {})
    sched.event_broadcaster = EventBroadcaster(client, retry_sleep=0.0)
    # In place: the status dispatcher and the plugins' handles hold this same mapping.
    sched.recorders.update({name: sched.event_broadcaster.new_recorder(name) for name in sched.frameworks})
    sched.rng = random.Random(7)
    return sched, Informers(sched), client


def schedule_next(sched: Scheduler) -> None:
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)


async def run_queue(sched: Scheduler) -> None:
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await sched.drain()


def retry_after_cluster_event(sched: Scheduler) -> None:
    """An assigned pod went away: the unschedulable pod moves (to backoffQ, which an idle pop takes)."""
    gone = Pod.from_raw({**raw_pod("gone", cpu="1"), "spec": {**raw_pod()["spec"], "nodeName": "n"}})
    sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, gone, None)


# ---- issue 9 finding 1: a refused or slow Event never costs the condition -------------------------


@pytest.mark.parametrize(
    "refusal",
    [FORBIDDEN, ApiError(429, "too many requests", "TooManyRequests"), ApiError(500, "etcd", "InternalError")],
)
async def test_a_refused_event_does_not_skip_the_condition(refusal: ApiError) -> None:
    sched, inf, client = setup()
    client.refuse_events = refusal
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    await run_queue(sched)
    assert client.events == []
    assert client.conditions["ns/p"]["status"] == "False"
    assert client.conditions["ns/p"]["message"] == UNFIT


async def test_a_slow_event_delays_neither_the_condition_nor_a_bind() -> None:
    sched, inf, client = setup()
    client.event_gate = asyncio.Event()  # the apiserver never answers event writes
    inf.on_node("ADDED", raw_node("n", cpu="4"))
    inf.on_pod("ADDED", raw_pod("big", cpu="8"))
    for i in range(10):  # more Scheduled events than the recorder has writers
        inf.on_pod("ADDED", raw_pod(f"small-{i}", cpu="100m"))
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*list(sched._tasks)), timeout=5)
    assert len(client.bindings) == 10
    assert client.conditions["ns/big"]["reason"] == "Unschedulable"
    assert client.events == []
    client.event_gate.set()
    await sched.drain()
    assert len(client.events) == 11


# ---- issue 9 finding 2: after an accepted Binding, nothing undoes it ------------------------------


async def bind_one_pod(sched: Scheduler, inf: Informers, client: FakeApiClient) -> list[MutableMapping[str, Any]]:
    """Schedule one pod that fits; check it stays bound, assumed, out of the queue, unreported."""
    inf.on_node("ADDED", raw_node("n", cpu="4"))
    inf.on_pod("ADDED", raw_pod())
    with capture_logs() as logs:
        await run_queue(sched)
    assert client.bindings == {"ns/p": "n"}
    assert sched.cache.is_assumed("uid-p")
    assert sched.queue.where("uid-p") is None
    assert client.status_patches == []
    return logs


@pytest.mark.parametrize("refusal", [FORBIDDEN, ApiError(0, "timed out"), ApiError(503, "unavailable")])
async def test_a_refused_scheduled_event_leaves_the_pod_bound(refusal: ApiError) -> None:
    sched, inf, client = setup()
    client.refuse_events = refusal
    logs = await bind_one_pod(sched, inf, client)
    assert not [entry for entry in logs if entry["event"] == "binding cycle crashed"]


class FailingPostBind:
    name = "FailingPostBind"

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise RuntimeError("post-bind bookkeeping broke")


async def test_a_failing_post_bind_leaves_the_pod_bound_and_reports_scheduled() -> None:
    sched, inf, client = setup()
    sched.frameworks[NAME].post_bind_plugins.append(FailingPostBind())
    logs = await bind_one_pod(sched, inf, client)
    assert [e.reason for e in client.events] == ["Scheduled"]
    failures = [entry for entry in logs if entry["log_level"] == "error"]
    assert [entry["event"] for entry in failures] == ["PostBind plugin failed"]
    assert "exc_info" not in failures[0]


# ---- issue 9 finding 4: a stale report never lands after the pod's bind ---------------------------


async def test_a_report_in_flight_lands_before_the_next_bind_of_the_pod() -> None:
    sched, inf, client = setup()
    client.patch_gate = asyncio.Event()  # the status patch is on the wire and slow
    inf.on_node("ADDED", raw_node("small"))
    inf.on_pod("ADDED", raw_pod())
    schedule_next(sched)
    await asyncio.sleep(0)  # the report's patch is sent
    inf.on_node("ADDED", raw_node("big", cpu="4"))  # the pod fits now; an idle pop takes it from backoffQ
    schedule_next(sched)
    for _ in range(5):
        await asyncio.sleep(0)
    assert client.bindings == {}  # the bind waits for the patch already sent
    client.patch_gate.set()
    await sched.drain()
    assert client.writes == [("status", "ns/p"), ("bind", "ns/p")]


async def test_a_report_not_yet_sent_is_cancelled_by_the_next_bind_of_the_pod() -> None:
    sched, inf, client = setup()
    client.patch_errors["ns/p"] = [ApiError(500, "etcd leader changed", "InternalError")]
    inf.on_node("ADDED", raw_node("small"))
    inf.on_pod("ADDED", raw_pod())
    schedule_next(sched)
    await asyncio.sleep(0)  # first try failed; the retry waits its backoff
    inf.on_node("ADDED", raw_node("big", cpu="4"))
    schedule_next(sched)
    await sched.drain()
    assert client.writes == [("bind", "ns/p")]
    assert client.patch_errors["ns/p"] == []  # the first try was made


async def test_a_newer_report_supersedes_a_pending_one() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    pod = sched.pending_pods["uid-p"]
    sched.status_writes.report(pod, "SchedulerError", "first", None)
    sched.status_writes.report(pod, "Unschedulable", "second", None)
    await sched.drain()
    assert [p.condition["message"] for p in client.status_patches if p.condition] == ["second"]


async def test_every_failure_has_its_event_even_when_its_report_is_cancelled() -> None:
    sched, inf, client = setup()
    client.patch_gate = asyncio.Event()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    pod = sched.pending_pods["uid-p"]
    sched.status_writes.report(pod, "Unschedulable", UNFIT, None)
    await asyncio.sleep(0)  # its patch is on the wire
    sched.status_writes.report(pod, "Unschedulable", UNFIT, None)  # waits for it...
    sched.status_writes.report(pod, "Unschedulable", UNFIT, None)  # ...and is superseded before it ran
    settled = asyncio.ensure_future(sched.status_writes.settle("uid-p"))  # then the pod is bound
    client.patch_gate.set()
    await settled
    await sched.drain()
    assert len(client.status_patches) == 1
    counts = sorted(e.get("series", {}).get("count", 1) for e in client.stored_events.values())
    assert counts == [1, 2]  # three failures: a series of two (before the write landed) and one after


async def test_the_status_patch_is_preconditioned_on_the_informer_view() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    await run_queue(sched)
    assert [p.resource_version for p in client.status_patches] == ["7"]


# ---- issue 8 item 4: the PodScheduled condition as kube writes it ---------------------------------

T0 = "2026-12-01T09:00:00Z"
NOW = "2026-12-01T10:00:00Z"


def scheduled(status: str, reason: str = "Unschedulable", message: str = UNFIT, **extra: Any) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": status, "reason": reason, "message": message, **extra}


@pytest.mark.parametrize(
    ("existing", "reason", "message", "expected_transition"),
    [
        # No condition yet: added, transition now.
        (None, "Unschedulable", UNFIT, NOW),
        # Same status, other message: written, transition time kept.
        (
            scheduled("False", message="0/2 nodes are available: 2 Insufficient cpu.", lastTransitionTime=T0),
            "Unschedulable",
            UNFIT,
            T0,
        ),
        # Same status, other reason: written, transition time kept.
        (scheduled("False", reason="SchedulerError", lastTransitionTime=T0), "Unschedulable", UNFIT, T0),
        # Status changes (True → False, e.g. a pod un-bound by a test): transition now.
        (scheduled("True", reason="", message="", lastTransitionTime=T0), "Unschedulable", UNFIT, NOW),
        # A probe time set by someone else differs from ours (none): written.
        (scheduled("False", lastTransitionTime=T0, lastProbeTime=T0), "Unschedulable", UNFIT, T0),
        # Identical: nothing to write.
        (scheduled("False", lastTransitionTime=T0, lastProbeTime=None), "Unschedulable", UNFIT, None),
        # observedGeneration is not compared (kube's isEqual leaves it out).
        (scheduled("False", lastTransitionTime=T0, observedGeneration=1), "Unschedulable", UNFIT, None),
    ],
)
def test_pod_scheduled_condition_as_update_pod_condition(
    existing: dict[str, Any] | None, reason: str, message: str, expected_transition: str | None
) -> None:
    status = {"conditions": [{"type": "Ready", "status": "False"}, *([existing] if existing else [])]}
    pod = Pod.from_raw(raw_pod(status=status, generation=3))
    condition = pod_scheduled_condition(pod, reason, message, NOW)
    if expected_transition is None:
        assert condition is None
        return
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": expected_transition,
        "observedGeneration": 3,
    }


def test_no_observed_generation_without_a_generation() -> None:
    condition = pod_scheduled_condition(Pod.from_raw(raw_pod()), "Unschedulable", UNFIT, NOW)
    assert condition is not None and "observedGeneration" not in condition


async def test_the_transition_time_is_kept_across_retries() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    old = scheduled("False", message="0/1 nodes are available: 1 Too many pods.", lastTransitionTime=T0)
    inf.on_pod("ADDED", raw_pod(status={"conditions": [old]}, generation=2))
    await run_queue(sched)
    assert client.conditions["ns/p"]["lastTransitionTime"] == T0
    assert client.conditions["ns/p"]["message"] == UNFIT
    assert client.conditions["ns/p"]["observedGeneration"] == 2


async def test_an_unchanged_condition_is_not_written_again() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod(status={"conditions": [scheduled("False", lastTransitionTime=T0)]}))
    await run_queue(sched)
    assert client.status_patches == []
    assert [e.reason for e in client.events] == ["FailedScheduling"]


@pytest.mark.parametrize(
    ("errors", "tries", "written"),
    [
        (
            [ApiError(500, "x", "InternalError"), ApiError(503, "x", "ServiceUnavailable"), ApiError(0, "refused")],
            4,
            True,
        ),
        ([ApiError(409, "the object has been modified", "Conflict")] * 3, 4, True),
        ([ApiError(409, "the object has been modified", "Conflict")] * 4, 4, False),
        ([ApiError(403, "forbidden", "Forbidden")], 1, False),
        ([ApiError(422, "invalid", "Invalid")], 1, False),
        ([ApiError(404, "gone", "NotFound")], 1, False),
    ],
)
async def test_transient_patch_errors_are_retried_as_patch_pod_status(
    errors: list[ApiError], tries: int, written: bool
) -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    client.patch_errors["ns/p"] = list(errors)
    with capture_logs() as logs:
        await run_queue(sched)
    made = len(errors) - len(client.patch_errors["ns/p"]) + (1 if written else 0)
    assert made == tries
    assert ("ns/p" in client.conditions) == written
    warnings = [entry for entry in logs if entry["event"] == "updating pod condition failed"]
    assert len(warnings) == (0 if written or errors[0].status == 404 else 1)


async def test_a_failure_clears_a_nomination() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod(status={"nominatedNodeName": "n"}))
    assert sched.nominator.nominated_node("uid-p") == "n"
    await run_queue(sched)
    assert client.nominations == {"ns/p": ""}
    assert sched.nominator.nominated_node("uid-p") == ""


class NominatesNothing:
    name = "NominatesNothing"

    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        return None, Status.unschedulable("preemption: 0/1 nodes are available: 1 No preemption victims found.")


async def test_post_filter_that_nominates_nothing_keeps_the_nomination() -> None:
    sched, inf, client = setup()
    # Alone: DefaultPreemption clears the nomination when it finds no candidate, as upstream does.
    sched.frameworks[NAME].post_filter_plugins[:] = [NominatesNothing()]
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod(status={"nominatedNodeName": "n"}))
    await run_queue(sched)
    assert client.nominations == {}
    assert [p.nominated_node_name for p in client.status_patches] == [None]
    assert sched.nominator.nominated_node("uid-p") == "n"


async def test_a_deleting_pod_is_skipped_with_an_event() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n", cpu="4"))
    inf.on_pod("ADDED", raw_pod())
    info = sched.queue.pop_nowait()
    assert info is not None
    info.pod = Pod.from_raw(raw_pod(deletionTimestamp="2026-12-01T10:00:00Z"))
    sched.schedule_one(info)
    await sched.drain()
    assert client.bindings == {}
    assert [(e.reason, e.message) for e in client.events] == [("FailedScheduling", "skip schedule deleting pod: ns/p")]


# ---- issue 8 item 4: repeated identical events are one Event with a growing series -----------------


async def test_six_identical_failures_make_two_events_as_kube_scheduler() -> None:
    """The hand-made comparison of issue 8: kube-scheduler v1.37.2 leaves 2 Event objects for six
    identical failures (the first status patch changes the pod's resourceVersion, which is part of
    the isomorphic key; the later five are one series), ours left 7."""
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    await run_queue(sched)
    for _ in range(5):
        retry_after_cluster_event(sched)
        await run_queue(sched)
    assert sched.queue.where("uid-p") == "unschedulable"
    assert len(client.status_patches) == 1
    first, second = client.stored_events.values()
    for event in (first, second):
        assert (event["reason"], event["reportingController"], event["note"]) == ("FailedScheduling", NAME, UNFIT)
    assert first["regarding"]["resourceVersion"] == "7"
    assert second["regarding"]["resourceVersion"] == "7+status"  # as the first report left the pod
    assert "series" not in first
    assert second["series"]["count"] == 2  # the API sees 2 at once, the rest at the series heartbeat
    await sched.event_broadcaster.refresh_series()  # attempts 2 to 6
    assert client.stored_events[f"ns/{second['metadata']['name']}"]["series"]["count"] == 5


async def test_a_report_after_a_write_in_flight_regards_the_pod_as_written() -> None:
    sched, inf, client = setup()
    client.patch_gate = asyncio.Event()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod())
    schedule_next(sched)
    await asyncio.sleep(0)  # the first report's patch is on the wire
    retry_after_cluster_event(sched)
    schedule_next(sched)  # fails again before the patch returned
    await asyncio.sleep(0)
    assert len(client.events) == 1  # the second event waits for the write in flight
    client.patch_gate.set()
    await sched.drain()
    first, second = client.stored_events.values()
    assert (first["regarding"]["resourceVersion"], second["regarding"]["resourceVersion"]) == ("7", "7+status")
    assert "series" not in first and "series" not in second
    assert len(client.status_patches) == 1  # the second report found the condition already written


async def test_a_long_message_is_cut_in_the_event_but_not_in_the_condition() -> None:
    sched, inf, client = setup()
    inf.on_pod("ADDED", raw_pod())
    pod = sched.pending_pods["uid-p"]
    message = "0/5000 nodes are available: " + ", ".join(
        f"{i} node(s) had untolerated taint {{k{i}: v}}" for i in range(60)
    )
    sched.status_writes.report(pod, "Unschedulable", message, None)
    await sched.drain()
    assert client.conditions["ns/p"]["message"] == message
    (event,) = client.events
    assert len(event.message) == 1024 and event.message.endswith(" ...")


async def test_a_denied_status_patch_is_logged_once_not_once_per_pod() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    for i in range(5):
        inf.on_pod("ADDED", raw_pod(f"p{i}"))
        client.patch_errors[f"ns/p{i}"] = [ApiError(403, "pods/status is forbidden", "Forbidden")]
    with capture_logs() as logs:
        await run_queue(sched)
    assert all(client.patch_errors[f"ns/p{i}"] == [] for i in range(5))  # every pod tried
    assert len([entry for entry in logs if entry["event"] == "updating pod condition failed"]) == 1
