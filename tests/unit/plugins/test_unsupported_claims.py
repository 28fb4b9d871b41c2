"""DynamicResources (not implemented) refuses pods with claims; VolumeBinding reports missing PVCs.

A pod with spec.resourceClaims must be UnschedulableAndUnresolvable with a message naming the
claims and the missing support — never placed as if it had none; a pod whose PVC does not exist
gets VolumeBinding's message. Both go through the real scheduling cycle here (fake API client).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plugins import dynamicresources
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.framework.types import Code, CycleState
from scheduler.informers import Informers
from scheduler.testing.builders import make_pod

NAME = "secondary-scheduler"


def with_claims(*names: str) -> Any:
    return (
        make_pod("p")
        .container(cpu="100m")
        .spec(resourceClaims=[{"name": n, "resourceClaimName": f"{n}-claim"} for n in names])
    )


PVC = {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            with_claims("gpu"),
            'pod has resource claims (spec.resourceClaims: "gpu"), '
            "but this scheduler does not implement DynamicResources (DRA) yet",
        ),
        (
            with_claims("gpu", "nic"),
            'pod has resource claims (spec.resourceClaims: "gpu", "nic"), '
            "but this scheduler does not implement DynamicResources (DRA) yet",
        ),
    ],
)
def test_dynamic_resources_refuses_pods_with_claims(pod: Any, message: str) -> None:
    result, status = dynamicresources.DynamicResources().pre_filter(CycleState(), pod.obj(), [])
    assert result is None
    assert status is not None
    assert (status.code, status.reasons, status.plugin) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (message,),
        "DynamicResources",
    )


def test_dynamic_resources_refuses_implicit_device_class_resources() -> None:
    pod = make_pod("p").container(requests={"deviceclass.resource.kubernetes.io/gpu": "1", "example.com/x": "1"})
    _, status = dynamicresources.DynamicResources().pre_filter(CycleState(), pod.obj(), [])
    assert status is not None
    assert (status.code, status.reasons) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (
            'pod requests extended resources backed by DRA ("deviceclass.resource.kubernetes.io/gpu"), '
            "but this scheduler does not implement DynamicResources (DRA) yet",
        ),
    )


def test_dynamic_resources_skips_pods_without_claims() -> None:
    _, status = dynamicresources.DynamicResources().pre_filter(CycleState(), make_pod("p").obj(), [])
    assert status is not None and status.code == Code.SKIP


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]},
            '0/2 nodes are available: pod has resource claims (spec.resourceClaims: "gpu"), '
            "but this scheduler does not implement DynamicResources (DRA) yet. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
        (
            {"volumes": [PVC]},
            # VolumeBinding (no longer the interim guard) reports the missing claim as kube does.
            '0/2 nodes are available: persistentvolumeclaim "data-claim" not found. '
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
    ],
)
def test_scheduling_cycle_reports_instead_of_binding(spec: dict[str, Any], message: str) -> None:
    client = FakeApiClient()
    sched = build_scheduler(default_config(NAME), full_registry(), client, {"default": {}})
    informers = Informers(sched)
    for i in range(2):
        informers.on_node(
            "ADDED",
            {
                "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1"},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            },
        )
    raw = make_pod("p").container(cpu="100m").spec(schedulerName=NAME, **spec).raw
    informers.on_pod("ADDED", raw)

    async def drain() -> None:
        while (info := sched.queue.pop_nowait()) is not None:
            sched.schedule_one(info)
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(drain())
    assert client.bindings == {}
    condition = client.conditions["default/p"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)
    assert [(e.reason, e.message) for e in client.events] == [("FailedScheduling", message)]
