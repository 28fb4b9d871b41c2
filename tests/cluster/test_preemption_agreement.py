"""Preemption compared with the real kube-scheduler v1.37.2, scenario by scenario: the same
cluster is built twice on the shared control plane, once for kube-scheduler and once for ours;
each must bind the preemptor to the same node, preempt the same victims and write the same
FailedScheduling message (node names replaced by their role).

Ours runs with victimRemoval: delete here, the mode that is upstream's behaviour exactly.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.workload import api_pod, failed_scheduling_messages, make_node, running_scheduler, wait_for
from tests.cluster.test_preemption import protect, running_pod

pytestmark = pytest.mark.cluster


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[str, ...]  # roles; every node has 2 cpu
    pods: tuple[tuple[str, str, str, str], ...]  # (name, node role, cpu, priority level)
    protected: tuple[str, ...] = ()  # app labels (pod name without "-N") under a PDB allowing nothing
    preemptor_cpu: str = "2"
    binds: bool = True  # False: preemption cannot help, only the message is compared


SCENARIOS = (
    Scenario("lowest-victim", ("n1", "n2"), (("mid-0", "n1", "2", "mid"), ("low-0", "n2", "2", "low"))),
    Scenario(
        "pdb-moves-preemption",
        ("n1", "n2"),
        (("mid-0", "n1", "2", "mid"), ("low-0", "n2", "2", "low")),
        protected=("low",),
    ),
    Scenario(
        "several-candidates",
        ("n1", "n2", "n3"),
        (
            ("lowa-0", "n1", "1", "low"),
            ("lowb-0", "n1", "1", "low"),
            ("mid-0", "n2", "1", "mid"),
            ("lowc-0", "n2", "1", "low"),
            ("lowd-0", "n3", "2", "low"),
        ),
    ),
    Scenario("reprieve", ("n1",), (("mid-0", "n1", "1", "mid"), ("low-0", "n1", "1", "low")), preemptor_cpu="1"),
    Scenario(
        "violation-unavoidable",
        ("n1", "n2"),
        (("mid-0", "n1", "2", "mid"), ("low-0", "n2", "2", "low")),
        protected=("low", "mid"),
    ),
    Scenario(
        "not-helpful",
        ("n1", "n2"),
        (("mid-0", "n1", "2", "mid"), ("low-0", "n2", "1", "low")),
        preemptor_cpu="3",
        binds=False,
    ),
)


@dataclass(frozen=True)
class Outcome:
    node: str
    survivors: frozenset[str]
    message: str


def build(core: Any, k8s: Any, scenario: Scenario, prefix: str, classes: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The scenario's nodes and pods in a fresh namespace; returns it and node name -> role."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=namespace)))
    roles = {f"{namespace}-{role}": role for role in scenario.nodes}
    for node in roles:
        make_node(core, node, cpu="2")
    by_role = {role: node for node, role in roles.items()}
    for name, role, cpu, level in scenario.pods:
        running_pod(core, namespace, name, by_role[role], cpu, classes[level])
    wait_for(
        lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
        timeout=60,
        what="existing pods Running",
    )
    for app in scenario.protected:
        protect(k8s, namespace, app)
    return namespace, roles


def outcome(core: Any, namespace: str, roles: dict[str, str], binds: bool) -> Outcome:
    def failed() -> list[str]:
        return failed_scheduling_messages(core, namespace, "vip")

    node = ""
    if binds:
        node = wait_for(lambda: core.read_namespaced_pod("vip", namespace).spec.node_name, timeout=90, what="vip bound")
    messages = wait_for(failed, timeout=60, what="a FailedScheduling event")
    pods = core.list_namespaced_pod(namespace).items
    survivors = frozenset(
        p.metadata.name for p in pods if p.metadata.name != "vip" and not p.metadata.deletion_timestamp
    )
    message = re.sub("|".join(map(re.escape, sorted(roles, key=len, reverse=True))), lambda m: roles[m[0]], messages[0])
    return Outcome(roles.get(node, ""), survivors, message)


def teardown(core: Any, namespace: str, roles: dict[str, str]) -> None:
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for node in roles:
        core.delete_node(node)
    core.delete_namespace(namespace)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_preemption_agrees_with_kube_scheduler(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    priority_classes: dict[str, str],
    disruption_controller: None,
    scenario: Scenario,
    tmp_path: Path,
) -> None:
    results: dict[str, Outcome] = {}
    kube_name, our_name = f"kube-{uuid.uuid4().hex[:6]}", f"ours-{uuid.uuid4().hex[:6]}"
    namespace, roles = build(core, k8s, scenario, "kube", priority_classes)
    kube = control_plane.start_kube_scheduler(kube_name)
    try:
        core.create_namespaced_pod(
            namespace, api_pod("vip", kube_name, cpu=scenario.preemptor_cpu, priority_class=priority_classes["high"])
        )
        results["kube"] = outcome(core, namespace, roles, scenario.binds)
    finally:
        control_plane.stop_process(kube)
        teardown(core, namespace, roles)
    namespace, roles = build(core, k8s, scenario, "ours", priority_classes)
    config = tmp_path / "config.yaml"
    profile = {
        "schedulerName": our_name,
        "pluginConfig": [{"name": "DefaultPreemption", "args": {"victimRemoval": "delete"}}],
    }
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [profile],
            }
        )
    )
    try:
        with running_scheduler(control_plane, our_name, config=config):
            core.create_namespaced_pod(
                namespace,
                api_pod("vip", our_name, cpu=scenario.preemptor_cpu, priority_class=priority_classes["high"]),
            )
            results["ours"] = outcome(core, namespace, roles, scenario.binds)
    finally:
        teardown(core, namespace, roles)
    if scenario.binds:
        # The scenario is about preemption: kube-scheduler did preempt someone.
        assert results["kube"].survivors < {name for name, *_ in scenario.pods}
        assert "preemption: found a potential placement" in results["kube"].message
    assert results["ours"] == results["kube"]
