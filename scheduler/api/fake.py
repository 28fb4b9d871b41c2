"""In-memory ApiClient for unit tests: records every write and can be told to fail.

Like httpx's MockTransport, it ships with the package so that tests never mock. Failures are
injected per call: `bind_errors` / `evict_errors` (one error for the next call on that pod),
`evict_refusals` (every eviction of that pod fails with it, as under a budget that allows none),
`patch_errors` (errors for the next status patches of that pod, in order), `event_errors` (errors
for the next event writes, in order) and `refuse_events` (every event write fails with it, as when
RBAC denies events). `event_gate` / `patch_gate`, when set, hold those writes until the test opens
them (a slow apiserver).

It also serves a Reflector's reads: `collections` (path -> objects) are listed in pages as the
apiserver does (`limit`, an opaque `continue` token; `continue_errors` fail the next continuation
requests, e.g. a 410 for an expired token), and each watch request streams the next batch of
`watch_events` queued for the path, then stays open and silent. `reads` records every read's path.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler import codec
from scheduler.api.client import ApiError
from scheduler.model.objects import Pod

# Query parameters of a list or watch request; what is left of the path names the collection.
_READ_PARAMS = frozenset({"limit", "continue", "watch", "allowWatchBookmarks", "timeoutSeconds", "resourceVersion"})


def _split_read(path: str) -> tuple[str, dict[str, str]]:
    """(collection path with its own query, e.g. a field selector; the list/watch parameters)."""
    base, _, query = path.partition("?")
    kept, params = [], {}
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        if name in _READ_PARAMS:
            params[name] = urllib.parse.unquote(value)
        else:
            kept.append(part)
    return base + ("?" + "&".join(kept) if kept else ""), params


@dataclass
class RecordedEvent:
    pod: str
    type: str
    reason: str
    action: str
    message: str


@dataclass
class StatusPatch:
    pod: str
    condition: dict[str, Any] | None
    nominated_node_name: str | None
    resource_version: str | None


@dataclass
class FakeApiClient:
    """Binds, patches and events land in plain dicts and lists."""

    bindings: dict[str, str] = field(default_factory=dict)  # pod key -> node
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod key -> PodScheduled
    nominations: dict[str, str] = field(default_factory=dict)  # pod key -> node ("" once cleared)
    status_patches: list[StatusPatch] = field(default_factory=list)  # every accepted status patch
    writes: list[tuple[str, str]] = field(default_factory=list)  # ("bind" | "status", pod key), in order
    events: list[RecordedEvent] = field(default_factory=list)  # every created Event
    stored_events: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/name" -> Event (with series)
    event_writes: int = 0  # creates and patches that reached the fake (accepted or not)
    # pod key -> condition type -> condition, for every other type (DisruptionTarget)
    other_conditions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # PodGroup "ns/name" -> condition type -> the condition as last patched
    pod_group_conditions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    pod_group_errors: dict[str, ApiError] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    # pod key -> ApiError to raise from the next bind of that pod
    bind_errors: dict[str, ApiError] = field(default_factory=dict)
    evict_errors: dict[str, ApiError] = field(default_factory=dict)
    evict_refusals: dict[str, ApiError] = field(default_factory=dict)
    eviction_attempts: list[str] = field(default_factory=list)  # every evict_pod call, refused or not
    patch_errors: dict[str, list[ApiError]] = field(default_factory=dict)
    event_errors: list[ApiError] = field(default_factory=list)
    refuse_events: ApiError | None = None
    event_gate: asyncio.Event | None = None
    patch_gate: asyncio.Event | None = None
    delete_errors: dict[str, ApiError] = field(default_factory=dict)
    status_errors: dict[str, ApiError] = field(default_factory=dict)
    # PVs by name and PVCs by namespace/name as last written; errors raised by the next update
    persistent_volumes: dict[str, dict[str, Any]] = field(default_factory=dict)
    persistent_volume_claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    volume_update_errors: dict[str, ApiError] = field(default_factory=dict)
    # ResourceClaims by namespace/name as stored (tests put the claims the informers saw here too);
    # claim_errors: the next claim write of that key raises it; claim_writes: ("update" | "status"
    # | "patch" | "create" | "delete", key) in order; pod_status_fields: the last fields patched per pod
    resource_claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    claim_errors: dict[str, ApiError] = field(default_factory=dict)
    claim_writes: list[tuple[str, str]] = field(default_factory=list)
    pod_status_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    # collection path -> its objects, listed at `list_resource_version`
    collections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    list_resource_version: str = "1"
    continue_errors: list[ApiError] = field(default_factory=list)
    # collection path -> the events of each next watch request on it, in order
    watch_events: dict[str, list[list[dict[str, Any]]]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    closed: bool = False

    async def bind(self, pod: Pod, node_name: str) -> None:
        error = self.bind_errors.pop(pod.key, None)
        if error is not None:
            raise error
        if pod.key in self.bindings:
            raise ApiError(409, f"pod {pod.key} is already assigned to node {self.bindings[pod.key]}", "Conflict")
        self.bindings[pod.key] = node_name
        self.writes.append(("bind", pod.key))

    async def patch_pod_status(
        self,
        pod: Pod,
        condition: Mapping[str, Any] | None,
        nominated_node_name: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Mapping[str, Any] | None:
        if self.patch_gate is not None:
            await self.patch_gate.wait()
        errors = self.patch_errors.get(pod.key)
        if errors:
            raise errors.pop(0)
        error = self.status_errors.pop(pod.key, None)
        if error is not None:
            raise error
        recorded = dict(condition) if condition is not None else None
        self.status_patches.append(StatusPatch(pod.key, recorded, nominated_node_name, resource_version))
        self.writes.append(("status", pod.key))
        status = dict(pod.raw.get("status") or {})
        if condition is not None and condition.get("type") == "PodScheduled":
            self.conditions[pod.key] = dict(condition)
        elif condition is not None:
            self.other_conditions.setdefault(pod.key, {})[condition.get("type", "")] = dict(condition)
        if condition is not None:
            others = [c for c in status.get("conditions") or () if c.get("type") != condition.get("type")]
            status["conditions"] = [*others, dict(condition)]
        if nominated_node_name is not None:
            self.nominations[pod.key] = nominated_node_name
            status["nominatedNodeName"] = nominated_node_name or None
        # The pod as an apiserver would return it: the status merged, a new resourceVersion.
        metadata = dict(pod.raw.get("metadata") or {})
        metadata["resourceVersion"] = f"{pod.resource_version}+status"
        return {**pod.raw, "metadata": metadata, "status": status}

    async def patch_pod_group_status(self, namespace: str, name: str, uid: str, condition: Mapping[str, Any]) -> None:
        key = f"{namespace}/{name}"
        error = self.pod_group_errors.pop(key, None)
        if error is not None:
            raise error
        self.pod_group_conditions.setdefault(key, {})[condition.get("type", "")] = dict(condition)
        self.writes.append(("podgroup-status", key))

    async def _event_write(self) -> None:
        self.event_writes += 1
        if self.event_gate is not None:
            await self.event_gate.wait()
        if self.event_errors:
            raise self.event_errors.pop(0)
        if self.refuse_events is not None:
            raise self.refuse_events

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        await self._event_write()
        key = f"{namespace}/{event['metadata']['name']}"
        if key in self.stored_events:
            raise ApiError(409, f'events.events.k8s.io "{key}" already exists', "AlreadyExists")
        self.stored_events[key] = dict(event)
        regarding = event["regarding"]
        self.events.append(
            RecordedEvent(
                f"{regarding['namespace']}/{regarding['name']}",
                event["type"],
                event["reason"],
                event["action"],
                event["note"],
            )
        )

    def failed_scheduling(self) -> list[str]:
        """The messages of every FailedScheduling Event created, in order."""
        return [e.message for e in self.events if e.reason == "FailedScheduling"]

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        await self._event_write()
        key = f"{namespace}/{name}"
        if key not in self.stored_events:
            raise ApiError(404, f'events.events.k8s.io "{key}" not found', "NotFound")
        self.stored_events[key] = {**self.stored_events[key], **patch}

    async def delete_pod(self, pod: Pod) -> None:
        error = self.delete_errors.pop(pod.key, None)
        if error is not None:
            raise error
        self.deleted.append(pod.key)

    async def evict_pod(self, pod: Pod) -> None:
        self.eviction_attempts.append(pod.key)
        error = self.evict_errors.pop(pod.key, None) or self.evict_refusals.get(pod.key)
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

    # ---- ResourceClaims: an apiserver's optimistic concurrency in a dict ----------------------

    def _claim_write(self, verb: str, key: str) -> dict[str, Any]:
        self.claim_writes.append((verb, key))
        error = self.claim_errors.pop(key, None)
        if error is not None:
            raise error
        stored = self.resource_claims.get(key)
        if stored is None and verb != "create":
            raise ApiError(404, f'resourceclaims.resource.k8s.io "{key.split("/", 1)[1]}" not found', "NotFound")
        return stored or {}

    @staticmethod
    def _claim_key(claim: Mapping[str, Any]) -> str:
        meta = claim.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def _store_claim(self, key: str, claim: Mapping[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(dict(claim))
        meta = stored.setdefault("metadata", {})
        meta["resourceVersion"] = str(self._next_version())
        self.resource_claims[key] = stored
        return copy.deepcopy(stored)

    def _next_version(self) -> int:
        versions = [int((c.get("metadata") or {}).get("resourceVersion") or 0) for c in self.resource_claims.values()]
        return max(versions, default=0) + 1

    @staticmethod
    def _check_version(key: str, stored: Mapping[str, Any], claim: Mapping[str, Any]) -> None:
        given = (claim.get("metadata") or {}).get("resourceVersion")
        if given and given != (stored.get("metadata") or {}).get("resourceVersion"):
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{key.split("/", 1)[1]}": '
                "the object has been modified; please apply your changes to the latest version and try again",
                "Conflict",
            )

    async def get_resource_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        key = f"{namespace}/{name}"
        if key not in self.resource_claims:
            raise ApiError(404, f'resourceclaims.resource.k8s.io "{name}" not found', "NotFound")
        return copy.deepcopy(self.resource_claims[key])

    async def update_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        key = self._claim_key(claim)
        stored = self._claim_write("update", key)
        self._check_version(key, stored, claim)
        return self._store_claim(key, {**claim, "status": stored.get("status") or {}})

    async def update_resource_claim_status(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        key = self._claim_key(claim)
        stored = self._claim_write("status", key)
        self._check_version(key, stored, claim)
        return self._store_claim(key, {**stored, "status": copy.deepcopy(dict(claim.get("status") or {}))})

    async def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        key = f"{namespace}/{name}"
        stored = self._claim_write("patch", key)
        status = copy.deepcopy(dict(stored.get("status") or {}))
        # The one patch the scheduler sends: delete reservedFor entries by uid.
        removed = {e.get("uid") for e in (patch.get("status") or {}).get("reservedFor") or () if e.get("$patch")}
        status["reservedFor"] = [e for e in status.get("reservedFor") or () if e.get("uid") not in removed]
        if not status["reservedFor"]:
            del status["reservedFor"]
        return self._store_claim(key, {**stored, "status": status})

    async def create_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        created = copy.deepcopy(dict(claim))
        meta = created.setdefault("metadata", {})
        if meta.get("generateName") and not meta.get("name"):
            meta["name"] = f"{meta['generateName']}{len(self.resource_claims):05d}"
        key = self._claim_key(created)
        self._claim_write("create", key)
        if key in self.resource_claims:
            raise ApiError(409, f'resourceclaims.resource.k8s.io "{meta["name"]}" already exists', "AlreadyExists")
        meta.setdefault("uid", f"uid-{key}")
        return self._store_claim(key, created)

    async def delete_resource_claim(self, claim: Mapping[str, Any]) -> None:
        key = self._claim_key(claim)
        self._claim_write("delete", key)
        del self.resource_claims[key]

    async def patch_pod_status_fields(self, pod: Pod, status: Mapping[str, Any]) -> Mapping[str, Any]:
        self.pod_status_fields[pod.key] = copy.deepcopy(dict(status))
        self.writes.append(("status", pod.key))
        return {**pod.raw, "status": {**(pod.raw.get("status") or {}), **status}}

    async def request(self, method: str, path: str) -> Any:
        self.reads.append(path)
        collection, params = _split_read(path)
        if method != "GET" or collection not in self.collections:
            raise ApiError(404, f"{method} {path}: the fake serves no such collection", "NotFound")
        items = self.collections[collection]
        start = 0
        if "continue" in params:
            if self.continue_errors:
                raise self.continue_errors.pop(0)
            start = int(base64.b64decode(params["continue"]).split(b"/")[0])
        limit = int(params.get("limit") or 0)
        end = start + limit if limit else len(items)
        metadata: dict[str, Any] = {"resourceVersion": self.list_resource_version}
        if end < len(items):
            # Padded base64, as the apiserver's tokens: a client must quote the "=".
            metadata["continue"] = base64.b64encode(f"{end}/".encode()).decode()
        return {"kind": "List", "metadata": metadata, "items": copy.deepcopy(items[start:end])}

    async def stream(self, method: str, path: str, read_timeout: float | None = None) -> AsyncGenerator[bytes, None]:
        self.reads.append(path)
        queued = self.watch_events.get(_split_read(path)[0])
        for event in queued.pop(0) if queued else ():
            yield codec.dumps(event) + b"\n"
        await asyncio.Event().wait()  # an open watch with nothing to say, until the reader gives up

    async def close(self) -> None:
        self.closed = True
