"""NodeUnschedulable: cordoned nodes only for pods tolerating node.kubernetes.io/unschedulable."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.nodeunschedulable import ERR_REASON_UNSCHEDULABLE, NodeUnschedulable
from scheduler.framework.types import Code, CycleState, EventResource, QueueingHint
from scheduler.testing.builders import PodBuilder, make_node, make_pod, node_info

UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("pod", "unschedulable", "rejected"),
    [
        (make_pod("p"), True, True),
        (make_pod("p"), False, False),
        (make_pod("p").toleration(UNSCHEDULABLE_KEY, effect="NoSchedule"), True, False),
        (make_pod("p").toleration(UNSCHEDULABLE_KEY, operator="Exists"), True, False),
        (make_pod("p").toleration(operator="Exists"), True, False),  # tolerates everything
        (make_pod("p").toleration(UNSCHEDULABLE_KEY, effect="NoExecute"), True, True),
        (make_pod("p").toleration("other", operator="Exists", effect="NoSchedule"), True, True),
    ],
)
def test_filter(pod: PodBuilder, unschedulable: bool, rejected: bool) -> None:
    status = NodeUnschedulable().filter(CycleState(), pod.obj(), node_info(make_node("n").unschedulable(unschedulable)))
    if not rejected:
        assert status is None
        return
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (ERR_REASON_UNSCHEDULABLE,)
    assert ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"


CORDONED = make_node("n").unschedulable().obj()
READY = make_node("n").obj()
READY_TAINTED = make_node("n").taint("node.kubernetes.io/not-ready", effect="NoExecute").obj()
CORDONED_TAINTED = make_node("n").unschedulable().taint("node.kubernetes.io/not-ready", effect="NoExecute").obj()


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, "not-a-node", QueueingHint.QUEUE),
        ("not-a-node", CORDONED, QueueingHint.QUEUE),
        (None, CORDONED, QueueingHint.SKIP),
        (None, READY, QueueingHint.QUEUE),
        (CORDONED, CORDONED_TAINTED, QueueingHint.SKIP),
        (READY, READY_TAINTED, QueueingHint.SKIP),
        (CORDONED, READY, QueueingHint.QUEUE),
        (READY, CORDONED, QueueingHint.SKIP),
    ],
)
def test_node_change_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    registered = NodeUnschedulable().events_to_register()
    node_hint = next(e.hint for e in registered if e.event.resource == EventResource.NODE)
    assert node_hint is not None
    assert node_hint(make_pod("p").obj(), old, new) is hint


@pytest.mark.parametrize(
    ("new", "hint"),
    [
        ("not-a-pod", QueueingHint.QUEUE),
        (make_pod("other").toleration(UNSCHEDULABLE_KEY, effect="NoSchedule").obj(), QueueingHint.SKIP),
        (make_pod("p").toleration("other", effect="NoSchedule").obj(), QueueingHint.SKIP),
        (make_pod("p").toleration(UNSCHEDULABLE_KEY, effect="NoSchedule").obj(), QueueingHint.QUEUE),
    ],
)
def test_pod_toleration_change_hint(new: Any, hint: QueueingHint) -> None:
    registered = NodeUnschedulable().events_to_register()
    pod_hint = next(e.hint for e in registered if e.event.resource == EventResource.TARGET_POD)
    assert pod_hint is not None
    assert pod_hint(make_pod("p").obj(), make_pod("p").obj(), new) is hint
