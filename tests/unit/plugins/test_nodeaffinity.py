"""NodeAffinity: nodeSelector + required terms (filter), preferred terms (score), addedAffinity."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    parse_args,
)
from scheduler.framework.types import Code, CycleState, PreFilterResult, QueueingHint, Status
from scheduler.model.objects import Pod
from scheduler.model.selectors import SelectorError
from scheduler.testing.builders import PodBuilder, expr, make_node, make_pod, name_in, node_info, run_score, term

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def added_required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


def added_preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"addedAffinity": {PREFERRED: [{"weight": w, "preference": t} for w, t in weighted]}}


def pod_required(*terms: dict[str, Any]) -> PodBuilder:
    return make_pod("p").required_terms(*terms)


POD_REJECTED = Status.unresolvable(ERR_REASON_POD, plugin="NodeAffinity")
ENFORCED_REJECTED = Status.unresolvable(ERR_REASON_ENFORCED, plugin="NodeAffinity")


@pytest.mark.parametrize(
    ("pod", "labels", "node_name", "args", "want"),
    [
        (make_pod("p").node_selector(foo="bar"), {}, "n", {}, POD_REJECTED),
        (make_pod("p").node_selector(foo="bar"), {"foo": "bar"}, "n", {}, None),
        (make_pod("p").node_selector(foo="bar"), {"foo": "bar", "baz": "blah"}, "n", {}, None),
        (make_pod("p").node_selector(foo="bar", baz="blah"), {"foo": "bar"}, "n", {}, POD_REJECTED),
        (pod_required(term(expr("foo", "In", "value1", "value2"))), {"foo": "value1"}, "n", {}, None),
        (pod_required(term(expr("kernel-version", "Gt", "0204"))), {"kernel-version": "0206"}, "n", {}, None),
        (pod_required(term(expr("mem-type", "NotIn", "DDR", "DDR2"))), {"mem-type": "DDR3"}, "n", {}, None),
        (pod_required(term(expr("GPU", "Exists"))), {"GPU": "NVIDIA-GRID-K1"}, "n", {}, None),
        (pod_required(term(expr("foo", "In", "value1", "value2"))), {"foo": "bar"}, "n", {}, POD_REJECTED),
        (pod_required({"matchExpressions": []}), {"foo": "bar"}, "n", {}, POD_REJECTED),  # empty term: nothing
        (make_pod("p"), {"foo": "bar"}, "n", {}, None),
        (
            make_pod("p").spec(affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}),
            {"foo": "bar"},
            "n",
            {},
            POD_REJECTED,
        ),
        (
            pod_required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            {},
            None,
        ),
        (
            pod_required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))),
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            {},
            POD_REJECTED,
        ),
        (
            pod_required(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2"))),
            {"foo": "bar"},
            "n",
            {},
            None,
        ),
        (make_pod("p").node_selector(foo="bar").node_affinity_in("foo", ["bar"]), {"foo": "bar"}, "n", {}, None),
        (
            make_pod("p").node_selector(foo="bar").node_affinity_in("foo", ["bar"]),
            {"foo": "barrrrrr"},
            "n",
            {},
            POD_REJECTED,
        ),
        (pod_required(term(expr("foo", "NotIn", "invalid value: ___@#$%^"))), {"foo": "bar"}, "n", {}, POD_REJECTED),
        (pod_required(term(fields=[name_in("node1")])), {}, "node1", {}, None),
        (pod_required(term(fields=[name_in("node1")])), {}, "node2", {}, POD_REJECTED),
        (
            pod_required(term(fields=[name_in("node1")]), term(expr("foo", "In", "bar"))),
            {"foo": "bar"},
            "node2",
            {},
            None,
        ),
        (
            pod_required(term(expr("foo", "In", "bar"), fields=[name_in("node1")])),
            {"foo": "bar"},
            "node2",
            {},
            POD_REJECTED,
        ),
        (
            pod_required(term(expr("foo", "In", "bar"), fields=[name_in("node1")])),
            {"foo": "bar"},
            "node1",
            {},
            None,
        ),
        (
            pod_required(term(fields=[name_in("node1")]), term(expr("foo", "In", "not-match"))),
            {"foo": "bar"},
            "node2",
            {},
            POD_REJECTED,
        ),
        (
            pod_required(term(expr("zone", "In", "foo"))),
            {"zone": "foo"},
            "node2",
            added_required(term(fields=[name_in("node2")])),
            None,
        ),
        (
            pod_required(term(expr("zone", "In", "bar"))),
            {"zone": "foo"},
            "node2",
            added_required(term(fields=[name_in("node2")])),
            POD_REJECTED,
        ),
        (make_pod("p"), {"zone": "foo"}, "node2", added_required(term(expr("zone", "In", "bar"))), ENFORCED_REJECTED),
    ],
)
def test_filter(
    pod: PodBuilder, labels: dict[str, str], node_name: str, args: dict[str, Any], want: Status | None
) -> None:
    plugin = NodeAffinity(parse_args(args))
    info = node_info(make_node(node_name).labels(labels))
    for run_pre_filter in (True, False):  # Filter works it out itself when PreFilter did not run
        state = CycleState()
        if run_pre_filter:
            _, status = plugin.pre_filter(state, pod.obj(), [info])
            assert status is None or status.code == Code.SKIP
        assert plugin.filter(state, pod.obj(), info) == want


@pytest.mark.parametrize(
    ("pod", "args", "want_result", "want_status"),
    [
        (make_pod("p"), {}, None, Status(Code.SKIP, plugin="NodeAffinity")),
        (make_pod("p").node_selector(foo="bar"), {}, None, None),
        (make_pod("p"), added_required(term(expr("zone", "In", "a"))), None, None),
        (pod_required(term(expr("foo", "In", "bar"))), {}, None, None),
        (pod_required(term(fields=[name_in("node1")]), term(fields=[name_in("node2")])), {}, {"node1", "node2"}, None),
        (pod_required(term(fields=[name_in("node1")]), term(expr("foo", "Exists"))), {}, None, None),
        (
            pod_required(term(fields=[name_in("node1"), name_in("node2")])),
            {},
            None,
            Status.unresolvable(ERR_REASON_CONFLICT, plugin="NodeAffinity"),
        ),
        (  # names are taken as written even when the term itself is invalid (two values)
            pod_required(term(fields=[name_in("node1", "node2")])),
            {},
            {"node1", "node2"},
            None,
        ),
    ],
)
def test_pre_filter(
    pod: PodBuilder, args: dict[str, Any], want_result: set[str] | None, want_status: Status | None
) -> None:
    result, status = NodeAffinity(parse_args(args)).pre_filter(CycleState(), pod.obj(), [])
    assert status == want_status
    assert result == (PreFilterResult(want_result) if want_result is not None else None)


AFFINITY1 = [(2, term(expr("foo", "In", "bar")))]
AFFINITY2 = [
    (2, term(expr("foo", "In", "bar"))),
    (4, term(expr("key", "In", "value"))),
    (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
]
LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}


def preferring(weighted: list[tuple[int, dict[str, Any]]]) -> PodBuilder:
    pod = make_pod("p")
    for weight, preference in weighted:
        pod.preferred_term(weight, preference)
    return pod


@pytest.mark.parametrize(
    ("pod", "nodes", "args", "want"),
    [
        (preferring([]).spec(affinity={}), [LABEL1, LABEL2, LABEL3], {}, None),  # Skip at PreScore
        (preferring([(2, term(expr("foo", "In", "bar")))]), [LABEL2, LABEL3], {}, [0, 0]),
        (preferring(AFFINITY1), [LABEL1, LABEL2, LABEL3], {}, [100, 0, 0]),
        (preferring(AFFINITY2), [LABEL1, LABEL5, LABEL2], {}, [18, 100, 36]),
        (make_pod("p"), [LABEL1, LABEL2], added_preferred(*AFFINITY1), [100, 0]),
        (
            preferring(AFFINITY1),
            [LABEL1, LABEL2, LABEL5],
            added_preferred((3, term(expr("key", "In", "value")))),
            [40, 60, 100],
        ),
    ],
)
def test_score(pod: PodBuilder, nodes: list[dict[str, str]], args: dict[str, Any], want: list[int] | None) -> None:
    plugin = NodeAffinity(parse_args(args))
    infos = [node_info(make_node(f"node{i}").labels(labels)) for i, labels in enumerate(nodes)]
    for run_pre_score in (True, False):  # Score works it out itself when PreScore did not run
        state = CycleState()
        if run_pre_score:
            status = plugin.pre_score(state, pod.obj(), infos)
            if want is None:
                assert status is not None
                assert status.code == Code.SKIP
                return
            assert status is None
        assert run_score(plugin, state, pod.obj(), infos) == want


def test_pre_score_reports_a_broken_preferred_term() -> None:
    pod = preferring([(2, term(expr("invalid key", "In", "bar")))]).obj()
    status = NodeAffinity(parse_args({})).pre_score(CycleState(), pod, [])
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == (
        '[0].matchExpressions[0].key: Invalid value: "invalid key": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
        "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            added_required(term(expr("foo", "Near", "a"))),
            f"addedAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "
            '"Near": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
        ),
        (
            added_preferred((1, term(fields=[name_in("a", "b")]))),
            f'addedAffinity.{PREFERRED}[0].matchFields[0].values: Invalid value: ["a","b"]: must have one element',
        ),
        (
            {
                "addedAffinity": {
                    REQUIRED: {"nodeSelectorTerms": [term(expr("foo", "In"))]},
                    PREFERRED: [{"weight": 1, "preference": term(expr("bar", "Exists", "x"))}],
                }
            },
            f"[addedAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: null: "
            "for 'in', 'notin' operators, values set can't be empty, "
            f'addedAffinity.{PREFERRED}[0].matchExpressions[0].values: Invalid value: ["x"]: '
            "values set must be empty for exists and does not exist]",
        ),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_args(args)
    assert str(err.value) == message


def test_unknown_args_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        parse_args({"addedAfinity": {}})
    with pytest.raises(ValueError, match="kind: Unsupported value"):
        parse_args({"kind": "NodeResourcesFitArgs"})


def test_typed_args_are_accepted() -> None:
    args = parse_args({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeAffinityArgs"})
    assert args.added_required is None
    assert args.added_preferred is None


POD = make_pod("p").node_affinity_in("foo", ["bar"]).obj()
BARE = make_node("n").obj()
MATCHING = make_node("n").label("foo", "bar").obj()


@pytest.mark.parametrize(
    ("args", "pod", "old", "new", "hint"),
    [
        ({}, POD, None, "not-a-node", QueueingHint.QUEUE),
        ({}, POD, "not-a-node", BARE, QueueingHint.QUEUE),
        ({}, POD, None, BARE, QueueingHint.SKIP),
        ({}, POD, None, MATCHING, QueueingHint.QUEUE),
        ({}, POD, BARE, make_node("n").capacity(cpu="1").obj(), QueueingHint.SKIP),
        ({}, POD, BARE, make_node("n").label("k", "v").obj(), QueueingHint.SKIP),
        ({}, POD, MATCHING, make_node("n").label("k", "v").obj(), QueueingHint.SKIP),
        ({}, POD, BARE, MATCHING, QueueingHint.QUEUE),
        ({}, POD, MATCHING, make_node("n").label("foo", "bar").capacity(cpu="1").obj(), QueueingHint.SKIP),
        (added_required(term(expr("foo", "In", "bar"))), POD, None, BARE, QueueingHint.SKIP),
        (added_required(term(expr("foo", "In", "bar"))), POD, None, MATCHING, QueueingHint.QUEUE),
        (added_required(term(expr("zone", "In", "a"))), make_pod("p").obj(), None, MATCHING, QueueingHint.SKIP),
        ({}, pod_required(term(expr("foo", "In", "bad value!"))).obj(), None, MATCHING, QueueingHint.QUEUE),
    ],
)
def test_node_change_hint(args: dict[str, Any], pod: Any, old: Any, new: Any, hint: QueueingHint) -> None:
    (registered,) = NodeAffinity(parse_args(args)).events_to_register()
    assert registered.hint is not None
    assert registered.hint(pod, old, new) is hint


def test_batch_forms_key_on_the_enforced_affinity_not_on_the_plugin_object() -> None:
    """The node table's derived masks outlive a plugin: a key naming the plugin by id() hands a
    later plugin, built at the reused address with another addedAffinity, the old plugin's mask."""
    from scheduler.testing.builders import snapshot

    snap = snapshot(*(node_info(make_node(n).label("zone", n)) for n in ("a", "b")))
    pod = make_pod("p").node_selector(zone="a").obj()
    only_a, only_b = (parse_args(added_required(term(expr("zone", "In", z)))) for z in ("a", "b"))

    def mask(plugin: NodeAffinity) -> list[bool]:
        state = CycleState()
        plugin.pre_filter(state, pod, snap.list())
        return [bool(ok) for ok in plugin.filter_batch(state, pod, snap.table).passes]

    first = NodeAffinity(only_a)
    assert mask(first) == [True, False]
    address = id(first)
    del first
    alive = []  # CPython hands a freed address out again; keep the misses so the next try differs
    for _ in range(100):
        later = NodeAffinity(only_b)
        if id(later) == address:
            break
        alive.append(later)
    else:
        pytest.fail("no plugin got the freed address: the stale-key case was not exercised")
    assert mask(later) == [False, False]


def test_batch_forms_share_masks_between_pods_and_profiles_alike() -> None:
    """Keyed on what the rule reads: the same required affinity written differently (a number as
    a string), or a second plugin with the same addedAffinity, reuse the first mask."""
    from scheduler.testing.builders import snapshot

    snap = snapshot(*(node_info(make_node(n).label("zone", n).label("gen", "1")) for n in ("a", "b")))
    args = parse_args(added_required(term(expr("zone", "In", "a", "b"))))
    first = Pod.from_raw({**make_pod("p1").obj().raw, "spec": {"nodeSelector": {"gen": 1}}})
    second = make_pod("p2").node_selector(gen="1").obj()
    masks = []
    for plugin, pod in ((NodeAffinity(args), first), (NodeAffinity(args), second)):
        state = CycleState()
        plugin.pre_filter(state, pod, snap.list())
        masks.append(plugin.filter_batch(state, pod, snap.table))
    assert masks[0] is masks[1]
