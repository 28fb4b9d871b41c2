"""Framework behaviour on the real control plane: Permit, out-of-tree plugins, requeueing, profiles."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.controlplane import ControlPlane
from harness.workload import api_pod, metric_value, pod_events, running_scheduler, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

OOT = Path(__file__).parent / "oot"
CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


@pytest.fixture
def permit_gate(tmp_path: Path, scheduler_name: str) -> Iterator[tuple[Path, Path, tuple[Path, ...]]]:
    """A config enabling the out-of-tree PermitGate plugin, its allow dir, and the PYTHONPATH that
    makes its entry point visible (a real .dist-info, as an installed distribution would have)."""
    site = tmp_path / "site"
    dist = site / "permitgate_test-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: permitgate-test\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[secondary_scheduler.plugins]\nPermitGate = permitgate\n")
    allow = tmp_path / "allow"
    allow.mkdir()
    config = tmp_path / "config.yaml"
    profile = {
        "schedulerName": scheduler_name,
        "plugins": {"permit": {"enabled": [{"name": "PermitGate"}]}},
        "pluginConfig": [{"name": "PermitGate", "args": {"allowDir": str(allow), "timeoutSeconds": 60}}],
    }
    config.write_text(yaml.safe_dump({**CONFIG, "profiles": [profile]}))
    yield config, allow, (site, OOT)


def test_permit_plugin_from_entry_point_holds_pod_until_allowed(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    permit_gate: tuple[Path, Path, tuple[Path, ...]],
) -> None:
    config, allow, python_path = permit_gate
    node = nodes(f"{namespace}-n0")
    with running_scheduler(control_plane, scheduler_name, config=config, python_path=python_path) as port:
        core.create_namespaced_pod(namespace, api_pod("held", scheduler_name))
        wait_for(lambda: metric_value(port, "scheduler_cache_size", type="assumed_pods") == 1, what="assumed")
        time.sleep(1.5)
        assert not core.read_namespaced_pod("held", namespace).spec.node_name
        (allow / "held").touch()
        wait_for(lambda: core.read_namespaced_pod("held", namespace).spec.node_name == node, what="bound after allow")


def test_pod_deleted_while_waiting_leaves_nothing_assumed_or_bound(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    permit_gate: tuple[Path, Path, tuple[Path, ...]],
) -> None:
    config, allow, python_path = permit_gate
    nodes(f"{namespace}-n0")
    with running_scheduler(control_plane, scheduler_name, config=config, python_path=python_path) as port:
        core.create_namespaced_pod(namespace, api_pod("doomed", scheduler_name))
        wait_for(lambda: metric_value(port, "scheduler_cache_size", type="assumed_pods") == 1, what="assumed")
        core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)
        wait_for(lambda: metric_value(port, "scheduler_cache_size", type="assumed_pods") == 0, what="forgotten")
        (allow / "doomed").touch()  # allowing it now must not resurrect a binding
        time.sleep(1)
        assert metric_value(port, "scheduler_cache_size", type="pods") == 0
        assert metric_value(port, "scheduler_schedule_attempts_total", result="scheduled") == 0
        assert metric_value(port, "scheduler_pending_pods", queue="active") == 0
        assert metric_value(port, "scheduler_pending_pods", queue="unschedulable") == 0
    assert not [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == "doomed"]


def test_unschedulable_pod_requeued_by_node_add_not_by_unrelated_pod_update(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    nodes(f"{namespace}-small", cpu="1")
    core.create_namespaced_pod(namespace, api_pod("bystander", "nobody"))
    with running_scheduler(control_plane, scheduler_name) as port:
        core.create_namespaced_pod(namespace, api_pod("big", scheduler_name, cpu="3"))

        def unschedulable_attempts() -> float:
            return metric_value(port, "scheduler_schedule_attempts_total", result="unschedulable")

        wait_for(lambda: unschedulable_attempts() == 1, what="first failed attempt")
        wait_for(lambda: metric_value(port, "scheduler_pending_pods", queue="unschedulable") == 1, what="parked")
        # Unrelated changes: another scheduler's pod is updated, a node too small for it appears.
        core.patch_namespaced_pod("bystander", namespace, {"metadata": {"labels": {"touched": "yes"}}})
        nodes(f"{namespace}-also-small", cpu="2")
        time.sleep(3)
        assert unschedulable_attempts() == 1
        assert len([e for e in pod_events(core, namespace, "big") if e.reason == "FailedScheduling"]) == 1
        big = nodes(f"{namespace}-big", cpu="4")
        wait_for(lambda: core.read_namespaced_pod("big", namespace).spec.node_name == big, what="bound on node add")
        assert unschedulable_attempts() == 1


def test_two_profiles_in_one_process_each_schedule_only_their_own_pods(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, tmp_path: Path
) -> None:
    for i in range(3):
        nodes(f"{namespace}-n{i}", cpu="4")
    spread, pack = f"spread-{namespace}", f"pack-{namespace}"
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                **CONFIG,
                "profiles": [
                    {"schedulerName": spread},
                    {
                        "schedulerName": pack,
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                        ],
                    },
                ],
            }
        )
    )
    with running_scheduler(control_plane, spread, config=config) as port:
        for i in range(3):
            core.create_namespaced_pod(namespace, api_pod(f"s-{i}", spread, cpu="500m"))
        wait_for(
            lambda: all(core.read_namespaced_pod(f"s-{i}", namespace).spec.node_name for i in range(3)),
            what="spread pods bound",
        )
        for i in range(3):
            core.create_namespaced_pod(namespace, api_pod(f"p-{i}", pack, cpu="500m"))
        core.create_namespaced_pod(namespace, api_pod("stranger", "nobody"))
        wait_for(
            lambda: all(core.read_namespaced_pod(f"p-{i}", namespace).spec.node_name for i in range(3)),
            what="pack pods bound",
        )
        assert metric_value(port, "scheduler_schedule_attempts_total", profile=spread, result="scheduled") == 3
        assert metric_value(port, "scheduler_schedule_attempts_total", profile=pack, result="scheduled") == 3
    spread_nodes = {core.read_namespaced_pod(f"s-{i}", namespace).spec.node_name for i in range(3)}
    pack_nodes = {core.read_namespaced_pod(f"p-{i}", namespace).spec.node_name for i in range(3)}
    assert len(spread_nodes) == 3  # LeastAllocated spreads over the three empty nodes
    assert len(pack_nodes) == 1  # MostAllocated piles onto one node
    assert not core.read_namespaced_pod("stranger", namespace).spec.node_name
