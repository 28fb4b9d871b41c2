"""The scheduler binds real pods through the Binding subresource on a real apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import (
    api_pod,
    metrics_text,
    pod_events,
    requested_per_node,
    running_scheduler,
    scheduled_condition,
    wait_for,
)
from scheduler.model.objects import Resource
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster


def _bound(core: Any, namespace: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name}


def test_thirty_pods_on_three_nodes_all_bound_within_allocatable(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    for i in range(3):
        nodes(f"{namespace}-n{i}", cpu="2", memory="4Gi")
    with running_scheduler(control_plane, scheduler_name) as port:
        for i in range(30):
            core.create_namespaced_pod(namespace, api_pod(f"web-{i}", scheduler_name, cpu="150m", memory="256Mi"))
        bound = wait_for(
            lambda: (b := _bound(core, namespace)) and len(b) == 30 and b, timeout=60, what="30 bound pods"
        )
        assert set(bound.values()) == {f"{namespace}-n{i}" for i in range(3)}
        text = metrics_text(port)
    allocatable = Resource(milli_cpu=2000, memory=4 * 1024**3)
    for node, used in requested_per_node(core, namespace).items():
        assert used.milli_cpu <= allocatable.milli_cpu, node
        assert used.memory <= allocatable.memory, node
    events = pod_events(core, namespace, "web-0")
    assert any(
        e.reason == "Scheduled" and e.message.startswith(f"Successfully assigned {namespace}/web-0 to ") for e in events
    )
    assert f'scheduler_schedule_attempts_total{{profile="{scheduler_name}",result="scheduled"}} 30.0' in text
    # kwok plays the kubelet: bound pods become Running.
    wait_for(
        lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
        timeout=30,
        what="pods Running",
    )


def test_unfittable_pod_reported_then_bound_when_a_big_node_arrives(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    for i in range(3):
        nodes(f"{namespace}-small{i}", cpu="1")
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, api_pod("huge", scheduler_name, cpu="3"))
        message = (
            "0/3 nodes are available: 3 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )

        def reported() -> bool:
            pod = core.read_namespaced_pod("huge", namespace)
            condition = scheduled_condition(pod)
            return bool(
                condition is not None
                and condition.status == "False"
                and condition.reason == "Unschedulable"
                and condition.message == message
            )

        wait_for(reported, timeout=30, what="PodScheduled=False condition")
        events = pod_events(core, namespace, "huge")
        failed = [e for e in events if e.reason == "FailedScheduling"]
        assert failed
        assert failed[0].type == "Warning"
        assert failed[0].message == message
        attempts_before = len(failed)
        # No busy loop: with nothing changing in the cluster the pod is not retried.
        import time

        time.sleep(3)
        assert (
            len([e for e in pod_events(core, namespace, "huge") if e.reason == "FailedScheduling"]) == attempts_before
        )
        big = nodes(f"{namespace}-big", cpu="8")
        wait_for(
            lambda: core.read_namespaced_pod("huge", namespace).spec.node_name == big,
            timeout=30,
            what="bound to big node",
        )


def test_pods_for_other_schedulers_are_never_touched(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    node = nodes(f"{namespace}-n0", cpu="4")
    # Nobody schedules "nobody"'s pods: anything that changes them must be us.
    core.create_namespaced_pod(namespace, api_pod("foreign", "nobody"))
    core.create_namespaced_pod(namespace, api_pod("foreign-unfit", "nobody", cpu="64"))
    before_pods = {p.metadata.name: p.metadata.resource_version for p in core.list_namespaced_pod(namespace).items}
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, api_pod("mine", scheduler_name))
        wait_for(
            lambda: core.read_namespaced_pod("mine", namespace).spec.node_name == node, timeout=30, what="mine bound"
        )
        import time

        time.sleep(2)
        after = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    for name in ("foreign", "foreign-unfit"):
        pod = after[name]
        assert pod.metadata.resource_version == before_pods[name], name
        assert not pod.spec.node_name
        assert scheduled_condition(pod) is None
        assert not pod_events(core, namespace, name)


def test_scheduler_writes_nothing_to_objects_it_does_not_schedule(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    node = nodes(f"{namespace}-n0", cpu="4")
    core.create_namespaced_pod(namespace, api_pod("foreign", "nobody"))
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, api_pod("mine", scheduler_name))
        wait_for(
            lambda: core.read_namespaced_pod("mine", namespace).spec.node_name == node, timeout=30, what="mine bound"
        )
    # Field managers record every writer: our api client ("secondary-scheduler") and kopf ("kopf")
    # must appear only on the pod we scheduled, never on nodes, namespaces or foreign pods.
    writers = ("secondary-scheduler", "kopf")

    def managers(obj: Any) -> set[str]:
        return {m.manager for m in obj.metadata.managed_fields or ()}

    for n in core.list_node().items:
        assert not managers(n) & set(writers), n.metadata.name
        assert not any(k.startswith("kopf.") for k in (n.metadata.annotations or {})), n.metadata.name
    assert not managers(core.read_namespace(namespace)) & set(writers)
    foreign = core.read_namespaced_pod("foreign", namespace)
    assert not managers(foreign) & set(writers)
    mine = core.read_namespaced_pod("mine", namespace)
    assert not any(k.startswith("kopf.") for k in (mine.metadata.annotations or {}))
    assert not mine.metadata.finalizers
