"""InterPodAffinity: Filter verdicts, AddPod/RemovePod, scores and normalisation, args, hints.

The scenarios mirror kube-scheduler 1.34's filtering_test.go, scoring_test.go and
plugin_test.go for this plugin.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from plugins.interpodaffinity import InterPodAffinity, _node_changed, _pod_changed, parse_args
from plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PRE_FILTER_KEY,
)
from plugins.registry import in_tree_registry
from scheduler.framework.types import ActionType, Code, CycleState, EventResource, NodeInfo, QueueingHint, Status
from scheduler.model.objects import Pod
from scheduler.testing.builders import (
    NodeBuilder,
    PodBuilder,
    affinity_term,
    expr,
    label_selector,
    make_handle,
    make_node,
    make_pod,
    run_score,
)

Raw = dict[str, Any]

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
TEAM1 = label_selector(None, expr("team", "In", "team1"))
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

_names = itertools.count()


def sel_in(key: str, *values: str) -> Raw:
    return label_selector(None, expr(key, "In", *values))


def sel(*expressions: Raw) -> Raw:
    return label_selector(None, *expressions)


def pod(namespace: str = "default", node: str = "", **labels: str) -> PodBuilder:
    built = make_pod(f"p{next(_names)}", namespace)
    if node:
        built.node(node)
    for key, value in labels.items():
        built.label(key, value)
    return built


def cluster(nodes: Sequence[NodeBuilder], pods: Sequence[PodBuilder] = ()) -> list[NodeInfo]:
    infos = {n.raw["metadata"]["name"]: NodeInfo(n.obj()) for n in nodes}
    for p in pods:
        infos[p.raw["spec"]["nodeName"]].add_pod(p.obj())
    return list(infos.values())


def plugin(infos: Sequence[NodeInfo], args: Mapping[str, Any] | None = None) -> InterPodAffinity:
    return InterPodAffinity(parse_args(args or {}), make_handle(*infos, namespaces=NAMESPACES))


def run_filter(pl: InterPodAffinity, incoming: Pod, infos: Sequence[NodeInfo]) -> list[Status | None]:
    """Filter every node after PreFilter; a skipped PreFilter means every node passes."""
    state = CycleState()
    _, status = pl.pre_filter(state, incoming, infos)
    if status is not None and status.code == Code.SKIP:
        return [None for _ in infos]
    assert status is None
    return [pl.filter(state, incoming, info) for info in infos]


AFFINITY = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = (Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXISTING = (Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
OK = None


def verdict(status: Status | None) -> tuple[Code, str] | None:
    if status is None:
        return None
    assert status.plugin == "InterPodAffinity"
    assert len(status.reasons) == 1
    return status.code, status.reasons[0]


# ---- Filter on one node -----------------------------------------------------------------

MACHINE1 = make_node("machine1").label("region", "r1").label("zone", "z11")
IN_SCAN = sel_in("service", "securityscan", "value2")
IN_ANTIVIRUS = sel_in("service", "antivirusscan", "value2")


def on1(namespace: str = "default", **labels: str) -> PodBuilder:
    return pod(namespace, "machine1", **labels)


SINGLE_NODE_CASES: list[tuple[str, PodBuilder, list[PodBuilder], tuple[Code, str] | None]] = [
    ("no affinity and no existing pods", pod(), [], OK),
    (
        "affinity In matches the existing pod",
        pod(security="S1").pod_affinity(affinity_term("region", IN_SCAN)),
        [on1(service="securityscan")],
        OK,
    ),
    (
        "affinity NotIn matches the existing pod",
        pod(security="S1").pod_affinity(
            affinity_term("region", sel(expr("service", "NotIn", "securityscan3", "value3")))
        ),
        [on1(service="securityscan")],
        OK,
    ),
    (
        "affinity does not match because of a different namespace",
        pod(security="S1").pod_affinity(affinity_term("region", IN_SCAN, namespaces=["DiffNameSpace"])),
        [on1("ns", service="securityscan")],
        AFFINITY,
    ),
    (
        "affinity does not match the existing pod's labels",
        pod(service="securityscan").pod_affinity(affinity_term("region", IN_ANTIVIRUS)),
        [on1(service="securityscan")],
        AFFINITY,
    ),
    (
        "affinity terms with different operators, all matched",
        pod(security="S1").pod_affinity(
            affinity_term("region", sel(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"))),
            affinity_term("region", sel(expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue"))),
        ),
        [on1(service="securityscan")],
        OK,
    ),
    (
        "requirements are ANDed: one unmatched expression fails",
        pod(security="S1").pod_affinity(
            affinity_term("region", sel(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"))),
            affinity_term(
                "region", sel(expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue"))
            ),
        ),
        [on1(service="securityscan")],
        AFFINITY,
    ),
    (
        "affinity and anti-affinity both satisfied",
        pod(security="S1")
        .pod_affinity(affinity_term("region", IN_SCAN))
        .pod_anti_affinity(affinity_term("node", IN_ANTIVIRUS)),
        [on1(service="securityscan")],
        OK,
    ),
    (
        "affinity, anti-affinity and the existing pod's anti-affinity satisfied",
        pod(security="S1")
        .pod_affinity(affinity_term("region", IN_SCAN))
        .pod_anti_affinity(affinity_term("node", IN_ANTIVIRUS)),
        [on1(service="securityscan").pod_anti_affinity(affinity_term("node", IN_ANTIVIRUS))],
        OK,
    ),
    (
        "affinity satisfied but anti-affinity not",
        pod(security="S1")
        .pod_affinity(affinity_term("region", IN_SCAN))
        .pod_anti_affinity(affinity_term("zone", IN_SCAN)),
        [on1(service="securityscan")],
        ANTI,
    ),
    (
        "the existing pod's anti-affinity is violated",
        pod(service="securityscan")
        .pod_affinity(affinity_term("region", IN_SCAN))
        .pod_anti_affinity(affinity_term("node", IN_ANTIVIRUS)),
        [on1(service="securityscan").pod_anti_affinity(affinity_term("zone", IN_SCAN))],
        EXISTING,
    ),
    (
        "the pod matches its own affinity but a matching pod exists elsewhere only",
        pod(service="securityscan").pod_affinity(
            affinity_term("region", sel(expr("service", "NotIn", "securityscan", "value2")))
        ),
        [],
        AFFINITY,
    ),
    (
        "existing anti-affinity applies to a pod without affinity",
        pod(service="securityscan"),
        [on1(service="securityscan").pod_anti_affinity(affinity_term("zone", IN_SCAN))],
        EXISTING,
    ),
    (
        "existing anti-affinity not matching a pod without affinity",
        pod(service="securityscan"),
        [
            on1(service="securityscan").pod_anti_affinity(
                affinity_term("zone", sel(expr("service", "NotIn", "securityscan")))
            )
        ],
        OK,
    ),
    (
        "one of two anti-affinity terms matches",
        pod(service="securityscan").pod_anti_affinity(
            affinity_term("region", sel(expr("service", "Exists"))),
            affinity_term("region", sel(expr("security", "Exists"))),
        ),
        [on1(security="S1")],
        ANTI,
    ),
    (
        "two existing pods, one with anti-affinity to the pod",
        pod(service="securityscan"),
        [
            on1(security="S1"),
            on1(security="S1").pod_anti_affinity(affinity_term("zone", sel(expr("service", "Exists")))),
        ],
        EXISTING,
    ),
    (
        "first pod of a group matching its own affinity",
        pod(service="securityscan").pod_affinity(affinity_term("region", IN_SCAN)),
        [],
        OK,
    ),
    (
        "first pod of a group, but the node lacks the topology key",
        pod(service="securityscan").pod_affinity(affinity_term("rack", IN_SCAN)),
        [],
        AFFINITY,
    ),
    (
        "first pod of a group with two terms, one it does not match",
        pod(service="securityscan").pod_affinity(
            affinity_term("region", IN_SCAN), affinity_term("zone", sel_in("other", "x"))
        ),
        [],
        AFFINITY,
    ),
    (
        "affinity namespaceSelector selects the existing pod's namespace",
        pod("subteam1.team1", security="S1").pod_affinity(affinity_term("region", IN_SCAN, namespace_selector=TEAM1)),
        [on1("subteam2.team1", service="securityscan")],
        OK,
    ),
    (
        "affinity namespaceSelector does not select the existing pod's namespace",
        pod("subteam1.team1", security="S1").pod_affinity(affinity_term("region", IN_SCAN, namespace_selector=TEAM1)),
        [on1("subteam1.team2", service="securityscan")],
        AFFINITY,
    ),
    (
        "affinity namespaces and namespaceSelector are ORed",
        pod("subteam1.team1", security="S1").pod_affinity(
            affinity_term("region", IN_SCAN, namespaces=["subteam2.team2"], namespace_selector=TEAM1)
        ),
        [on1("subteam2.team2", service="securityscan")],
        OK,
    ),
    (
        "empty namespaceSelector selects every namespace",
        pod(security="S1").pod_affinity(affinity_term("region", IN_SCAN, namespace_selector={})),
        [on1("anywhere", service="securityscan")],
        OK,
    ),
    (
        "anti-affinity namespaceSelector selects the existing pod's namespace",
        pod("subteam1.team1", security="S1").pod_anti_affinity(
            affinity_term("zone", IN_SCAN, namespace_selector=TEAM1)
        ),
        [on1("subteam2.team1", service="securityscan")],
        ANTI,
    ),
    (
        "existing anti-affinity namespaceSelector selects the pod's namespace",
        pod("subteam1.team1", service="securityscan"),
        [on1("other", security="S1").pod_anti_affinity(affinity_term("zone", IN_SCAN, namespace_selector=TEAM1))],
        EXISTING,
    ),
    (
        "existing anti-affinity namespaceSelector does not select the pod's namespace",
        pod("subteam1.team2", service="securityscan"),
        [on1("other", security="S1").pod_anti_affinity(affinity_term("zone", IN_SCAN, namespace_selector=TEAM1))],
        OK,
    ),
    (
        "existing anti-affinity without namespaces covers only its own namespace",
        pod("elsewhere", service="securityscan"),
        [on1("other", security="S1").pod_anti_affinity(affinity_term("zone", IN_SCAN))],
        OK,
    ),
    (
        "existing anti-affinity on a key the node lacks",
        pod(service="securityscan"),
        [on1(security="S1").pod_anti_affinity(affinity_term("rack", IN_SCAN))],
        OK,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "want"),
    [case[1:] for case in SINGLE_NODE_CASES],
    ids=[case[0] for case in SINGLE_NODE_CASES],
)
def test_filter_single_node(incoming: PodBuilder, pods: list[PodBuilder], want: tuple[Code, str] | None) -> None:
    infos = cluster([MACHINE1], pods)
    [status] = run_filter(plugin(infos), incoming.obj(), infos)
    assert verdict(status) == want


# ---- Filter on several nodes ------------------------------------------------------------

THREE = [
    make_node("machine1").label("region", "r1").label("zone", "z11").label("hostname", "m1"),
    make_node("machine2").label("region", "r1").label("zone", "z12").label("hostname", "m2"),
    make_node("machine3").label("region", "r2").label("zone", "z21").label("hostname", "m3"),
]
FOO_BAR = sel_in("foo", "bar")

MULTI_NODE_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], list[tuple[Code, str] | None]]] = [
    (
        "affinity in a region: the region's nodes pass",
        pod().pod_affinity(affinity_term("region", FOO_BAR)),
        THREE,
        [pod(node="machine1", foo="bar")],
        [OK, OK, AFFINITY],
    ),
    (
        "affinity on a key one node lacks",
        pod().pod_affinity(affinity_term("region", FOO_BAR)),
        [*THREE[:2], make_node("machine3").label("zone", "z21")],
        [pod(node="machine1", foo="bar")],
        [OK, OK, AFFINITY],
    ),
    (
        "anti-affinity in a zone",
        pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)),
        THREE,
        [pod(node="machine1", foo="bar")],
        [ANTI, OK, OK],
    ),
    (
        "anti-affinity in a region",
        pod().pod_anti_affinity(affinity_term("region", FOO_BAR)),
        THREE,
        [pod(node="machine1", foo="bar")],
        [ANTI, ANTI, OK],
    ),
    (
        "an existing pod's anti-affinity in a region",
        pod(foo="bar"),
        THREE,
        [pod(node="machine1").pod_anti_affinity(affinity_term("region", FOO_BAR))],
        [EXISTING, EXISTING, OK],
    ),
    (
        "self-affinity with matching pods elsewhere is not a first pod",
        pod(foo="bar").pod_affinity(affinity_term("region", FOO_BAR)),
        THREE,
        [pod(node="machine3", foo="bar")],
        [AFFINITY, AFFINITY, OK],
    ),
    (
        "first pod of a group may go anywhere with the key",
        pod(foo="bar").pod_affinity(affinity_term("region", FOO_BAR)),
        [*THREE[:2], make_node("machine3").label("zone", "z21")],
        [pod(node="machine3", other="x")],
        [OK, OK, AFFINITY],
    ),
    (
        "no matching pods and the pod does not match itself",
        pod().pod_affinity(affinity_term("region", FOO_BAR)),
        THREE,
        [],
        [AFFINITY, AFFINITY, AFFINITY],
    ),
    (
        "affinity in a region and a zone: only the pod's node passes",
        pod().pod_affinity(affinity_term("region", FOO_BAR), affinity_term("zone", FOO_BAR)),
        THREE,
        [pod(node="machine1", foo="bar")],
        [OK, AFFINITY, AFFINITY],
    ),
    (
        "affinity needs one pod matching every term",
        pod().pod_affinity(affinity_term("region", FOO_BAR), affinity_term("region", sel_in("baz", "qux"))),
        THREE,
        [pod(node="machine1", foo="bar"), pod(node="machine2", baz="qux")],
        [AFFINITY, AFFINITY, AFFINITY],
    ),
    (
        "anti-affinity on a key a node lacks does not reject it",
        pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)),
        [THREE[0], make_node("machine2").label("region", "r1")],
        [pod(node="machine1", foo="bar")],
        [ANTI, OK],
    ),
    (
        "affinity and anti-affinity by hostname",
        pod(app="web")
        .pod_affinity(affinity_term("region", sel_in("app", "db")))
        .pod_anti_affinity(affinity_term("hostname", sel_in("app", "web"))),
        THREE,
        [pod(node="machine1", app="db"), pod(node="machine1", app="web"), pod(node="machine3", app="web")],
        [ANTI, OK, AFFINITY],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "want"),
    [case[1:] for case in MULTI_NODE_CASES],
    ids=[case[0] for case in MULTI_NODE_CASES],
)
def test_filter_multiple_nodes(
    incoming: PodBuilder, nodes: list[NodeBuilder], pods: list[PodBuilder], want: list[tuple[Code, str] | None]
) -> None:
    infos = cluster(nodes, pods)
    assert [verdict(s) for s in run_filter(plugin(infos), incoming.obj(), infos)] == want


def test_pre_filter_skips_without_any_terms() -> None:
    infos = cluster(THREE, [pod(node="machine1", foo="bar").pod_affinity(affinity_term("zone", FOO_BAR))])
    _, status = plugin(infos).pre_filter(CycleState(), pod(foo="bar").obj(), infos)
    assert status is not None
    assert status.code == Code.SKIP


def test_pre_filter_rejects_an_unparsable_pod() -> None:
    incoming = pod().pod_affinity(affinity_term("zone", sel(expr("foo", "In")))).obj()
    infos = cluster(THREE)
    _, status = plugin(infos).pre_filter(CycleState(), incoming, infos)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("parsing pod: requiredAffinityTerms: values: Invalid value: ")
    assert status.message.endswith("for 'in', 'notin' operators, values set can't be empty")


def test_existing_pod_with_unparsable_terms_is_ignored() -> None:
    broken = pod(node="machine1").pod_anti_affinity(affinity_term("zone", sel(expr("foo", "In")))).uid("broken")
    infos = cluster(THREE, [broken])
    assert run_filter(plugin(infos), pod(foo="bar").obj(), infos) == [None, None, None]


def test_filter_without_pre_filter_is_an_error() -> None:
    infos = cluster(THREE)
    status = plugin(infos).filter(CycleState(), pod().obj(), infos[0])
    assert status is not None
    assert status.code == Code.ERROR


def test_reason_strings() -> None:
    assert ERR_REASON_AFFINITY_RULES_NOT_MATCH == "node(s) didn't match pod affinity rules"
    assert ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH == "node(s) didn't match pod anti-affinity rules"
    assert (
        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH == "node(s) didn't satisfy existing pods anti-affinity rules"
    )


# ---- AddPod / RemovePod -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("incoming", "pods", "changed", "add", "before", "after"),
    [
        pytest.param(
            pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)),
            [],
            pod(node="machine1", foo="bar"),
            True,
            [OK, OK, OK],
            [ANTI, OK, OK],
            id="a nominated pod matching the pod's anti-affinity",
        ),
        pytest.param(
            pod(foo="bar").pod_anti_affinity(affinity_term("zone", sel_in("x", "y"))),
            [],
            pod(node="machine2").pod_anti_affinity(affinity_term("region", FOO_BAR)),
            True,
            [OK, OK, OK],
            [EXISTING, EXISTING, OK],
            id="a nominated pod whose anti-affinity matches the pod",
        ),
        pytest.param(
            pod().pod_affinity(affinity_term("region", FOO_BAR)),
            [],
            pod(node="machine3", foo="bar"),
            True,
            [AFFINITY, AFFINITY, AFFINITY],
            [AFFINITY, AFFINITY, OK],
            id="a nominated pod matching the pod's affinity",
        ),
        pytest.param(
            pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)),
            [pod(node="machine1", foo="bar").uid("victim")],
            pod(node="machine1", foo="bar").uid("victim"),
            False,
            [ANTI, OK, OK],
            [OK, OK, OK],
            id="removing the pod that anti-affinity avoids",
        ),
        pytest.param(
            pod(foo="bar").pod_anti_affinity(affinity_term("zone", sel_in("x", "y"))),
            [pod(node="machine1").uid("victim").pod_anti_affinity(affinity_term("region", FOO_BAR))],
            pod(node="machine1").uid("victim").pod_anti_affinity(affinity_term("region", FOO_BAR)),
            False,
            [EXISTING, EXISTING, OK],
            [OK, OK, OK],
            id="removing the pod whose anti-affinity repels the pod",
        ),
        pytest.param(
            pod().pod_affinity(affinity_term("region", FOO_BAR)),
            [pod(node="machine1", foo="bar").uid("victim")],
            pod(node="machine1", foo="bar").uid("victim"),
            False,
            [OK, OK, AFFINITY],
            [AFFINITY, AFFINITY, AFFINITY],
            id="removing the only pod the affinity needs",
        ),
        pytest.param(
            pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)),
            [],
            pod(node="machine1", foo="other"),
            True,
            [OK, OK, OK],
            [OK, OK, OK],
            id="a nominated pod matching nothing",
        ),
    ],
)
def test_add_and_remove_pod(
    incoming: PodBuilder,
    pods: list[PodBuilder],
    changed: PodBuilder,
    add: bool,
    before: list[tuple[Code, str] | None],
    after: list[tuple[Code, str] | None],
) -> None:
    infos = cluster(THREE, pods)
    pl = plugin(infos)
    pending = incoming.obj()
    state = CycleState()
    _, status = pl.pre_filter(state, pending, infos)
    assert status is None
    assert [verdict(pl.filter(state, pending, info)) for info in infos] == before
    what_if = state.clone()
    changed_pod = changed.obj()
    node = next(i for i in infos if i.name == changed_pod.node_name).clone()
    if add:
        node.add_pod(changed_pod)
        assert pl.add_pod(what_if, pending, changed_pod, node) is None
    else:
        node.remove_pod(changed_pod)
        assert pl.remove_pod(what_if, pending, changed_pod, node) is None
    assert [verdict(pl.filter(what_if, pending, info)) for info in infos] == after
    # The original state is untouched by the what-if.
    assert [verdict(pl.filter(state, pending, info)) for info in infos] == before


def test_nominated_anti_affinity_is_not_seen_when_pre_filter_skipped() -> None:
    """As upstream: without terms of its own and no existing pod repelling it, the plugin is skipped
    for the cycle, so AddPod never runs for a nominated pod whose anti-affinity would repel it."""
    infos = cluster(THREE)
    state = CycleState()
    _, status = plugin(infos).pre_filter(state, pod(foo="bar").obj(), infos)
    assert status is not None
    assert status.code == Code.SKIP
    assert state.get(PRE_FILTER_KEY) is None


def test_add_then_remove_restores_counts() -> None:
    infos = cluster(THREE)
    pl = plugin(infos)
    pending = pod().pod_anti_affinity(affinity_term("zone", FOO_BAR)).obj()
    state = CycleState()
    pl.pre_filter(state, pending, infos)
    nominated = pod(node="machine1", foo="bar").obj()
    pl.add_pod(state, pending, nominated, infos[0])
    assert state.read(PRE_FILTER_KEY).anti_affinity == {("zone", "z11"): 1}
    pl.remove_pod(state, pending, nominated, infos[0])
    assert state.read(PRE_FILTER_KEY).anti_affinity == {}


# ---- scoring ----------------------------------------------------------------------------


def preferred(kind: str, *weighted: tuple[int, Raw]) -> Raw:
    return {kind: {PREFERRED: [{"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def required(kind: str, *terms: Raw) -> Raw:
    return {kind: {REQUIRED: list(terms)}}


S1_IN = sel_in("security", "S1")
S2_IN = sel_in("security", "S2")
STAY_WITH_S1_IN_REGION = preferred("podAffinity", (5, affinity_term("region", S1_IN)))
STAY_WITH_S2_IN_REGION = preferred("podAffinity", (6, affinity_term("region", S2_IN)))
AFFINITY3 = preferred(
    "podAffinity",
    (8, affinity_term("region", sel(expr("security", "NotIn", "S1"), expr("security", "In", "S2")))),
    (2, affinity_term("region", sel(expr("security", "Exists"), expr("wrongkey", "DoesNotExist")))),
)
HARD_AFFINITY = required(
    "podAffinity",
    affinity_term("region", sel_in("security", "S1", "value2")),
    affinity_term("region", sel(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))),
)
AWAY_FROM_S1_IN_AZ = preferred("podAntiAffinity", (5, affinity_term("az", S1_IN)))
AWAY_FROM_S2_IN_AZ = preferred("podAntiAffinity", (5, affinity_term("az", S2_IN)))
STAY_WITH_S1_AWAY_FROM_S2 = {
    **preferred("podAffinity", (8, affinity_term("region", S1_IN))),
    **preferred("podAntiAffinity", (5, affinity_term("az", S2_IN))),
}
AFFINITY_NAMESPACE_SELECTOR = preferred(
    "podAffinity", (5, affinity_term("region", S1_IN, namespaces=["subteam2.team2"], namespace_selector=TEAM1))
)
ANTI_AFFINITY_NAMESPACE_SELECTOR = preferred(
    "podAntiAffinity", (5, affinity_term("region", S1_IN, namespaces=["subteam2.team2"], namespace_selector=TEAM1))
)
INVALID_AFFINITY = preferred("podAffinity", (8, affinity_term("region", sel_in("security", "{{.bad-value.}}"))))
INVALID_ANTI_AFFINITY = preferred("podAntiAffinity", (5, affinity_term("az", sel_in("security", "{{.bad-value.}}"))))


def region(name: str, value: str) -> NodeBuilder:
    return make_node(name).label("region", value)


def az(name: str, value: str) -> NodeBuilder:
    return make_node(name).label("az", value)


def p(node: str = "", affinity: Raw | None = None, namespace: str = "default", **labels: str) -> PodBuilder:
    built = pod(namespace, node, **labels)
    return built.spec(affinity=affinity) if affinity is not None else built


CHINA, INDIA = "China", "India"
FIVE_NODES = [region("node1", CHINA), region("node2", INDIA), region("node3", CHINA), region("node4", CHINA)]
FIVE_NODES.append(region("node5", INDIA))

SCORE_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], Mapping[str, Any], list[int] | None]] = [
    (
        "all nodes are the same priority as affinity is nil",
        p(security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [],
        {},
        None,
    ),
    (
        "affinity: matching topology key and pods scores high",
        p(affinity=STAY_WITH_S1_IN_REGION, security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [p("node1", security="S1"), p("node2", security="S2"), p("node3", security="S1")],
        {},
        [100, 0, 0],
    ),
    (
        "affinity: nodes sharing the topology value score the same",
        p(affinity=STAY_WITH_S1_IN_REGION),
        [region("node1", CHINA), region("node2", CHINA).label("az", "az1"), region("node3", INDIA)],
        [p("node1", security="S1")],
        {},
        [100, 100, 0],
    ),
    (
        "affinity: the region with more matching pods scores high",
        p(affinity=STAY_WITH_S2_IN_REGION, security="S1"),
        FIVE_NODES,
        [p(f"node{i}", security="S2") for i in (1, 1, 2, 3, 4, 5)],
        {},
        [100, 0, 100, 100, 0],
    ),
    (
        "affinity: different operators and values, some not matching",
        p(affinity=AFFINITY3, security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [p("node1", security="S1"), p("node2", security="S2"), p("node3", security="S1")],
        {},
        [20, 100, 0],
    ),
    (
        "affinity symmetry: preferred terms of existing pods",
        p(security="S2"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [p("node1", STAY_WITH_S1_IN_REGION, security="S1"), p("node2", STAY_WITH_S2_IN_REGION, security="S2")],
        {},
        [0, 100, 0],
    ),
    (
        "affinity symmetry with a namespace selector",
        p(namespace="subteam1.team1", security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [p("node1", AFFINITY_NAMESPACE_SELECTOR, security="S1"), p("node2", STAY_WITH_S2_IN_REGION, security="S2")],
        {},
        [100, 0, 0],
    ),
    (
        "anti-affinity symmetry with a namespace selector",
        p(namespace="subteam1.team1", security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [
            p("node1", ANTI_AFFINITY_NAMESPACE_SELECTOR, security="S1"),
            p("node2", STAY_WITH_S2_IN_REGION, security="S2"),
        ],
        {},
        [0, 100, 100],
    ),
    (
        "affinity symmetry: required terms of existing pods with hardPodAffinityWeight",
        p(security="S1"),
        [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")],
        [p("node1", HARD_AFFINITY, security="S1"), p("node2", HARD_AFFINITY, security="S2")],
        {},
        [100, 100, 0],
    ),
    (
        "anti-affinity: a node with a matching pod scores low",
        p(affinity=AWAY_FROM_S1_IN_AZ, security="S1"),
        [az("node1", "az1"), region("node2", CHINA)],
        [p("node1", security="S1"), p("node2", security="S2")],
        {},
        [0, 100],
    ),
    (
        "anti-affinity: a node without the topology key scores high",
        p(affinity=AWAY_FROM_S1_IN_AZ, security="S1"),
        [az("node1", "az1"), region("node2", CHINA)],
        [p("node1", security="S1"), p("node2", security="S1")],
        {},
        [0, 100],
    ),
    (
        "anti-affinity: more matching pods score lower",
        p(affinity=AWAY_FROM_S1_IN_AZ, security="S1"),
        [az("node1", "az1"), region("node2", INDIA)],
        [p("node1", security="S1"), p("node1", security="S1"), p("node2", security="S2")],
        {},
        [0, 100],
    ),
    (
        "anti-affinity symmetry",
        p(security="S2"),
        [az("node1", "az1"), az("node2", "az2")],
        [p("node1", AWAY_FROM_S2_IN_AZ, security="S1"), p("node2", AWAY_FROM_S1_IN_AZ, security="S2")],
        {},
        [0, 100],
    ),
    (
        "affinity and anti-affinity",
        p(affinity=STAY_WITH_S1_AWAY_FROM_S2, security="S1"),
        [region("node1", CHINA), az("node2", "az1")],
        [p("node1", security="S1"), p("node2", security="S1")],
        {},
        [100, 0],
    ),
    (
        "affinity and anti-affinity with pods of the same labels",
        p(affinity=STAY_WITH_S1_AWAY_FROM_S2, security="S1"),
        [region("node1", CHINA).label("az", "az1"), *FIVE_NODES[1:]],
        [p(f"node{i}", security="S1") for i in (1, 1, 2, 3, 3, 4, 5)],
        {},
        [100, 0, 100, 100, 0],
    ),
    (
        "affinity, anti-affinity and symmetry together",
        p(affinity=STAY_WITH_S1_AWAY_FROM_S2, security="S1"),
        [region("node1", CHINA), az("node2", "az1"), region("node3", INDIA), az("node4", "az2")],
        [
            p("node1", security="S1"),
            p("node2", security="S2"),
            p("node3", STAY_WITH_S1_AWAY_FROM_S2),
            p("node4", AWAY_FROM_S1_IN_AZ),
        ],
        {},
        [100, 0, 100, 0],
    ),
    (
        "equal scores in a topology with partly affinity-less pods",
        p(security="S1"),
        [region("node1", CHINA), region("node2", CHINA)],
        [p("node1", security="S1"), p("node2", STAY_WITH_S1_AWAY_FROM_S2)],
        {},
        [0, 0],
    ),
    (
        "affinity with pods matching the namespace selector",
        p(affinity=AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1", security="S1"),
        [region("node1", CHINA), region("node2", INDIA)],
        [
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam1.team2", security="S1"),
            p("node2", namespace="subteam2.team1", security="S1"),
        ],
        {},
        [100, 0],
    ),
    (
        "affinity with pods matching namespaces and the namespace selector",
        p(affinity=AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1", security="S1"),
        [region("node1", CHINA), region("node2", INDIA)],
        [
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam2.team2", security="S1"),
            p("node2", namespace="subteam2.team1", security="S1"),
        ],
        {},
        [100, 0],
    ),
    (
        "anti-affinity with pods matching the namespace selector",
        p(affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1", security="S1"),
        [region("node1", CHINA), region("node2", INDIA)],
        [
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam1.team1", security="S1"),
            p("node1", namespace="subteam1.team2", security="S1"),
            p("node2", namespace="subteam2.team1", security="S1"),
        ],
        {},
        [0, 100],
    ),
    (
        "ignore preferred terms of existing pods",
        p(security="S2"),
        [region("node1", CHINA), region("node2", INDIA)],
        [p("node1", STAY_WITH_S1_AWAY_FROM_S2, security="S1"), p("node2", STAY_WITH_S2_IN_REGION, security="S2")],
        {"ignorePreferredTermsOfExistingPods": True},
        None,
    ),
    (
        "do not ignore preferred terms of existing pods",
        p(security="S2"),
        [region("node1", CHINA), region("node2", INDIA)],
        [p("node1", STAY_WITH_S1_AWAY_FROM_S2, security="S1"), p("node2", STAY_WITH_S2_IN_REGION, security="S2")],
        {"ignorePreferredTermsOfExistingPods": False},
        [0, 100],
    ),
    ("no nodes to score", p(security="S2"), [], [], {}, None),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "args", "want"),
    [case[1:] for case in SCORE_CASES],
    ids=[case[0] for case in SCORE_CASES],
)
def test_score(
    incoming: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder],
    args: Mapping[str, Any],
    want: list[int] | None,
) -> None:
    infos = cluster(nodes, pods)
    pl = plugin(infos, {"hardPodAffinityWeight": 1, **args})
    state = CycleState()
    pending = incoming.obj()
    status = pl.pre_score(state, pending, infos)
    if want is None:
        assert status is not None
        assert status.code == Code.SKIP
        return
    assert status is None
    assert run_score(pl, state, pending, infos) == want


@pytest.mark.parametrize("affinity", [INVALID_AFFINITY, INVALID_ANTI_AFFINITY], ids=["affinity", "anti-affinity"])
def test_invalid_preferred_terms_fail_pre_score(affinity: Raw) -> None:
    infos = cluster([region("node1", CHINA), region("node2", CHINA)])
    status = plugin(infos).pre_score(CycleState(), p(affinity=affinity).obj(), infos)
    assert status is not None
    assert status.code == Code.ERROR
    assert 'Invalid value: "{{.bad-value.}}"' in status.message


HARD_POD_AFFINITY = required(
    "podAffinity",
    affinity_term("region", sel_in("service", "S1"), namespaces=["", "subteam2.team2"], namespace_selector=TEAM1),
)
SYMMETRIC_NODES = [region("node1", CHINA), region("node2", INDIA), az("node3", "az1")]


@pytest.mark.parametrize(
    ("namespace", "weight", "want"),
    [
        pytest.param("", 1, [100, 100, 0], id="with default weight"),
        pytest.param("", 0, None, id="with zero weight"),
        pytest.param("subteam1.team2", 1, None, id="with no matching namespace"),
        pytest.param("subteam1.team1", 1, [100, 100, 0], id="with matching namespace selector"),
        pytest.param("subteam2.team2", 1, [100, 100, 0], id="with matching namespaces"),
    ],
)
def test_hard_pod_affinity_weight(namespace: str, weight: int, want: list[int] | None) -> None:
    pods = [p("node1", HARD_POD_AFFINITY, namespace=""), p("node2", HARD_POD_AFFINITY, namespace="")]
    infos = cluster(SYMMETRIC_NODES, pods)
    pl = plugin(infos, {"hardPodAffinityWeight": weight})
    state = CycleState()
    incoming = p(namespace=namespace, service="S1").obj()
    status = pl.pre_score(state, incoming, infos)
    if want is None:
        assert status is not None
        assert status.code == Code.SKIP
        return
    assert status is None
    assert run_score(pl, state, incoming, infos) == want


def test_normalize_scales_negative_scores() -> None:
    infos = cluster(
        [az("node1", "az1"), az("node2", "az2"), az("node3", "az3")],
        [p("node1", security="S1"), p("node1", security="S1"), p("node2", security="S1")],
    )
    pl = plugin(infos)
    state = CycleState()
    incoming = p(affinity=AWAY_FROM_S1_IN_AZ).obj()
    assert pl.pre_score(state, incoming, infos) is None
    # Raw scores -10, -5, 0: the range maps to 0, 50, 100.
    assert run_score(pl, state, incoming, infos) == [0, 50, 100]


# ---- args -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
        ({"hardPodAffinityWeight": 110}, "hardPodAffinityWeight: Invalid value: 110: not in valid range [0, 100]"),
        ({"hardPodAffinityWeight": "1"}, 'hardPodAffinityWeight: Invalid value: "1": must be an integer'),
        (
            {"ignorePreferredTermsOfExistingPods": "yes"},
            'ignorePreferredTermsOfExistingPods: Invalid value: "yes": must be a boolean',
        ),
        ({"kind": "PodTopologySpreadArgs"}, 'kind: Unsupported value: "PodTopologySpreadArgs"'),
        ({"unknown": 1}, "unknown field(s) ['unknown']"),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_args(args)
    assert str(info.value).startswith(message)


def test_args_defaults() -> None:
    args = parse_args({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs"})
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert parse_args({"hardPodAffinityWeight": 100}).hard_pod_affinity_weight == 100


def test_registered() -> None:
    built = in_tree_registry().create("InterPodAffinity", {"hardPodAffinityWeight": 5}, make_handle())
    assert built.name == "InterPodAffinity"


# ---- queueing hints ---------------------------------------------------------------------

WANTS_FOO = pod().pod_affinity(affinity_term("zone", FOO_BAR))
AVOIDS_FOO = pod().pod_anti_affinity(affinity_term("zone", FOO_BAR))


@pytest.mark.parametrize(
    ("pending", "old", "new_pod", "want"),
    [
        pytest.param(WANTS_FOO, None, pod(node="n", foo="bar"), QueueingHint.QUEUE, id="add a pod matching affinity"),
        pytest.param(WANTS_FOO, None, pod(node="n", foo="baz"), QueueingHint.SKIP, id="add a pod not matching"),
        pytest.param(WANTS_FOO, None, pod(foo="bar"), QueueingHint.SKIP, id="add an unscheduled pod"),
        pytest.param(
            WANTS_FOO,
            pod(node="n", foo="baz").uid("u"),
            pod(node="n", foo="bar").uid("u"),
            QueueingHint.QUEUE,
            id="update a pod to match affinity",
        ),
        pytest.param(
            WANTS_FOO,
            pod(node="n", foo="bar").uid("u"),
            pod(node="n", foo="bar", x="y").uid("u"),
            QueueingHint.SKIP,
            id="update a pod that already matched",
        ),
        pytest.param(
            AVOIDS_FOO,
            pod(node="n", foo="bar").uid("u"),
            pod(node="n", foo="baz").uid("u"),
            QueueingHint.QUEUE,
            id="update a pod to stop matching anti-affinity",
        ),
        pytest.param(
            AVOIDS_FOO, pod(node="n", foo="bar"), None, QueueingHint.QUEUE, id="delete a pod anti-affinity avoids"
        ),
        pytest.param(AVOIDS_FOO, pod(node="n", foo="baz"), None, QueueingHint.SKIP, id="delete an unrelated pod"),
        pytest.param(
            pod(foo="bar"),
            pod(node="n").pod_anti_affinity(affinity_term("zone", FOO_BAR)),
            None,
            QueueingHint.SKIP,
            id="delete a pod whose anti-affinity repelled the pod (not consulted in 1.34)",
        ),
        pytest.param(
            WANTS_FOO,
            None,
            pod(node="n", foo="bar", namespace="other"),
            QueueingHint.SKIP,
            id="add a matching pod of another namespace",
        ),
    ],
)
def test_pod_hint(pending: PodBuilder, old: PodBuilder | None, new_pod: PodBuilder | None, want: QueueingHint) -> None:
    assert _pod_changed(pending.obj(), old.obj() if old else None, new_pod.obj() if new_pod else None) == want


@pytest.mark.parametrize(
    ("pending", "old", "new_node", "want"),
    [
        pytest.param(
            WANTS_FOO, None, make_node("n").label("zone", "a"), QueueingHint.QUEUE, id="add a node with the key"
        ),
        pytest.param(WANTS_FOO, None, make_node("n"), QueueingHint.SKIP, id="add a node without the key"),
        pytest.param(
            WANTS_FOO, make_node("n"), make_node("n").label("zone", "a"), QueueingHint.QUEUE, id="the key was added"
        ),
        pytest.param(
            WANTS_FOO,
            make_node("n").label("zone", "a"),
            make_node("n").label("zone", "b"),
            QueueingHint.QUEUE,
            id="the key's value changed",
        ),
        pytest.param(
            WANTS_FOO,
            make_node("n").label("zone", "a"),
            make_node("n").label("zone", "a").label("x", "y"),
            QueueingHint.SKIP,
            id="an unrelated label changed",
        ),
        pytest.param(AVOIDS_FOO, None, make_node("n"), QueueingHint.QUEUE, id="anti-affinity: any added node"),
        pytest.param(
            AVOIDS_FOO,
            make_node("n").label("zone", "a"),
            make_node("n"),
            QueueingHint.QUEUE,
            id="anti-affinity: the key was removed",
        ),
        pytest.param(
            AVOIDS_FOO,
            make_node("n"),
            make_node("n").label("zone", "a"),
            QueueingHint.SKIP,
            id="anti-affinity: key added",
        ),
        pytest.param(pod(), None, make_node("n").label("zone", "a"), QueueingHint.SKIP, id="no terms at all"),
    ],
)
def test_node_hint(pending: PodBuilder, old: NodeBuilder | None, new_node: NodeBuilder, want: QueueingHint) -> None:
    assert _node_changed(pending.obj(), old.obj() if old else None, new_node.obj()) == want


def test_hints_queue_unexpected_objects() -> None:
    pending = WANTS_FOO.obj()
    assert _pod_changed(pending, None, NodeBuilder("n").obj()) == QueueingHint.QUEUE
    assert _node_changed(pending, None, None) == QueueingHint.QUEUE


def test_events_registered() -> None:
    events = plugin([]).events_to_register()
    assert [(e.event.resource, e.event.action, e.hint is not None) for e in events] == [
        (EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE, True),
        (EventResource.TARGET_POD, ActionType.UPDATE_POD_LABEL, False),  # kube's hint always says Queue
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, True),
    ]


def test_pre_score_kept_across_cycles_equals_a_fresh_count() -> None:
    """PreScore keeps each node's weights between cycles (recounting the nodes that changed): after
    pods come and go, its scores are those a plugin seeing the cluster for the first time gives."""
    from scheduler.api.fake import FakeApiClient
    from scheduler.cache.cache import Cache
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces

    zone_affinity = affinity_term("zone", label_selector({"color": "blue"}))
    cache, snap = Cache(), Snapshot()
    for i in range(6):
        cache.add_or_update_node(make_node(f"n{i}").label("zone", f"z{i % 3}").obj())

    def blue(node: str, name: str) -> Pod:
        built = make_pod(name, "default").node(node).label("color", "blue").pod_affinity(zone_affinity)
        return built.preferred_pod_affinity(3, affinity_term("zone", label_selector({"size": "big"}))).obj()

    def scores(plugin: InterPodAffinity) -> tuple[Status | None, list[int]]:
        state = CycleState()
        incoming = make_pod("incoming", "default").label("color", "blue").pod_affinity(zone_affinity).obj()
        status = plugin.pre_score(state, incoming, snap.list())
        return status, run_score(plugin, state, incoming, snap.list()) if status is None else []

    def fresh() -> InterPodAffinity:
        return InterPodAffinity(parse_args({}), FrameworkHandle(FakeApiClient(), snap, StaticNamespaces({})))

    kept = fresh()
    cache.update_snapshot(snap)
    status, _ = scores(kept)
    assert status is not None and status.code == Code.SKIP  # no pod with affinity yet
    added = [blue(node, f"b{i}") for i, node in enumerate(["n0", "n0", "n1", "n3", "n4"])]
    for p_ in added:
        cache.add_pod(p_)
    cache.add_pod(make_pod("big", "default").node("n5").label("size", "big").obj())
    for step in range(3):
        cache.update_snapshot(snap)
        got = scores(kept)
        assert got == scores(fresh()), f"step {step}"
        assert got[0] is None and any(got[1])
        cache.remove_pod(added.pop().uid)
    assert "b0" in {p.name for info in snap.list() for p in info.pods.values()}


def test_pods_differing_only_in_labels_no_term_selects_share_the_kept_counts() -> None:
    """Upstream's benchmark gives every pod its own `signature` label: the counts kept across cycles
    must not be keyed by it, yet a label some existing term does select on must still count."""
    from scheduler.api.fake import FakeApiClient
    from scheduler.cache.cache import Cache
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces

    cache, snap = Cache(), Snapshot()
    for i in range(4):
        cache.add_or_update_node(make_node(f"n{i}").label("zone", f"z{i % 2}").obj())
    for i, node in enumerate(["n0", "n0", "n1"]):
        existing = make_pod(f"e{i}", "default").node(node).label("color", "blue")
        cache.add_pod(existing.pod_anti_affinity(affinity_term("zone", label_selector({"color": "blue"}))).obj())
    cache.update_snapshot(snap)

    def fresh() -> InterPodAffinity:
        return InterPodAffinity(parse_args({}), FrameworkHandle(FakeApiClient(), snap, StaticNamespaces({})))

    def verdicts(plugin: InterPodAffinity, incoming: Pod) -> list[tuple[Code, str] | None]:
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, snap.list())
        assert status is None
        return [verdict(plugin.filter(state, incoming, info)) for info in snap.list()]

    kept = fresh()
    zone = affinity_term("zone", label_selector({"app": "web"}))
    entries = []
    for n in range(4):  # own required affinity: the table path with kept counts
        incoming = make_pod(f"s{n}", "default").label("signature", f"signature-label-{n}").label("app", "web")
        incoming.pod_affinity(zone)
        assert verdicts(kept, incoming.obj()) == verdicts(fresh(), incoming.obj())
        entries.append(len(kept._filtering._counts._entries))
    # The first cycle learns which keys the existing terms select on (a second entry, once); after
    # that pods with other signatures reuse it.
    assert entries == [1, 2, 2, 2]
    blue = make_pod("blue", "default").label("signature", "x").label("app", "web").label("color", "blue")
    got = verdicts(kept, blue.pod_affinity(zone).obj())
    assert got == verdicts(fresh(), blue.obj()) and EXISTING in got  # the existing pods repel it


def test_kept_counts_are_keyed_on_what_they_read() -> None:
    """PreFilter's kept counts read the pod's required terms, not its preferred ones: pods that
    differ only in preferred terms share them (and PreScore's kept weights read only preferred)."""
    from scheduler.api.fake import FakeApiClient
    from scheduler.cache.cache import Cache
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces

    cache, snap = Cache(), Snapshot()
    for i in range(4):
        cache.add_or_update_node(make_node(f"n{i}").label("zone", f"z{i % 2}").obj())
    cache.add_pod(make_pod("e0", "default").node("n0").label("app", "web").obj())
    cache.update_snapshot(snap)
    plugin = InterPodAffinity(parse_args({}), FrameworkHandle(FakeApiClient(), snap, StaticNamespaces({})))
    zone = affinity_term("zone", label_selector({"app": "web"}))
    for weight in (10, 20, 30):
        builder = make_pod(f"p{weight}", "default").label("app", "web").pod_affinity(zone)
        pod = builder.preferred_pod_anti_affinity(weight, affinity_term("zone", label_selector({"app": "db"}))).obj()
        state = CycleState()
        assert plugin.pre_filter(state, pod, snap.list()) == (None, None)
        plugin.pre_score(state, pod, snap.list())
    assert len(plugin._filtering._counts._entries) == 1
    assert len(plugin._scoring._scores._entries) == 3


def test_namespace_selector_terms_take_the_kept_counts_and_the_batch_filter() -> None:
    """Terms selecting namespaces by label (upstream's NSSelector workload) share the counts kept
    across cycles like any other term; relabelling a namespace changes what they select (a new
    entry, counted afresh), and the batch Filter gives the per-node verdicts."""
    from scheduler.api.fake import FakeApiClient
    from scheduler.cache.cache import Cache
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces

    namespaces: dict[str, Mapping[str, str]] = {
        "init-0": {"team": "devops"},
        "init-1": {},
        "measure": {"team": "devops"},
    }
    cache, snap = Cache(), Snapshot()
    for i in range(4):
        cache.add_or_update_node(make_node(f"n{i}").label("kubernetes.io/hostname", f"n{i}").obj())
    devops = affinity_term(
        "kubernetes.io/hostname",
        label_selector({"color": "green"}),
        namespace_selector={"matchLabels": {"team": "devops"}},
    )
    for i, (node, namespace) in enumerate([("n0", "init-0"), ("n1", "init-1")]):
        cache.add_pod(make_pod(f"e{i}", namespace).node(node).label("color", "green").pod_anti_affinity(devops).obj())
    cache.update_snapshot(snap)
    plugin = InterPodAffinity(parse_args({}), FrameworkHandle(FakeApiClient(), snap, StaticNamespaces(namespaces)))

    def verdicts(n: int) -> list[tuple[Code, str] | None]:
        incoming = make_pod(f"m{n}", "measure").label("color", "green").label("signature", f"s{n}")
        pod = incoming.pod_anti_affinity(devops).obj()
        state = CycleState()
        assert plugin.pre_filter(state, pod, snap.list()) == (None, None)
        got = [verdict(plugin.filter(state, pod, info)) for info in snap.list()]
        batch = plugin.filter_batch(state, pod, snap.table)
        assert batch is not None
        explained = iter(batch.statuses(np.flatnonzero(~batch.passes)))
        assert [None if ok else verdict(next(explained)) for ok in batch.passes.tolist()] == got
        return got

    # e0 (init-0, devops) repels on n0 both ways; e1's namespace is not selected, but its own term
    # selects the incoming pod's namespace: n1 is closed by the existing pod's anti-affinity.
    assert verdicts(0) == [ANTI, EXISTING, None, None]
    assert verdicts(1) == [ANTI, EXISTING, None, None]
    # (the first cycle learns which label keys existing terms select on: a second entry, once)
    assert len(plugin._filtering._counts._entries) == 2
    namespaces["init-1"] = {"team": "devops"}
    assert verdicts(2) == [ANTI, ANTI, None, None]
    assert len(plugin._filtering._counts._entries) == 3


def test_a_pod_without_pod_affinity_parses_to_no_terms_without_parsing() -> None:
    """parse_pod_terms answers NO_TERMS at once for a pod with neither podAffinity nor
    podAntiAffinity (node affinity alone included), and resolving its namespaces keeps it."""
    from plugins.interpodaffinity.terms import NO_TERMS, parse_pod_terms

    plain = make_pod("p").label("app", "web").node_affinity_in("zone", ["z1"]).obj()
    terms, errors = parse_pod_terms(plain)
    assert terms is NO_TERMS and errors == []
    assert terms.with_namespaces_resolved(lambda selector: frozenset()) is NO_TERMS  # type: ignore[arg-type]
    anti = make_pod("q").pod_anti_affinity({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"})
    parsed, errors = parse_pod_terms(anti.obj())
    assert errors == [] and len(parsed.required_anti_affinity) == 1 and parsed is not NO_TERMS
