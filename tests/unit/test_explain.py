"""explain: a dry scheduling cycle that says, node by node, why a pod does or does not fit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.app import Options
from scheduler.explain import explain_pod
from scheduler.features import parse_feature_gates


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


# ---- pod groups -------------------------------------------------------------------------------

GANG_GATES = "GenericWorkload=true"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


def upstream_member(name: str, cpu: str = "800m", node_name: str = "", gated: bool = False) -> dict[str, Any]:
    raw = pod(name, cpu, node_name=node_name)
    raw["spec"]["schedulingGroup"] = {"podGroupName": "gang"}
    if gated:
        raw["spec"]["schedulingGates"] = [{"name": "example.com/approval"}]
    return raw


def upstream_group(min_count: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "gang", "namespace": "ns", "uid": "pg", "resourceVersion": "1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def coscheduling_member(name: str, cpu: str = "800m") -> dict[str, Any]:
    raw = pod(name, cpu)
    raw["metadata"]["labels"] = {COSCHEDULING_LABEL: "gang"}
    return raw


def coscheduling_group(min_member: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "gang", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"minMember": min_member},
    }


def coscheduling_options(tmp_path: Path) -> Options:
    """scheduler-plugins' as-a-second-scheduler profile: Coscheduling everywhere, its queue sort."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "secondary-scheduler",
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Options(config=str(path))


@dataclass(frozen=True)
class GroupCase:
    name: str
    api: str  # "upstream" or "coscheduling"
    nodes: int  # 1-CPU nodes
    members: list[dict[str, Any]]
    group: dict[str, Any] | None
    # exist, bound, would be assumed, gated
    counts: tuple[int, int, int, int]
    held_back: dict[str, str]
    verdict: str
    whole: bool


GANG_UNSCHEDULABLE = (
    "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
    "pod group preemption: No preemption victims found for incoming preemptor"
)
INSUFFICIENT = "0/2 nodes are available: 2 Insufficient cpu."

GROUP_CASES = [
    GroupCase(
        "gang larger than the cluster: the third member blocks, quorum not reached",
        "upstream",
        2,
        [upstream_member(n) for n in ("g1", "g2", "g3")],
        upstream_group(3),
        (3, 0, 2, 0),
        {"ns/g3": INSUFFICIENT},
        GANG_UNSCHEDULABLE,
        False,
    ),
    GroupCase(
        "a member missing: PreEnqueue keeps the whole gang out of the queue",
        "upstream",
        3,
        [upstream_member(n) for n in ("g1", "g2")],
        upstream_group(3),
        (2, 0, 0, 0),
        {"(1 missing)": "minCount 3 needs 3 members, 2 exist"},
        "waits before the queue: GangScheduling: waiting for minCount pods from a gang to appear in scheduling queue",
        False,
    ),
    GroupCase(
        "a gated member stays behind; the quorum goes without it",
        "upstream",
        2,
        [upstream_member("g1", "100m"), upstream_member("g2", "100m"), upstream_member("g3", "100m", gated=True)],
        upstream_group(2),
        (3, 0, 2, 1),
        {"ns/g3": "gated: SchedulingGates: waiting for scheduling gates: [example.com/approval]"},
        "would be scheduled whole",
        True,
    ),
    GroupCase(
        "a bound member counts toward the quorum",
        "upstream",
        3,
        [upstream_member("g1", node_name="n0"), upstream_member("g2"), upstream_member("g3")],
        upstream_group(3),
        (3, 1, 2, 0),
        {},
        "would be scheduled whole",
        True,
    ),
    GroupCase(
        "the PodGroup does not exist",
        "upstream",
        2,
        [upstream_member(n) for n in ("g1", "g2")],
        None,
        (2, 0, 0, 0),
        {},
        'podgroup "gang" not found: no member is scheduled until it exists and is valid',
        False,
    ),
    GroupCase(
        "Coscheduling: two of three fit, minMember not reached",
        "coscheduling",
        2,
        [coscheduling_member(n) for n in ("c1", "c2", "c3")],
        coscheduling_group(3),
        (3, 0, 2, 0),
        {"ns/c3": INSUFFICIENT},
        "minMember 3 not reached: 0 bound + 2 would be assumed; "
        "the placed members would wait at Permit, then be rejected together",
        False,
    ),
    GroupCase(
        "Coscheduling: room for all",
        "coscheduling",
        3,
        [coscheduling_member(n) for n in ("c1", "c2", "c3")],
        coscheduling_group(3),
        (3, 0, 3, 0),
        {},
        "would be scheduled whole: minMember 3 reached, Permit lets the members go together",
        True,
    ),
    GroupCase(
        "Coscheduling: too few siblings, PreFilter rejects each member",
        "coscheduling",
        3,
        [coscheduling_member(n) for n in ("c1", "c2")],
        coscheduling_group(3),
        (2, 0, 0, 0),
        {
            "(1 missing)": "minMember 3 needs 3 members, 2 exist",
            "ns/c1": "0/3 nodes are available: pre-filter pod c1 cannot find enough sibling pods, "
            "current pods number: 2, minMember of group: 3.",
            "ns/c2": "0/3 nodes are available: pre-filter pod c2 cannot find enough sibling pods, "
            "current pods number: 2, minMember of group: 3.",
        },
        "minMember 3 not reached: 0 bound + 0 would be assumed",
        False,
    ),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c.name for c in GROUP_CASES])
def test_group_member_says_which_members_block_the_group(case: GroupCase, tmp_path: Path) -> None:
    cluster: dict[str, Any] = {
        "nodes": [node(f"n{i}", "1") for i in range(case.nodes)],
        "pods": case.members,
    }
    if case.api == "upstream":
        options = Options(feature_gates=parse_feature_gates(GANG_GATES))
        cluster["pod_groups"] = [case.group] if case.group else []
    else:
        options = coscheduling_options(tmp_path)
        cluster["scheduler_plugins_pod_groups"] = [case.group] if case.group else []
    explained = next(m for m in case.members if not m["spec"].get("nodeName") and not m["spec"].get("schedulingGates"))
    result = explain_pod(options, explained, cluster)
    group = result.group
    assert group is not None
    assert str(group.key) == "ns/gang"
    assert (group.exist, group.bound, group.assumed, group.gated) == case.counts
    assert {m.pod: m.blocks for m in group.held_back} == case.held_back
    assert group.verdict == case.verdict
    assert group.whole == case.whole
    text = result.render()
    assert f"group verdict: {case.verdict}" in text
    # The group's dry run reverted every assume: the pod's own verdicts still see the empty nodes.
    if case.counts[2] and not case.whole:
        assert result.message.startswith("would be scheduled to")
        assert text.splitlines()[-1].startswith("alone it would be scheduled to")


def test_pod_outside_any_group_has_no_group_section() -> None:
    options = Options(feature_gates=parse_feature_gates(GANG_GATES))
    result = explain_pod(options, pod("solo", "1"), {"nodes": [node("a", "2")], "pod_groups": [upstream_group(2)]})
    assert result.group is None
    assert "group" not in result.render()


def test_gang_that_would_preempt_says_it_waits_on_preemption() -> None:
    """The group's PodGroupPostFilter runs dry: the verdict names the members' nominated nodes, and
    nothing is evicted (explain writes nothing)."""
    low = pod("low", "500m", node_name="n1")
    members = [upstream_member(n, "400m") for n in ("g1", "g2")]
    for member in members:
        member["spec"]["priority"] = 10
    group = upstream_group(2)
    group["spec"]["priority"] = 10
    cluster = {"nodes": [node("n1", "1")], "pods": [low, *members], "pod_groups": [group]}
    result = explain_pod(Options(feature_gates=parse_feature_gates(GANG_GATES)), members[0], cluster)
    assert result.group is not None
    assert result.group.verdict == (
        "waits on preemption (ns/g1 on n1, ns/g2 on n1): minCount (2) cannot be satisfied: 1 scheduled, "
        "0 remaining, pod group preemption: found a placement for podgroup, preempting 1 victims"
    )
