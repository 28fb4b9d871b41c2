"""PodGroup (scheduling.k8s.io/v1beta1) and a pod's membership, as compact immutable views.

Owns: reading `spec.schedulingGroup.podGroupName` of a pod and the fields of a PodGroup the
scheduler reads (gang minCount, priority, topology constraints, status conditions), and the
metav1.Condition rules kube's `apimeta.SetStatusCondition` applies. A PodGroup that cannot be
interpreted raises InvalidObject naming the object and the field. Pure data: never touches the
API, the cache or the queue.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.objects import InvalidObject, Pod, Raw

API_VERSION = "scheduling.k8s.io/v1beta1"
KIND = "PodGroup"
# The PodGroup condition kube-scheduler writes, and its reasons (scheduling/v1beta1 types.go).
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


def pod_group_name(pod: Pod) -> str | None:
    """The standalone PodGroup the pod belongs to (`spec.schedulingGroup.podGroupName`), if any."""
    group = pod.spec.get("schedulingGroup")
    if not isinstance(group, Mapping):
        return None
    name = group.get("podGroupName")
    return name if isinstance(name, str) and name else None


@dataclass(frozen=True, slots=True)
class PodGroup:
    uid: str
    namespace: str
    name: str
    generation: int
    resource_version: str
    # spec.schedulingPolicy.gang.minCount; None for the basic policy (no gang).
    min_count: int | None
    # spec.priority as the apiserver resolved it (0 when unset, as kube's util.PodGroupPriority).
    priority: int
    # spec.schedulingConstraints.topology[].key
    topology_keys: tuple[str, ...]
    conditions: tuple[Mapping[str, Any], ...]
    raw: Raw = field(repr=False, compare=False, hash=False)
    # spec.disruptionMode.all set: preemption takes the group's scheduled pods together or not at all.
    disruption_all: bool = False
    # spec.preemptionPolicy (PodGroupPreemptionPolicy); None when unset.
    preemption_policy: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    kind = KIND
    api_version = API_VERSION

    @property
    def is_gang(self) -> bool:
        return self.min_count is not None

    def condition(self, condition_type: str) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == condition_type), None)

    @classmethod
    def from_raw(cls, raw: Raw) -> PodGroup:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        where = f"podgroup {meta.get('namespace', '')}/{meta.get('name', '')}"
        policy = spec.get("schedulingPolicy") or {}
        if not isinstance(policy, Mapping):
            raise InvalidObject(f"{where}: spec.schedulingPolicy: {policy!r} is not an object")
        min_count = None
        gang = policy.get("gang")
        if gang is not None:
            value = gang.get("minCount") if isinstance(gang, Mapping) else None
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidObject(
                    f"{where}: spec.schedulingPolicy.gang.minCount: {value!r} is not a positive integer"
                )
            min_count = value
        priority = spec.get("priority")
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            raise InvalidObject(f"{where}: spec.priority: {priority!r} is not an integer")
        constraints = spec.get("schedulingConstraints") or {}
        topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
        keys = tuple(str(t.get("key", "")) for t in topology or () if isinstance(t, Mapping))
        disruption = spec.get("disruptionMode") or {}
        if not isinstance(disruption, Mapping):
            raise InvalidObject(f"{where}: spec.disruptionMode: {disruption!r} is not an object")
        preemption_policy = spec.get("preemptionPolicy")
        if preemption_policy is not None and preemption_policy not in ("PreemptLowerPriority", "Never"):
            raise InvalidObject(
                f"{where}: spec.preemptionPolicy: {preemption_policy!r}: "
                'supported values: "Never", "PreemptLowerPriority"'
            )
        generation = meta.get("generation") or 0
        return cls(
            uid=meta.get("uid", ""),
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            generation=generation if isinstance(generation, int) else 0,
            resource_version=meta.get("resourceVersion", ""),
            min_count=min_count,
            priority=priority or 0,
            topology_keys=keys,
            conditions=tuple(c for c in (raw.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)),
            raw=raw,
            disruption_all=disruption.get("all") is not None,
            preemption_policy=preemption_policy,
        )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_status_condition(
    conditions: Sequence[Mapping[str, Any]], new: Mapping[str, Any], now: str | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """apimeta.SetStatusCondition: the list with `new` merged in by type, and whether it changed.

    lastTransitionTime moves only when the status flips (or the condition is new); reason, message
    and observedGeneration are replaced.
    """
    result = [dict(c) for c in conditions]
    for existing in result:
        if existing.get("type") != new.get("type"):
            continue
        changed = False
        if existing.get("status") != new.get("status"):
            existing["status"] = new.get("status")
            existing["lastTransitionTime"] = new.get("lastTransitionTime") or now or _now()
            changed = True
        for key in ("reason", "message", "observedGeneration"):
            if existing.get(key) != new.get(key):
                existing[key] = new.get(key)
                changed = True
        return result, changed
    added = dict(new)
    added.setdefault("lastTransitionTime", now or _now())
    result.append(added)
    return result, True
