"""DefaultPreemption on the real control plane: priorities from PriorityClasses (the Priority
admission plugin fills spec.priority), PodDisruptionBudgets kept by kube-controller-manager's
disruption controller, victims removed through the Eviction API (kwok completes the deletions)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.workload import (
    api_pod,
    failed_scheduling_messages,
    metric_value,
    pod_events,
    running_scheduler,
    scheduled_condition,
    wait_for,
)
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def running_pod(core: Any, namespace: str, name: str, node: str, cpu: str, priority_class: str) -> None:
    """A pod placed by hand (spec.nodeName), Running once kwok sees it."""
    pod: Any = api_pod(name, "nobody", cpu=cpu, priority_class=priority_class)
    pod.spec.node_name = node
    pod.spec.termination_grace_period_seconds = 0
    core.create_namespaced_pod(namespace, pod)


def wait_running(core: Any, namespace: str, count: int) -> None:
    wait_for(
        lambda: len([p for p in core.list_namespaced_pod(namespace).items if p.status.phase == "Running"]) >= count,
        timeout=60,
        what=f"{count} pods Running",
    )


def protect(k8s: Any, namespace: str, app: str) -> None:
    """A PDB keeping every `app` pod (minAvailable 1 of 1: no disruption allowed); waits for its status."""
    policy = k8s_client.PolicyV1Api(k8s)
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        k8s_client.V1PodDisruptionBudget(
            metadata=k8s_client.V1ObjectMeta(name=f"protect-{app}"),
            spec=k8s_client.V1PodDisruptionBudgetSpec(
                min_available=1, selector=k8s_client.V1LabelSelector(match_labels={"app": app})
            ),
        ),
    )

    def observed() -> bool:
        pdb: Any = policy.read_namespaced_pod_disruption_budget(f"protect-{app}", namespace)
        status = pdb.status
        return bool(status and status.observed_generation == pdb.metadata.generation and status.current_healthy == 1)

    wait_for(observed, timeout=60, what=f"PDB protect-{app} observed by the disruption controller")


def protect_with_max_unavailable_zero(k8s: Any, namespace: str, app: str) -> None:
    """maxUnavailable 0 over the `app` pods, made a DaemonSet's pods: the disruption controller cannot
    read a DaemonSet's scale, so it fails the sync safe (disruptionsAllowed 0, observedGeneration left
    behind) and every eviction gets 429 "still being processed" with Retry-After: 10, for good."""
    apps: Any = k8s_client.AppsV1Api(k8s)
    daemonset: Any = apps.create_namespaced_daemon_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": app},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    # No daemonset controller runs here; should one, it has no node to place pods on.
                    "spec": {"nodeSelector": {"nowhere": "true"}, "containers": [{"name": "c", "image": "pause"}]},
                },
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": app,
        "uid": daemonset.metadata.uid,
        "controller": True,
    }
    core: Any = k8s_client.CoreV1Api(k8s)
    for pod in core.list_namespaced_pod(namespace, label_selector=f"app={app}").items:
        core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"ownerReferences": [owner]}})
    policy = k8s_client.PolicyV1Api(k8s)
    name = f"protect-{app}"
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        k8s_client.V1PodDisruptionBudget(
            metadata=k8s_client.V1ObjectMeta(name=name),
            spec=k8s_client.V1PodDisruptionBudgetSpec(
                max_unavailable=0, selector=k8s_client.V1LabelSelector(match_labels={"app": app})
            ),
        ),
    )

    def sync_failed() -> bool:
        pdb: Any = policy.read_namespaced_pod_disruption_budget(name, namespace)
        conditions = (pdb.status.conditions if pdb.status else None) or ()
        return any(c.reason == "SyncFailed" for c in conditions)

    wait_for(sync_failed, timeout=60, what=f"PDB {name} failed safe in the disruption controller")


def two_full_nodes(core: Any, namespace: str, nodes: NodeFactory, classes: dict[str, str]) -> tuple[str, str]:
    """n1 runs a mid-priority pod (app=mid), n2 a low-priority one (app=low); each fills its node."""
    n1, n2 = nodes(f"{namespace}-n1", cpu="2"), nodes(f"{namespace}-n2", cpu="2")
    running_pod(core, namespace, "mid-0", n1, "2", classes["mid"])
    running_pod(core, namespace, "low-0", n2, "2", classes["low"])
    wait_running(core, namespace, 2)
    return n1, n2


def config_file(tmp_path: Path, scheduler_name: str, victim_removal: str | None = None) -> Path:
    profile: dict[str, Any] = {"schedulerName": scheduler_name}
    if victim_removal:
        profile["pluginConfig"] = [{"name": "DefaultPreemption", "args": {"victimRemoval": victim_removal}}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "profiles": [profile]}))
    return path


def pod_names(core: Any, namespace: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp}


def unschedulable_message(core: Any, namespace: str, name: str) -> str:
    def message() -> str | None:
        condition = scheduled_condition(core.read_namespaced_pod(name, namespace))
        return condition.message if condition is not None and condition.reason == "Unschedulable" else None

    found: str = wait_for(message, timeout=30, what=f"{name} reported Unschedulable")
    return found


def test_high_priority_pod_preempts_the_lowest_priority_victim_and_is_bound_there(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
    disruption_controller: None,
) -> None:
    _, n2 = two_full_nodes(core, namespace, nodes, priority_classes)
    with running_scheduler(control_plane, scheduler_name) as port:
        core.create_namespaced_pod(
            namespace, api_pod("vip", scheduler_name, cpu="2", priority_class=priority_classes["high"])
        )
        wait_for(lambda: core.read_namespaced_pod("vip", namespace).spec.node_name == n2, timeout=60, what="vip on n2")
        assert metric_value(port, "scheduler_preemption_attempts_total") >= 1
        assert metric_value(port, "scheduler_preemption_victims_count") == 1
        assert metric_value(port, "scheduler_preemption_goroutines_execution_total", result="success") == 1
    assert pod_names(core, namespace) == {"mid-0", "vip"}
    preempted = [e for e in pod_events(core, namespace, "low-0") if e.reason == "Preempted"]
    vip = core.read_namespaced_pod("vip", namespace)
    assert preempted and preempted[0].message == f"Preempted by pod {vip.metadata.uid} on node {n2}"
    failed = failed_scheduling_messages(core, namespace, "vip")
    assert failed[0] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        f"preemption: found a potential placement for pod on node {n2}, preempting 1 victims"
    )


def test_pdb_protected_pods_survive_when_another_candidate_exists(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
    disruption_controller: None,
) -> None:
    n1, _ = two_full_nodes(core, namespace, nodes, priority_classes)
    protect(k8s, namespace, "low")
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(
            namespace, api_pod("vip", scheduler_name, cpu="2", priority_class=priority_classes["high"])
        )
        wait_for(lambda: core.read_namespaced_pod("vip", namespace).spec.node_name == n1, timeout=60, what="vip on n1")
    assert pod_names(core, namespace) == {"low-0", "vip"}


def test_evict_mode_never_violates_a_pdb_and_says_why(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
    disruption_controller: None,
    tmp_path: Path,
) -> None:
    two_full_nodes(core, namespace, nodes, priority_classes)
    protect(k8s, namespace, "low")
    protect(k8s, namespace, "mid")
    with running_scheduler(control_plane, scheduler_name, config=config_file(tmp_path, scheduler_name, "evict")):
        core.create_namespaced_pod(
            namespace, api_pod("vip", scheduler_name, cpu="2", priority_class=priority_classes["high"])
        )
        message = unschedulable_message(core, namespace, "vip")
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "2 Preemption victims are protected by a PodDisruptionBudget (victimRemoval: evict)."
    )
    assert message in failed_scheduling_messages(core, namespace, "vip")
    assert pod_names(core, namespace) == {"low-0", "mid-0", "vip"}
    assert not core.read_namespaced_pod("vip", namespace).spec.node_name


def test_preemption_policy_never_preempts_nothing(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
) -> None:
    two_full_nodes(core, namespace, nodes, priority_classes)
    api = k8s_client.SchedulingV1Api(k8s)
    polite = f"polite-{uuid.uuid4().hex[:6]}"
    api.create_priority_class(
        k8s_client.V1PriorityClass(metadata=k8s_client.V1ObjectMeta(name=polite), value=100, preemption_policy="Never")
    )
    try:
        with running_scheduler(control_plane, scheduler_name):
            core.create_namespaced_pod(namespace, api_pod("polite", scheduler_name, cpu="2", priority_class=polite))
            message = unschedulable_message(core, namespace, "polite")
    finally:
        api.delete_priority_class(polite)
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    assert pod_names(core, namespace) == {"low-0", "mid-0", "polite"}


def test_a_pod_preemption_cannot_help_gets_upstreams_message(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
) -> None:
    two_full_nodes(core, namespace, nodes, priority_classes)
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(
            namespace, api_pod("huge", scheduler_name, cpu="3", priority_class=priority_classes["high"])
        )
        core.create_namespaced_pod(
            namespace, api_pod("peer", scheduler_name, cpu="1", priority_class=priority_classes["low"])
        )
        huge = unschedulable_message(core, namespace, "huge")
        peer = unschedulable_message(core, namespace, "peer")
    assert huge == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert peer == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert pod_names(core, namespace) == {"low-0", "mid-0", "huge", "peer"}


@pytest.mark.parametrize(
    ("budget", "cause"),
    [
        (protect_with_max_unavailable_zero, "is still being processed by the server"),
        (protect, "needs 1 healthy pods and has 1 currently"),
    ],
    ids=["maxUnavailable-0-retry-after-10", "minAvailable-1"],
)
def test_evict_then_delete_spends_only_the_eviction_budget_on_a_blocking_pdb_and_says_so(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    priority_classes: dict[str, str],
    disruption_controller: None,
    budget: Any,
    cause: str,
) -> None:
    # Default victimRemoval (evict-then-delete) and evictionTimeoutSeconds (5): the preemptor was
    # bound after 100.9 s (ten client retries of the eviction's Retry-After: 10) with nothing said.
    node = nodes(f"{namespace}-n1", cpu="2")
    running_pod(core, namespace, "low-0", node, "2", priority_classes["low"])
    wait_running(core, namespace, 1)
    budget(k8s, namespace, "low")
    with running_scheduler(control_plane, scheduler_name) as port:
        started = time.monotonic()
        core.create_namespaced_pod(
            namespace, api_pod("vip", scheduler_name, cpu="2", priority_class=priority_classes["high"])
        )
        wait_for(
            lambda: core.read_namespaced_pod("vip", namespace).spec.node_name == node, timeout=30, what="vip bound"
        )
        bound_after = time.monotonic() - started
        assert metric_value(port, "scheduler_preemption_evictions_total", result="deleted_after_budget") == 1
        assert metric_value(port, "scheduler_preemption_evictions_total", result="evicted") == 0
    print(f"vip bound {bound_after:.1f} s after its creation")
    assert 5 <= bound_after < 20
    assert pod_names(core, namespace) == {"vip"}
    (blocked,) = [e for e in pod_events(core, namespace, "vip") if e.reason == "EvictionBlocked"]
    assert blocked.type == "Warning"
    assert blocked.message.startswith(
        f"Eviction of victim {namespace}/low-0 blocked by PodDisruptionBudget {namespace}/protect-low: "
        f"The disruption budget protect-low {cause}"
    )
    assert blocked.message.endswith("; retrying for up to 5s (evictionTimeoutSeconds), then deleting it")
    # kube's FailedScheduling message stays kube's.
    failed = failed_scheduling_messages(core, namespace, "vip")
    assert failed[0].endswith(f"preemption: found a potential placement for pod on node {node}, preempting 1 victims")
    log = (control_plane.log_dir / f"scheduler-{scheduler_name}.log").read_text()
    lines = [line for line in log.splitlines() if "eviction of a preemption victim blocked" in line]
    assert len(lines) == 1 and f"{namespace}/low-0" in lines[0] and f"{namespace}/protect-low" in lines[0], lines


def test_an_eviction_removes_a_pod_without_grace_period_or_finalizer_at_once(
    core: Any, namespace: str, nodes: NodeFactory, priority_classes: dict[str, str]
) -> None:
    """What evict mode leans on to skip its DisruptionTarget patch: such a victim is gone when the
    eviction returns; one with a finalizer stays, deleting, for the patch to mark."""
    node = nodes(f"{namespace}-n1", cpu="4")
    running_pod(core, namespace, "bare", node, "1", priority_classes["low"])
    running_pod(core, namespace, "held", node, "1", priority_classes["low"])
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": ["example.com/hold"]}})
    wait_running(core, namespace, 2)
    for name in ("bare", "held"):
        core.create_namespaced_pod_eviction(
            name,
            namespace,
            k8s_client.V1Eviction(metadata=k8s_client.V1ObjectMeta(name=name, namespace=namespace)),
        )
    with pytest.raises(k8s_client.ApiException) as gone:
        core.read_namespaced_pod("bare", namespace)
    assert gone.value.status == 404
    held: Any = core.read_namespaced_pod("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
