"""The client protocols: ApiClient (every write the scheduler makes, and nothing else) and
ListWatchClient (the reads of a watch Reflector)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

from scheduler.model.objects import Pod

# metav1.StatusCause reason the eviction subresource gives when a PodDisruptionBudget refuses.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


class ApiError(Exception):
    """An API call that failed; `status` is the HTTP status (0 for transport errors)."""

    def __init__(
        self,
        status: int,
        message: str,
        reason: str = "",
        retry_after: float | None = None,
        causes: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After), if it did
        self.causes = tuple(causes)  # the Status's details.causes as (reason, message)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def too_many_requests(self) -> bool:
        """429: for an eviction, a PodDisruptionBudget does not allow it (now)."""
        return self.status == 429

    @property
    def disruption_budget(self) -> str | None:
        """For a refused eviction, the apiserver's DisruptionBudget cause (its message names the PDB)."""
        return next((message for reason, message in self.causes if reason == DISRUPTION_BUDGET_CAUSE), None)


class ApiClient(Protocol):
    async def bind(self, pod: Pod, node_name: str) -> None:
        """POST the Binding subresource; raises ApiError (409 when already bound)."""
        ...

    async def patch_pod_status(
        self,
        pod: Pod,
        condition: Mapping[str, Any] | None,
        nominated_node_name: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Mapping[str, Any] | None:
        """Strategic-merge a condition (PodScheduled, DisruptionTarget) and/or nominatedNodeName ("" clears it) into the
        pod's status, preconditioned on its UID and, when given, on `resource_version` (409 Conflict
        when the pod changed since: a stale report never overwrites a later bind). Returns the pod
        as the apiserver wrote it (None when there was nothing to send)."""
        ...

    async def patch_pod_group_status(self, namespace: str, name: str, uid: str, condition: Mapping[str, Any]) -> None:
        """Strategic-merge one condition (merged by type) into a scheduling.k8s.io/v1beta1 PodGroup's
        status, preconditioned on its UID (a PodGroup re-created under the name is left alone)."""
        ...

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        """POST an events.k8s.io/v1 Event; raises ApiError (409 AlreadyExists for a taken name)."""
        ...

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Strategic-merge PATCH of an events.k8s.io/v1 Event (a series' count); 404 when it is gone."""
        ...

    async def delete_pod(self, pod: Pod) -> None:
        """Delete the pod (preconditioned on its UID)."""
        ...

    async def evict_pod(self, pod: Pod) -> None:
        """Create an Eviction for the pod, once: no retry of its own, the caller bounds how long it
        keeps trying. A PDB's refusal is ApiError 429 (or 403) with a DisruptionBudget cause."""
        ...

    async def update_persistent_volume(self, pv: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the PV (VolumeBinding's claimRef); returns the stored object; 409 on a stale one."""
        ...

    async def update_persistent_volume_claim(self, pvc: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the PVC (VolumeBinding's selected-node annotation); returns the stored object."""
        ...

    async def get_resource_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        """GET a resource.k8s.io/v1 ResourceClaim (DynamicResources re-reads one after a conflict)."""
        ...

    async def update_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the claim (its finalizers); returns the stored object; 409 on a stale resourceVersion."""
        ...

    async def update_resource_claim_status(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the claim's status subresource (allocation, reservedFor); 409 on a stale one."""
        ...

    async def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """Strategic-merge PATCH of the claim's status (remove one reservedFor entry by uid)."""
        ...

    async def create_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST a claim (the special claim of extended resources backed by DRA); the stored object."""
        ...

    async def delete_resource_claim(self, claim: Mapping[str, Any]) -> None:
        """Delete the claim, preconditioned on its UID."""
        ...

    async def patch_pod_status_fields(self, pod: Pod, status: Mapping[str, Any]) -> Mapping[str, Any]:
        """Strategic-merge other fields into the pod's status (extendedResourceClaimStatus),
        preconditioned on its UID; returns the pod as written."""
        ...

    async def close(self) -> None: ...


class ListWatchClient(Protocol):
    """What a Reflector reads through: HttpApiClient, or the in-memory fake in unit tests."""

    async def request(self, method: str, path: str) -> Any:
        """One request; the decoded JSON answer. Raises ApiError."""
        ...

    def stream(self, method: str, path: str, read_timeout: float | None = None) -> AsyncGenerator[bytes, None]:
        """The answer's body in chunks as they arrive (a watch). Raises ApiError."""
        ...
