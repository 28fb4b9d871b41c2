"""NodeUnschedulable: keep pods off cordoned nodes (spec.unschedulable) unless they tolerate it.

A pod tolerates a cordoned node when a toleration of its tolerates the taint
`node.kubernetes.io/unschedulable:NoSchedule`, whether or not the node carries that taint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plugins.helper import event_objects
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, NodeTable
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Node, Pod, Taint
from scheduler.model.selectors import NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE, tolerations_of, tolerations_tolerate

NAME = "NodeUnschedulable"

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_UNSCHEDULABLE = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=NAME)

_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE)


def tolerates_unschedulable(pod: Pod) -> bool:
    return tolerations_tolerate(tolerations_of(pod), _UNSCHEDULABLE_TAINT)


class NodeUnschedulable:
    name = NAME

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.TOLERATIONS, signing.tolerations(pod)),), None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the Node's spec.unschedulable alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None or not node.unschedulable or tolerates_unschedulable(pod):
            return None
        return _UNSCHEDULABLE

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts:
        if tolerates_unschedulable(pod):
            return FilterVerdicts.from_mask(np.ones(table.size, np.bool_), _UNSCHEDULABLE)
        return FilterVerdicts.from_mask(~table.unschedulable, _UNSCHEDULABLE)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT), _node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_TOLERATION), _pod_changed
            ),
        ]


def _node_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """A schedulable node appeared, or a cordoned one was uncordoned."""
    objects = event_objects(Node, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    if not new.unschedulable and (old is None or old.unschedulable):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _pod_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """The rejected pod itself now tolerates cordoned nodes."""
    objects = event_objects(Pod, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    if new.uid == pod.uid and tolerates_unschedulable(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
