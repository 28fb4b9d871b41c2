"""kube-scheduler 1.37's default profile against the real apiserver v1.37.2.

Pod-level resources count (a pod asking for 100 CPUs at pod level is not placed on small
nodes), a pod resized in place counts at its allocated size, NodeDeclaredFeatures keeps a pod
needing a feature on the nodes declaring it, and a pod with a missing PersistentVolumeClaim is
reported unschedulable — never bound. (Pods with resource claims: tests/cluster/test_dra.py.)
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import running_scheduler, scheduled_condition, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

PAUSE = "registry.k8s.io/pause:3.10"


def pod_body(name: str, scheduler_name: str, **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c", "image": PAUSE}])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"schedulerName": scheduler_name, "containers": containers, **spec},
    }


def reported(core: Any, namespace: str, name: str, message: str, post_filter: str = " preemption: 0/") -> bool:
    """PodScheduled=False whose Filter part is `message`; the PostFilter part (by default
    DefaultPreemption's, in the default profile of 1.37) follows it, as kube-scheduler's messages have it."""
    pod = core.read_namespaced_pod(name, namespace)
    condition = scheduled_condition(pod)
    return bool(
        condition is not None
        and condition.status == "False"
        and condition.reason == "Unschedulable"
        and condition.message.startswith(message + post_filter)
        and not pod.spec.node_name
    )


def bound_to(core: Any, namespace: str, name: str) -> str:
    node: str = core.read_namespaced_pod(name, namespace).spec.node_name or ""
    return node


def test_pod_level_resources_decide_fit(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    small = nodes(f"{namespace}-small", cpu="1")
    big = nodes(f"{namespace}-big", cpu="2")
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, pod_body("huge", scheduler_name, resources={"requests": {"cpu": "100"}}))
        core.create_namespaced_pod(namespace, pod_body("mid", scheduler_name, resources={"requests": {"cpu": "1500m"}}))
        wait_for(
            lambda: reported(core, namespace, "huge", "0/2 nodes are available: 2 Insufficient cpu."),
            timeout=60,
            what="huge reported unschedulable",
        )
        assert wait_for(lambda: bound_to(core, namespace, "mid"), timeout=60, what="mid bound") == big
    assert small != big


def test_declared_features_keep_a_pod_on_declaring_nodes(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    declaring = f"{namespace}-declaring"
    plain = f"{namespace}-plain"
    nodes(plain, cpu="4")
    nodes(declaring, cpu="1")
    core.patch_node_status(declaring, {"status": {"declaredFeatures": ["RestartAllContainersOnContainerExits"]}})
    assert core.read_node(declaring).status.declared_features == ["RestartAllContainersOnContainerExits"]
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    container = {"name": "c", "image": PAUSE, "restartPolicy": "Never", "restartPolicyRules": [rule]}
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, pod_body("needs-feature", scheduler_name, containers=[container]))
        assert wait_for(lambda: bound_to(core, namespace, "needs-feature"), timeout=60, what="bound") == declaring
        big = {**container, "resources": {"requests": {"cpu": "2"}}}
        core.create_namespaced_pod(namespace, pod_body("needs-feature-big", scheduler_name, containers=[big]))
        message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's required features."
        wait_for(lambda: reported(core, namespace, "needs-feature-big", message), timeout=60, what="reported")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}]},
            # VolumeBinding's PreFilter, as kube-scheduler reports a missing claim.
            '0/1 nodes are available: persistentvolumeclaim "missing" not found.',
        ),
    ],
    ids=["persistent-volume-claim"],
)
def test_pods_with_claims_are_reported_not_bound(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    spec: dict[str, Any],
    message: str,
) -> None:
    nodes(f"{namespace}-n", cpu="4")
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, pod_body("claims", scheduler_name, **spec))
        core.create_namespaced_pod(namespace, pod_body("plain", scheduler_name))
        wait_for(lambda: bound_to(core, namespace, "plain"), timeout=60, what="the plain pod bound")
        # A PreFilter rejection: DynamicResources' PostFilter finds no state of its own and kube's
        # message ends with its error, "not found" (DefaultPreemption does not run after an error).
        wait_for(lambda: reported(core, namespace, "claims", message, " not found"), timeout=60, what="reported")
        assert not bound_to(core, namespace, "claims")


def test_pod_resized_in_place_is_accounted_at_its_allocated_size(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    node = nodes(f"{namespace}-n", cpu="4")
    container = {"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "1"}}}
    core.create_namespaced_pod(namespace, pod_body("resized", scheduler_name, nodeName=node, containers=[container]))
    wait_for(
        lambda: core.read_namespaced_pod("resized", namespace).status.phase == "Running", timeout=60, what="Running"
    )
    # What the kubelet reports after resizing the running pod up to 3 CPUs (spec still says 1).
    allocated = [
        {
            "name": "c",
            "image": PAUSE,
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "allocatedResources": {"cpu": "3"},
            "resources": {"requests": {"cpu": "3"}},
        }
    ]

    def report_resize() -> bool:
        core.patch_namespaced_pod_status("resized", namespace, {"status": {"containerStatuses": allocated}})
        statuses = core.read_namespaced_pod("resized", namespace).status.container_statuses or []
        return any((s.allocated_resources or {}).get("cpu") == "3" for s in statuses)

    wait_for(report_resize, timeout=30, what="allocatedResources reported")
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(
            namespace, pod_body("needs-two", scheduler_name, resources={"requests": {"cpu": "2"}})
        )
        wait_for(
            lambda: reported(core, namespace, "needs-two", "0/1 nodes are available: 1 Insufficient cpu."),
            timeout=60,
            what="needs-two reported unschedulable",
        )
