"""DefaultPreemption's domain core: candidate counts, the per-node dry run and its reprieve,
PodDisruptionBudget counting, SelectCandidate's rules, PodEligibleToPreemptOthers, args.

Cases ported from kube-scheduler v1.37.2's default_preemption_test.go (TestSelectBestCandidate,
TestSelectVictimsOnNode, TestDryRunPreemption, TestPodEligibleToPreemptOthers) and
preemption/util_test.go (TestFilterVictimsWithPDBViolation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from plugins.defaultpreemption import DefaultPreemption, parse_args
from plugins.defaultpreemption.candidates import dry_run, num_candidates
from plugins.defaultpreemption.selection import select_candidate
from plugins.defaultpreemption.victims import select_victims_on_node, split_by_pdb_violation
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.config import default_config
from scheduler.framework.runtime import Framework, FrameworkHandle, Wiring
from scheduler.framework.types import Code, CycleState, NodeInfo, Status
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.profile import build_profiles
from scheduler.testing.builders import PodBuilder, make_node, make_pod, node_info, snapshot

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
PROFILE = "secondary-scheduler"


def framework(infos: Sequence[NodeInfo]) -> tuple[Framework, DefaultPreemption]:
    return framework_over(snapshot(*infos))


def framework_over(snap: Snapshot) -> tuple[Framework, DefaultPreemption]:
    """The default profile and its DefaultPreemption over `snap` (a standalone one, or a cache's)."""
    handle = FrameworkHandle(FakeApiClient(), snap)
    handle.wire(Wiring.standalone(snap))
    fw = build_profiles(default_config(PROFILE), _registry(), handle)[PROFILE]
    plugin = next(p for p in fw.post_filter_plugins if isinstance(p, DefaultPreemption))
    return fw, plugin


def _registry() -> Any:
    from plugins.registry import in_tree_registry

    return in_tree_registry()


def victim(name: str, node: str, priority: int, res: dict[str, str], start: int = 0) -> PodBuilder:
    return make_pod(name).uid(name).node(node).priority(priority).req(res).start_time(start)


def cluster(nodes: Sequence[str], pods: Sequence[PodBuilder], capacity: dict[str, str]) -> list[NodeInfo]:
    built = [p.obj() for p in pods]
    return [
        node_info(make_node(n).capacity(capacity, pods=110), *[p for p in built if p.node_name == n]) for n in nodes
    ]


def pdb(
    allowed: int, labels: dict[str, str], disrupted: Sequence[str] = (), namespace: str = "default"
) -> PodDisruptionBudget:
    return PodDisruptionBudget.from_raw(
        {
            "metadata": {"name": "pdb", "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {n: "2024-01-01T00:00:00Z" for n in disrupted}},
        }
    )


def prefiltered(fw: Framework, pod: Pod, infos: Sequence[NodeInfo]) -> CycleState:
    state = CycleState()
    _, status, _ = fw.run_pre_filter(state, pod, infos)
    assert status is None
    return state


# ---- SelectCandidate (TestSelectBestCandidate) ----------------------------------------------

SELECT_CASES = [
    (
        "a pod that fits on both nodes when lower priority pods are preempted",
        ["node1", "node2"],
        LARGE,
        [victim("p1", "node1", MID, LARGE), victim("p2", "node2", MID, LARGE)],
        {"node1", "node2"},
    ),
    (
        "node with min highest priority pod is picked",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, MEDIUM),
            victim("p1.2", "node1", MID, LARGE),
            victim("p2.1", "node2", MID, MEDIUM),
            victim("p2.2", "node2", LOW, MEDIUM),
            victim("p3.1", "node3", LOW, MEDIUM),
            victim("p3.2", "node3", LOW, MEDIUM),
        ],
        {"node3"},
    ),
    (
        "when highest priorities are the same, minimum sum of priorities is picked",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, MEDIUM),
            victim("p1.2", "node1", MID, LARGE),
            victim("p2.1", "node2", MID, LARGE),
            victim("p2.2", "node2", LOW, MEDIUM),
            victim("p3.1", "node3", MID, MEDIUM),
            victim("p3.2", "node3", MID, MEDIUM),
        ],
        {"node2"},
    ),
    (
        "when highest priority and sum are the same, minimum number of pods is picked",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, SMALL),
            victim("p1.2", "node1", NEG, SMALL),
            victim("p1.3", "node1", MID, SMALL),
            victim("p1.4", "node1", NEG, SMALL),
            victim("p2.1", "node2", MID, LARGE),
            victim("p2.2", "node2", NEG, MEDIUM),
            victim("p3.1", "node3", MID, MEDIUM),
            victim("p3.2", "node3", NEG, SMALL),
            victim("p3.3", "node3", LOW, SMALL),
        ],
        {"node2"},
    ),
    (
        "sum of adjusted priorities is considered",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, SMALL),
            victim("p1.2", "node1", NEG, SMALL),
            victim("p1.3", "node1", NEG, SMALL),
            victim("p2.1", "node2", MID, LARGE),
            victim("p2.2", "node2", NEG, MEDIUM),
            victim("p3.1", "node3", MID, MEDIUM),
            victim("p3.2", "node3", NEG, SMALL),
            victim("p3.3", "node3", LOW, SMALL),
        ],
        {"node2"},
    ),
    (
        "non-overlapping lowest high priority, sum priorities, and number of pods",
        ["node1", "node2", "node3", "node4"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, SMALL),
            victim("p1.2", "node1", LOW, SMALL),
            victim("p1.3", "node1", LOW, SMALL),
            victim("p2.1", "node2", HIGH, LARGE),
            victim("p3.1", "node3", MID, MEDIUM),
            victim("p3.2", "node3", LOW, SMALL),
            victim("p3.3", "node3", LOW, SMALL),
            victim("p3.4", "node3", LOW, MEDIUM),
            victim("p4.1", "node4", MID, MEDIUM),
            victim("p4.2", "node4", MID, SMALL),
            victim("p4.3", "node4", MID, SMALL),
            victim("p4.4", "node4", NEG, SMALL),
        ],
        {"node1"},
    ),
    (
        "same priority, same number of victims, different start time for each node's pod",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, MEDIUM, 2),
            victim("p1.2", "node1", MID, MEDIUM, 2),
            victim("p2.1", "node2", MID, MEDIUM, 3),
            victim("p2.2", "node2", MID, MEDIUM, 3),
            victim("p3.1", "node3", MID, MEDIUM, 1),
            victim("p3.2", "node3", MID, MEDIUM, 1),
        ],
        {"node2"},
    ),
    (
        "same priority, same number of victims, different start time for all pods",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", MID, MEDIUM, 4),
            victim("p1.2", "node1", MID, MEDIUM, 2),
            victim("p2.1", "node2", MID, MEDIUM, 5),
            victim("p2.2", "node2", MID, MEDIUM, 1),
            victim("p3.1", "node3", MID, MEDIUM, 3),
            victim("p3.2", "node3", MID, MEDIUM, 6),
        ],
        {"node3"},
    ),
    (
        "different priority, same number of victims, different start time for all pods",
        ["node1", "node2", "node3"],
        VERY_LARGE,
        [
            victim("p1.1", "node1", LOW, MEDIUM, 4),
            victim("p1.2", "node1", MID, MEDIUM, 2),
            victim("p2.1", "node2", MID, MEDIUM, 6),
            victim("p2.2", "node2", LOW, MEDIUM, 1),
            victim("p3.1", "node3", LOW, MEDIUM, 3),
            victim("p3.2", "node3", MID, MEDIUM, 5),
        ],
        {"node2"},
    ),
]


@pytest.mark.parametrize(
    ("name", "nodes", "request_", "pods", "expected"), SELECT_CASES, ids=[c[0] for c in SELECT_CASES]
)
def test_select_best_candidate(
    name: str, nodes: list[str], request_: dict[str, str], pods: list[PodBuilder], expected: set[str]
) -> None:
    preemptor = make_pod("p").uid("p").priority(VERY_HIGH if "non-overlapping" in name else HIGH).req(request_).obj()
    infos = cluster(nodes, pods, VERY_LARGE)
    fw, _ = framework(infos)
    state = prefiltered(fw, preemptor, infos)
    candidates, statuses = dry_run(fw, state, preemptor, infos, [], 0, len(infos))
    assert not statuses
    best = select_candidate(candidates)
    assert best is not None and best.node in expected


def test_candidate_order_decides_the_last_tie() -> None:
    infos = cluster(["node1", "node2"], [victim("a", "node1", MID, LARGE), victim("b", "node2", MID, LARGE)], LARGE)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(LARGE).obj()
    fw, _ = framework(infos)
    state = prefiltered(fw, preemptor, infos)
    for offset, first in ((0, "node1"), (1, "node2")):
        candidates, _ = dry_run(fw, state, preemptor, infos, [], offset, 2)
        best = select_candidate(candidates)
        assert best is not None and best.node == first


# ---- the dry run on one node (TestSelectVictimsOnNode) ---------------------------------------


def victims_on(pods: Sequence[PodBuilder], pdbs: Sequence[PodDisruptionBudget] = (), preemptor_res: Any = LARGE) -> Any:
    infos = cluster(["node1"], pods, VERY_LARGE)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(preemptor_res).obj()
    fw, _ = framework(infos)
    state = prefiltered(fw, preemptor, infos)
    return select_victims_on_node(fw, state.clone(), preemptor, infos[0].clone(), pdbs)


def test_lower_priority_pods_are_preempted_first() -> None:
    found, status = victims_on(
        [
            victim("high-prio", "node1", HIGH, SMALL),
            victim("mid-prio", "node1", MID, SMALL),
            victim("low-prio", "node1", LOW, SMALL),
        ]
    )
    assert status is None
    assert [p.name for p in found.pods] == ["low-prio"]
    assert found.num_pdb_violations == 0


def test_reprieve_keeps_the_most_important_pods() -> None:
    # 500m node; 300m preemptor: of 4 x 100m lower-priority pods, two must go: the least important.
    found, status = victims_on(
        [
            victim("old-mid", "node1", MID, SMALL, 1),
            victim("new-mid", "node1", MID, SMALL, 9),
            victim("low", "node1", LOW, SMALL),
            victim("neg", "node1", NEG, SMALL),
        ]
    )
    assert status is None
    assert [p.name for p in found.pods] == ["low", "neg"]  # most important first


def test_prefer_non_violating_victim_with_higher_priority() -> None:
    found, _ = victims_on(
        [
            victim("victim-pdb", "node1", LOW, MEDIUM).label("app", "foo"),
            victim("victim-no-pdb", "node1", MID, MEDIUM),
        ],
        [pdb(0, {"app": "foo"})],
    )
    assert [p.name for p in found.pods] == ["victim-no-pdb"]
    assert found.num_pdb_violations == 0


def test_prefer_lower_priority_when_no_preemption_without_violation_exists() -> None:
    found, _ = victims_on(
        [
            victim("v1", "node1", LOW, MEDIUM).label("app", "foo"),
            victim("v2", "node1", MID, MEDIUM).label("app", "foo"),
        ],
        [pdb(0, {"app": "foo"})],
    )
    assert [p.name for p in found.pods] == ["v1"]
    assert found.num_pdb_violations == 1
    assert found.violating == {"v1"}


def test_no_lower_priority_pods_means_no_victims() -> None:
    found, status = victims_on([victim("peer", "node1", HIGH, VERY_LARGE)])
    assert found is None
    assert status == Status.unresolvable("No preemption victims found for incoming pod")


def test_a_node_that_cannot_fit_even_when_empty_reports_the_filter() -> None:
    found, status = victims_on([victim("low", "node1", LOW, SMALL)], preemptor_res={"cpu": "600m", "memory": "1"})
    assert found is None
    assert status is not None and status.reasons == ("Insufficient cpu",)


# ---- PDB violations (TestDryRunPreemption, TestFilterVictimsWithPDBViolation) ---------------

FOO = {"app": "foo"}


@pytest.mark.parametrize(
    ("name", "pods", "budget", "violations"),
    [
        ("preemption with violation of same pdb", ["p1.1", "p1.2"], pdb(1, FOO), 1),
        ("the victim does not belong to DisruptedPods", ["p1.1", "p1.2"], pdb(1, FOO, ["p2"]), 1),
        ("the victim belongs to DisruptedPods", ["p1.1", "p1.2"], pdb(1, FOO, ["p1.2"]), 0),
        ("the DisruptedPods victim is non-violating", ["p1.1", "p1.2", "p1.3"], pdb(1, FOO, ["p1.3"]), 1),
    ],
)
def test_dry_run_counts_pdb_violations(
    name: str, pods: list[str], budget: PodDisruptionBudget, violations: int
) -> None:
    infos = cluster(["node1"], [victim(n, "node1", MID, MEDIUM).label("app", "foo") for n in pods], VERY_LARGE)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj()
    fw, _ = framework(infos)
    state = prefiltered(fw, preemptor, infos)
    (candidate,), _ = dry_run(fw, state, preemptor, infos, [budget], 0, 1)
    assert sorted(p.name for p in candidate.victims.pods) == sorted(pods)
    assert candidate.victims.num_pdb_violations == violations


def test_pdb_counting_rules() -> None:
    pods = [make_pod(n).uid(n).label("app", "foo").obj() for n in ("a", "b", "c")]
    unlabeled = make_pod("plain").uid("plain").obj()
    other_ns = make_pod("x", namespace="other").uid("x").label("app", "foo").obj()
    violating, fine = split_by_pdb_violation([*pods, unlabeled, other_ns], [pdb(2, FOO)])
    assert [p.name for p in violating] == ["c"]
    assert [p.name for p in fine] == ["a", "b", "plain", "x"]
    # An empty selector matches nothing; refused evictions count as violating whatever the budget.
    empty = PodDisruptionBudget.from_raw({"metadata": {"name": "e", "namespace": "default"}, "spec": {"selector": {}}})
    violating, _ = split_by_pdb_violation(pods, [empty], refused={"b"})
    assert [p.name for p in violating] == ["b"]


def test_dry_run_prefers_non_violating_candidates_and_stops_when_enough() -> None:
    pods = [victim(f"v{i}", f"node{i}", LOW, LARGE).label("app", "foo" if i < 2 else "bar") for i in range(4)]
    infos = cluster([f"node{i}" for i in range(4)], pods, LARGE)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(LARGE).obj()
    fw, _ = framework(infos)
    state = prefiltered(fw, preemptor, infos)
    candidates, _ = dry_run(fw, state, preemptor, infos, [pdb(0, FOO)], 0, 3)
    # node0 and node1 violate the budget; node2 does not and completes the three wanted.
    assert [c.node for c in candidates] == ["node2", "node0", "node1"]
    best = select_candidate(candidates)
    assert best is not None and best.node == "node2"


def test_num_candidates() -> None:
    assert num_candidates(50, 10, 100) == 50
    assert num_candidates(5000, 10, 100) == 500
    assert num_candidates(500, 10, 100) == 100
    assert num_candidates(5, 40, 1) == 2


# ---- PodEligibleToPreemptOthers --------------------------------------------------------------


def terminating_victim(reason: str) -> PodBuilder:
    pod = victim("victim", "node1", LOW, SMALL).terminating()
    pod.raw["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": reason}]
    return pod


@pytest.mark.parametrize(
    ("name", "preemptor", "existing", "nominated_status", "eligible", "why"),
    [
        ("preemptionPolicy Never", make_pod("p").priority(HIGH).spec(preemptionPolicy="Never"), [], None, False,
         "not eligible due to preemptionPolicy=Never."),
        ("no nomination", make_pod("p").priority(HIGH), [], None, True, ""),
        ("terminating victim on the nominated node", make_pod("p").priority(HIGH).nominated_node("node1"),
         [terminating_victim("PreemptionByScheduler")], Status.unschedulable("x"), False,
         "not eligible due to a terminating pod on the nominated node."),
        ("nominated node now unresolvable", make_pod("p").priority(HIGH).nominated_node("node1"),
         [terminating_victim("PreemptionByScheduler")], Status.unresolvable("x"), True, ""),
        ("terminating for another reason", make_pod("p").priority(HIGH).nominated_node("node1"),
         [terminating_victim("EvictionByEvictionAPI")], Status.unschedulable("x"), True, ""),
    ],
)  # fmt: skip
def test_pod_eligible_to_preempt_others(
    name: str,
    preemptor: PodBuilder,
    existing: list[PodBuilder],
    nominated_status: Status | None,
    eligible: bool,
    why: str,
) -> None:
    _, plugin = framework(cluster(["node1"], existing, VERY_LARGE))
    status = nominated_status or Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    assert plugin.pod_eligible_to_preempt_others(preemptor.obj(), status) == (eligible, why)


# ---- args ------------------------------------------------------------------------------------


def test_args_defaults_and_errors() -> None:
    args = parse_args({})
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)
    assert args.victim_removal == "evict-then-delete"
    with pytest.raises(ValueError, match=r"minCandidateNodesPercentage: Invalid value: 101: not in valid range"):
        parse_args({"minCandidateNodesPercentage": 101})
    with pytest.raises(ValueError, match=r"minCandidateNodesAbsolute: Invalid value: -1"):
        parse_args({"minCandidateNodesAbsolute": -1})
    with pytest.raises(ValueError, match="cannot be zero at the same time"):
        parse_args({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})
    with pytest.raises(ValueError, match=r"victimRemoval: Unsupported value: 'kill'"):
        parse_args({"victimRemoval": "kill"})
    assert parse_args({"victimRemoval": "evict"}).victim_removal == "evict"


def test_eviction_timeout_defaults_to_five_seconds_and_is_validated() -> None:
    assert parse_args({}).eviction_timeout_seconds == 5
    assert parse_args({"evictionTimeoutSeconds": 0}).eviction_timeout_seconds == 0
    assert parse_args({"evictionTimeoutSeconds": 300}).eviction_timeout_seconds == 300
    with pytest.raises(ValueError, match=r"^evictionTimeoutSeconds: Invalid value: -1: not in valid range \[0, 300\]$"):
        parse_args({"evictionTimeoutSeconds": -1})
    with pytest.raises(ValueError, match=r"^evictionTimeoutSeconds: Invalid value: 5000: not in valid range"):
        parse_args({"evictionTimeoutSeconds": 5000})  # milliseconds meant
    with pytest.raises(ValueError, match=r"^evictionTimeoutSeconds: Invalid value: '5s': must be an integer$"):
        parse_args({"evictionTimeoutSeconds": "5s"})


def test_snapshot_is_left_untouched_by_the_dry_run() -> None:
    infos = cluster(["node1"], [victim("low", "node1", LOW, LARGE)], LARGE)
    before = (len(infos[0].pods), infos[0].requested.milli_cpu)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(LARGE).obj()
    fw, _ = framework(infos)
    dry_run(fw, prefiltered(fw, preemptor, infos), preemptor, infos, [], 0, 1)
    assert (len(infos[0].pods), infos[0].requested.milli_cpu) == before
    assert isinstance(fw.handle.snapshot, Snapshot)


def candidate(node: str, priorities: Sequence[int], violations: int = 0, start: int = 0) -> Any:
    from plugins.defaultpreemption.candidates import Candidate
    from plugins.defaultpreemption.victims import NodeVictims

    pods = tuple(victim(f"{node}-{i}", node, p, SMALL, start).obj() for i, p in enumerate(priorities))
    return Candidate(node, NodeVictims(pods, violations))


@pytest.mark.parametrize(
    ("rule", "candidates", "expected"),
    [
        ("fewest PDB violations, even over lower priorities", [candidate("a", [LOW], 1), candidate("b", [MID])], "b"),
        ("lowest highest-priority victim", [candidate("a", [MID, NEG]), candidate("b", [LOW, LOW, LOW])], "b"),
        ("smallest shifted sum", [candidate("a", [MID, LOW]), candidate("b", [MID, NEG])], "b"),
        # Shifted by 2^31 the sums tie (2^31 each): the one with fewer victims wins.
        ("fewest victims", [candidate("a", [LOW, -(2**31), -(2**31)]), candidate("b", [LOW])], "b"),
        ("latest start of the top-priority victims", [candidate("a", [MID], start=5), candidate("b", [MID], start=9)],
         "b"),
        ("first one left", [candidate("a", [MID]), candidate("b", [MID])], "a"),
    ],
)  # fmt: skip
def test_each_selection_rule(rule: str, candidates: list[Any], expected: str) -> None:
    best = select_candidate(candidates)
    assert best is not None and best.node == expected
    if rule != "first one left":
        # The rule decides, not the order the candidates came in.
        best = select_candidate(list(reversed(candidates)))
        assert best is not None and best.node == expected


# ---- PostFilter as a whole (TestPostFilter) ----------------------------------------------------

ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400", "pods": "110"}
UNSCHEDULABLE = Status.unschedulable()
UNRESOLVABLE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
VIOLATING = {"test.kubernetes.io/is-violating-pdb": "violating"}
NON_VIOLATING = {"test.kubernetes.io/is-violating-pdb": "non-violating"}


def on(name: str, node: str, priority: int = 0, labels: dict[str, str] | None = None) -> PodBuilder:
    pod = make_pod(name).uid(name).node(node).priority(priority)
    for key, value in (labels or {}).items():
        pod.label(key, value)
    return pod


POST_FILTER_CASES = [
    (
        "pod with higher priority can be made schedulable",
        make_pod("p").uid("p").priority(HIGH),
        [on("p1", "node1")],
        {"node1": ONE_POD},
        {"node1": UNSCHEDULABLE},
        [],
        ("node1", Code.SUCCESS, "preemption: found a potential placement for pod on node node1, preempting 1 victims"),
    ),
    (
        "pod with tied priority is still unschedulable",
        make_pod("p").uid("p"),
        [on("p1", "node1")],
        {"node1": ONE_POD},
        {"node1": UNSCHEDULABLE},
        [],
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
    ),
    (
        "preemption should respect filteredNodesStatuses",
        make_pod("p").uid("p").priority(HIGH),
        [on("p1", "node1")],
        {"node1": ONE_POD},
        {"node1": UNRESOLVABLE},
        [],
        ("", Code.UNSCHEDULABLE, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    ),
    (
        "preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable",
        make_pod("p").uid("p").priority(HIGH),
        [on("p1", "node1")],
        {"node1": ONE_POD},
        {},
        [],
        ("", Code.UNSCHEDULABLE, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    ),
    (
        "pod can be made schedulable on one node",
        make_pod("p").uid("p").priority(MID),
        [on("p1", "node1", HIGH), on("p2", "node2", LOW)],
        {"node1": ONE_POD, "node2": ONE_POD},
        {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
        [],
        ("node2", Code.SUCCESS, "preemption: found a potential placement for pod on node node2, preempting 1 victims"),
    ),
    (
        "pod can be made schedulable on minHighestPriority node",
        make_pod("p").uid("p").priority(VERY_HIGH),
        [on("p1", "node1", HIGH, NON_VIOLATING), on("p2", "node1", LOW, VIOLATING), on("p3", "node2", MID, VIOLATING)],
        {"node1": ONE_POD, "node2": ONE_POD},
        {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
        [(0, VIOLATING), (2**31 - 1, NON_VIOLATING)],
        ("node2", Code.SUCCESS, "preemption: found a potential placement for pod on node node2, preempting 1 victims"),
    ),
    (
        "no candidate nodes found, no enough resource after removing low priority pods",
        make_pod("p").uid("p").priority(HIGH).req(LARGE),
        [on("p1", "node1"), on("p2", "node2")],
        {"node1": NODE_RES, "node2": NODE_RES},
        {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
        [],
        ("", Code.UNSCHEDULABLE, "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
    ),
    (
        "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
        make_pod("p").uid("p").priority(HIGH).req(LARGE),
        [on("p1", "node1", HIGH), on("p2", "node2"), on("p3", "node3", HIGH)],
        {"node1": ONE_POD, "node2": NODE_RES, "node3": ONE_POD},
        {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE, "node3": UNSCHEDULABLE},
        [],
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
        ),
    ),
    (
        "no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes don't have "
        "enough CPU resource",
        make_pod("p").uid("p").priority(HIGH).req(LARGE),
        [on("p1", "node1"), on("p2", "node2")],
        {"node1": NODE_RES, "node2": NODE_RES, "node3": NODE_RES, "node4": NODE_RES},
        {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE, "node4": UNRESOLVABLE},
        [],
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
        ),
    ),
]


@pytest.mark.parametrize(
    ("name", "preemptor", "pods", "nodes", "statuses", "budgets", "expected"),
    POST_FILTER_CASES,
    ids=[c[0] for c in POST_FILTER_CASES],
)
async def test_post_filter(
    name: str,
    preemptor: PodBuilder,
    pods: list[PodBuilder],
    nodes: dict[str, dict[str, str]],
    statuses: dict[str, Status],
    budgets: list[tuple[int, dict[str, str]]],
    expected: tuple[str, Code, str],
) -> None:
    from scheduler.framework.types import NodeToStatus

    built = [p.obj() for p in pods]
    infos = [node_info(make_node(n).capacity(res), *[p for p in built if p.node_name == n]) for n, res in nodes.items()]
    fw, plugin = framework(infos)
    for i, (allowed, labels) in enumerate(budgets):
        fw.handle.pdbs.upsert(
            PodDisruptionBudget.from_raw(
                {
                    "metadata": {"name": f"pdb{i}", "namespace": "default"},
                    "spec": {"selector": {"matchLabels": labels}},
                    "status": {"disruptionsAllowed": allowed},
                }
            )
        )
    started: list[Any] = []
    fw.handle.wire(dataclasses.replace(fw.handle.wiring, spawn=started.append))
    pod = preemptor.spec(schedulerName=PROFILE).obj()
    state = prefiltered(fw, pod, infos)
    nominated, status = plugin.post_filter(state, pod, NodeToStatus(statuses, UNRESOLVABLE))
    assert status is not None
    assert (nominated, status.code, status.message) == expected
    # The preemption's API calls run off the cycle, only when there is a victim to remove.
    assert len(started) == (1 if status.code == Code.SUCCESS else 0)
    for coro in started:
        await coro
