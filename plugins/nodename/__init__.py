"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, NodeTable
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventResource,
    NodeInfo,
    Status,
)
from scheduler.model.objects import Pod

NAME = "NodeName"

ERR_REASON = "node(s) didn't match the requested node name"
_MISMATCH = Status.unresolvable(ERR_REASON, plugin=NAME)


def fits(pod: Pod, node_info: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node_info.name


class NodeName:
    name = NAME

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.NODE_NAME, pod.spec.get("nodeName") or ""),), None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the node's name alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if fits(pod, node_info):
            return None
        return _MISMATCH

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts:
        if not pod.node_name:
            return FilterVerdicts.from_mask(np.ones(table.size, np.bool_), _MISMATCH)
        mask = np.fromiter((info.name == pod.node_name for info in table.infos), np.bool_, table.size)
        return FilterVerdicts.from_mask(mask, _MISMATCH)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # Only a new node can be the one the pod names; no hint narrows that further upstream.
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))]


def new(args: Mapping[str, Any], handle: Handle) -> NodeName:
    return NodeName()
