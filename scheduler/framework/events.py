"""Cluster events the scheduler reacts to, and how an update is told apart (kube's framework/events.go).

An update of a node or a pod becomes the fine-grained events it amounts to (UpdateNodeLabel,
UpdateNodeTaint, UpdatePodScaleDown, …) so that a plugin's queueing hints run only for the changes
it registered. Pure functions of old and new model structs: never touches the queue or the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.framework.types import ActionType, ClusterEvent, EventResource
from scheduler.model.objects import Node, Pod, Resource

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE)
ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD)
ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)
UNSCHEDULED_POD_ADD = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD)
UNSCHEDULED_POD_UPDATE = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE)
POD_GROUP_ADD = ClusterEvent(EventResource.POD_GROUP, ActionType.ADD)
POD_GROUP_UPDATE = ClusterEvent(EventResource.POD_GROUP, ActionType.UPDATE)
POD_GROUP_DELETE = ClusterEvent(EventResource.POD_GROUP, ActionType.DELETE)

# Special labels of scheduler_queue_incoming_pods_total (not cluster events).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"
UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")


def _meta(raw: Mapping[str, Any], field: str) -> Any:
    return (raw.get("metadata") or {}).get(field) or {}


def _spec(raw: Mapping[str, Any], field: str) -> Any:
    return (raw.get("spec") or {}).get(field)


def _status(raw: Mapping[str, Any], field: str) -> Any:
    return (raw.get("status") or {}).get(field)


# ---- nodes ------------------------------------------------------------------------------------


def _node_unschedulable_lifted(new: Node, old: Node) -> bool:
    return old.unschedulable and not new.unschedulable


def _node_allocatable(new: Node, old: Node) -> bool:
    return new.allocatable != old.allocatable


def _node_labels(new: Node, old: Node) -> bool:
    return dict(new.labels) != dict(old.labels)


def _node_taints(new: Node, old: Node) -> bool:
    # Every field of every taint counts (timeAdded too), as kube's semantic DeepEqual does.
    return (_spec(new.raw, "taints") or []) != (_spec(old.raw, "taints") or [])


def _node_conditions(new: Node, old: Node) -> bool:
    def statuses(node: Node) -> dict[str, str]:
        return {c.get("type", ""): c.get("status", "") for c in _status(node.raw, "conditions") or ()}

    return statuses(new) != statuses(old)


def _node_annotations(new: Node, old: Node) -> bool:
    return dict(_meta(new.raw, "annotations")) != dict(_meta(old.raw, "annotations"))


def _node_preemption_policy(new: Node, old: Node) -> bool:
    return bool(_spec(new.raw, "podPreemptionPolicy") != _spec(old.raw, "podPreemptionPolicy"))


def _node_declared_features(new: Node, old: Node) -> bool:
    return (_status(new.raw, "declaredFeatures") or []) != (_status(old.raw, "declaredFeatures") or [])


_NODE_CHANGES: tuple[tuple[Callable[[Node, Node], bool], ActionType], ...] = (
    (_node_unschedulable_lifted, ActionType.UPDATE_NODE_TAINT),
    (_node_allocatable, ActionType.UPDATE_NODE_ALLOCATABLE),
    (_node_labels, ActionType.UPDATE_NODE_LABEL),
    (_node_taints, ActionType.UPDATE_NODE_TAINT),
    (_node_conditions, ActionType.UPDATE_NODE_CONDITION),
    (_node_annotations, ActionType.UPDATE_NODE_ANNOTATION),
    (_node_preemption_policy, ActionType.UPDATE_NODE_PREEMPTION_POLICY),
    (_node_declared_features, ActionType.UPDATE_NODE_DECLARED_FEATURE),
)


def node_scheduling_properties_change(new: Node, old: Node) -> list[ClusterEvent]:
    """The Node/UpdateNodeXYZ events an update amounts to, in kube's order; empty for a heartbeat."""
    return [ClusterEvent(EventResource.NODE, action) for changed, action in _NODE_CHANGES if changed(new, old)]


# ---- pods -------------------------------------------------------------------------------------


def _amounts(resource: Resource) -> dict[str, int]:
    amounts = {"cpu": resource.milli_cpu, "memory": resource.memory, "ephemeral-storage": resource.ephemeral_storage}
    amounts.update(resource.scalar)
    return {name: value for name, value in amounts.items() if value}


def _pod_labels(new: Pod, old: Pod) -> bool:
    return dict(new.labels) != dict(old.labels)


def _pod_scale_down(new: Pod, old: Pod) -> bool:
    after = _amounts(new.requests)
    return any(after.get(name, 0) < amount for name, amount in _amounts(old.requests).items())


def _pod_scale_up(new: Pod, old: Pod) -> bool:
    before = _amounts(old.requests)
    return any(amount > before.get(name, 0) for name, amount in _amounts(new.requests).items())


def _pod_gates_eliminated(new: Pod, old: Pod) -> bool:
    return not new.scheduling_gates and bool(old.scheduling_gates)


def _pod_tolerations(new: Pod, old: Pod) -> bool:
    # The API only lets tolerations be added, so a different count is every change there is.
    return len(new.spec.get("tolerations") or ()) != len(old.spec.get("tolerations") or ())


def _pod_generated_claims(new: Pod, old: Pod) -> bool:
    return any(
        (_status(new.raw, field) or None) != (_status(old.raw, field) or None)
        for field in ("resourceClaimStatuses", "extendedResourceClaimStatus")
    )


_POD_CHANGES: tuple[tuple[Callable[[Pod, Pod], bool], ActionType], ...] = (
    (_pod_labels, ActionType.UPDATE_POD_LABEL),
    (_pod_scale_down, ActionType.UPDATE_POD_SCALE_DOWN),
    (_pod_scale_up, ActionType.UPDATE_POD_SCALE_UP),
    (_pod_gates_eliminated, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
    (_pod_tolerations, ActionType.UPDATE_POD_TOLERATION),
    (_pod_generated_claims, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
)


def pod_scheduling_properties_change(new: Pod, old: Pod, is_target: bool) -> list[ClusterEvent]:
    """The UpdatePodXYZ events of a pod update; a general Update when none applies.

    The resource is AssignedPod for a bound pod, TargetPod for the updated pod itself as seen by
    the plugins that rejected it, UnscheduledPod otherwise.
    """
    if new.node_name:
        resource = EventResource.ASSIGNED_POD
    elif is_target:
        resource = EventResource.TARGET_POD
    else:
        resource = EventResource.UNSCHEDULED_POD
    events = [ClusterEvent(resource, action) for changed, action in _POD_CHANGES if changed(new, old)]
    return events or [ClusterEvent(resource, ActionType.UPDATE)]
