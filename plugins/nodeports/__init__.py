"""NodePorts: a pod's host ports must be free on the node.

A host port is (hostIP, protocol, hostPort) with hostIP defaulting to 0.0.0.0 and protocol
to TCP (Pod.host_ports). 0.0.0.0 conflicts with the same protocol/port on any IP, and any IP
conflicts with 0.0.0.0. Ports of regular containers and of sidecars (restartable init containers)
count. A node's ports in use are kept as its pods come and go (NodeInfo.used_ports), and the node
table indexes them by port, so the batch form finds the taken rows without visiting each node.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import BoolArray, FilterVerdicts, NodeTable
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import BIND_ALL_HOST_IP, HostPort, Pod

NAME = "NodePorts"

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


def conflicts(used: Collection[HostPort], wanted: HostPort) -> bool:
    """kube's HostPortInfo.CheckConflict over one node's used ports."""
    ip, protocol, port = wanted
    if ip == BIND_ALL_HOST_IP:
        return any(p == port and proto == protocol for _, proto, p in used)
    return (BIND_ALL_HOST_IP, protocol, port) in used or wanted in used


def fits_ports(wanted: Sequence[HostPort], used: Collection[HostPort]) -> bool:
    return not any(conflicts(used, p) for p in wanted)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    ports: tuple[HostPort, ...]

    def clone(self) -> _PreFilterState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


class NodePorts:
    name = NAME

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.HOST_PORTS, signing.host_ports(pod)),), None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        ports = pod.host_ports
        if not ports:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(PRE_FILTER_KEY, _PreFilterState(tuple(ports)))
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the host ports of the node's pods alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        try:
            wanted = state.read(PRE_FILTER_KEY).ports
        except KeyError as exc:
            return Status.as_error(exc, NAME)
        if fits_ports(wanted, node_info.used_ports):
            return None
        return Status.unschedulable(ERR_REASON, plugin=NAME)

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
        """Every row at once, from the table's index of the ports in use."""
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return None  # the per-node form reports the missing state
        mask: BoolArray = np.ones(table.size, np.bool_)
        taken = table.host_port_rows(pre.ports)
        if taken:
            mask[np.fromiter(taken, np.int64, len(taken))] = False
        return FilterVerdicts.from_mask(mask, Status.unschedulable(ERR_REASON, plugin=NAME))

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ]


def _pod_deleted(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """A deleted pod that held (or was about to hold) a port this pod wants frees it."""
    if not isinstance(old, Pod):
        return QueueingHint.QUEUE
    nominated = (old.raw.get("status") or {}).get("nominatedNodeName")
    if not old.node_name and not nominated:
        return QueueingHint.SKIP
    freed = old.host_ports
    if not freed or fits_ports(pod.host_ports, freed):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: Mapping[str, Any], handle: Handle) -> NodePorts:
    return NodePorts()
