"""GangScheduling: all-or-nothing for pods of a PodGroup with a gang policy (kube-scheduler v1.37.2).

In the default profile when GenericWorkload is on. PreEnqueue keeps a member out of activeQ until
its PodGroup is known and at least `minCount` members exist; Permit holds each placed member until
`minCount` members are assumed or bound (then allows every waiting member, up to 5 minutes);
PlacementFeasible tells the pod-group cycle whether `minCount` can still be reached. Reads the
pod-group state through the handle; never writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupState, scheduling_group_key
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventObject,
    EventResource,
    EventScope,
    PlacementProgress,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.podgroups import PodGroup

NAME = "GangScheduling"
# How long gang members wait at Permit for their quorum before being rejected (kube's permitTimeoutDuration).
PERMIT_TIMEOUT_SECONDS = 300.0

WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_AT_PERMIT = "waiting for minCount pods from a gang to be scheduled"


def waiting_for_group(name: str) -> str:
    return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


def min_count(group: object | None) -> int:
    """The members a group needs placed together: the gang's minCount, 1 for the basic policy."""
    if isinstance(group, PodGroup) and group.min_count is not None:
        return group.min_count
    return 1


def _raw_key(obj: EventObject | None) -> GroupKey | None:
    if obj is None or isinstance(obj, Pod | Node):
        return None
    meta = obj.get("metadata") or {}
    return GroupKey(POD_GROUP_API, meta.get("namespace", ""), meta.get("name", ""))


def _gang_min_count(obj: EventObject | None) -> int | None:
    if obj is None or isinstance(obj, Pod | Node):
        return None
    gang = ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    value = gang.get("minCount") if isinstance(gang, Mapping) else None
    return value if isinstance(value, int) else None


def _member_keys(pod: Pod) -> tuple[GroupKey, ...]:
    """The EventScope's keys of a waiting pod: its group."""
    key = scheduling_group_key(pod)
    return (key,) if key is not None else ()


def _group_object_keys(old: EventObject | None, new: EventObject | None) -> tuple[GroupKey, ...]:
    """The EventScope's keys of a PodGroup event: that group's members."""
    key = _raw_key(new)
    return (key,) if key is not None else ()


GROUP_OBJECT_SCOPE = EventScope(_member_keys, _group_object_keys)


def _own_group_added(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    key = scheduling_group_key(pod)
    return QueueingHint.QUEUE if key is not None and key == _raw_key(new) else QueueingHint.SKIP


def _own_group_min_count_decreased(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    key = scheduling_group_key(pod)
    if key is None or key != _raw_key(new):
        return QueueingHint.SKIP
    before, after = _gang_min_count(old), _gang_min_count(new)
    if before is None or after is None or after >= before:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


class GangScheduling:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._member_added_scope = EventScope(_member_keys, self._member_added_keys)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        # spec.schedulingGroup is immutable: no pod update can change membership.
        # An added member wakes only its own group's pods, and none while the group is still short
        # of minCount members (they would be gated again): a gang's arrival is linear, not quadratic.
        member_added = self._member_added_scope
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD), self._same_group_pod_added, member_added
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD), self._same_group_pod_added, member_added
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD_GROUP, ActionType.ADD), _own_group_added, GROUP_OBJECT_SCOPE
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD_GROUP, ActionType.UPDATE),
                _own_group_min_count_decreased,
                GROUP_OBJECT_SCOPE,
            ),
        ]

    def _short_of_members(self, key: GroupKey) -> bool:
        """Whether the group is known to have fewer members than its minCount: PreEnqueue gates every
        one of them, whatever event woke it."""
        state = self.handle.pod_groups.get(key)
        if state is None or not isinstance(state.group, PodGroup) or state.group.min_count is None:
            return False
        return state.all_pods_count() < state.group.min_count

    def _same_group_pod_added(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """A new member (unscheduled or bound) may complete the gang. kube's hint queues every member
        of the group; this one skips them while the group is still short of minCount (PreEnqueue
        would gate each again), which leaves every pod where kube's ends up."""
        if not isinstance(new, Pod):
            return QueueingHint.SKIP
        key = scheduling_group_key(pod)
        if key is None or key != scheduling_group_key(new) or self._short_of_members(key):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def _member_added_keys(self, old: EventObject | None, new: EventObject | None) -> tuple[GroupKey, ...]:
        """The EventScope's keys of an added pod: its group, unless the group is still short."""
        if not isinstance(new, Pod):
            return ()
        key = scheduling_group_key(new)
        return (key,) if key is not None and not self._short_of_members(key) else ()

    def _state(self, pod: Pod) -> tuple[GroupKey | None, PodGroupState | None]:
        key = scheduling_group_key(pod)
        return key, (self.handle.pod_groups.get(key) if key is not None else None)

    def pre_enqueue(self, pod: Pod) -> Status | None:
        key, state = self._state(pod)
        if key is None:
            return None
        if state is None or not isinstance(state.group, PodGroup):
            # The pod cannot be scheduled until its PodGroup object is observed.
            return Status.unresolvable(waiting_for_group(key.name), plugin=NAME)
        group = state.group
        if group.min_count is None:
            return None
        if state.all_pods_count() < group.min_count:
            return Status.unresolvable(WAITING_FOR_PODS, plugin=NAME)
        return None

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        key, group_state = self._state(pod)
        if key is None:
            return None, 0.0
        if group_state is None or not isinstance(group_state.group, PodGroup):
            error = LookupError(f"failed to get podGroup {key}: podgroup.scheduling.k8s.io {key.name!r} not found")
            return Status.as_error(error, NAME), 0.0
        group = group_state.group
        if group.min_count is None:
            return None, 0.0
        if group_state.scheduled_pods_count() < group.min_count:
            # Members still queued may have waited for this one: let them try now.
            self.handle.activate([p.uid for p in group_state.unscheduled_pods()])
            return Status(Code.WAIT, (WAITING_AT_PERMIT,), plugin=NAME), PERMIT_TIMEOUT_SECONDS
        # The quorum is met: this member goes on, and so does every member waiting for it.
        for assumed in group_state.assumed_pods():
            self.handle.allow_waiting_pod(assumed.uid, NAME)
        return None, 0.0

    def placement_feasible(self, group: PodGroupState, progress: PlacementProgress) -> Status | None:
        """Whether the cycle can still place minCount members: Unschedulable ends it early, Wait goes on."""
        needed = min_count(group.group)
        if progress.remaining + progress.scheduled < needed:
            return Status.unschedulable(
                f"minCount ({needed}) cannot be satisfied: {progress.scheduled} scheduled, "
                f"{progress.remaining} remaining",
                plugin=NAME,
            )
        if progress.scheduled < needed:
            message = (
                f"minCount ({needed}) is not yet satisfied: {progress.scheduled} scheduled, "
                f"{progress.remaining} remaining"
            )
            return Status(Code.WAIT, (message,), plugin=NAME)
        return None


def new(args: Mapping[str, Any], handle: Handle) -> GangScheduling:
    return GangScheduling(handle)
