"""In-memory ApiClient for unit tests: records every write and can be told to fail.

Like httpx's MockTransport, it ships with the package so that tests never mock.
"""

from __future__ import annotations

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
    # pod key -> condition type -> condition, for every other type (DisruptionTarget)
    other_conditions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    nominations: dict[str, str] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    # pod key -> ApiError to raise from the next bind of that pod
    bind_errors: dict[str, ApiError] = field(default_factory=dict)
    evict_errors: dict[str, ApiError] = field(default_factory=dict)
    delete_errors: dict[str, ApiError] = field(default_factory=dict)
    status_errors: dict[str, ApiError] = field(default_factory=dict)
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
        error = self.status_errors.pop(pod.key, None)
        if error is not None:
            raise error
        if condition is not None and condition.get("type") == "PodScheduled":
            self.conditions[pod.key] = dict(condition)
        elif condition is not None:
            self.other_conditions.setdefault(pod.key, {})[condition.get("type", "")] = dict(condition)
        if nominated_node_name is not None:
            self.nominations[pod.key] = nominated_node_name

    async def emit_event(self, pod: Pod, event_type: str, reason: str, action: str, message: str) -> None:
        self.events.append(RecordedEvent(pod.key, event_type, reason, action, message))

    async def delete_pod(self, pod: Pod) -> None:
        error = self.delete_errors.pop(pod.key, None)
        if error is not None:
            raise error
        self.deleted.append(pod.key)

    async def evict_pod(self, pod: Pod) -> None:
        error = self.evict_errors.pop(pod.key, None)
        if error is not None:
            raise error
        self.evicted.append(pod.key)

    async def close(self) -> None:
        self.closed = True
