"""Coscheduling on the real control plane, with scheduler-plugins' PodGroup CRD installed from the
chart's copy and the scheduler configured as scheduler-plugins' as-a-second-scheduler manifest
configures kube-scheduler: a gang that fits binds whole; one that does not binds nothing and each
member says why; two gangs that together do not fit end with one bound whole and the other
waiting whole (no deadlock); a Permit timeout releases what the waiting members held."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness import chart
from harness.controlplane import ControlPlane
from harness.workload import (
    api_pod,
    failed_scheduling_messages,
    pod_events,
    running_scheduler,
    scheduled_condition,
    wait_for,
)
from tests.cluster.conftest import NodeFactory, apply_example, job_controller, run_explain

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
LABEL = "scheduling.x-k8s.io/pod-group"
CRD_FILE = chart.CHART_DIR / "files" / "podgroups.scheduling.x-k8s.io.yaml"


@pytest.fixture(scope="module")
def podgroup_crd(k8s: Any) -> Iterator[None]:
    """The chart's PodGroup CRD, served before any scheduler starts (it lists PodGroups at start)."""
    extensions = k8s_client.ApiextensionsV1Api(k8s)
    crd = yaml.safe_load(CRD_FILE.read_text())
    extensions.create_custom_resource_definition(crd)

    def established() -> bool:
        read: Any = extensions.read_custom_resource_definition(crd["metadata"]["name"])
        conditions = read.status.conditions or ()
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, timeout=30, what="PodGroup CRD established")
    yield
    extensions.delete_custom_resource_definition(crd["metadata"]["name"])


def config_file(tmp_path: Path, scheduler_name: str, **args: int) -> Path:
    """scheduler-plugins' manifests/coscheduling/scheduler-config.yaml, for this test's scheduler."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": scheduler_name,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10, **args}}],
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def create_pod_group(k8s: Any, namespace: str, name: str, min_member: int, timeout: int | None = None) -> None:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    k8s_client.CustomObjectsApi(k8s).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def create_member(
    core: Any,
    namespace: str,
    name: str,
    group: str,
    scheduler_name: str,
    cpu: str,
    node_selector: dict[str, str] | None = None,
) -> None:
    pod: Any = api_pod(name, scheduler_name, cpu=cpu)
    pod.metadata.labels[LABEL] = group
    pod.spec.node_selector = node_selector
    pod.spec.termination_grace_period_seconds = 0
    core.create_namespaced_pod(namespace, pod)


def bound(core: Any, namespace: str) -> dict[str, str]:
    """Pod name -> node of every bound pod of the namespace."""
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name}


def stays_unbound(core: Any, namespace: str, names: set[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert not names & set(bound(core, namespace)), bound(core, namespace)
        time.sleep(0.2)


def failed_scheduling(core: Any, namespace: str, name: str) -> list[str]:
    return failed_scheduling_messages(core, namespace, name)


def test_a_gang_that_fits_binds_whole(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
    podgroup_crd: None,
) -> None:
    nodes(f"{scheduler_name}-a", cpu="2")
    nodes(f"{scheduler_name}-b", cpu="2")
    with running_scheduler(control_plane, scheduler_name, config=config_file(tmp_path, scheduler_name)):
        for i in range(3):
            create_member(core, namespace, f"fits-{i}", "fits", scheduler_name, cpu="1")
        # Members of a PodGroup not (yet) created are refused at Permit, as scheduler-plugins does;
        # the PodGroup's arrival (watched) requeues them.
        wait_for(
            lambda: "0/1 nodes are available: 1 PodGroup not found." in failed_scheduling(core, namespace, "fits-0"),
            timeout=60,
            what="fits-0 refused for its missing PodGroup",
        )
        create_pod_group(k8s, namespace, "fits", min_member=3)
        wait_for(lambda: len(bound(core, namespace)) == 3, timeout=60, what="the whole gang bound")
    for i in range(3):
        events = pod_events(core, namespace, f"fits-{i}")
        assert any(e.reason == "Scheduled" for e in events), [e.message for e in events]


def test_a_gang_that_does_not_fit_binds_nothing_and_says_why(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
    podgroup_crd: None,
) -> None:
    nodes(f"{scheduler_name}-a", cpu="2")
    nodes(f"{scheduler_name}-b", cpu="2")
    create_pod_group(k8s, namespace, "big", min_member=3)
    names = {f"big-{i}" for i in range(3)}
    with running_scheduler(control_plane, scheduler_name, config=config_file(tmp_path, scheduler_name)):
        for name in sorted(names):
            create_member(core, namespace, name, "big", scheduler_name, cpu="1500m")

        def everyone_told() -> bool:
            return all(failed_scheduling(core, namespace, name) for name in names)

        wait_for(everyone_told, timeout=60, what="FailedScheduling for every member")
        stays_unbound(core, namespace, names, 5)
    messages = [m for name in sorted(names) for m in failed_scheduling(core, namespace, name)]
    assert any("PodGroup " + namespace + "/big gets rejected due to Pod" in m for m in messages), messages
    for name in names:
        condition = scheduled_condition(core.read_namespaced_pod(name, namespace))
        assert condition is not None and (condition.status, condition.reason) == ("False", "Unschedulable")


def test_two_gangs_that_together_do_not_fit_do_not_deadlock(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
    podgroup_crd: None,
) -> None:
    nodes(f"{scheduler_name}-a", cpu="2")
    nodes(f"{scheduler_name}-b", cpu="2")
    create_pod_group(k8s, namespace, "one", min_member=3)
    create_pod_group(k8s, namespace, "two", min_member=3)
    with running_scheduler(control_plane, scheduler_name, config=config_file(tmp_path, scheduler_name)):
        # Interleaved, so that both gangs reach Permit with part of their members.
        for i in range(3):
            create_member(core, namespace, f"one-{i}", "one", scheduler_name, cpu="1")
            create_member(core, namespace, f"two-{i}", "two", scheduler_name, cpu="1")
        wait_for(lambda: len(bound(core, namespace)) == 3, timeout=90, what="one gang bound")
        placed = {name.rsplit("-", 1)[0] for name in bound(core, namespace)}
        assert len(placed) == 1, bound(core, namespace)
        waiting = ({"one", "two"} - placed).pop()
        stays_unbound(core, namespace, {f"{waiting}-{i}" for i in range(3)}, 5)
    assert len(bound(core, namespace)) == 3


def test_a_permit_timeout_releases_what_the_waiting_members_hold(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
    podgroup_crd: None,
) -> None:
    node = nodes(f"{scheduler_name}-a", cpu="2")
    # The third member fits no node; with podGroupRejectPercentage 100 its failures never reject the
    # group, so the two others wait at Permit, holding the node, until the PodGroup's timeout.
    create_pod_group(k8s, namespace, "stuck", min_member=3, timeout=4)
    config = config_file(tmp_path, scheduler_name, podGroupRejectPercentage=100)
    # All three members exist before the scheduler starts: a member created after its siblings were
    # rejected at PreFilter sends no UnscheduledPodAdd without GenericWorkload (as kube's queue), so
    # the siblings would wait for the 5-minute flush instead of reaching Permit.
    create_member(core, namespace, "stuck-0", "stuck", scheduler_name, cpu="1")
    create_member(core, namespace, "stuck-1", "stuck", scheduler_name, cpu="1")
    create_member(core, namespace, "stuck-2", "stuck", scheduler_name, cpu="1", node_selector={"no": "such"})
    with running_scheduler(control_plane, scheduler_name, config=config):
        time.sleep(1)
        filler: Any = api_pod("filler", scheduler_name, cpu="2")
        filler.spec.termination_grace_period_seconds = 0
        core.create_namespaced_pod(namespace, filler)
        # Held by the waiting members first, then released by their timeout.
        wait_for(lambda: failed_scheduling(core, namespace, "filler"), timeout=30, what="filler rejected while held")
        wait_for(
            lambda: bound(core, namespace).get("filler") == node, timeout=60, what="filler bound after the timeout"
        )
    assert any(
        "rejected due to timeout after waiting 4s at plugin Coscheduling" in m
        for name in ("stuck-0", "stuck-1")
        for m in failed_scheduling(core, namespace, name)
    )
    assert set(bound(core, namespace)) == {"filler"}
    assert failed_scheduling(core, namespace, "stuck-2")


def test_coscheduling_example_is_explained_then_binds_whole(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
    podgroup_crd: None,
) -> None:
    """deploy/examples/gang-coscheduling.yaml as the README shows it: the apiserver takes the PodGroup
    and the Job; with room for three of the Job controller's four pods, `explain` names the member
    that blocks the group and why; with a fourth node the scheduler binds all four.

    `explain` runs before the scheduler starts: once members have been rejected at Permit they wait,
    as under scheduler-plugins, for a Pod or PodGroup event (or the 5-minute flush), not for a node."""
    for i in range(3):
        nodes(f"{scheduler_name}-{i}", cpu="1")
    config = config_file(tmp_path, scheduler_name)
    with job_controller(control_plane):
        apply_example(control_plane, "gang-coscheduling.yaml", namespace, scheduler_name)
        pods = wait_for(
            lambda: (
                len(names := sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items)) == 4 and names
            ),
            timeout=60,
            what="the Job's four pods",
        )
        text = run_explain(
            control_plane, namespace, pods[0], "--scheduler-name", scheduler_name, "--config", str(config)
        )
        lines = text.splitlines()
        assert f"group {namespace}/training (scheduling.x-k8s.io/v1alpha1 PodGroup): minMember 4" in lines
        assert "members: 4 exist, 0 bound, 3 would be assumed, 0 gated" in lines
        held = [line for line in lines if line.startswith(f"  {namespace}/training-")]
        assert held == [f"  {namespace}/{pods[-1]}: 0/3 nodes are available: 3 Insufficient cpu."], text
        assert (
            "group verdict: minMember 4 not reached: 0 bound + 3 would be assumed; "
            "the placed members would wait at Permit, then be rejected together"
        ) in lines

        nodes(f"{scheduler_name}-3", cpu="1")
        with running_scheduler(control_plane, scheduler_name, config=config):
            placed = wait_for(
                lambda: len(bound(core, namespace)) == 4 and bound(core, namespace),
                timeout=60,
                what="the Job bound whole",
            )
        assert len(set(placed.values())) == 4
