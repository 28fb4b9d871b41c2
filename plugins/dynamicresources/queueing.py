"""DynamicResources' cluster events and queueing hints (kube's EventsToRegister,
isSchedulableAfterClaimChange and isSchedulableAfterTargetPodUpdate). Reads the claim tracker;
never writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from plugins.dynamicresources.claims import ClaimProblem, name_of, namespace_of, pod_resource_claims
from plugins.helper import api_hint
from scheduler.framework.dra import DraManager, allocation_of, uid_of
from scheduler.framework.types import (
    ActionType,
    ApiObject,
    ClusterEvent,
    ClusterEventWithHint,
    EventObject,
    EventResource,
    EventScope,
    QueueingHint,
)
from scheduler.model.objects import Node, Pod

ClaimKey = tuple[str, str]


def claim_keys_of_pod(pod: Pod) -> frozenset[ClaimKey]:
    """(namespace, name) of every claim the pod may refer to: its entries' resourceClaimName and the
    names its status gives a template's claims (none at all without entries). A pod's update that
    names a generated claim changes them."""
    entries = pod.spec.get("resourceClaims")
    if not entries:
        return frozenset()
    statuses = (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ()
    names = [entry.get("resourceClaimName") for entry in entries]
    names.extend(status.get("resourceClaimName") for status in statuses)
    return frozenset((pod.namespace, name) for name in names if isinstance(name, str))


def _may_name(pod: Pod, claim: ApiObject) -> bool:
    """Whether the pod may refer to the claim; pod_resource_claims decides the rest."""
    return (namespace_of(claim), name_of(claim)) in claim_keys_of_pod(pod)


def _claim_event_keys(old: EventObject | None, new: EventObject | None) -> frozenset[ClaimKey] | None:
    """The pods after_claim_change may queue, as the claim keys they must hold (None: any pod): a
    deleted claim queues everyone if it held devices and no one else; a deallocation queues anyone;
    any other change only the pods naming the claim."""
    if isinstance(old, Pod | Node) or isinstance(new, Pod | Node):
        return None  # api_hint queues every pod for these
    if new is None:
        return None if old is not None and allocation_of(old) is not None else frozenset()
    if old is not None and allocation_of(old) is not None and allocation_of(new) is None:
        return None
    return frozenset(((namespace_of(new), name_of(new)),))


# after_claim_change answers SKIP for every pod none of whose claim keys the event names.
CLAIM_EVENT_SCOPE = EventScope(claim_keys_of_pod, _claim_event_keys)


def events_to_register(dra: DraManager) -> Sequence[ClusterEventWithHint]:
    @api_hint
    def after_claim_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
        if new is None:
            # Deleted: only an allocated claim frees devices others may want.
            return QueueingHint.SKIP if old is None or allocation_of(old) is None else QueueingHint.QUEUE
        deallocated = old is not None and allocation_of(old) is not None and allocation_of(new) is None
        if not deallocated and not _may_name(pod, new):
            # Every later answer but one needs the claim among the pod's; that one is deallocation.
            return QueueingHint.SKIP
        try:
            claims = pod_resource_claims(pod, dra.claims)
        except ClaimProblem:
            return QueueingHint.SKIP
        if deallocated:
            return QueueingHint.QUEUE  # devices became free
        if not any(uid_of(claim) == uid_of(new) for claim in claims):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        # A change outside the status (the driver's finalizer) helps nobody.
        return QueueingHint.SKIP if (old.get("status") or {}) == (new.get("status") or {}) else QueueingHint.QUEUE

    def after_target_pod_update(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        if not isinstance(new, Pod):
            return QueueingHint.QUEUE
        try:
            pod_resource_claims(new, dra.claims)
        except ClaimProblem:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    return [
        # Topology of devices may depend on node labels; a new node may bring devices.
        ClusterEventWithHint(
            ClusterEvent(
                EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE
            )
        ),
        ClusterEventWithHint(
            ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
            after_claim_change,
            CLAIM_EVENT_SCOPE,
        ),
        ClusterEventWithHint(
            ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
            after_target_pod_update,
        ),
        ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
        ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE)),
    ]
