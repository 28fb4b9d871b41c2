"""Coscheduling: scheduler-plugins' gang plugin, for clusters without kube's GenericWorkload.

The adapter (args, QueueSort, PreFilter, PostFilter, Permit, Reserve/Unreserve, events); the
domain core is `core`. Pods join a scheduling.x-k8s.io/v1alpha1 PodGroup of their namespace by
the label scheduling.x-k8s.io/pod-group; members wait at Permit until minMember of them are
assumed or bound, then all are let go together; a member that fails rejects the waiting rest.
Names, args, defaults, messages and order follow scheduler-plugins' pkg/coscheduling, so an
as-a-second-scheduler configuration works unchanged.

Members' progress is the framework's shared pod-group state (assume and forget move them there);
this plugin never calls the API and writes no PodGroup status (scheduler-plugins' controller does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.coscheduling.core import DEFAULT_WAIT_SECONDS, PodGroup, PodGroupManager, pod_group_key
from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import GroupKey
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    NodeInfo,
    NodeToStatus,
    PreFilterResult,
    QueuedPodInfo,
    Status,
)
from scheduler.model.objects import InvalidObject, Pod

NAME = "Coscheduling"

POD_GROUP_NOT_FOUND = "PodGroup not found"
NO_POD_GROUP = "can not find pod group"


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """scheduler-plugins' CoschedulingArgs with its v1 defaults."""

    permit_waiting_time_seconds: int = 60
    pod_group_backoff_seconds: int = 0
    pod_group_reject_percentage: int = 10


_ARG_FIELDS = {
    "permitWaitingTimeSeconds": "permit_waiting_time_seconds",
    "podGroupBackoffSeconds": "pod_group_backoff_seconds",
    "podGroupRejectPercentage": "pod_group_reject_percentage",
}


def parse_args(args: Mapping[str, Any]) -> CoschedulingArgs:
    """Defaults, then ValidateCoschedulingArgs; several errors aggregate as Go's field errors do."""
    unknown = set(args) - set(_ARG_FIELDS) - {"apiVersion", "kind"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    values: dict[str, int] = {}
    errors: list[str] = []
    for field, attr in _ARG_FIELDS.items():
        if field not in args or args[field] is None:
            continue
        value = args[field]
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{field}: Invalid value: {value!r}: must be an integer")
            continue
        values[attr] = value
    parsed = CoschedulingArgs(**values)
    if parsed.permit_waiting_time_seconds < 0:
        errors.append(
            f"permitWaitingTimeSeconds: Invalid value: {parsed.permit_waiting_time_seconds}: must be greater than 0"
        )
    if parsed.pod_group_backoff_seconds < 0:
        errors.append(
            f"podGroupBackoffSeconds: Invalid value: {parsed.pod_group_backoff_seconds}: must be greater than 0"
        )
    if not 0 <= parsed.pod_group_reject_percentage <= 100:
        errors.append(
            f"podGroupRejectPercentage: Invalid value: {parsed.pod_group_reject_percentage}: must be between 0 and 100"
        )
    if errors:
        raise ValueError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return parsed


POD_GROUP_EVENT = ClusterEvent(EventResource.SCHEDULER_PLUGINS_POD_GROUP, ActionType.ADD | ActionType.UPDATE)


class Coscheduling:
    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Handle, clock: Callable[[], float] = time.monotonic) -> None:
        self.handle = handle
        handle.pod_groups.add_membership(pod_group_key)
        self.schedule_timeout = float(args.permit_waiting_time_seconds)
        self.backoff = float(args.pod_group_backoff_seconds)
        self.reject_threshold = args.pod_group_reject_percentage / 100.0
        self.manager = PodGroupManager(handle.pod_groups, self.schedule_timeout, clock)
        # Queue timestamps are on `clock`; a PodGroup's creation is wall-clock time.
        self._wall_offset = time.time() - clock()

    def _group(self, pod: Pod) -> tuple[GroupKey | None, PodGroup | None]:
        """The pod's group key (None: no group) and its usable PodGroup (None: missing or invalid)."""
        key = pod_group_key(pod)
        if key is None:
            return None, None
        pg = self.manager.pod_group(key)
        return key, pg if isinstance(pg, PodGroup) else None

    # ---- QueueSort -----------------------------------------------------------------------

    def _sort_time(self, info: QueuedPodInfo) -> float:
        """GetCreationTimestamp: the group's last failure, else its creation, else the pod's first try."""
        own = info.initial_attempt_timestamp if info.initial_attempt_timestamp is not None else info.timestamp
        key, pg = self._group(info.pod)
        if key is None:
            return own
        failed = self.manager.last_failed.get(key)
        if failed is not None:
            return failed
        return pg.created - self._wall_offset if pg is not None else own

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Higher priority first; then the earlier group creation (or pod arrival); then the key."""
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        time_a, time_b = self._sort_time(a), self._sort_time(b)
        if time_a == time_b:
            return a.pod.key < b.pod.key
        return time_a < time_b

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ADD)),
            ClusterEventWithHint(POD_GROUP_EVENT),
        ]

    # ---- PreFilter / PostFilter ----------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        key = pod_group_key(pod)
        if key is None:
            return None, None
        pg = self.manager.pod_group(key)
        if isinstance(pg, InvalidObject):
            return None, Status.unresolvable(f"PodGroup {key} is invalid: {pg}")
        if pg is None:
            return None, None
        # Unresolvable: preemption cannot make a group whole.
        problem = self.manager.pre_filter(pod, key, pg, nodes)
        return None, Status.unresolvable(problem) if problem is not None else None

    def pre_filter_extensions(self) -> None:
        return None

    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        key, pg = self._group(pod)
        if key is None or pg is None:
            return None, Status.unschedulable(NO_POD_GROUP)
        group = self.manager.state(key)
        assigned = group.scheduled_pods_count() if group is not None else 0
        # Enough members are placed already: no reason to reject the whole group.
        if assigned >= pg.min_member:
            return None, Status(Code.UNSCHEDULABLE)
        # A small gap may still close with the next members: leave the group be.
        if (pg.min_member - assigned) / pg.min_member <= self.reject_threshold:
            return None, Status(Code.UNSCHEDULABLE)
        # If this member fails, its siblings very likely fail too: release what they hold.
        self._reject_waiting(key, "optimistic rejection in PostFilter")
        if self.backoff > 0 and group is not None and group.all_pods_count() >= pg.min_member:
            self.manager.backed_off.add(key, self.backoff)
        self.manager.permitted.discard(key)
        self.manager.mark_failure(key)
        return None, Status.unschedulable(
            f"PodGroup {key} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"
        )

    def _reject_waiting(self, key: GroupKey, message: str) -> None:
        group = self.manager.state(key)
        if group is None:
            return
        for uid in list(group.assumed):
            self.handle.reject_waiting_pod(uid, NAME, message)

    # ---- Permit / Reserve ----------------------------------------------------------------

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        key = pod_group_key(pod)
        if key is None:
            return None, 0.0
        pg = self.manager.pod_group(key)
        if not isinstance(pg, PodGroup):
            return Status.unschedulable(POD_GROUP_NOT_FOUND), 0.0
        group = self.manager.state(key)
        # This pod was assumed before Permit: it counts itself.
        scheduled = group.scheduled_pods_count() if group is not None else 0
        if scheduled >= pg.min_member:
            self.manager.clear_failure(key)
            if group is not None:
                for uid in list(group.assumed):
                    self.handle.allow_waiting_pod(uid, NAME)
            return None, 0.0
        if scheduled == 1 and group is not None:
            # The first member in: bring its siblings forward (only once, scheduler-plugins#682).
            self.handle.activate([p.uid for p in group.unscheduled_pods() if p.uid != pod.uid])
        return Status(Code.WAIT), self._wait_time(pg)

    def _wait_time(self, pg: PodGroup) -> float:
        """The PodGroup's scheduleTimeoutSeconds, else the args' permitWaitingTimeSeconds, else 60s
        (util.GetWaitTimeDuration); a PodGroup's 0 means the args' value, as upstream's Permit reads it."""
        if pg.schedule_timeout_seconds is not None:
            wait = float(pg.schedule_timeout_seconds)
        else:
            wait = self.schedule_timeout or DEFAULT_WAIT_SECONDS
        return wait or self.schedule_timeout

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """One member undone (rejected, timed out, failed to bind): the waiting rest go too."""
        key, pg = self._group(pod)
        if key is None or pg is None:
            return
        self._reject_waiting(key, "rejection in Unreserve")
        self.manager.permitted.discard(key)
        self.manager.mark_failure(key)


def new(args: Mapping[str, Any], handle: Handle) -> Coscheduling:
    return Coscheduling(parse_args(args), handle)
