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
    QueueingHint,
)
from scheduler.model.objects import Pod


def _may_name(pod: Pod, claim: ApiObject) -> bool:
    """Whether the pod may refer to the claim: same namespace and one of its entries names it (by
    resourceClaimName, or the name its status gives a template's claim). A cheap test run for every
    waiting pod on every claim event; pod_resource_claims decides the rest."""
    if pod.namespace != namespace_of(claim):
        return False
    entries = pod.spec.get("resourceClaims")
    if not entries:
        return False
    name = name_of(claim)
    if any(entry.get("resourceClaimName") == name for entry in entries):
        return True
    statuses = (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ()
    return any(status.get("resourceClaimName") == name for status in statuses)


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
        ),
        ClusterEventWithHint(
            ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
            after_target_pod_update,
        ),
        ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
        ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE)),
    ]
