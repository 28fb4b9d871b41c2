"""Coscheduling's domain core, as scheduler-plugins' pkg/coscheduling/core: the PodGroup object,
the group checks of PreFilter (quorum, gated members, minResources against the cluster), the
quorum count of Permit, and the manager's short-lived memories (groups that passed the
minResources check, groups backing off, groups that failed lately).

Members and their progress come from the framework's shared pod-group state (the handle's
`pod_groups`); PodGroup objects are parsed here from the JSON the informer stored. Never calls the
API, never mutates a NodeInfo; a PodGroup that cannot be parsed is reported once by name and field
and fails only its own pods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from scheduler.framework.podgroups import SCHEDULER_PLUGINS_POD_GROUP_API, GroupKey, PodGroupState, PodGroupStates
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import CPU, PODS, InvalidObject, Pod, Resource

log = structlog.get_logger("coscheduling")

# Pods join a scheduler-plugins PodGroup of their namespace by this label.
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# util.DefaultWaitTime: Permit's wait when neither the PodGroup nor the args give one.
DEFAULT_WAIT_SECONDS = 60.0


def pod_group_name(pod: Pod) -> str | None:
    """The pod's PodGroup name from its label (util.GetPodGroupLabel)."""
    return pod.labels.get(POD_GROUP_LABEL) or None


def pod_group_key(pod: Pod) -> GroupKey | None:
    """Coscheduling's membership in the shared pod-group state: the labelled PodGroup of the pod's namespace."""
    name = pod_group_name(pod)
    return GroupKey(SCHEDULER_PLUGINS_POD_GROUP_API, pod.namespace, name) if name else None


@dataclass(frozen=True, slots=True)
class PodGroup:
    """What Coscheduling reads of a scheduling.x-k8s.io/v1alpha1 PodGroup."""

    key: GroupKey
    min_member: int
    # spec.minResources by name (cpu in millicores), None when not given.
    min_resources: Mapping[str, int] | None
    schedule_timeout_seconds: int | None
    # metadata.creationTimestamp, wall-clock seconds.
    created: float

    @classmethod
    def from_raw(cls, key: GroupKey, raw: Mapping[str, Any]) -> PodGroup:
        spec = raw.get("spec") or {}
        min_member = spec.get("minMember", 0)
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
            raise InvalidObject(f"spec.minMember: Invalid value: {min_member!r}: must be a non-negative integer")
        timeout = spec.get("scheduleTimeoutSeconds")
        if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
            raise InvalidObject(f"spec.scheduleTimeoutSeconds: Invalid value: {timeout!r}: must be an integer")
        raw_resources = spec.get("minResources")
        min_resources = None
        if raw_resources is not None:
            if not isinstance(raw_resources, Mapping):
                raise InvalidObject(f"spec.minResources: Invalid value: {raw_resources!r}: must be a resource list")
            amounts = Resource.from_list(raw_resources, "spec.minResources")
            min_resources = {name: amounts.get(name) for name in raw_resources}
        stamp = (raw.get("metadata") or {}).get("creationTimestamp") or ""
        try:
            created = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0
        except ValueError as exc:
            raise InvalidObject(f"metadata.creationTimestamp: Invalid value: {stamp!r}: {exc}") from exc
        return cls(key, min_member, min_resources, timeout, created)


class Expiring:
    """Keys remembered until a deadline (scheduler-plugins keeps these in go-cache with a TTL)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._until: dict[GroupKey, float] = {}

    def add(self, key: GroupKey, ttl: float) -> None:
        self._until[key] = self._clock() + ttl

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, GroupKey):
            return False
        until = self._until.get(key)
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[key]
            return False
        return True

    def discard(self, key: GroupKey) -> None:
        self._until.pop(key, None)


def _format_amount(name: str, amount: int) -> str:
    if name == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    return str(amount)


def _left_on_node(info: NodeInfo, group: str) -> Resource:
    """The node's allocatable minus what its pods outside `group` request (getNodeResource)."""
    node = info.node
    if node is None:
        return Resource()
    requested = info.requested.copy()
    pods = len(info.pods)
    for other in info.pods.values():
        if _full_name(other) == group:
            requested.sub(other.requests)
            pods -= 1
    allocatable = node.allocatable
    left = allocatable.copy()
    left.sub(requested)
    left.allowed_pods = allocatable.allowed_pods - pods
    # Only the scalar resources the node offers count (a pod's other requests are not free room).
    left.scalar = {name: amount - requested.scalar.get(name, 0) for name, amount in allocatable.scalar.items()}
    return left


def _full_name(pod: Pod) -> str:
    """util.GetPodGroupFullName: namespace/group, or "" for a pod of no group."""
    name = pod_group_name(pod)
    return f"{pod.namespace}/{name}" if name else ""


def check_cluster_resource(nodes: Sequence[NodeInfo], request: Mapping[str, int], group: str) -> str | None:
    """None when the nodes' free resources (the group's own pods' counted as free) cover `request`
    summed over the cluster; else the gap, as scheduler-plugins' CheckClusterResource reports it."""
    gap = dict(request)
    for name, amount in list(gap.items()):
        if amount <= 0:
            del gap[name]
    if not gap:
        return None
    for info in nodes:
        if info.node is None:
            continue
        left = _left_on_node(info, group)
        for name in list(gap):
            remaining = gap[name] - left.get(name)
            if remaining <= 0:
                del gap[name]
            else:
                gap[name] = remaining
        if not gap:
            return None
    return "resource gap: map[" + " ".join(f"{n}:{_format_amount(n, a)}" for n, a in sorted(gap.items())) + "]"


class PodGroupManager:
    """scheduler-plugins' PodGroupManager over the shared pod-group state."""

    def __init__(self, groups: PodGroupStates, schedule_timeout: float, clock: Callable[[], float]) -> None:
        self.groups = groups
        self.schedule_timeout = schedule_timeout
        self.clock = clock
        # Groups whose minResources passed the cluster check lately (not checked again meanwhile).
        self.permitted = Expiring(clock)
        # Groups that failed lately and wait out podGroupBackoffSeconds.
        self.backed_off = Expiring(clock)
        # When each group's last attempt failed (queue clock): it sorts from then, not from its
        # creation, so a failing gang does not block the queue's head.
        self.last_failed: dict[GroupKey, float] = {}
        # The parsed object per group, with the JSON it was parsed from; errors reported once.
        self._parsed: dict[GroupKey, tuple[Mapping[str, Any], PodGroup | InvalidObject]] = {}

    def state(self, key: GroupKey) -> PodGroupState | None:
        return self.groups.get(key)

    def pod_group(self, key: GroupKey) -> PodGroup | InvalidObject | None:
        """The group's PodGroup, the problem with it, or None when there is no such object."""
        state = self.groups.get(key)
        raw = state.group if state is not None and isinstance(state.group, Mapping) else None
        if raw is None:
            self._parsed.pop(key, None)
            return None
        known = self._parsed.get(key)
        if known is not None and known[0] is raw:
            return known[1]
        parsed: PodGroup | InvalidObject
        try:
            parsed = PodGroup.from_raw(key, raw)
        except InvalidObject as exc:
            parsed = exc
            log.error("PodGroup cannot be used", podgroup=str(key), error=str(exc))
        self._parsed[key] = (raw, parsed)
        return parsed

    def mark_failure(self, key: GroupKey) -> None:
        self.last_failed[key] = self.clock()

    def clear_failure(self, key: GroupKey) -> None:
        self.last_failed.pop(key, None)

    def pre_filter(self, pod: Pod, key: GroupKey, pg: PodGroup, nodes: Sequence[NodeInfo]) -> str | None:
        """None when the group may go on; else why not (upstream's messages)."""
        if key in self.backed_off:
            return f"podGroup {key} failed recently"
        state = self.groups.get(key)
        members = list(state.pods.values()) if state is not None else []
        quorum_gap = pg.min_member - len(members)
        if quorum_gap > 0:
            return (
                f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                f"current pods number: {len(members)}, minMember of group: {pg.min_member}"
            )
        # minMember may be below the replicas: only so many gated members are tolerated.
        if quorum_gap + sum(1 for member in members if member.scheduling_gates) > 0:
            return f"pre-filter pod {pod.name} cannot proceed due to gated pods in the same PodGroup"
        if pg.min_resources is None or key in self.permitted:
            return None
        request = {**pg.min_resources, PODS: pg.min_member}
        gap = check_cluster_resource(nodes, request, str(key))
        if gap is not None:
            return gap
        self.permitted.add(key, self.schedule_timeout)
        return None
