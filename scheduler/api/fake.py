"""In-memory ApiClient for unit tests: records every write and can be told to fail.

Like httpx's MockTransport, it ships with the package so that tests never mock.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.client import ApiError
from scheduler.model.objects import Pod


@dataclass
class RecordedEvent:
    pod: str
    type: str
    reason: str
    action: str
    message: str


@dataclass
class FakeApiClient:
    """Binds, patches and events land in plain dicts and lists."""

    bindings: dict[str, str] = field(default_factory=dict)  # pod key -> node
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod key -> PodScheduled
    nominations: dict[str, str] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    # pod key -> ApiError to raise from the next bind of that pod
    bind_errors: dict[str, ApiError] = field(default_factory=dict)
    evict_errors: dict[str, ApiError] = field(default_factory=dict)
    # PVs by name and PVCs by namespace/name as last written; errors raised by the next update
    persistent_volumes: dict[str, dict[str, Any]] = field(default_factory=dict)
    persistent_volume_claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    volume_update_errors: dict[str, ApiError] = field(default_factory=dict)
    closed: bool = False

    async def bind(self, pod: Pod, node_name: str) -> None:
        error = self.bind_errors.pop(pod.key, None)
        if error is not None:
            raise error
        if pod.key in self.bindings:
            raise ApiError(409, f"pod {pod.key} is already assigned to node {self.bindings[pod.key]}", "Conflict")
        self.bindings[pod.key] = node_name

    async def patch_pod_status(
        self, pod: Pod, condition: Mapping[str, Any] | None, nominated_node_name: str | None = None
    ) -> None:
        if condition is not None:
            self.conditions[pod.key] = dict(condition)
        if nominated_node_name is not None:
            self.nominations[pod.key] = nominated_node_name

    async def emit_event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        self.events.append(RecordedEvent(pod.key, event_type, reason, action, message))

    async def delete_pod(self, pod: Pod) -> None:
        self.deleted.append(pod.key)

    async def evict_pod(self, pod: Pod) -> None:
        error = self.evict_errors.pop(pod.key, None)
        if error is not None:
            raise error
        self.evicted.append(pod.key)

    def _update(self, written: dict[str, dict[str, Any]], key: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        error = self.volume_update_errors.pop(key, None)
        if error is not None:
            raise error
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        written[key] = stored
        return copy.deepcopy(stored)

    async def update_persistent_volume(self, pv: Mapping[str, Any]) -> Mapping[str, Any]:
        return self._update(self.persistent_volumes, (pv.get("metadata") or {}).get("name", ""), pv)

    async def update_persistent_volume_claim(self, pvc: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = pvc.get("metadata") or {}
        return self._update(self.persistent_volume_claims, f"{meta.get('namespace', '')}/{meta.get('name', '')}", pvc)

    async def close(self) -> None:
        self.closed = True
