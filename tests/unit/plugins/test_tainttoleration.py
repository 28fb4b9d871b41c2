"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.tainttoleration import ERR_REASON_UNTOLERATED, TaintToleration
from scheduler.framework.types import Code, CycleState, EventResource, QueueingHint
from scheduler.model.objects import Toleration
from scheduler.model.selectors import tolerations_of
from scheduler.testing.builders import NodeBuilder, PodBuilder, make_node, make_pod, node_info, run_score


def tainted(name: str, *taints: tuple[str, str, str]) -> NodeBuilder:
    node = make_node(name)
    for key, value, effect in taints:
        node.taint(key, value, effect)
    return node


@pytest.mark.parametrize(
    ("pod", "node", "rejected"),
    [
        (make_pod("p"), tainted("n", ("dedicated", "user1", "NoSchedule")), True),
        (
            make_pod("p").toleration("dedicated", "user1", "NoSchedule"),
            tainted("n", ("dedicated", "user1", "NoSchedule")),
            False,
        ),
        (
            make_pod("p").toleration("dedicated", "user2", "NoSchedule", operator="Equal"),
            tainted("n", ("dedicated", "user1", "NoSchedule")),
            True,
        ),
        (
            make_pod("p").toleration("foo", effect="NoSchedule", operator="Exists"),
            tainted("n", ("foo", "bar", "NoSchedule")),
            False,
        ),
        (
            make_pod("p")
            .toleration("dedicated", "user2", "NoSchedule", operator="Equal")
            .toleration("foo", effect="NoSchedule", operator="Exists"),
            tainted("n", ("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")),
            False,
        ),
        (
            make_pod("p").toleration("foo", "bar", "PreferNoSchedule", operator="Equal"),
            tainted("n", ("foo", "bar", "NoSchedule")),
            True,
        ),
        (make_pod("p").toleration("foo", "bar", operator="Equal"), tainted("n", ("foo", "bar", "NoSchedule")), False),
        (
            make_pod("p").toleration("dedicated", "user2", "NoSchedule", operator="Equal"),
            tainted("n", ("dedicated", "user1", "PreferNoSchedule")),
            False,
        ),
        (make_pod("p"), tainted("n", ("dedicated", "user1", "PreferNoSchedule")), False),
        (make_pod("p"), tainted("n", ("node.kubernetes.io/not-ready", "", "NoExecute")), True),
        (
            make_pod("p").toleration(operator="Exists"),
            tainted("n", ("a", "b", "NoExecute"), ("c", "", "NoSchedule")),
            False,
        ),
        (make_pod("p"), make_node("n"), False),
    ],
)
def test_filter(pod: PodBuilder, node: NodeBuilder, rejected: bool) -> None:
    status = TaintToleration().filter(CycleState(), pod.obj(), node_info(node))
    if not rejected:
        assert status is None
        return
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) had untolerated taint(s)",) == (ERR_REASON_UNTOLERATED,)


PREFER = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        (
            make_pod("p").toleration("foo", "bar", PREFER, operator="Equal"),
            [tainted("a", ("foo", "bar", PREFER)), tainted("b", ("foo", "blah", PREFER))],
            [100, 0],
        ),
        (  # how many tolerated taints a node has does not matter
            make_pod("p")
            .toleration("cpu-type", "arm64", PREFER, operator="Equal")
            .toleration("disk-type", "ssd", PREFER, operator="Equal"),
            [
                tainted("a"),
                tainted("b", ("cpu-type", "arm64", PREFER)),
                tainted("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 100],
        ),
        (  # the more intolerable taints, the lower the score
            make_pod("p").toleration("foo", "bar", PREFER, operator="Equal"),
            [
                tainted("a"),
                tainted("b", ("cpu-type", "arm64", PREFER)),
                tainted("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 50, 0],
        ),
        (  # only PreferNoSchedule taints and tolerations (or effect-less ones) count
            make_pod("p")
            .toleration("cpu-type", "arm64", "NoSchedule", operator="Equal")
            .toleration("disk-type", "ssd", "NoSchedule", operator="Equal"),
            [
                tainted("a"),
                tainted("b", ("cpu-type", "arm64", "NoSchedule")),
                tainted("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 0],
        ),
        (  # a toleration without effect tolerates PreferNoSchedule too
            make_pod("p").toleration("cpu-type", operator="Exists"),
            [tainted("a", ("cpu-type", "arm64", PREFER)), tainted("b", ("other", "", PREFER))],
            [100, 0],
        ),
        (make_pod("p"), [tainted("a"), tainted("b", ("cpu-type", "arm64", PREFER))], [100, 0]),
        (make_pod("p"), [tainted("a"), tainted("b")], [100, 100]),
    ],
)
def test_score(pod: PodBuilder, nodes: list[NodeBuilder], want: list[int]) -> None:
    plugin = TaintToleration()
    state = CycleState()
    infos = [node_info(n) for n in nodes]
    assert plugin.pre_score(state, pod.obj(), infos) is None
    assert run_score(plugin, state, pod.obj(), infos) == want


def test_score_without_pre_score_is_an_error() -> None:
    _, status = TaintToleration().score(CycleState(), make_pod("p").obj(), node_info(make_node("n")))
    assert status is not None
    assert status.code == Code.ERROR


POD = make_pod("p").toleration("dedicated", "user2", "NoSchedule", operator="Equal").obj()


def _hint(resource: EventResource) -> Any:
    registered = TaintToleration().events_to_register()
    return next(e.hint for e in registered if e.event.resource == resource)


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, "not-a-node", QueueingHint.QUEUE),
        ("not-a-node", tainted("n", ("dedicated", "user1", "NoSchedule")).obj(), QueueingHint.QUEUE),
        (None, tainted("n", ("dedicated", "user1", "NoSchedule")).obj(), QueueingHint.SKIP),
        (None, tainted("n", ("dedicated", "user2", "NoSchedule")).obj(), QueueingHint.QUEUE),
        (
            tainted("n", ("dedicated", "user1", "NoSchedule")).obj(),
            tainted("n", ("dedicated", "user1", "NoSchedule"), ("dedicated", "user3", "NoSchedule")).obj(),
            QueueingHint.SKIP,
        ),
        (
            tainted("n", ("dedicated", "user1", "NoSchedule")).obj(),
            tainted("n", ("dedicated", "user2", "NoSchedule")).obj(),
            QueueingHint.QUEUE,
        ),
        (tainted("n").obj(), tainted("n", ("soft", "", "PreferNoSchedule")).obj(), QueueingHint.SKIP),
    ],
)
def test_node_change_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    assert _hint(EventResource.NODE)(POD, old, new) is hint


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, "not-a-pod", QueueingHint.QUEUE),
        ("not-a-pod", POD, QueueingHint.QUEUE),
        (make_pod("other").obj(), make_pod("other").toleration("a", operator="Exists").obj(), QueueingHint.SKIP),
        (POD, POD, QueueingHint.SKIP),  # an update that did not touch the tolerations
        (POD, make_pod("p").toleration("dedicated", operator="Exists").obj(), QueueingHint.QUEUE),
    ],
)
def test_pod_toleration_change_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    assert _hint(EventResource.TARGET_POD)(POD, old, new) is hint


def test_tolerations_are_parsed_once_when_the_pod_is_built() -> None:

    pod = make_pod("p").toleration("k", "v", "NoSchedule", operator="Equal").obj()
    want = (Toleration(key="k", operator="Equal", value="v", effect="NoSchedule"),)
    assert pod.tolerations == want
    # Every reader sees the same tuple, not a new parse of spec.tolerations per attempt.
    assert tolerations_of(pod) is pod.tolerations
    assert tolerations_of(make_pod("none").obj()) == ()
