"""The ApiClient protocol: every write the scheduler makes, and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from scheduler.model.objects import Pod


class ApiError(Exception):
    """An API call that failed; `status` is the HTTP status (0 for transport errors)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


class ApiClient(Protocol):
    async def bind(self, pod: Pod, node_name: str) -> None:
        """POST the Binding subresource; raises ApiError (409 when already bound)."""
        ...

    async def patch_pod_status(
        self, pod: Pod, condition: Mapping[str, Any] | None, nominated_node_name: str | None = None
    ) -> None:
        """Merge a PodScheduled condition (and nominatedNodeName) into the pod's status."""
        ...

    async def emit_event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        """Record an Event about the pod (Normal/Warning)."""
        ...

    async def delete_pod(self, pod: Pod) -> None:
        """Delete the pod (preconditioned on its UID)."""
        ...

    async def evict_pod(self, pod: Pod) -> None:
        """Create an Eviction for the pod; raises ApiError 429 when a PDB forbids it."""
        ...

    async def update_persistent_volume(self, pv: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the PV (VolumeBinding's claimRef); returns the stored object; 409 on a stale one."""
        ...

    async def update_persistent_volume_claim(self, pvc: Mapping[str, Any]) -> Mapping[str, Any]:
        """PUT the PVC (VolumeBinding's selected-node annotation); returns the stored object."""
        ...

    async def close(self) -> None: ...
