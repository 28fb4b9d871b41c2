"""NodePorts: a pod's host ports must be free on the node.

A host port is (hostIP, protocol, hostPort) with hostIP defaulting to 0.0.0.0 and protocol
to TCP. 0.0.0.0 conflicts with the same protocol/port on any IP, and any IP conflicts with
0.0.0.0. Ports of regular containers and of sidecars (restartable init containers) count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
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
from scheduler.model.objects import Pod

NAME = "NodePorts"

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

BIND_ALL_HOST_IP = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


def host_ports(pod: Pod) -> list[HostPort]:
    """Every port the pod's long-running containers bind on the host (hostPort > 0)."""
    spec = pod.spec
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers.extend(spec.get("containers") or ())
    ports: list[HostPort] = []
    for container in containers:
        for port in container.get("ports") or ():
            number = int(port.get("hostPort") or 0)
            if number > 0:
                ports.append(HostPort(port.get("hostIP") or BIND_ALL_HOST_IP, port.get("protocol") or "TCP", number))
    return ports


def used_ports(pods: Iterable[Pod]) -> dict[str, set[tuple[str, int]]]:
    """hostIP -> {(protocol, port)} over these pods."""
    used: dict[str, set[tuple[str, int]]] = {}
    for pod in pods:
        for p in host_ports(pod):
            used.setdefault(p.ip, set()).add((p.protocol, p.port))
    return used


def conflicts(used: Mapping[str, set[tuple[str, int]]], wanted: HostPort) -> bool:
    key = (wanted.protocol, wanted.port)
    if wanted.ip == BIND_ALL_HOST_IP:
        return any(key in pairs for pairs in used.values())
    return any(key in used.get(ip, ()) for ip in (BIND_ALL_HOST_IP, wanted.ip))


def fits_ports(wanted: Sequence[HostPort], used: Mapping[str, set[tuple[str, int]]]) -> bool:
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
        ports = host_ports(pod)
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
        if fits_ports(wanted, used_ports(node_info.pods.values())):
            return None
        return Status.unschedulable(ERR_REASON, plugin=NAME)

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
    freed = used_ports([old])
    if not freed or fits_ports(host_ports(pod), freed):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: Mapping[str, Any], handle: Handle) -> NodePorts:
    return NodePorts()
