"""TopologyPlacementGenerator and PodGroupPodsCount (TopologyAwareWorkloadScheduling), after
v1.37.2's topology_placement_test.go and podgroup_pods_count_test.go (non-composite cases)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.podgrouppodscount import PodGroupPodsCount
from plugins.topologyplacementgenerator import TopologyPlacementGenerator
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupStates, scheduling_group_key
from scheduler.framework.types import Code, Placement
from scheduler.model.podgroups import PodGroup
from scheduler.testing.builders import make_handle, make_node, make_pod, node_info

KEY = GroupKey(POD_GROUP_API, "ns", "pg")


def pod_group(topology: str | None) -> PodGroup:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return PodGroup.from_raw({"metadata": {"name": "pg", "namespace": "ns"}, "spec": spec})


NODES = [
    node_info(make_node("a1").label("zone", "a")),
    node_info(make_node("a2").label("zone", "a")),
    node_info(make_node("b1").label("zone", "b")),
    node_info(make_node("x")),
]


def generator(topology: str | None, scheduled_on: tuple[str, ...] = ()) -> tuple[TopologyPlacementGenerator, Any]:
    handle = make_handle(*NODES)
    states: PodGroupStates = handle.pod_groups
    states.add_membership(scheduling_group_key)
    states.set_group(KEY, pod_group(topology))
    for i, node in enumerate(scheduled_on):
        states.add_pod(make_pod(f"m{i}", "ns").pod_group("pg").node(node).obj())
    state = states.get(KEY)
    return TopologyPlacementGenerator(handle), state


def names(placements: list[Placement]) -> list[tuple[str, list[str]]]:
    return [(p.name, [n.name for n in p.nodes]) for p in placements]


@pytest.mark.parametrize(
    ("name", "topology", "scheduled_on", "want"),
    [
        ("no topology constraint: the whole cluster", None, (), [("", ["a1", "a2", "b1", "x"])]),
        ("one placement per domain; unlabelled nodes in none", "zone", (), [("a", ["a1", "a2"]), ("b", ["b1"])]),
        ("scheduled members pin the domain", "zone", ("a2",), [("a", ["a1", "a2"])]),
        ("a key no node has: no placements", "rack", (), []),
    ],
)
def test_generate_placements(name: str, topology: str | None, scheduled_on: tuple[str, ...], want: Any) -> None:
    plugin, state = generator(topology, scheduled_on)
    placements, status = plugin.generate_placements(state, Placement("", tuple(NODES)))
    assert status is None
    assert names(placements) == want


@pytest.mark.parametrize(
    ("scheduled_on", "message"),
    [
        (("x",), "cannot determine domain for already scheduled pods: no topology domain found for pod ns/m0"),
        (
            ("a1", "b1"),
            "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: a, b",
        ),
    ],
)
def test_scheduled_members_in_no_or_several_domains_is_an_error(scheduled_on: tuple[str, ...], message: str) -> None:
    plugin, state = generator("zone", scheduled_on)
    placements, status = plugin.generate_placements(state, Placement("", tuple(NODES)))
    assert placements == [] and status is not None
    assert (status.code, status.message) == (Code.ERROR, message)


@pytest.mark.parametrize(
    ("name", "assigned", "assumed", "want"),
    [
        ("existing assigned and assumed pods", 2, 1, 5),
        ("no assumed pods", 1, 0, 3),
        ("no assigned pods", 0, 1, 3),
        ("no assigned pods, no assumed pods", 0, 0, 2),
    ],
)
def test_score_placement_counts_scheduled_and_proposed(name: str, assigned: int, assumed: int, want: int) -> None:
    states = PodGroupStates()
    states.add_membership(scheduling_group_key)
    states.set_group(KEY, pod_group("zone"))
    for i in range(assigned):
        states.add_pod(make_pod(f"assigned{i}", "ns").pod_group("pg").node(f"node{i + 2}").obj())
    for i in range(assumed):
        pending = make_pod(f"assumed{i}", "ns").pod_group("pg")
        states.add_pod(pending.obj())
        states.assume_pod(pending.node("node1").obj())
    state = states.get(KEY)
    assert state is not None
    proposed = [(make_pod("p1", "ns").obj(), "node1"), (make_pod("p2", "ns").obj(), "node2")]
    assert PodGroupPodsCount().score_placement(state, Placement("", ()), proposed) == (want, None)


@pytest.mark.parametrize(
    ("name", "scores", "want"),
    [
        ("distinct scores", [10, 50, 110], [9, 45, 100]),
        ("equal scores", [50, 50], [100, 100]),
        ("single score", [50], [100]),
        ("some minimal score far from a close group", [11, 100, 101, 102], [10, 98, 99, 100]),
    ],
)
def test_normalize_placement_scores(name: str, scores: list[int], want: list[int]) -> None:
    states = PodGroupStates()
    states.set_group(KEY, pod_group("zone"))
    state = states.get(KEY)
    assert state is not None
    assert PodGroupPodsCount().normalize_placement_scores(state, scores) is None
    assert scores == want


def test_normalize_zero_scores_is_an_error() -> None:
    states = PodGroupStates()
    states.set_group(KEY, pod_group("zone"))
    state = states.get(KEY)
    assert state is not None
    status = PodGroupPodsCount().normalize_placement_scores(state, [0, 0])
    assert (
        status is not None
        and status.message == "no pods from pod group are assigned to any of the candidate placements"
    )
