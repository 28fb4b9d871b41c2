"""explain: a dry scheduling cycle that says, node by node, why a pod does or does not fit."""

from __future__ import annotations

from typing import Any

from scheduler.app import Options
from scheduler.explain import explain_pod


def node(name: str, cpu: str, taint: bool = False) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "uid": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }
    if taint:
        raw["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    return raw


def pod(name: str, cpu: str, node_name: str = "", priority: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {
            "schedulerName": "secondary-scheduler",
            "nodeName": node_name,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def test_pending_pod_reasons_per_node_and_message() -> None:
    cluster = {
        "nodes": [node("small", "1"), node("busy", "4"), node("gpu", "8", taint=True)],
        "pods": [pod("hog", "3", node_name="busy")],
    }
    result = explain_pod(Options(), pod("want", "2"), cluster)
    by_node = {v.node: v.status for v in result.verdicts}
    assert by_node["small"] is not None
    assert by_node["small"].plugin == "NodeResourcesFit"
    assert by_node["busy"] is not None
    assert by_node["busy"].reasons == ("Insufficient cpu",)
    assert by_node["gpu"] is not None
    assert by_node["gpu"].plugin == "TaintToleration"
    assert result.message == (
        "FailedScheduling: 0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    text = result.render()
    assert "rejected by: NodeResourcesFit (2 nodes), TaintToleration (1 nodes)" in text
    assert "busy" in text


def test_schedulable_pod_shows_scores_and_the_winner() -> None:
    cluster = {"nodes": [node("a", "4"), node("b", "4")], "pods": [pod("other", "2", node_name="a")]}
    result = explain_pod(Options(), pod("want", "1"), cluster)
    assert {v.node for v in result.feasible} == {"a", "b"}
    best = max(result.feasible, key=lambda v: v.total)
    assert best.node == "b"  # less allocated
    assert "NodeResourcesFit" in best.scores
    assert result.message.startswith("would be scheduled to b")


def test_explain_says_what_preemption_would_do() -> None:
    cluster = {
        "nodes": [node("busy", "4")],
        "pods": [pod("hog", "3", node_name="busy")],
        "pdbs": [
            {
                "metadata": {"name": "keep", "namespace": "ns"},
                "spec": {"selector": {"matchLabels": {"app": "other"}}},
                "status": {"disruptionsAllowed": 0},
            }
        ],
    }
    result = explain_pod(Options(), pod("vip", "2", priority=100), cluster)
    assert result.message == (
        "FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: found a potential placement for pod on node busy, preempting 1 victims"
    )


def test_explain_reads_the_volume_objects() -> None:
    """A pod's bound claim is looked up in the fetched PVs and PVCs (VOLUME_KINDS order)."""
    affinity = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["b"]}]}
            ]
        }
    }
    pv = {"metadata": {"name": "local", "resourceVersion": "1"}, "spec": {"nodeAffinity": affinity}}
    pvc = {
        "metadata": {"name": "data", "namespace": "ns", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"volumeName": "local"},
    }
    want = pod("want", "1")
    want["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    cluster = {"nodes": [node("a", "4"), node("b", "4")], "volumes_by_kind": [[], [pv], [pvc]]}
    result = explain_pod(Options(), want, cluster)
    by_node = {v.node: v.status for v in result.verdicts}
    status_a = by_node["a"]
    assert status_a is not None and status_a.message == "node(s) didn't match PersistentVolume's node affinity"
    assert by_node["b"] is None
    assert result.message.startswith("would be scheduled to b")
