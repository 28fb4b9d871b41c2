"""PodTopologySpread: PreFilter counts, Filter verdicts, AddPod/RemovePod, scores, defaults, args, hints.

The scenarios mirror kube-scheduler 1.34's filtering_test.go, scoring_test.go and
plugin_test.go for this plugin (with 1.34's feature defaults: node inclusion policies and
matchLabelKeys on).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from plugins.podtopologyspread import PodTopologySpread, new
from plugins.podtopologyspread.constraints import NO_DOMAIN_MINIMUM, topology_normalizing_weight
from plugins.podtopologyspread.defaults import StaticWorkloads, default_selector, parse_args
from plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PRE_FILTER_KEY,
)
from plugins.podtopologyspread.scoring import PRE_SCORE_KEY
from plugins.registry import in_tree_registry
from scheduler.framework.types import ActionType, Code, CycleState, EventResource, NodeInfo, QueueingHint, Status
from scheduler.model.objects import Pod
from scheduler.testing.builders import (
    NodeBuilder,
    PodBuilder,
    expr,
    label_selector,
    make_handle,
    make_node,
    make_pod,
    run_score,
)

HOSTNAME = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
FOO = label_selector(None, expr("foo", "Exists"))
BAR = label_selector(None, expr("bar", "Exists"))
HARD, SOFT = "DoNotSchedule", "ScheduleAnyway"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

_names = itertools.count()


def zn(name: str, zone: str | None = None, node_key: str = "node") -> NodeBuilder:
    """A node labelled zone=<zone> (unless None) and <node_key>=<name>."""
    node = make_node(name).label(node_key, name)
    return node.label("zone", zone) if zone is not None else node


def on(node: str, *keys: str, namespace: str = "default", **labels: str) -> PodBuilder:
    """A pod bound to `node`, labelled key="" for each key and with any other labels."""
    pod = make_pod(f"p{next(_names)}", namespace).node(node)
    for key in keys:
        pod.label(key, "")
    for key, value in labels.items():
        pod.label(key, value)
    return pod


def incoming(*keys: str, **labels: str) -> PodBuilder:
    pod = make_pod("incoming")
    for key in keys:
        pod.label(key, "")
    for key, value in labels.items():
        pod.label(key, value)
    return pod


def cluster(nodes: Sequence[NodeBuilder], pods: Sequence[PodBuilder] = ()) -> list[NodeInfo]:
    infos = {n.raw["metadata"]["name"]: NodeInfo(n.obj()) for n in nodes}
    for pod in pods:
        infos[pod.raw["spec"]["nodeName"]].add_pod(pod.obj())
    return list(infos.values())


def plugin(
    infos: Sequence[NodeInfo], args: Mapping[str, Any] | None = None, objects: Sequence[Any] = ()
) -> PodTopologySpread:
    return PodTopologySpread(
        parse_args(args if args is not None else {"defaultingType": "List"}),
        make_handle(*infos),
        StaticWorkloads(objects),
    )


def pre_filter(pl: PodTopologySpread, pod: Pod, infos: Sequence[NodeInfo]) -> tuple[CycleState, Status | None]:
    state = CycleState()
    result, status = pl.pre_filter(state, pod, infos)
    assert result is None
    return state, status


def counts_of(state: CycleState) -> list[dict[str, int]]:
    return [dict(d.counts) for d in state.read(PRE_FILTER_KEY).domains]


def minima_of(state: CycleState) -> list[int]:
    return [d.minimum() for d in state.read(PRE_FILTER_KEY).domains]


FOUR_NODES = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
SPREAD_AB_Y = [on("node-a", "foo"), on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo"), on("node-y", "foo")]
SPREAD_2_1_0_4 = [*SPREAD_AB_Y, on("node-y", "foo"), on("node-y", "foo")]
TAINTED = ("taint",)


def tainted(node: NodeBuilder) -> NodeBuilder:
    return node.taint(UNSCHEDULABLE_TAINT, effect="NoSchedule")


# ---- PreFilter state ------------------------------------------------------------------

PRE_FILTER_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], list[dict[str, int]], list[int]]] = [
    (
        "clean cluster with one constraint",
        incoming("foo").spread_constraint(5, "zone", HARD, label_selector({"foo": "bar"})),
        FOUR_NODES,
        [],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "normal case with one constraint",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO),
        FOUR_NODES,
        SPREAD_AB_Y,
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "null label selector matches nothing",
        incoming("foo").spread_constraint(1, "zone", HARD, None),
        FOUR_NODES,
        SPREAD_AB_Y,
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "one constraint on a 3-zone cluster",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO),
        [*FOUR_NODES, zn("node-o", "zone3"), zn("node-p", "zone3")],
        SPREAD_AB_Y,
        [{"zone1": 3, "zone2": 2, "zone3": 0}],
        [0],
    ),
    (
        "pods of other namespaces do not count",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO),
        FOUR_NODES,
        [
            on("node-a", "foo"),
            on("node-a", "foo", namespace="ns1"),
            on("node-b", "foo"),
            on("node-y", "foo", namespace="ns2"),
            on("node-y", "foo"),
        ],
        [{"zone1": 2, "zone2": 1}],
        [1],
    ),
    (
        "two constraints",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, FOO),
        FOUR_NODES,
        SPREAD_2_1_0_4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
        [3, 0],
    ),
    (
        "soft constraints are bypassed",
        incoming("foo")
        .spread_constraint(1, "zone", SOFT, FOO)
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", SOFT, FOO)
        .spread_constraint(1, "node", HARD, FOO),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        SPREAD_2_1_0_4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "different label selectors, simple",
        incoming("foo", "bar").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, BAR),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [on("node-a", "foo"), on("node-b", "bar")],
        [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
        [0, 0],
    ),
    (
        "different label selectors, complex pods",
        incoming("foo", "bar").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, BAR),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [
            on("node-a", "foo"),
            on("node-a", "foo", "bar"),
            on("node-b", "foo"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
        ],
        [{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}],
        [3, 0],
    ),
    (
        "required node affinity excludes a node",
        incoming("foo")
        .required_terms({"matchExpressions": [expr("node", "NotIn", "node-x")]})
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", HARD, FOO),
        FOUR_NODES,
        SPREAD_2_1_0_4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "NodeAffinityPolicy honored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", HARD, BAR),
        [zn("node-a").label("foo", ""), zn("node-b").label("foo", ""), zn("node-c").label("bar", "")],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "NodeAffinityPolicy ignored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", HARD, BAR, node_affinity_policy="Ignore"),
        [zn("node-a").label("foo", ""), zn("node-b").label("foo", ""), zn("node-c").label("bar", "")],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "NodeAffinityPolicy honored with node affinity",
        incoming("foo").node_affinity_in("foo", [""]).spread_constraint(1, "node", HARD, BAR),
        [zn("node-a").label("foo", ""), zn("node-b").label("foo", ""), zn("node-c").label("bar", "")],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "NodeAffinityPolicy ignored with node affinity",
        incoming("foo")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", HARD, BAR, node_affinity_policy="Ignore"),
        [zn("node-a").label("foo", ""), zn("node-b").label("foo", ""), zn("node-c").label("bar", "")],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "NodeTaintsPolicy ignored by default",
        incoming("foo").spread_constraint(1, "node", HARD, BAR),
        [zn("node-a"), zn("node-b"), tainted(zn("node-c").label("bar", ""))],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "NodeTaintsPolicy honored",
        incoming("foo").spread_constraint(1, "node", HARD, BAR, node_taints_policy="Honor"),
        [zn("node-a"), zn("node-b"), tainted(zn("node-c").label("bar", ""))],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "NodeTaintsPolicy honored with tolerated taints",
        incoming("foo")
        .toleration(UNSCHEDULABLE_TAINT, operator="Exists")
        .spread_constraint(1, "node", HARD, BAR, node_taints_policy="Honor"),
        [zn("node-a"), zn("node-b"), tainted(zn("node-c").label("bar", ""))],
        [on("node-a", "bar"), on("node-b", "bar"), on("node-b", "bar"), on("node-c")],
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "two inclusion constraints, zone honor/ignore, node ignore/ignore",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", HARD, FOO, node_affinity_policy="Ignore"),
        [zn("node-a", "zone1").label("foo", ""), zn("node-b", "zone1"), zn("node-x", "zone2").label("foo", "")],
        [on("node-b", "foo"), on("node-b", "foo"), on("node-x", "foo")],
        [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
        [0, 0],
    ),
    (
        "two inclusion constraints, zone honor/honor, node honor/ignore",
        incoming("foo")
        .spread_constraint(1, "zone", HARD, FOO, node_taints_policy="Honor")
        .spread_constraint(1, "node", HARD, FOO),
        [
            zn("node-a", "zone1").label("foo", ""),
            tainted(zn("node-b", "zone1")),
            zn("node-x", "zone2").label("foo", ""),
        ],
        [on("node-b", "foo"), on("node-b", "foo"), on("node-x", "foo")],
        [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
        [0, 0],
    ),
    (
        "two inclusion constraints, zone honor/ignore, node honor/ignore",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", HARD, FOO),
        [
            zn("node-a", "zone1"),
            tainted(zn("node-b", "zone1").label("foo", "")),
            zn("node-x", "zone2").label("foo", ""),
            zn("node-y", "zone2"),
        ],
        [on("node-a", "foo"), on("node-a", "foo"), on("node-x", "foo"), on("node-y", "foo")],
        [{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}],
        [0, 0],
    ),
    (
        "two inclusion constraints, zone ignore/ignore, node honor/honor",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO, node_affinity_policy="Ignore")
        .spread_constraint(1, "node", HARD, FOO, node_taints_policy="Honor"),
        [
            zn("node-a", "zone1"),
            tainted(zn("node-b", "zone1").label("foo", "")),
            zn("node-x", "zone2").label("foo", ""),
            zn("node-y", "zone2").label("foo", ""),
        ],
        [on("node-a", "foo"), on("node-a", "foo"), on("node-x", "foo"), on("node-x", "foo"), on("node-y", "foo")],
        [{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}],
        [2, 1],
    ),
    (
        "matchLabelKeys ANDed with a non-empty selector",
        incoming("foo", bar="a").spread_constraint(1, "zone", HARD, FOO, match_label_keys=["bar"]),
        FOUR_NODES,
        [
            on("node-a", "foo"),
            on("node-a", "foo", bar="a"),
            on("node-b", "foo"),
            on("node-y", "foo", bar="a"),
            on("node-y", "bar"),
        ],
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "matchLabelKeys ANDed with an empty selector",
        incoming(foo="a").spread_constraint(1, "zone", HARD, label_selector(), match_label_keys=["foo"]),
        FOUR_NODES,
        [on("node-a", foo="a"), on("node-a", foo="a"), on("node-b", foo="a"), on("node-y", foo="a"), on("node-y")],
        [{"zone1": 3, "zone2": 1}],
        [1],
    ),
    (
        "matchLabelKeys the pod lacks leave a null selector matching nothing",
        incoming("foo").spread_constraint(1, "zone", HARD, None, match_label_keys=["bar"]),
        FOUR_NODES,
        [on("node-a", foo="a"), on("node-b", foo="a"), on("node-y", foo="a")],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "matchLabelKeys the pod lacks are ignored",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO, match_label_keys=["bar"]),
        FOUR_NODES,
        [on("node-a", foo="a"), on("node-a", foo="a"), on("node-b", foo="a"), on("node-y", foo="a")],
        [{"zone1": 3, "zone2": 1}],
        [1],
    ),
    (
        "two constraints with the same topology key count separately",
        incoming("foo", "bar").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "zone", HARD, BAR),
        FOUR_NODES,
        [
            on("node-a", "foo", "bar"),
            on("node-b", "foo"),
            on("node-x", "bar"),
            on("node-y", "foo", "bar"),
            on("node-y", "bar"),
        ],
        [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
        [1, 1],
    ),
    (
        "terminating pods do not count",
        incoming("foo").spread_constraint(1, "node", HARD, FOO),
        [zn("node-a"), zn("node-b")],
        [on("node-a", "foo").terminating(), on("node-b", "foo")],
        [{"node-a": 0, "node-b": 1}],
        [0],
    ),
    (
        "nodes without every topology key are not domains",
        incoming("foo").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, FOO),
        [zn("node-a", "zone1"), zn("node-b"), zn("node-x", "zone2")],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-b", "foo")],
        [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
        [0, 0],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want_counts", "want_minima"),
    [case[1:] for case in PRE_FILTER_CASES],
    ids=[case[0] for case in PRE_FILTER_CASES],
)
def test_pre_filter_counts(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder],
    want_counts: list[dict[str, int]],
    want_minima: list[int],
) -> None:
    infos = cluster(nodes, pods)
    state, status = pre_filter(plugin(infos), pod.obj(), infos)
    assert status is None
    assert counts_of(state) == want_counts
    assert minima_of(state) == want_minima


SERVICE_FOO_BAR = {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"foo": "bar"}}}


@pytest.mark.parametrize(
    ("pod", "default_constraints", "objects", "want"),
    [
        pytest.param(
            make_pod("p").label("foo", "bar").label("baz", "kar"),
            [
                {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": HARD},
                {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SOFT},
                {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": HARD},
            ],
            [SERVICE_FOO_BAR],
            [(3, "node"), (5, "rack")],
            id="default constraints and a service",
        ),
        pytest.param(
            make_pod("p").label("foo", "bar"),
            [{"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": HARD}],
            [{"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"baz": "kep"}}}],
            None,
            id="default constraints and a service that doesn't match",
        ),
        pytest.param(
            make_pod("p")
            .label("foo", "bar")
            .label("baz", "tar")
            .spread_constraint(1, "zone", HARD, label_selector({"baz": "tar"}))
            .spread_constraint(2, "planet", SOFT, label_selector({"fot": "rok"})),
            [{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": HARD}],
            [SERVICE_FOO_BAR],
            [(1, "zone")],
            id="default constraints and a service, but the pod has constraints",
        ),
        pytest.param(
            make_pod("p").label("foo", "bar"),
            [{"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": SOFT}],
            [SERVICE_FOO_BAR],
            None,
            id="default soft constraints and a service",
        ),
        pytest.param(make_pod("p").label("foo", ""), [], [], None, id="skip if not specified"),
    ],
)
def test_pre_filter_defaults(
    pod: PodBuilder, default_constraints: list[dict[str, Any]], objects: list[Any], want: list[tuple[int, str]] | None
) -> None:
    infos: list[NodeInfo] = []
    args = {"defaultingType": "List", "defaultConstraints": default_constraints}
    pl = plugin(infos, args, objects)
    state, status = pre_filter(pl, pod.obj(), infos)
    if want is None:
        assert status is not None
        assert status.code == Code.SKIP
        return
    assert status is None
    pre = state.read(PRE_FILTER_KEY)
    assert [(c.max_skew, c.topology_key) for c in pre.constraints] == want
    assert counts_of(state) == [{} for _ in want]
    assert minima_of(state) == [NO_DOMAIN_MINIMUM for _ in want]


def test_default_constraints_use_the_service_selector() -> None:
    infos = cluster([zn("node-a"), zn("node-b")], [on("node-a", foo="bar"), on("node-a", foo="baz")])
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD}],
    }
    state, status = pre_filter(plugin(infos, args, [SERVICE_FOO_BAR]), make_pod("p").label("foo", "bar").obj(), infos)
    assert status is None
    assert counts_of(state) == [{"node-a": 1, "node-b": 0}]


def test_malformed_selector_is_an_error() -> None:
    pod = incoming("foo").spread_constraint(1, "zone", HARD, label_selector(None, expr("foo", "In"))).obj()
    infos = cluster(FOUR_NODES)
    _, status = pre_filter(plugin(infos), pod, infos)
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message.startswith("get constraints from pod: ")


# ---- AddPod / RemovePod ---------------------------------------------------------------

NODE_AB = [zn("node-a", "zone1"), zn("node-b", "zone1")]
NODE_AX = [zn("node-a", "zone1"), zn("node-x", "zone2")]
NODE_ABX = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]
AFFINITY_NODES = [zn("node-a", "zone1").label("foo", "bar"), zn("node-b", "zone2").label("foo", "")]
TAINT_NODES = [tainted(zn("node-a", "zone1")), zn("node-b", "zone2")]
ON_NODE = incoming("foo").spread_constraint(1, "node", HARD, FOO)
ON_ZONE = incoming("foo").spread_constraint(1, "zone", HARD, FOO)
ON_ZONE_AND_NODE = incoming("foo").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, FOO)
ON_ZONE_FOO_NODE_BAR = (
    incoming("foo", "bar").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, BAR)
)
AVOIDING_FOO_BAR = ON_ZONE.obj().raw["spec"]


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "added", "want_counts", "want_minima"),
    [
        pytest.param(
            ON_NODE,
            NODE_AB,
            [],
            on("node-a", "foo"),
            [{"node-a": 1, "node-b": 0}],
            [0],
            id="node a and b both impact the current minimum",
        ),
        pytest.param(
            ON_NODE,
            NODE_AB,
            [on("node-b", "foo")],
            on("node-a", "foo"),
            [{"node-a": 1, "node-b": 1}],
            [1],
            id="only node a impacts the current minimum",
        ),
        pytest.param(
            ON_NODE,
            NODE_AB,
            [on("node-b", "foo")],
            on("node-a", "foo", namespace="ns1"),
            [{"node-a": 0, "node-b": 1}],
            [0],
            id="a pod of another namespace changes nothing",
        ),
        pytest.param(
            ON_NODE,
            NODE_AB,
            [on("node-b", "foo")],
            on("node-b", "foo"),
            [{"node-a": 0, "node-b": 2}],
            [0],
            id="a pod on a non-critical node",
        ),
        pytest.param(
            ON_ZONE_AND_NODE,
            NODE_AX,
            [],
            on("node-a", "foo"),
            [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
            [0, 0],
            id="node a and x both impact the minimum on zone and node",
        ),
        pytest.param(
            ON_ZONE_AND_NODE,
            NODE_AX,
            [on("node-x", "foo")],
            on("node-a", "foo"),
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
            [1, 1],
            id="only node a impacts the minimum on zone and node",
        ),
        pytest.param(
            ON_ZONE_AND_NODE,
            NODE_ABX,
            [on("node-b", "foo"), on("node-b", "foo"), on("node-x", "foo")],
            on("node-a", "foo"),
            [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
            [1, 1],
            id="node a impacts the node minimum, node x the zone minimum",
        ),
        pytest.param(
            ON_ZONE_FOO_NODE_BAR,
            NODE_ABX,
            [on("node-b", "foo", "bar"), on("node-x", "foo", "bar"), on("node-x", "bar")],
            on("node-a", "foo"),
            [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}],
            [1, 0],
            id="different selectors, node a impacts the zone minimum",
        ),
        pytest.param(
            ON_ZONE_FOO_NODE_BAR,
            NODE_ABX,
            [on("node-b", "bar"), on("node-x", "foo", "bar"), on("node-x", "bar")],
            on("node-a", "foo", "bar"),
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
            [1, 1],
            id="different selectors, node a impacts both minima",
        ),
        pytest.param(
            incoming("foo")
            .required_terms({"matchExpressions": [expr("foo", "NotIn", "bar")]})
            .spread_constraint(1, "zone", HARD, FOO),
            AFFINITY_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-a", "foo"),
            [{"zone2": 1}],
            [1],
            id="a pod on a node the incoming pod's affinity excludes",
        ),
        pytest.param(
            ON_ZONE,
            AFFINITY_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-b", "foo"),
            [{"zone1": 1, "zone2": 2}],
            [1],
            id="a pod on a node matching the incoming pod's affinity",
        ),
        pytest.param(
            ON_ZONE,
            AFFINITY_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-b"),
            [{"zone1": 1, "zone2": 1}],
            [1],
            id="a pod the selector does not match",
        ),
        pytest.param(
            ON_ZONE,
            TAINT_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-b", "foo"),
            [{"zone1": 1, "zone2": 2}],
            [1],
            id="taints are ignored by default",
        ),
        pytest.param(
            incoming("foo").toleration(UNSCHEDULABLE_TAINT, operator="Exists").spread_constraint(1, "zone", HARD, FOO),
            TAINT_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-b", "foo"),
            [{"zone1": 1, "zone2": 2}],
            [1],
            id="taint tolerated by the incoming pod",
        ),
        pytest.param(
            incoming("foo").spread_constraint(1, "zone", HARD, FOO, node_taints_policy="Honor"),
            TAINT_NODES,
            [on("node-b", "foo")],
            on("node-a", "foo"),
            [{"zone2": 1}],
            [1],
            id="a pod on a tainted node while taints are honored",
        ),
    ],
)
def test_add_pod(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    existing: list[PodBuilder],
    added: PodBuilder,
    want_counts: list[dict[str, int]],
    want_minima: list[int],
) -> None:
    infos = cluster(nodes, existing)
    pl = plugin(infos)
    incoming_pod = pod.obj()
    state, status = pre_filter(pl, incoming_pod, infos)
    assert status is None
    added_pod = added.obj()
    target = next(i for i in infos if i.name == added_pod.node_name).clone()
    target.add_pod(added_pod)
    assert pl.add_pod(state, incoming_pod, added_pod, target) is None
    assert counts_of(state) == want_counts
    assert minima_of(state) == want_minima


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "removed", "want_counts", "want_minima"),
    [
        pytest.param(
            ON_ZONE,
            NODE_ABX,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo")],
            0,
            [{"zone1": 1, "zone2": 1}],
            [1],
            id="one constraint on zone, minimum unchanged",
        ),
        pytest.param(
            ON_ZONE,
            FOUR_NODES,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            0,
            [{"zone1": 1, "zone2": 2}],
            [1],
            id="one constraint on zone, minimum changed",
        ),
        pytest.param(
            ON_ZONE,
            FOUR_NODES,
            [on("node-a", "bar"), on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            0,
            [{"zone1": 2, "zone2": 2}],
            [2],
            id="removing an irrelevant pod won't help",
        ),
        pytest.param(
            ON_ZONE,
            FOUR_NODES,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            on("node-a", "bar"),
            [{"zone1": 2, "zone2": 2}],
            [2],
            id="removing a non-existing pod won't help",
        ),
        pytest.param(
            ON_ZONE_AND_NODE,
            NODE_ABX,
            [
                on("node-a", "foo"),
                on("node-a", "foo"),
                on("node-b", "foo"),
                on("node-x", "foo"),
                on("node-x", "foo"),
            ],
            3,
            [{"zone1": 3, "zone2": 1}, {"node-a": 2, "node-b": 1, "node-x": 1}],
            [1, 1],
            id="two constraints",
        ),
        pytest.param(
            incoming("foo")
            .required_terms({"matchExpressions": [expr("foo", "NotIn", "bar")]})
            .spread_constraint(1, "zone", HARD, FOO),
            AFFINITY_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            on("node-a", "foo"),
            [{"zone2": 1}],
            [1],
            id="a pod on a node the incoming pod's affinity excludes",
        ),
        pytest.param(
            ON_ZONE,
            AFFINITY_NODES,
            [on("node-a", "foo"), on("node-b", "foo")],
            1,
            [{"zone1": 1, "zone2": 0}],
            [0],
            id="a pod on a node matching the incoming pod's affinity",
        ),
    ],
)
def test_remove_pod(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    existing: list[PodBuilder],
    removed: int | PodBuilder,
    want_counts: list[dict[str, int]],
    want_minima: list[int],
) -> None:
    infos = cluster(nodes, existing)
    pl = plugin(infos)
    incoming_pod = pod.obj()
    state, status = pre_filter(pl, incoming_pod, infos)
    assert status is None
    removed_pod = existing[removed].obj() if isinstance(removed, int) else removed.obj()
    target = next(i for i in infos if i.name == removed_pod.node_name).clone()
    target.remove_pod(removed_pod)
    assert pl.remove_pod(state, incoming_pod, removed_pod, target) is None
    assert counts_of(state) == want_counts
    assert minima_of(state) == want_minima


def test_state_clone_is_independent_and_nominated_pods_count() -> None:
    infos = cluster(NODE_AB, [on("node-b", "foo")])
    pl = plugin(infos)
    pod = ON_NODE.obj()
    state, _ = pre_filter(pl, pod, infos)
    with_nominated = state.clone()
    nominated = on("node-a", "foo").obj()
    node_a = infos[0].clone()
    node_a.add_pod(nominated)
    pl.add_pod(with_nominated, pod, nominated, node_a)
    assert counts_of(with_nominated) == [{"node-a": 1, "node-b": 1}]
    assert counts_of(state) == [{"node-a": 0, "node-b": 1}]
    # With the nominated pod node-a is as full as node-b: placing there makes a skew of 1, allowed.
    assert pl.filter(with_nominated, pod, node_a) is None
    pl.add_pod(with_nominated, pod, on("node-a", "foo").obj(), node_a)
    rejected = pl.filter(with_nominated, pod, node_a)
    assert rejected is not None
    assert rejected.code == Code.UNSCHEDULABLE


def test_minimum_recomputed_when_the_emptiest_domain_grows() -> None:
    infos = cluster([zn("node-a"), zn("node-b"), zn("node-c")], [on("node-b", "foo"), on("node-c", "foo")])
    pl = plugin(infos)
    pod = ON_NODE.obj()
    state, _ = pre_filter(pl, pod, infos)
    node_a = infos[0]
    pl.add_pod(state, pod, on("node-a", "foo").obj(), node_a)
    assert minima_of(state) == [1]
    pl.add_pod(state, pod, on("node-a", "foo").obj(), node_a)
    assert minima_of(state) == [1]
    pl.remove_pod(state, pod, on("node-b", "foo").obj(), infos[1])
    assert minima_of(state) == [0]


# ---- Filter -----------------------------------------------------------------------------

S, U, X = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NODES_ABC = [zn("node-a"), zn("node-b"), zn("node-c")]
SPREAD_2_2_1 = [
    on("node-a", "foo"),
    on("node-a", "foo"),
    on("node-b", "foo"),
    on("node-b", "foo"),
    on("node-c", "foo"),
]
SPREAD_2_1_0_3 = [
    on("node-a", "foo"),
    on("node-a", "foo"),
    on("node-b", "foo"),
    on("node-y", "foo"),
    on("node-y", "foo"),
    on("node-y", "foo"),
]
POLICY_NODES = [
    zn("node-a").label("foo", ""),
    zn("node-b").label("foo", ""),
    zn("node-x").label("foo", ""),
    zn("node-y"),
]
POLICY_PODS = [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")]
TAINT_POLICY_NODES = [
    zn("node-a").label("foo", ""),
    zn("node-b").label("foo", ""),
    zn("node-x").label("foo", ""),
    tainted(zn("node-y")),
]

FILTER_CASES: list[tuple[str, PodBuilder, list[NodeBuilder], list[PodBuilder], str]] = [
    ("no existing pods", ON_ZONE, FOUR_NODES, [], "SSSS"),
    (
        "no existing pods, incoming pod doesn't match itself",
        incoming("foo").spread_constraint(1, "zone", HARD, BAR),
        FOUR_NODES,
        [],
        "SSSS",
    ),
    (
        "existing pods in a different namespace do not count",
        ON_ZONE,
        FOUR_NODES,
        [
            on("node-a", "foo", namespace="ns1"),
            on("node-a", "foo", namespace="ns2"),
            on("node-x", "foo"),
            on("node-y", "foo"),
        ],
        "SSUU",
    ),
    (
        "existing pods do not match a null selector",
        incoming("foo").spread_constraint(1, "zone", HARD, None),
        FOUR_NODES,
        [on("node-x", "foo"), on("node-y", "foo")],
        "SSSS",
    ),
    ("pods spread across zones as 3/3, all nodes fit", ON_ZONE, FOUR_NODES, SPREAD_2_1_0_3, "SSSS"),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        ON_ZONE,
        [zn("node-a", "zone1"), zn("node-b").label("zon", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
        "SXUU",
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        incoming("foo").spread_constraint(1, "rack", HARD, FOO),
        [zn("node-a", "zone1"), zn("node-x", "zone2")],
        [],
        "XX",
    ),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", ON_NODE, FOUR_NODES, SPREAD_2_1_0_3, "UUSU"),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        incoming("foo").spread_constraint(2, "node", HARD, FOO),
        FOUR_NODES,
        SPREAD_2_1_0_3,
        "USSU",
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        incoming("bar").spread_constraint(1, "node", HARD, FOO),
        FOUR_NODES,
        SPREAD_2_1_0_3,
        "USSU",
    ),
    (
        "incoming pod has node affinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        incoming("foo").node_affinity_in("node", ["node-a", "node-y"]).spread_constraint(1, "node", HARD, FOO),
        FOUR_NODES,
        SPREAD_2_1_0_3,
        "SSSU",
    ),
    (
        "terminating pods are excluded",
        ON_NODE,
        [zn("node-a"), zn("node-b")],
        [on("node-a", "foo").terminating(), on("node-b", "foo")],
        "SU",
    ),
    (
        "incoming pod has node affinity, pods spread as 0/~2~/0/1, hence node-a fits",
        incoming("foo")
        .required_terms({"matchExpressions": [expr("node", "NotIn", "node-b")]})
        .spread_constraint(1, "zone", HARD, FOO),
        FOUR_NODES,
        [on("node-b", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "SSUU",
    ),
    (
        "2/2/1 with maxSkew 2 and fewer domains than minDomains: only the third node fits",
        incoming("foo").spread_constraint(2, "node", HARD, FOO, min_domains=4),
        NODES_ABC,
        SPREAD_2_2_1,
        "UUS",
    ),
    (
        "2/2/1 with maxSkew 2 and more domains than minDomains: all nodes fit",
        incoming("foo").spread_constraint(2, "node", HARD, FOO, min_domains=2),
        NODES_ABC,
        SPREAD_2_2_1,
        "SSS",
    ),
    (
        "zones 2/1 with maxSkew 2 and fewer domains than minDomains: the third and fourth nodes fit",
        incoming("foo").spread_constraint(2, "zone", HARD, FOO, min_domains=3),
        FOUR_NODES,
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "UUSS",
    ),
    (
        "zones 2/1 with maxSkew 2 and more domains than minDomains: all nodes fit",
        incoming("foo").spread_constraint(2, "zone", HARD, FOO, min_domains=1),
        FOUR_NODES,
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "SSSS",
    ),
    (
        "NodeAffinityPolicy honored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", HARD, FOO),
        POLICY_NODES,
        POLICY_PODS,
        "UUSS",
    ),
    (
        "NodeAffinityPolicy ignored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", HARD, FOO, node_affinity_policy="Ignore"),
        POLICY_NODES,
        POLICY_PODS,
        "UUSU",
    ),
    (
        "NodeAffinityPolicy honored with node affinity",
        incoming("foo").node_affinity_in("foo", [""]).spread_constraint(1, "node", HARD, FOO),
        POLICY_NODES,
        POLICY_PODS,
        "UUSS",
    ),
    (
        "NodeAffinityPolicy ignored with node affinity",
        incoming("foo")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", HARD, FOO, node_affinity_policy="Ignore"),
        POLICY_NODES,
        POLICY_PODS,
        "UUSU",
    ),
    (
        "NodeTaintsPolicy honored",
        incoming("foo").spread_constraint(1, "node", HARD, FOO, node_taints_policy="Honor"),
        TAINT_POLICY_NODES,
        POLICY_PODS,
        "UUSS",
    ),
    (
        "NodeTaintsPolicy ignored",
        ON_NODE,
        TAINT_POLICY_NODES,
        POLICY_PODS,
        "UUSU",
    ),
    (
        "two constraints on zone and node, spreads [3/3, 2/1/0/3]",
        ON_ZONE_AND_NODE,
        FOUR_NODES,
        SPREAD_2_1_0_3,
        "UUSU",
    ),
    (
        "two constraints on zone and node, spreads [3/4, 2/1/0/4]",
        ON_ZONE_AND_NODE,
        FOUR_NODES,
        SPREAD_2_1_0_4,
        "UUUU",
    ),
    (
        "different selectors, spreads [1/0, 1/0/0/1]",
        ON_ZONE_FOO_NODE_BAR,
        FOUR_NODES,
        [on("node-a", "foo"), on("node-y", "bar")],
        "UUSU",
    ),
    (
        "different selectors, spreads [1/0, 0/0/1/1]",
        ON_ZONE_FOO_NODE_BAR,
        FOUR_NODES,
        [on("node-a", "foo"), on("node-x", "bar"), on("node-y", "bar")],
        "UUUU",
    ),
    (
        "different selectors, spreads [2/3, 1/0/0/1]",
        ON_ZONE_FOO_NODE_BAR,
        FOUR_NODES,
        [
            on("node-a", "foo"),
            on("node-a", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
            on("node-y", "foo"),
        ],
        "USUU",
    ),
    (
        "different selectors, pod doesn't match itself on the zone constraint",
        incoming("bar").spread_constraint(1, "zone", HARD, FOO).spread_constraint(1, "node", HARD, BAR),
        FOUR_NODES,
        [on("node-a", "foo"), on("node-x", "bar"), on("node-y", "bar")],
        "SSUU",
    ),
    (
        "two constraints, node-x lacks label 'node', spreads [1/1, 1/0/0/1]",
        ON_ZONE_AND_NODE,
        [
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            make_node("node-x").label("zone", "zone2"),
            zn("node-y", "zone2"),
        ],
        [on("node-a", "foo"), on("node-y", "foo")],
        "USXU",
    ),
    (
        "two inclusion constraints, zone honor/ignore, node ignore/ignore",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", HARD, FOO, node_affinity_policy="Ignore"),
        [
            zn("node-a", "zone1").label("foo", ""),
            zn("node-b", "zone1").label("foo", ""),
            zn("node-x", "zone2").label("foo", ""),
            zn("node-y", "zone2"),
        ],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "UUSU",
    ),
    (
        "two inclusion constraints, zone honor/honor, node honor/ignore",
        incoming("foo")
        .spread_constraint(1, "zone", HARD, FOO, node_taints_policy="Honor")
        .spread_constraint(1, "node", HARD, FOO),
        [
            zn("node-a", "zone1").label("foo", ""),
            zn("node-b", "zone1").label("foo", ""),
            zn("node-x", "zone2").label("foo", ""),
            tainted(zn("node-y", "zone2")),
        ],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "UUSU",
    ),
    (
        "two inclusion constraints, zone honor/ignore, node honor/ignore",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO)
        .spread_constraint(1, "node", HARD, FOO),
        [
            zn("node-a", "zone1").label("foo", ""),
            zn("node-b", "zone1"),
            zn("node-x", "zone2").label("foo", ""),
            tainted(zn("node-y", "zone2").label("foo", "")),
        ],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "USSU",
    ),
    (
        "two inclusion constraints, zone honor/honor, node ignore/ignore",
        incoming("foo")
        .node_selector(foo="")
        .spread_constraint(1, "zone", HARD, FOO, node_taints_policy="Honor")
        .spread_constraint(1, "node", HARD, FOO, node_affinity_policy="Ignore"),
        [
            zn("node-a", "zone1").label("foo", ""),
            zn("node-b", "zone1"),
            zn("node-x", "zone2").label("foo", ""),
            tainted(zn("node-y", "zone2").label("foo", "")),
        ],
        [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
        "UUSU",
    ),
    (
        "two constraints on zone, spreads [3/3, 2/1]",
        incoming("foo", "bar").spread_constraint(1, "zone", HARD, BAR).spread_constraint(1, "zone", HARD, FOO),
        FOUR_NODES,
        [
            on("node-a", "foo", "bar"),
            on("node-a", "foo"),
            on("node-b", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
            on("node-y", "foo"),
        ],
        "UUSS",
    ),
    (
        "two constraints on zone, spreads [3/4, 2/1]",
        incoming("foo", "bar").spread_constraint(1, "zone", HARD, BAR).spread_constraint(1, "zone", HARD, FOO),
        FOUR_NODES,
        [
            on("node-a", "foo", "bar"),
            on("node-a", "foo"),
            on("node-b", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo"),
        ],
        "UUUU",
    ),
]

_CODES = {"S": Code.SUCCESS, "U": Code.UNSCHEDULABLE, "X": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
_REASONS = {
    Code.UNSCHEDULABLE: ERR_REASON_CONSTRAINTS_NOT_MATCH,
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: ERR_REASON_NODE_LABEL_NOT_MATCH,
}


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"), [case[1:] for case in FILTER_CASES], ids=[case[0] for case in FILTER_CASES]
)
def test_filter(pod: PodBuilder, nodes: list[NodeBuilder], pods: list[PodBuilder], want: str) -> None:
    infos = cluster(nodes, pods)
    pl = plugin(infos)
    incoming_pod = pod.obj()
    state, status = pre_filter(pl, incoming_pod, infos)
    assert status is None
    for info, letter in zip(infos, want, strict=True):
        got = pl.filter(state, incoming_pod, info)
        wanted = _CODES[letter]
        if wanted == Code.SUCCESS:
            assert got is None, info.name
            continue
        assert got is not None, info.name
        assert (got.code, got.reasons, got.plugin) == (wanted, (_REASONS[wanted],), "PodTopologySpread"), info.name


def test_filter_without_pre_filter_is_an_error() -> None:
    info = cluster([zn("node-a")])[0]
    status = plugin([info]).filter(CycleState(), ON_NODE.obj(), info)
    assert status is not None
    assert status.code == Code.ERROR


def test_reason_strings() -> None:
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert (
        ERR_REASON_NODE_LABEL_NOT_MATCH
        == "node(s) didn't match pod topology spread constraints (missing required label)"
    )


# ---- scoring ----------------------------------------------------------------------------


def hn(name: str, zone: str | None = None) -> NodeBuilder:
    """A node with the well-known hostname label (and zone=<zone>)."""
    node = make_node(name).label(HOSTNAME, name)
    return node.label("zone", zone) if zone is not None else node


RS_FOO = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"namespace": "default", "name": "rs1"},
    "spec": {"selector": FOO},
}
SERVICE_FOO = {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"foo": ""}}}
NODES_4_3_2_1 = [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")]
SPREAD_4_3_2_1 = [
    *(on("node-a", "foo") for _ in range(4)),
    *(on("node-b", "foo") for _ in range(3)),
    on("node-c", "foo"),
    on("node-c", "foo"),
    on("node-d", "foo"),
]
SPREAD_4_2_1_3 = [
    *(on("node-a", "foo") for _ in range(4)),
    on("node-b", "foo"),
    on("node-b", "foo"),
    on("node-x", "foo"),
    on("node-y", "foo"),
    on("node-y", "foo"),
    on("node-y", "foo"),
]
ONE_ON_HOST = incoming("foo").spread_constraint(1, HOSTNAME, SOFT, FOO)
POLICY_SCORE_NODES = [zn("node-a").label("foo", ""), zn("node-b").label("foo", ""), zn("node-c")]
POLICY_SCORE_PODS = [on("node-a", "foo"), on("node-a", "foo"), on("node-b", "foo"), on("node-c", "foo")]

SCORE_CASES: list[
    tuple[str, PodBuilder, list[NodeBuilder], list[NodeBuilder], list[PodBuilder], list[Any], list[int]]
] = [
    ("one constraint on node, no existing pods", ONE_ON_HOST, [hn("node-a"), hn("node-b")], [], [], [], [100, 100]),
    (
        "one constraint on node, only one node is a candidate",
        ONE_ON_HOST,
        [hn("node-a")],
        [hn("node-b")],
        [on("node-a", "foo"), on("node-a", "foo"), on("node-b", "foo")],
        [],
        [100],
    ),
    (
        "one constraint on node, all nodes have the same number of matching pods",
        ONE_ON_HOST,
        [hn("node-a"), hn("node-b")],
        [],
        [on("node-a", "foo"), on("node-b", "foo")],
        [],
        [100, 100],
    ),
    (
        "one constraint on node, all 4 nodes are candidates (2/1/0/3)",
        ONE_ON_HOST,
        NODES_4_3_2_1,
        [],
        [*SPREAD_AB_Y[:3], on("node-d", "foo"), on("node-d", "foo"), on("node-d", "foo")],
        [],
        [20, 60, 100, 0],
    ),
    (
        "one constraint on node, null selector",
        incoming("foo").spread_constraint(1, HOSTNAME, SOFT, None),
        NODES_4_3_2_1,
        [],
        [*SPREAD_AB_Y[:3], on("node-d", "foo"), on("node-d", "foo"), on("node-d", "foo")],
        [],
        [100, 100, 100, 100],
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        incoming("foo").spread_constraint(2, HOSTNAME, SOFT, FOO),
        NODES_4_3_2_1,
        [],
        [*SPREAD_AB_Y[:3], on("node-d", "foo"), on("node-d", "foo"), on("node-d", "foo")],
        [],
        [33, 66, 100, 16],
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        incoming("foo").spread_constraint(3, HOSTNAME, SOFT, FOO),
        NODES_4_3_2_1,
        [],
        SPREAD_4_3_2_1,
        [],
        [44, 66, 77, 100],
    ),
    (
        "system defaulting, nodes don't have zone, pods match a service",
        incoming("foo"),
        NODES_4_3_2_1,
        [],
        SPREAD_4_3_2_1,
        [SERVICE_FOO],
        [44, 66, 77, 100],
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates",
        ONE_ON_HOST,
        [hn("node-a"), hn("node-b"), hn("node-x")],
        [hn("node-y")],
        SPREAD_4_2_1_3,
        [],
        [33, 83, 100],
    ),
    (
        "one constraint on node, 3 of 4 nodes are candidates, one lacks the topology key",
        ONE_ON_HOST,
        [hn("node-a"), make_node("node-b").label("n", "node-b"), hn("node-x")],
        [hn("node-y")],
        SPREAD_4_2_1_3,
        [],
        [16, 0, 100],
    ),
    (
        "one constraint on zone, 3 out of 4 nodes are candidates",
        incoming("foo").spread_constraint(1, "zone", SOFT, FOO),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x", "zone2")],
        [hn("node-y", "zone2")],
        SPREAD_4_2_1_3,
        [],
        [75, 75, 100],
    ),
    (
        "two constraints on zone and node, 2 out of 4 nodes are candidates",
        incoming("foo").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, FOO),
        [hn("node-a", "zone1"), hn("node-x", "zone2")],
        [hn("node-b", "zone1"), hn("node-y", "zone2")],
        [
            on("node-a", "foo"),
            on("node-a", "foo"),
            on("node-b", "foo"),
            on("node-x", "foo"),
            on("node-x", "foo"),
            *(on("node-y", "foo") for _ in range(4)),
        ],
        [],
        [100, 63],
    ),
    (
        "two constraints on zone, 2 out of 4 nodes are candidates",
        incoming("foo", "bar").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, "zone", SOFT, BAR),
        [make_node("node-a").label("zone", "zone1"), make_node("node-x").label("zone", "zone2")],
        [make_node("node-b").label("zone", "zone1"), make_node("node-y").label("zone", "zone2")],
        [
            on("node-a", "foo", "bar"),
            on("node-a", "foo"),
            on("node-b", "foo", "bar"),
            on("node-y", "foo"),
            on("node-y", "foo", "bar"),
            on("node-y", "foo"),
        ],
        [],
        [85, 100],
    ),
    (
        "two constraints on zone and node with different selectors",
        incoming("foo", "bar").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, BAR),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x", "zone2"), hn("node-y", "zone2")],
        [],
        [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-y", "foo"), on("node-y", "bar")],
        [],
        [60, 20, 100, 60],
    ),
    (
        "two constraints on zone and node with different selectors, some nodes have 0 pods",
        incoming("foo", "bar").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, BAR),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x", "zone2"), hn("node-y", "zone2")],
        [],
        [on("node-b", "bar"), on("node-x", "foo"), on("node-y", "foo", "bar")],
        [],
        [100, 60, 40, 0],
    ),
    (
        "two constraints on zone and node with different selectors, 3 out of 4 nodes are candidates",
        incoming("foo", "bar").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, BAR),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x", "zone2")],
        [hn("node-y", "zone2")],
        [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-y", "foo"), on("node-y", "bar")],
        [],
        [50, 25, 100],
    ),
    (
        "existing pods in a different namespace do not count",
        ONE_ON_HOST,
        [hn("node-a"), hn("node-b")],
        [],
        [on("node-a", "foo", namespace="ns1"), on("node-a", "foo"), on("node-b", "foo"), on("node-b", "foo")],
        [],
        [100, 33],
    ),
    (
        "terminating pods are excluded",
        ONE_ON_HOST,
        [hn("node-a"), hn("node-b")],
        [],
        [on("node-a", "foo").terminating(), on("node-b", "foo")],
        [],
        [100, 0],
    ),
    (
        "minDomains has no effect when ScheduleAnyway",
        incoming("foo").spread_constraint(2, "node", SOFT, FOO, min_domains=10),
        NODES_ABC,
        [],
        SPREAD_2_2_1,
        [],
        [75, 75, 100],
    ),
    (
        "NodeAffinityPolicy honored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", SOFT, FOO),
        POLICY_SCORE_NODES,
        [],
        POLICY_SCORE_PODS,
        [],
        [0, 33, 100],
    ),
    (
        "NodeAffinityPolicy ignored with nodeSelector",
        incoming("foo").node_selector(foo="").spread_constraint(1, "node", SOFT, FOO, node_affinity_policy="Ignore"),
        POLICY_SCORE_NODES,
        [],
        POLICY_SCORE_PODS,
        [],
        [66, 100, 100],
    ),
    (
        "NodeAffinityPolicy honored with node affinity",
        incoming("foo").node_affinity_in("foo", [""]).spread_constraint(1, "node", SOFT, FOO),
        POLICY_SCORE_NODES,
        [],
        POLICY_SCORE_PODS,
        [],
        [0, 33, 100],
    ),
    (
        "NodeAffinityPolicy ignored with node affinity",
        incoming("foo")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", SOFT, FOO, node_affinity_policy="Ignore"),
        POLICY_SCORE_NODES,
        [],
        POLICY_SCORE_PODS,
        [],
        [66, 100, 100],
    ),
    (
        "NodeTaintsPolicy honored",
        incoming("foo").spread_constraint(1, "node", SOFT, FOO, node_taints_policy="Honor"),
        [zn("node-a"), zn("node-b"), tainted(zn("node-c"))],
        [],
        POLICY_SCORE_PODS,
        [],
        [0, 33, 100],
    ),
    (
        "NodeTaintsPolicy ignored",
        incoming("foo").spread_constraint(1, "node", SOFT, FOO),
        [zn("node-a"), zn("node-b"), tainted(zn("node-c"))],
        [],
        POLICY_SCORE_PODS,
        [],
        [66, 100, 100],
    ),
    (
        "matchLabelKeys ANDed with empty selectors",
        incoming("foo", "bar")
        .spread_constraint(1, "zone", SOFT, label_selector(), match_label_keys=["foo"])
        .spread_constraint(1, HOSTNAME, SOFT, label_selector(), match_label_keys=["bar"]),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-c", "zone2"), hn("node-d", "zone2")],
        [],
        [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-c", "foo"), on("node-c", "bar")],
        [],
        [60, 20, 60, 100],
    ),
    (
        "matchLabelKeys ANDed with a non-empty selector",
        incoming("foo", "bar", "baz")
        .spread_constraint(1, "zone", SOFT, FOO)
        .spread_constraint(1, HOSTNAME, SOFT, BAR, match_label_keys=["baz"]),
        [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-c", "zone2"), hn("node-d", "zone2")],
        [],
        [
            on("node-a", "foo"),
            on("node-b", "foo", "bar", "baz"),
            on("node-c", "foo"),
            on("node-c", "bar"),
            on("node-c", "bar", "baz"),
        ],
        [],
        [60, 20, 60, 100],
    ),
    (
        "system default constraints and a replica set",
        incoming(foo="tar", baz="sup").owner("ReplicaSet", "rs1"),
        [hn("node-a").label(ZONE_LABEL, "mars"), hn("node-b").label(ZONE_LABEL, "mars"), hn("node-c")],
        [],
        [on("node-a", foo="x"), on("node-a", foo="y"), on("node-b", foo="x"), on("node-c", bar="x")],
        [RS_FOO],
        # Hostname 2/1/0 (weight log 5, +2); zone mars=3 (weight log 4, +4), node-c has no zone: 13/12/2.
        [15, 23, 100],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "failed", "pods", "objects", "want"),
    [case[1:] for case in SCORE_CASES],
    ids=[case[0] for case in SCORE_CASES],
)
def test_score(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    failed: list[NodeBuilder],
    pods: list[PodBuilder],
    objects: list[Any],
    want: list[int],
) -> None:
    infos = cluster([*nodes, *failed], pods)
    pl = plugin(infos, {"defaultingType": "System"}, objects)
    candidates = infos[: len(nodes)]
    state = CycleState()
    incoming_pod = pod.obj()
    assert pl.pre_score(state, incoming_pod, candidates) is None
    assert run_score(pl, state, incoming_pod, candidates) == want


@pytest.mark.parametrize(
    ("pod", "nodes", "args", "objects", "want_ignored", "want_counts", "want_sizes"),
    [
        pytest.param(
            incoming("foo").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, FOO),
            [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x", "zone2")],
            {"defaultingType": "List"},
            [],
            set(),
            [{"zone1": 0, "zone2": 0}, {}],
            [2, 3],
            id="normal case",
        ),
        pytest.param(
            incoming("foo").spread_constraint(1, "zone", SOFT, FOO).spread_constraint(1, HOSTNAME, SOFT, BAR),
            [hn("node-a", "zone1"), hn("node-b", "zone1"), hn("node-x")],
            {"defaultingType": "List"},
            [],
            {"node-x"},
            [{"zone1": 0}, {}],
            [1, 2],
            id="node-x doesn't have label zone",
        ),
        pytest.param(
            incoming(foo="tar", baz="sup").owner("ReplicaSet", "rs1"),
            [
                hn("node-a").label(ZONE_LABEL, "mars"),
                hn("node-b").label(ZONE_LABEL, "mars"),
                hn("node-c"),
                hn("node-d"),
            ],
            {"defaultingType": "System"},
            [RS_FOO],
            set(),
            [{}, {"mars": 0, "": 0}],
            [4, 2],
            id="system default constraints and a replica set: nodes without zone form their own domain",
        ),
        pytest.param(
            incoming(foo="tar", baz="sup").owner("ReplicaSet", "rs1"),
            [hn("node-a").label("rack", "rack1").label("planet", "mars")],
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": SOFT},
                    {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": HARD},
                    {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT},
                ],
            },
            [RS_FOO],
            set(),
            [{}, {"mars": 0}],
            [1, 1],
            id="default constraints and a replica set",
        ),
        pytest.param(
            incoming(foo="bar", baz="sup")
            .owner("ReplicaSet", "rs1")
            .spread_constraint(1, "zone", HARD, BAR)
            .spread_constraint(2, "planet", SOFT, label_selector({"baz": "sup"})),
            [make_node("node-a").label("planet", "mars").label("galaxy", "andromeda")],
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 2, "topologyKey": "galaxy", "whenUnsatisfiable": SOFT}],
            },
            [RS_FOO],
            set(),
            [{"mars": 0}],
            [1],
            id="default constraints and a replica set, but the pod has constraints",
        ),
    ],
)
def test_pre_score_state(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    args: dict[str, Any],
    objects: list[Any],
    want_ignored: set[str],
    want_counts: list[dict[str, int]],
    want_sizes: list[int],
) -> None:
    infos = cluster(nodes)
    pl = plugin(infos, args, objects)
    state = CycleState()
    assert pl.pre_score(state, pod.obj(), infos) is None
    pre = state.read(PRE_SCORE_KEY)
    assert pre.ignored_nodes == want_ignored
    assert list(pre.counts) == want_counts
    assert list(pre.weights) == [topology_normalizing_weight(n) for n in want_sizes]


@pytest.mark.parametrize(
    ("pod", "args", "objects"),
    [
        pytest.param(make_pod("p"), {"defaultingType": "List"}, [], id="the pod has no soft constraints"),
        pytest.param(
            incoming(foo="bar", baz="sup").owner("ReplicaSet", "rs2"),
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT}],
            },
            [{**RS_FOO, "spec": {"selector": label_selector(None, expr("tar", "Exists"))}}],
            id="default constraints and a replica set that doesn't match",
        ),
        pytest.param(
            incoming("foo").spread_constraint(1, "zone", HARD, FOO),
            {"defaultingType": "System"},
            [SERVICE_FOO],
            id="only hard constraints of its own: no defaults",
        ),
    ],
)
def test_pre_score_skip(pod: PodBuilder, args: dict[str, Any], objects: list[Any]) -> None:
    infos = cluster([make_node("node-a").label("planet", "mars")])
    status = plugin(infos, args, objects).pre_score(CycleState(), pod.obj(), infos)
    assert status is not None
    assert status.code == Code.SKIP


def test_pre_score_skips_without_nodes() -> None:
    status = plugin([]).pre_score(CycleState(), ONE_ON_HOST.obj(), [])
    assert status is not None
    assert status.code == Code.SKIP


def test_system_defaults_without_a_workload_lister_apply_to_no_pod() -> None:
    infos = cluster([hn("node-a")])
    pl = new({}, make_handle(*infos))
    status = pl.pre_score(CycleState(), incoming("foo").obj(), infos)
    assert status is not None
    assert status.code == Code.SKIP


# ---- default selector -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "objects", "matches", "misses"),
    [
        pytest.param(
            make_pod("p").label("app", "web").label("tier", "fe"),
            [
                {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"app": "web"}}},
                {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"tier": "fe"}}},
                {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {"app": "db"}}},
                {"kind": "Service", "metadata": {"namespace": "other"}, "spec": {"selector": {"x": "y"}}},
                {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {}},
            ],
            [{"app": "web", "tier": "fe", "x": "z"}],
            [{"app": "web"}, {"tier": "fe"}],
            id="services selecting the pod are merged",
        ),
        pytest.param(
            make_pod("p").label("app", "web").owner("ReplicationController", "rc", api_version="v1"),
            [
                {
                    "apiVersion": "v1",
                    "kind": "ReplicationController",
                    "metadata": {"namespace": "default", "name": "rc"},
                    "spec": {"selector": {"app": "web", "rc": "1"}},
                }
            ],
            [{"app": "web", "rc": "1"}],
            [{"app": "web"}],
            id="replication controller selector",
        ),
        pytest.param(
            make_pod("p").label("app", "web").owner("StatefulSet", "ss"),
            [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "metadata": {"namespace": "default", "name": "ss"},
                    "spec": {"selector": label_selector({"app": "web"}, expr("shard", "Exists"))},
                }
            ],
            [{"app": "web", "shard": "1"}],
            [{"app": "web"}],
            id="stateful set selector",
        ),
    ],
)
def test_default_selector(
    pod: PodBuilder, objects: list[Any], matches: list[dict[str, str]], misses: list[dict[str, str]]
) -> None:
    selector = default_selector(pod.obj(), StaticWorkloads(objects))
    assert all(selector.matches(labels) for labels in matches)
    assert not any(selector.matches(labels) for labels in misses)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p").label("app", "web"), id="nothing owns the pod"),
        pytest.param(
            make_pod("p").label("app", "web").owner("ReplicaSet", "rs", controller=False), id="not controller"
        ),
        pytest.param(
            make_pod("p").label("app", "web").owner("Job", "j", api_version="batch/v1"), id="unsupported kind"
        ),
        pytest.param(make_pod("p").label("app", "web").owner("ReplicaSet", "missing"), id="unknown replica set"),
        pytest.param(make_pod("p").label("app", "web").owner("ReplicaSet", "bad"), id="malformed selector"),
    ],
)
def test_default_selector_empty(pod: PodBuilder) -> None:
    bad = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"namespace": "default", "name": "bad"},
        "spec": {"selector": label_selector(None, expr("app", "In"))},
    }
    assert default_selector(pod.obj(), StaticWorkloads([bad])).empty


# ---- args -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"defaultingType": "Other"},
            'defaultingType: Unsupported value: "Other": supported values: "System", "List"',
        ),
        (
            {
                "defaultingType": "System",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": SOFT}],
            },
            'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": SOFT}]},
            'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": SOFT}],
            },
            "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": SOFT}]},
            "defaultConstraints[0].topologyKey: Required value: can not be empty",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k"}]},
            "defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "Maybe"}],
            },
            'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": supported values: '
            '"DoNotSchedule", "ScheduleAnyway"',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": SOFT, "labelSelector": {}}
                ],
            },
            "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, "
            "as they deduced for each pod",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": SOFT},
                    {"maxSkew": 2, "topologyKey": "k", "whenUnsatisfiable": SOFT},
                ],
            },
            'defaultConstraints[1]: Duplicate value: "{k, ScheduleAnyway}"',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": -1, "topologyKey": "a/b/c", "whenUnsatisfiable": SOFT}],
            },
            "[defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf), "
            'defaultConstraints[0].topologyKey: Invalid value: "a/b/c": a qualified name must consist of',
        ),
        ({"kind": "NodeAffinityArgs"}, 'kind: Unsupported value: "NodeAffinityArgs"'),
        ({"unknown": 1}, "unknown field(s) ['unknown']"),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_args(args)
    assert str(info.value).startswith(message)


def test_args_defaults() -> None:
    system = parse_args({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "PodTopologySpreadArgs"})
    assert system.system_defaulted
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in system.default_constraints] == [
        (HOSTNAME, 3, SOFT),
        (ZONE_LABEL, 5, SOFT),
    ]
    listed = parse_args({"defaultingType": "List"})
    assert not listed.system_defaulted
    assert listed.default_constraints == ()


def test_registered() -> None:
    registry = in_tree_registry()
    built = registry.create("PodTopologySpread", {}, make_handle())
    assert built.name == "PodTopologySpread"


# ---- queueing hints ---------------------------------------------------------------------


def hint_plugin() -> PodTopologySpread:
    return plugin([])


def _pod_hint(pod: PodBuilder, old: PodBuilder | None, new_pod: PodBuilder | None) -> QueueingHint:
    return hint_plugin()._pod_changed(pod.obj(), old.obj() if old else None, new_pod.obj() if new_pod else None)


HONORING = incoming("foo").spread_constraint(1, "node", HARD, FOO, node_taints_policy="Honor")


@pytest.mark.parametrize(
    ("pod", "old", "new_pod", "want"),
    [
        pytest.param(ON_NODE, None, on("node-a", "foo"), QueueingHint.QUEUE, id="add a pod with matched labels"),
        pytest.param(ON_NODE, None, on("node-a", "bar"), QueueingHint.SKIP, id="add a pod with unmatched labels"),
        pytest.param(
            ON_NODE,
            None,
            on("node-a", "foo", namespace="other"),
            QueueingHint.SKIP,
            id="add a pod of another namespace",
        ),
        pytest.param(
            ON_NODE, None, make_pod("pending").label("foo", ""), QueueingHint.SKIP, id="add an unscheduled pod"
        ),
        pytest.param(
            ON_NODE,
            on("node-a", "foo").uid("u"),
            on("node-a", "foo", other="x").uid("u"),
            QueueingHint.SKIP,
            id="update a pod's unrelated label",
        ),
        pytest.param(
            ON_NODE,
            on("node-a", "foo").uid("u"),
            on("node-a", "bar").uid("u"),
            QueueingHint.QUEUE,
            id="update a pod so it no longer matches",
        ),
        pytest.param(
            ON_NODE,
            on("node-a", "foo").uid("u"),
            on("node-a", "foo").uid("u").toleration("k", "v", "NoSchedule"),
            QueueingHint.SKIP,
            id="update without a label change",
        ),
        pytest.param(ON_NODE, on("node-a", "foo"), None, QueueingHint.QUEUE, id="delete a matching pod"),
        pytest.param(ON_NODE, on("node-a", "bar"), None, QueueingHint.SKIP, id="delete an unmatched pod"),
    ],
)
def test_pod_hint(pod: PodBuilder, old: PodBuilder | None, new_pod: PodBuilder | None, want: QueueingHint) -> None:
    assert _pod_hint(pod, old, new_pod) == want


@pytest.mark.parametrize(
    ("pod", "new_pod", "want"),
    [
        pytest.param(
            HONORING,
            incoming("foo")
            .spread_constraint(1, "node", HARD, FOO, node_taints_policy="Honor")
            .toleration("k", "v", "NoSchedule"),
            QueueingHint.QUEUE,
            id="the pod gained a toleration while taints are honored",
        ),
        pytest.param(
            ON_NODE,
            incoming("foo").spread_constraint(1, "node", HARD, FOO).toleration("k", "v", "NoSchedule"),
            QueueingHint.SKIP,
            id="the pod gained a toleration while taints are ignored",
        ),
        pytest.param(
            ON_NODE,
            incoming("bar").spread_constraint(1, "node", HARD, FOO),
            QueueingHint.QUEUE,
            id="the pod's relabelling unmatches its own constraint",
        ),
        pytest.param(
            ON_NODE,
            incoming("foo", other="x").spread_constraint(1, "node", HARD, FOO),
            QueueingHint.SKIP,
            id="the pod's relabelling leaves every constraint as it was",
        ),
    ],
)
def test_target_pod_hint(pod: PodBuilder, new_pod: PodBuilder, want: QueueingHint) -> None:
    # TargetPod/UpdatePodToleration|UpdatePodLabel, kube's isSchedulableAfterTargetPodChange.
    assert hint_plugin()._target_pod_changed(pod.obj(), pod.obj(), new_pod.obj()) == want


@pytest.mark.parametrize(
    ("old", "new_node", "want"),
    [
        pytest.param(None, zn("n", "zone1"), QueueingHint.QUEUE, id="add a node with every key"),
        pytest.param(None, zn("n"), QueueingHint.SKIP, id="add a node missing a key"),
        pytest.param(zn("n", "zone1"), None, QueueingHint.QUEUE, id="delete a node with every key"),
        pytest.param(zn("n"), None, QueueingHint.SKIP, id="delete a node missing a key"),
        pytest.param(zn("n", "zone1"), zn("n", "zone2"), QueueingHint.QUEUE, id="a key's value changed"),
        pytest.param(zn("n", "zone1"), zn("n", "zone1").label("other", "x"), QueueingHint.SKIP, id="unrelated label"),
        pytest.param(zn("n"), zn("n", "zone1"), QueueingHint.QUEUE, id="a key was added"),
        pytest.param(zn("n", "zone1"), zn("n"), QueueingHint.QUEUE, id="a key was removed"),
        pytest.param(zn("n", "zone1"), tainted(zn("n", "zone1")), QueueingHint.QUEUE, id="taints changed"),
        pytest.param(zn("n"), tainted(zn("n")), QueueingHint.SKIP, id="taints changed on a node missing a key"),
    ],
)
def test_node_hint(old: NodeBuilder | None, new_node: NodeBuilder | None, want: QueueingHint) -> None:
    pod = ON_ZONE_AND_NODE.obj()
    got = hint_plugin()._node_changed(pod, old.obj() if old else None, new_node.obj() if new_node else None)
    assert got == want


def test_hints_queue_unexpected_objects() -> None:
    pl = hint_plugin()
    pod = ON_NODE.obj()
    assert pl._pod_changed(pod, None, NodeBuilder("n").obj()) == QueueingHint.QUEUE
    assert pl._node_changed(pod, None, None) == QueueingHint.QUEUE


def test_events_registered() -> None:
    events = hint_plugin().events_to_register()
    assert [(e.event.resource, e.event.action) for e in events] == [
        (EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
        (EventResource.TARGET_POD, ActionType.UPDATE_POD_TOLERATION | ActionType.UPDATE_POD_LABEL),
        (
            EventResource.NODE,
            ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
        ),
    ]
    assert all(e.hint is not None for e in events)


def test_kept_counts_are_keyed_on_what_they_read() -> None:
    """The kept counts read the pod's parsed node affinity and tolerations: pods that differ only in
    what the rule ignores (a toleration's tolerationSeconds) share them."""
    infos = cluster([zn("n1", "z1"), zn("n2", "z2")], [on("n1", "foo")])
    pl = plugin(infos)
    nodes = pl._filtering.handle.snapshot.list()
    for seconds in (10, 20, 30):
        builder = incoming("foo").spread_constraint(1, "zone", HARD, label_selector(None, expr("foo", "Exists")))
        builder.toleration("dedicated", "x", "NoExecute").raw["spec"]["tolerations"][0]["tolerationSeconds"] = seconds
        pod = builder.obj()
        assert pre_filter(pl, pod, nodes)[1] is None
    assert len(pl._filtering._counts._entries) == 1


@pytest.mark.parametrize(
    "default_constraints",
    [
        [
            {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": HARD},
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": SOFT, "nodeTaintsPolicy": "Honor"},
        ],
        [{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": HARD, "matchLabelKeys": ["baz"]}],
    ],
    ids=["label-free defaults, parsed once", "matchLabelKeys defaults, parsed per pod"],
)
def test_defaults_parsed_once_give_the_constraints_parsed_per_pod(default_constraints: list[dict[str, Any]]) -> None:
    """The plugin parses label-free default constraints once per whenUnsatisfiable; the constraints
    a pod gets are those parsed for it alone (defaults that read pod labels are parsed per pod)."""
    from plugins.podtopologyspread.common import pod_constraints

    args = {"defaultingType": "List", "defaultConstraints": default_constraints}
    pl = plugin([], args, [SERVICE_FOO_BAR])
    for pod in (
        make_pod("p").label("foo", "bar").label("baz", "one").obj(),
        make_pod("q").label("foo", "bar").label("baz", "two").obj(),
        make_pod("r").label("other", "x").obj(),
    ):
        for action in (HARD, SOFT):
            want = pod_constraints(pod, action, pl.default_constraints, pl.workloads)
            assert pl.constraints(pod, action) == want
    assert bool(pl._parsed_defaults) == (not any(c.get("matchLabelKeys") for c in default_constraints))
