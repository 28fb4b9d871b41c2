"""Pod-group state: which pods belong to which group, and how far each member has come.

Owns, per group, its members split as kube-scheduler's cache splits them (backend/cache/
podgroupstate.go): unscheduled, assumed (reserved, waiting at Permit or binding) and assigned
(bound), plus the group's API object as its informer last saw it. Any gang plugin reads it
through the framework handle: scheduler-plugins' Coscheduling (PodGroup CRD
scheduling.x-k8s.io/v1alpha1, pods joined by a label) and upstream's GangScheduling
(scheduling.k8s.io PodGroups) alike. A plugin says how a pod names its group by registering a
membership rule for its API group; with no rule registered the store does nothing, so clusters
without gangs pay one attribute check per pod event.

Fed by the informers (every pod, whoever schedules it, and the group objects) and by the cache
(assume, forget). Must never call the API, parse a group object (that is the plugin's: the store
keeps raw JSON), or hold a pod whose group it cannot name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scheduler.model.objects import Pod

# A membership rule: the name of the pod's group within its namespace, or None (not a member).
MembershipRule = Callable[[Pod], str | None]


class GroupKey(NamedTuple):
    """A group: the API group that defines it, its namespace and name."""

    api: str
    namespace: str
    name: str

    def __str__(self) -> str:
        """The namespaced name, as kube and scheduler-plugins print a group."""
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class PodGroupState:
    """One group's members and object. Read-only outside this module."""

    # Every member the informers know, by uid (the latest version seen).
    all_pods: dict[str, Pod] = field(default_factory=dict)
    # Members neither assumed nor bound.
    unscheduled: set[str] = field(default_factory=set)
    # Members reserved by this scheduler and not yet seen bound, as assumed (with their node).
    assumed: dict[str, Pod] = field(default_factory=dict)
    # Members bound to a node.
    assigned: set[str] = field(default_factory=set)
    # The group's API object as JSON, or None while only pods name the group.
    api_object: Mapping[str, Any] | None = None

    @property
    def scheduled_count(self) -> int:
        """Members assumed or bound: what a gang's quorum is counted in."""
        return len(self.assumed) + len(self.assigned)

    def unscheduled_pods(self) -> list[Pod]:
        return [self.all_pods[uid] for uid in self.unscheduled]

    def _empty(self) -> bool:
        return not self.all_pods and self.api_object is None


class PodGroupStates:
    """Every group's state, keyed by GroupKey; the handle's `pod_groups`."""

    def __init__(self) -> None:
        self._rules: dict[str, MembershipRule] = {}
        self._groups: dict[GroupKey, PodGroupState] = {}
        # uid -> the groups the pod was last counted in (a label change moves it).
        self._memberships: dict[str, tuple[GroupKey, ...]] = {}

    # ---- what plugins register and read ---------------------------------------------------

    def track(self, api: str, rule: MembershipRule) -> None:
        """Count pods into `api`'s groups by `rule` (idempotent for the same rule: one per profile)."""
        known = self._rules.get(api)
        if known is not None and known is not rule:
            raise ValueError(f"pod groups of {api!r} are already tracked by another membership rule")
        self._rules[api] = rule

    def tracks(self, api: str) -> bool:
        return api in self._rules

    def key_of(self, api: str, pod: Pod) -> GroupKey | None:
        """The pod's group under `api`'s rule, or None."""
        rule = self._rules.get(api)
        name = rule(pod) if rule is not None else None
        return GroupKey(api, pod.namespace, name) if name else None

    def get(self, key: GroupKey) -> PodGroupState | None:
        return self._groups.get(key)

    # ---- pods (informers) ---------------------------------------------------------------

    def upsert_pod(self, pod: Pod) -> None:
        """A pod added or updated (bound or not); a member's binding moves it to assigned."""
        if not self._rules:
            return
        keys = tuple(GroupKey(api, pod.namespace, name) for api, rule in self._rules.items() if (name := rule(pod)))
        previous = self._memberships.get(pod.uid, ())
        for key in previous:
            if key not in keys:
                self._remove(key, pod.uid)
        if not keys:
            self._memberships.pop(pod.uid, None)
            return
        self._memberships[pod.uid] = keys
        for key in keys:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = PodGroupState()
            group.all_pods[pod.uid] = pod
            if pod.node_name:
                group.assigned.add(pod.uid)
                group.unscheduled.discard(pod.uid)
                group.assumed.pop(pod.uid, None)
            elif pod.uid not in group.assumed and pod.uid not in group.assigned:
                group.unscheduled.add(pod.uid)

    def delete_pod(self, uid: str) -> None:
        for key in self._memberships.pop(uid, ()):
            self._remove(key, uid)

    def _remove(self, key: GroupKey, uid: str) -> None:
        group = self._groups.get(key)
        if group is None:
            return
        group.all_pods.pop(uid, None)
        group.unscheduled.discard(uid)
        group.assumed.pop(uid, None)
        group.assigned.discard(uid)
        if group._empty():
            del self._groups[key]

    # ---- assume / forget (cache) --------------------------------------------------------

    def assume_pod(self, pod: Pod) -> None:
        """`pod` (with its node) is reserved; a member the informers no longer have is ignored."""
        for key in self._memberships.get(pod.uid, ()):
            group = self._groups[key]
            if pod.uid in group.assigned:
                continue
            group.unscheduled.discard(pod.uid)
            group.assumed[pod.uid] = pod

    def forget_pod(self, uid: str) -> None:
        """Undo assume_pod: back to unscheduled, unless the informers saw it bound meanwhile."""
        for key in self._memberships.get(uid, ()):
            group = self._groups[key]
            if group.assumed.pop(uid, None) is not None and uid not in group.assigned:
                group.unscheduled.add(uid)

    # ---- group objects (informers) ------------------------------------------------------

    def set_object(self, key: GroupKey, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Store the group's object; returns the one it replaces."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = PodGroupState()
        old, group.api_object = group.api_object, obj
        return old

    def remove_object(self, key: GroupKey) -> Mapping[str, Any] | None:
        group = self._groups.get(key)
        if group is None:
            return None
        old, group.api_object = group.api_object, None
        if group._empty():
            del self._groups[key]
        return old
