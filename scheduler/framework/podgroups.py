"""Pod-group state: the group machinery every gang implementation shares (kube's podgroupstate.go).

Owns, per group key, the group's API object (whatever the group kind is) and its member pods split
as kube-scheduler splits them: unscheduled (neither assumed nor bound), assumed (reserved by a
scheduling cycle, waiting at Permit or binding) and assigned (bound). Counts come from here:
GangScheduling's PreEnqueue (all members), its Permit (assumed + assigned) and the pod-group
cycle's feasibility checks all read one place.

How a pod maps to a group is pluggable (`add_membership`): upstream's `spec.schedulingGroup`
(GenericWorkload) registers one resolver; scheduler-plugins' Coscheduling (label
`scheduling.x-k8s.io/pod-group`) can register another with its own `GroupKey.api`, and reuse the
counts, the Permit wait (the framework's waiting pods) and the pod-group cycle's all-or-nothing
revert without a second copy.

Fed by the cache (assigned and assumed pods: assume, forget, informer confirmations) and by the
informers (unscheduled members, group objects). Plugins read it through the framework handle
(`handle.pod_groups`). Never calls the API and never decides placement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from scheduler.model.objects import Pod
from scheduler.model.podgroups import API_VERSION, KIND, pod_group_name

# GroupKey.api of upstream's PodGroups (pods join through spec.schedulingGroup.podGroupName).
POD_GROUP_API = f"{API_VERSION}/{KIND}"
# GroupKey.api of scheduler-plugins' PodGroup CRD (pods join by a label; Coscheduling's membership).
SCHEDULER_PLUGINS_POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1/PodGroup"


class GroupKey(NamedTuple):
    """A group's identity: its API kind (e.g. scheduling.k8s.io/v1beta1 PodGroup), namespace, name."""

    api: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


Membership = Callable[[Pod], GroupKey | None]


def scheduling_group_key(pod: Pod) -> GroupKey | None:
    """Upstream's membership (GenericWorkload): the PodGroup named by spec.schedulingGroup."""
    name = pod_group_name(pod)
    return GroupKey(POD_GROUP_API, pod.namespace, name) if name is not None else None


@dataclass
class PodGroupState:
    """One group's members and object. Pods are kept by UID; each is in exactly one of
    unscheduled / assumed / assigned."""

    key: GroupKey
    group: object | None = None
    pods: dict[str, Pod] = field(default_factory=dict)
    unscheduled: set[str] = field(default_factory=set)
    assumed: dict[str, Pod] = field(default_factory=dict)
    assigned: set[str] = field(default_factory=set)
    # Bumped on every change (a cheap "did anything move" check for callers that keep results).
    generation: int = 0
    # UID of the PodGroup object this scheduler has marked PodGroupInitiallyScheduled=True: the
    # informer's copy may not show that write yet when the next cycle asks whether it may regress.
    scheduled_uid: str = ""

    def all_pods_count(self) -> int:
        return len(self.pods)

    def scheduled_pods_count(self) -> int:
        """Members assumed by a cycle or bound: what a gang's quorum at Permit counts."""
        return len(self.assumed) + len(self.assigned)

    # Lists follow the order members were first seen (deterministic, unlike iterating the sets).

    def unscheduled_pods(self) -> list[Pod]:
        return [pod for uid, pod in self.pods.items() if uid in self.unscheduled]

    def assumed_pods(self) -> list[Pod]:
        return list(self.assumed.values())

    def scheduled_pods(self) -> list[Pod]:
        return [pod for uid, pod in self.pods.items() if uid in self.assigned] + list(self.assumed.values())

    def empty(self) -> bool:
        return not self.pods and self.group is None

    def _add(self, pod: Pod) -> None:
        self.generation += 1
        self.pods[pod.uid] = pod
        if pod.node_name:
            self.assigned.add(pod.uid)
            self.unscheduled.discard(pod.uid)
            self.assumed.pop(pod.uid, None)
        elif pod.uid not in self.assumed:
            self.unscheduled.add(pod.uid)

    def _remove(self, uid: str) -> None:
        self.generation += 1
        self.pods.pop(uid, None)
        self.unscheduled.discard(uid)
        self.assumed.pop(uid, None)
        self.assigned.discard(uid)

    def _assume(self, pod: Pod) -> None:
        stored = self.pods.get(pod.uid)
        if stored is None:
            return  # the pod was deleted while being scheduled
        self.generation += 1
        if stored.node_name:
            self.assigned.add(pod.uid)
        else:
            self.assumed[pod.uid] = pod
        self.unscheduled.discard(pod.uid)

    def _forget(self, uid: str) -> None:
        stored = self.pods.get(uid)
        if stored is None:
            return
        self.generation += 1
        self.assumed.pop(uid, None)
        if stored.node_name:
            self.assigned.add(uid)
        else:
            self.unscheduled.add(uid)


class PodGroupStates:
    """Every known group's state, keyed by GroupKey; a group exists while it has a member or an object."""

    def __init__(self) -> None:
        self._states: dict[GroupKey, PodGroupState] = {}
        self._membership: list[Membership] = []
        # uid -> the group each member was last counted in: a membership read from labels can change
        # (Coscheduling's), and the member must leave the group it was counted in, not the new one.
        self._member_of: dict[str, GroupKey] = {}

    def add_membership(self, resolver: Membership) -> None:
        """Register how pods name their group (first resolver that answers wins); registering the same
        resolver again (one plugin instance per profile) changes nothing."""
        if resolver not in self._membership:
            self._membership.append(resolver)

    def key_of(self, pod: Pod) -> GroupKey | None:
        for resolver in self._membership:
            key = resolver(pod)
            if key is not None:
                return key
        return None

    def get(self, key: GroupKey) -> PodGroupState | None:
        return self._states.get(key)

    def __iter__(self) -> Iterator[PodGroupState]:
        return iter(list(self._states.values()))

    def _state(self, key: GroupKey) -> PodGroupState:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = PodGroupState(key)
        return state

    def _drop_if_empty(self, state: PodGroupState) -> None:
        if state.empty():
            self._states.pop(state.key, None)

    # ---- members (cache and informers) -----------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """A member appeared or changed (bound members count as assigned); a pod whose group changed
        moves, one that left every group is dropped."""
        key = self.key_of(pod)
        previous = self._member_of.get(pod.uid)
        if previous is not None and previous != key:
            self.remove_pod(pod)
        if key is not None:
            self._member_of[pod.uid] = key
            self._state(key)._add(pod)

    def _counted_in(self, pod: Pod) -> PodGroupState | None:
        key = self._member_of.get(pod.uid)
        return self._states.get(key) if key is not None else None

    def remove_pod(self, pod: Pod) -> None:
        key = self._member_of.pop(pod.uid, None)
        state = self._states.get(key) if key is not None else None
        if state is not None:
            state._remove(pod.uid)
            self._drop_if_empty(state)

    def assume_pod(self, pod: Pod) -> None:
        state = self._counted_in(pod)
        if state is not None:
            state._assume(pod)

    def forget_pod(self, pod: Pod) -> None:
        state = self._counted_in(pod)
        if state is not None:
            state._forget(pod.uid)

    # ---- group objects (informers) -----------------------------------------------------------

    def set_group(self, key: GroupKey, group: object) -> None:
        state = self._state(key)
        state.generation += 1
        state.group = group

    def remove_group(self, key: GroupKey) -> None:
        state = self._states.get(key)
        if state is not None:
            state.generation += 1
            state.group = None
            self._drop_if_empty(state)
