"""Gang scheduling with upstream's PodGroups (scheduling.k8s.io/v1beta1, GenericWorkload) against a
real kube-apiserver v1.37.2 started with --feature-gates=GenericWorkload=true and
--runtime-config=scheduling.k8s.io/v1beta1=true (its own control plane: the session one serves no
PodGroups). The gang of FIELD_NOTES: 3 x 800m on two 1-CPU nodes waits whole with kube's
PodGroup condition; a third node binds it whole. With the gate off the same pods go one by one,
as kube-scheduler does with GenericWorkload off.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.workload import make_node, running_scheduler, wait_for
from tests.cluster.conftest import apply_example, job_controller, run_explain
from tests.conftest import api_client

pytestmark = pytest.mark.cluster

GATE = "--feature-gates=GenericWorkload=true"
TAS_GATES = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"


@pytest.fixture(scope="module")
def gang_plane() -> Iterator[ControlPlane]:
    with ControlPlane(
        feature_gates={"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True},
        runtime_config={"scheduling.k8s.io/v1beta1": "true"},
    ) as plane:
        yield plane


@pytest.fixture
def gang_core(gang_plane: ControlPlane) -> Iterator[Any]:
    api = api_client(gang_plane)
    try:
        yield k8s_client.CoreV1Api(api)
    finally:
        api.close()


@pytest.fixture
def gang_namespace(gang_plane: ControlPlane, gang_core: Any) -> Iterator[str]:
    name = f"gang-{uuid.uuid4().hex[:8]}"
    gang_core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=name)))
    nodes_before = {n.metadata.name for n in gang_core.list_node().items}
    yield name
    gang_core.delete_namespace(name)
    for node in gang_core.list_node().items:
        if node.metadata.name not in nodes_before:
            gang_core.delete_node(node.metadata.name)


def _post(plane: ControlPlane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, reply = plane.http_request("POST", path, body)
    assert status == 201, reply.decode()
    created: dict[str, Any] = json.loads(reply)
    return created


def create_pod_group(plane: ControlPlane, namespace: str, name: str, min_count: int, topology: str = "") -> None:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    body = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    _post(plane, PODGROUPS.format(namespace=namespace), body)


def create_member(plane: ControlPlane, namespace: str, name: str, scheduler: str, group: str, cpu: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "schedulingGroup": {"podGroupName": group},
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }
    _post(plane, f"/api/v1/namespaces/{namespace}/pods", body)


def pod_group_condition(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    status, reply = plane.http_request("GET", f"{PODGROUPS.format(namespace=namespace)}/{name}")
    assert status == 200, reply.decode()
    conditions = (json.loads(reply).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodGroupInitiallyScheduled"), None)


def bound(core: Any, namespace: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name}


def test_gang_waits_whole_then_binds_whole(gang_plane: ControlPlane, gang_core: Any, gang_namespace: str) -> None:
    namespace, core = gang_namespace, gang_core
    scheduler = f"sched-{uuid.uuid4().hex[:8]}"
    for node in ("n1", "n2"):
        make_node(core, f"{namespace}-{node}", cpu="1", memory="4Gi")
    with running_scheduler(gang_plane, scheduler, extra_args=(GATE,)):
        create_pod_group(gang_plane, namespace, "gang", 3)
        for name in ("g1", "g2", "g3"):
            create_member(gang_plane, namespace, name, scheduler, "gang", "800m")

        condition = wait_for(
            lambda: pod_group_condition(gang_plane, namespace, "gang"),
            timeout=60,
            what="PodGroupInitiallyScheduled on the PodGroup",
        )
        # As kube-scheduler v1.37.2 writes it on the same cluster (checked 2026-12-02).
        group_message = (
            "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "Unschedulable",
            group_message,
        )
        # PodGroups carry no metadata.generation: kube's ObservedGeneration is 0 and left out.
        assert "observedGeneration" not in condition
        assert bound(core, namespace) == {}
        messages = sorted(
            next(
                c.message
                for c in core.read_namespaced_pod(name, namespace).status.conditions or ()
                if c.type == "PodScheduled"
            )
            for name in ("g1", "g2", "g3")
        )
        assert messages == [
            "0/2 nodes are available: 2 Insufficient cpu.",
            f"pod group is unschedulable, {group_message}",
            f"pod group is unschedulable, {group_message}",
        ]

        make_node(core, f"{namespace}-n3", cpu="1", memory="4Gi")
        placed = wait_for(
            lambda: len(bound(core, namespace)) == 3 and bound(core, namespace), timeout=60, what="the whole gang bound"
        )
        assert sorted(placed.values()) == [f"{namespace}-n1", f"{namespace}-n2", f"{namespace}-n3"]
        done = wait_for(
            lambda: (c := pod_group_condition(gang_plane, namespace, "gang")) and c["status"] == "True" and c,
            timeout=30,
            what="PodGroupInitiallyScheduled=True",
        )
        assert done["reason"] == "Scheduled"


def test_topology_constrained_gang_is_placed_in_one_zone(
    gang_plane: ControlPlane, gang_core: Any, gang_namespace: str
) -> None:
    namespace, core = gang_namespace, gang_core
    scheduler = f"sched-{uuid.uuid4().hex[:8]}"
    # Zone a cannot hold three 800m members (two 1-CPU nodes); zone b can.
    for node, zone, cpu in (("a1", "a", "1"), ("a2", "a", "1"), ("b1", "b", "2"), ("b2", "b", "2")):
        make_node(core, f"{namespace}-{node}", cpu=cpu, memory="4Gi", labels={f"{namespace}/zone": zone})
    with running_scheduler(gang_plane, scheduler, extra_args=(TAS_GATES,)):
        create_pod_group(gang_plane, namespace, "gang", 3, topology=f"{namespace}/zone")
        for name in ("g1", "g2", "g3"):
            create_member(gang_plane, namespace, name, scheduler, "gang", "800m")
        placed = wait_for(
            lambda: len(bound(core, namespace)) == 3 and bound(core, namespace), timeout=60, what="gang bound"
        )
        assert set(placed.values()) <= {f"{namespace}-b1", f"{namespace}-b2"}


def test_gate_off_schedules_members_one_by_one(gang_plane: ControlPlane, gang_core: Any, gang_namespace: str) -> None:
    namespace, core = gang_namespace, gang_core
    scheduler = f"sched-{uuid.uuid4().hex[:8]}"
    for node in ("n1", "n2"):
        make_node(core, f"{namespace}-{node}", cpu="1", memory="4Gi")
    with running_scheduler(gang_plane, scheduler):
        create_pod_group(gang_plane, namespace, "gang", 3)
        for name in ("g1", "g2", "g3"):
            create_member(gang_plane, namespace, name, scheduler, "gang", "800m")
        wait_for(lambda: len(bound(core, namespace)) == 2, timeout=60, what="two members bound without the gate")
        assert pod_group_condition(gang_plane, namespace, "gang") is None


def test_gate_on_against_an_apiserver_without_pod_groups_is_one_line(control_plane: ControlPlane) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "run",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--serve-plain-http",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--no-leader-elect",
            GATE,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "secondary-scheduler: cannot start: 404 NotFound: GenericWorkload is enabled but the apiserver does not "
        "serve scheduling.k8s.io/v1beta1 podgroups (start it with --feature-gates=GenericWorkload=true "
        "--runtime-config=scheduling.k8s.io/v1beta1=true)"
    )


def test_upstream_example_waits_whole_explains_then_binds_whole(
    gang_plane: ControlPlane, gang_core: Any, gang_namespace: str
) -> None:
    """deploy/examples/gang-upstream.yaml as the README shows it: the apiserver takes the PodGroup and
    the Job; the Job controller's four pods wait whole on three 1-CPU nodes, `explain` names the
    member that blocks the group and why, a fourth node binds all four."""
    namespace, core = gang_namespace, gang_core
    scheduler = f"sched-{uuid.uuid4().hex[:8]}"
    for node in ("n1", "n2", "n3"):
        make_node(core, f"{namespace}-{node}", cpu="1", memory="4Gi")
    with job_controller(gang_plane), running_scheduler(gang_plane, scheduler, extra_args=(GATE,)):
        apply_example(gang_plane, "gang-upstream.yaml", namespace, scheduler)
        condition = wait_for(
            lambda: pod_group_condition(gang_plane, namespace, "training"),
            timeout=60,
            what="PodGroupInitiallyScheduled on the example's PodGroup",
        )
        group_message = (
            "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )
        assert (condition["status"], condition["message"]) == ("False", group_message)
        assert bound(core, namespace) == {}
        pods = sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items)
        assert len(pods) == 4

        text = run_explain(gang_plane, namespace, pods[0], "--scheduler-name", scheduler, GATE)
        lines = text.splitlines()
        assert f"group {namespace}/training (scheduling.k8s.io/v1beta1 PodGroup): minCount 4" in lines
        assert "members: 4 exist, 0 bound, 3 would be assumed, 0 gated" in lines
        held = [line for line in lines if line.startswith(f"  {namespace}/training-")]
        assert held == [f"  {namespace}/{pods[-1]}: 0/3 nodes are available: 3 Insufficient cpu."], text
        assert f"group verdict: {group_message}" in lines

        make_node(core, f"{namespace}-n4", cpu="1", memory="4Gi")
        placed = wait_for(
            lambda: len(bound(core, namespace)) == 4 and bound(core, namespace), timeout=60, what="the Job bound whole"
        )
        assert len(set(placed.values())) == 4


def test_gang_preempts_lower_priority_pods_and_disruption_mode_all_takes_the_whole_group(
    gang_plane: ControlPlane, gang_core: Any, gang_namespace: str
) -> None:
    """A high-priority gang of 800m + 700m on two 1-CPU nodes fits only once batch's 500m member on one
    node goes; batch has disruptionMode all, so its 200m member on the other node goes too. The gang
    then binds whole."""
    namespace, core = gang_namespace, gang_core
    scheduler = f"sched-{uuid.uuid4().hex[:8]}"
    high = f"{namespace}-high"
    k8s_client.SchedulingV1Api(core.api_client).create_priority_class(
        k8s_client.V1PriorityClass(metadata=k8s_client.V1ObjectMeta(name=high), value=1000)
    )
    try:
        for node in ("n1", "n2"):
            make_node(core, f"{namespace}-{node}", cpu="1", memory="4Gi")
        batch = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "batch"},
            "spec": {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}},
        }
        _post(gang_plane, PODGROUPS.format(namespace=namespace), batch)
        for name, node, cpu in (("b1", "n1", "500m"), ("b2", "n2", "200m")):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name},
                "spec": {
                    "nodeName": f"{namespace}-{node}",
                    "schedulingGroup": {"podGroupName": "batch"},
                    "containers": [
                        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            }
            _post(gang_plane, f"/api/v1/namespaces/{namespace}/pods", body)
        with running_scheduler(gang_plane, scheduler, extra_args=(GATE,)):
            train = {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": high},
            }
            _post(gang_plane, PODGROUPS.format(namespace=namespace), train)
            for name, cpu in (("t1", "800m"), ("t2", "700m")):
                body = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name},
                    "spec": {
                        "schedulerName": scheduler,
                        "priorityClassName": high,
                        "schedulingGroup": {"podGroupName": "train"},
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": cpu}},
                            }
                        ],
                    },
                }
                _post(gang_plane, f"/api/v1/namespaces/{namespace}/pods", body)
            placed = wait_for(
                lambda: {"t1", "t2"} <= set(bound(core, namespace)) and bound(core, namespace),
                timeout=60,
                what="the high-priority gang bound",
            )
            assert set(placed) == {"t1", "t2"}  # both batch members are gone
            assert sorted(placed.values()) == [f"{namespace}-n1", f"{namespace}-n2"]
            names = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
            assert names == {"t1", "t2"}
            events = core.list_namespaced_event(namespace).items
            preempted = {e.involved_object.name for e in events if e.reason == "Preempted"}
            assert preempted == {"b1", "b2"}
    finally:
        k8s_client.SchedulingV1Api(core.api_client).delete_priority_class(high)
