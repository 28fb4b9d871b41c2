"""The fault suite's pod-group invariants on hand-made end states: a gang partly bound while its
other members wait fails the check; a gang held whole, or left whole because it does not fit, passes;
a gang left wholly unbound while enough of its members fit together (a deadlock) fails; members of a
gang with fewer than minCount members are held, not lost."""

from __future__ import annotations

from typing import Any

import pytest

from harness.faults import check_groups, held_members
from scheduler.model.objects import Node, Pod, Resource

NS = "faults"


def _node(name: str, cpu: str = "1") -> Node:
    return Node.from_raw(
        {
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }
    )


def _pod(name: str, group: str, node: str = "", cpu: str = "800m") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingGroup": {"podGroupName": group},
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": NS}, "spec": spec}


def _gang(name: str, min_count: int | None) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"schedulingPolicy": policy}}


def _check(pods: list[dict[str, Any]], groups: list[dict[str, Any]], nodes: list[Node]) -> Any:
    used: dict[str, Resource] = {}
    counts: dict[str, int] = {}
    for raw in pods:
        pod = Pod.from_raw(raw)
        if pod.node_name:
            used.setdefault(pod.node_name, Resource()).add(pod.requests)
            counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
    return check_groups(pods, groups, nodes, used, counts)


TWO_NODES = [_node("n1"), _node("n2")]


@pytest.mark.parametrize(
    ("case", "pods", "groups", "nodes", "problem"),
    [
        (
            "partly bound: 2 of 3 bound with minCount 3, the third waits",
            [_pod("g-0", "g", "n1"), _pod("g-1", "g", "n2"), _pod("g-2", "g")],
            [_gang("g", 3)],
            TWO_NODES,
            "pod group faults/g partly bound: 2 of 3 members bound (minCount 3), ['g-2'] left waiting",
        ),
        (
            "partly bound: 1 of 4 bound with minCount 2",
            [_pod("g-0", "g", "n1"), *(_pod(f"g-{i}", "g") for i in (1, 2, 3))],
            [_gang("g", 2)],
            [_node("n1"), _node("n2", cpu="500m")],
            "pod group faults/g partly bound: 1 of 4 members bound (minCount 2)",
        ),
        (
            "deadlock: neither of two gangs bound though one fits whole",
            [_pod("a-0", "a"), _pod("a-1", "a"), _pod("b-0", "b"), _pod("b-1", "b")],
            [_gang("a", 2), _gang("b", 2)],
            TWO_NODES,
            "pod group faults/a left wholly unbound, but 2 of its members fit together",
        ),
        (
            "a basic group none of whose members is bound, though one fits",
            [_pod("g-0", "g")],
            [_gang("g", None)],
            TWO_NODES,
            "pod group faults/g left wholly unbound, but 1 of its members fit together",
        ),
    ],
)
def test_a_broken_group_invariant_is_a_problem(
    case: str, pods: list[dict[str, Any]], groups: list[dict[str, Any]], nodes: list[Node], problem: str
) -> None:
    check = _check(pods, groups, nodes)
    assert any(p.startswith(problem) for p in check.problems), f"{case}: {check.problems}"


@pytest.mark.parametrize(
    ("case", "pods", "groups", "nodes"),
    [
        (
            "two gangs that together do not fit: one bound whole, the other waits whole",
            [_pod("a-0", "a", "n1"), _pod("a-1", "a", "n2"), _pod("b-0", "b"), _pod("b-1", "b")],
            [_gang("a", 2), _gang("b", 2)],
            TWO_NODES,
        ),
        (
            "minCount met, the rest waits (upstream binds a gang at its quorum)",
            [_pod("g-0", "g", "n1"), _pod("g-1", "g", "n2"), _pod("g-2", "g")],
            [_gang("g", 2)],
            TWO_NODES,
        ),
        (
            "a gang whose members were deleted below minCount while the rest were bound: none waits",
            [_pod("g-0", "g", "n1"), _pod("g-1", "g", "n2")],
            [_gang("g", 3)],
            TWO_NODES,
        ),
        (
            "a gang with fewer members than minCount, none bound: held before the queue",
            [_pod("g-0", "g"), _pod("g-1", "g")],
            [_gang("g", 3)],
            TWO_NODES,
        ),
        (
            "a gang that does not fit whole stays unbound whole",
            [_pod("g-0", "g"), _pod("g-1", "g"), _pod("g-2", "g")],
            [_gang("g", 3)],
            TWO_NODES,
        ),
    ],
)
def test_a_group_that_keeps_the_invariants_passes(
    case: str, pods: list[dict[str, Any]], groups: list[dict[str, Any]], nodes: list[Node]
) -> None:
    check = _check(pods, groups, nodes)
    assert check.problems == (), f"{case}: {check.problems}"


def test_a_partly_bound_gang_is_counted() -> None:
    pods = [_pod("g-0", "g", "n1"), _pod("g-1", "g"), _pod("h-0", "h", "n2")]
    check = _check(pods, [_gang("g", 2), _gang("h", 1)], TWO_NODES)
    assert (check.groups, check.partly_bound) == (2, 1)


def test_members_of_a_gang_below_min_count_are_held_not_lost() -> None:
    pods = [_pod("g-0", "g"), _pod("g-1", "g"), _pod("h-0", "h"), _pod("h-1", "h")]
    assert held_members(pods, [_gang("g", 3), _gang("h", 2)]) == {"faults/g-0", "faults/g-1"}
    # Once one is bound the gang is not held: the rest must be bound or reported.
    pods[0] = _pod("g-0", "g", "n1")
    assert held_members(pods, [_gang("g", 3)]) == set()
