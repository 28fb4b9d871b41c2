"""Rejections at Reserve, Permit and WaitOnPermit are kube's single-node FitError (schedule_one.go 1.37).

`0/1 nodes are available: <reason>.`, condition reason Unschedulable, result label `unschedulable`, and
the rejecting plugin recorded so that its registered events wake the pod.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

from harness.workload import registry_value
from scheduler import metrics
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import parse_config
from scheduler.framework.types import Code, CycleState, Status
from scheduler.informers import Informers
from scheduler.model.durations import go_duration
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler
from tests.unit.test_schedule_one import raw_node, raw_pod

NAME = "secondary-scheduler"


class Gate:
    """Reserve + Permit plugin whose verdicts the test sets."""

    name = "Gate"

    def __init__(self) -> None:
        self.reserve_status: Status | None = None
        self.permit_status: Status | None = None
        self.permit_timeout = 0.0
        self.unreserved: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.unreserved.append(pod.name)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return self.permit_status, self.permit_timeout


def setup() -> tuple[Scheduler, Informers, FakeApiClient, Gate]:
    gate = Gate()
    registry = full_registry()

    def new(args: Mapping[str, Any], handle: Any) -> Gate:
        return gate

    registry.register("Gate", new)
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": NAME,
                    "plugins": {"reserve": {"enabled": [{"name": "Gate"}]}, "permit": {"enabled": [{"name": "Gate"}]}},
                }
            ],
        }
    )
    client = FakeApiClient()
    sched = build_scheduler(config, registry, client, {})
    sched.rng = random.Random(3)
    inf = Informers(sched)
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_node("ADDED", raw_node("n2"))
    return sched, inf, client, gate


async def run_queue(sched: Scheduler) -> None:
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await sched.drain()


def unschedulable_attempts() -> float:
    return registry_value(metrics.REGISTRY, "scheduler_schedule_attempts_total", result="unschedulable", profile=NAME)


@pytest.mark.parametrize(
    ("point", "status"),
    [
        ("reserve", Status.unschedulable("no room reserved")),
        ("permit", Status.unschedulable("not permitted")),
        ("permit", Status.unresolvable("never permitted")),
    ],
)
async def test_reserve_and_permit_rejections_are_single_node_fit_errors(point: str, status: Status) -> None:
    sched, inf, client, gate = setup()
    setattr(gate, f"{point}_status", status)
    before = unschedulable_attempts()
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    message = f"0/1 nodes are available: 1 {status.message}."
    assert client.conditions["ns/p"]["reason"] == "Unschedulable"
    assert client.conditions["ns/p"]["message"] == message
    assert client.failed_scheduling() == [message]
    assert unschedulable_attempts() == before + 1
    assert gate.unreserved == ["p"]
    assert not sched.cache.is_assumed("uid-p")
    info = sched.queue.get("uid-p")
    assert info is not None
    assert info.unschedulable_plugins == {"Gate"}
    assert sched.queue.where("uid-p") == "unschedulable"


async def test_wait_on_permit_rejection_is_a_single_node_fit_error() -> None:
    sched, inf, client, gate = setup()
    gate.permit_status = Status(Code.WAIT)
    gate.permit_timeout = 30.0
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)
    await asyncio.sleep(0)
    fw = sched.frameworks[NAME]
    assert "uid-p" in fw.handle.waiting_pods
    fw.handle.reject_waiting_pod("uid-p", "Gate", "the gang is incomplete")
    await sched.drain()
    message = "0/1 nodes are available: 1 the gang is incomplete."
    assert client.conditions["ns/p"]["reason"] == "Unschedulable"
    assert client.conditions["ns/p"]["message"] == message
    queued = sched.queue.get("uid-p")
    assert queued is not None
    assert queued.unschedulable_plugins == {"Gate"}
    assert not sched.cache.is_assumed("uid-p")
    # The AssignedPodDelete of its own forgotten assumption does not send it back to backoff.
    assert sched.queue.where("uid-p") == "unschedulable"


async def test_error_at_reserve_stays_a_scheduler_error() -> None:
    sched, inf, client, gate = setup()
    gate.reserve_status = Status.as_error(RuntimeError("disk on fire"))
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    assert client.conditions["ns/p"]["reason"] == "SchedulerError"
    assert client.conditions["ns/p"]["message"] == "disk on fire"
    assert sched.queue.where("uid-p") == "backoff"


async def test_permit_timeout_message_prints_the_wait_like_go() -> None:
    sched, inf, client, gate = setup()
    gate.permit_status = Status(Code.WAIT)
    gate.permit_timeout = 0.05
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    assert client.conditions["ns/p"]["message"] == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 50ms at plugin Gate."
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (10, "10s"), (0.5, "500ms"), (90, "1m30s"), (900, "15m0s"), (3600, "1h0m0s"), (1.25, "1.25s")],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
