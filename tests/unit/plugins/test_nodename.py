"""NodeName: spec.nodeName pins the pod to one node."""

from __future__ import annotations

import pytest

from plugins.nodename import ERR_REASON, NodeName
from scheduler.framework.types import ActionType, Code, CycleState, EventResource
from scheduler.testing.builders import PodBuilder, make_node, make_pod, node_info


@pytest.mark.parametrize(
    ("pod", "rejected"),
    [
        (make_pod("p"), False),
        (make_pod("p").node("foo"), False),
        (make_pod("p").node("bar"), True),
    ],
)
def test_filter(pod: PodBuilder, rejected: bool) -> None:
    status = NodeName().filter(CycleState(), pod.obj(), node_info(make_node("foo")))
    if not rejected:
        assert status is None
        return
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) didn't match the requested node name",) == (ERR_REASON,)


def test_requeues_on_node_add_only() -> None:
    (registered,) = NodeName().events_to_register()
    assert registered.event.resource == EventResource.NODE
    assert registered.event.action == ActionType.ADD
    assert registered.hint is None
