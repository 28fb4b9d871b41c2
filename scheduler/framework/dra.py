"""DraManager: the resource.k8s.io objects DynamicResources reads, as kube's SharedDRAManager.

It owns four stores fed by the informers — ResourceClaims, ResourceSlices, DeviceClasses and
DeviceTaintRules as raw resource.k8s.io/v1 JSON — and, over the claims, kube's claim tracker:
an assume cache (a claim the scheduler just wrote is seen with its allocation before the watch
brings it back), the allocations in flight between Reserve and PreBind, and the devices every
claim's allocation holds (kept incrementally, so a PreFilter never walks all claims). ResourceSlices
are listed with the DeviceTaintRules' taints applied, as kube's slice tracker does.

Every profile shares one manager (kube's is shared too: an allocation reserved in one profile is
taken for all). It never talks to the API and never mutates an object it was given.
"""

from __future__ import annotations

import builtins
import itertools
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.model.volumes import key_of, resource_version

RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_SLICE = "ResourceSlice"
DEVICE_CLASS = "DeviceClass"
DEVICE_TAINT_RULE = "DeviceTaintRule"
KINDS = (RESOURCE_CLAIM, RESOURCE_SLICE, DEVICE_CLASS, DEVICE_TAINT_RULE)

# Every DeviceClass stands for the implicit extended resource of this prefix plus its name.
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
# The finalizer the scheduler puts on every claim it allocates (resourceapi.Finalizer).
FINALIZER = "resource.kubernetes.io/delete-protection"

# A device as the allocator names it: (driver, pool, device).
DeviceID = tuple[str, str, str]
ClaimObject = Mapping[str, Any]
# Called with (old, new) whenever the claims' view changes: informer events, assumes, restores.
ClaimListener = Callable[[ClaimObject | None, ClaimObject | None], None]


def allocation_of(claim: ClaimObject) -> Mapping[str, Any] | None:
    allocation: Mapping[str, Any] | None = (claim.get("status") or {}).get("allocation")
    return allocation


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


@dataclass
class AllocatedState:
    """What is taken: dedicated devices, shared allocations (device, shareID), and per device the
    capacity consumed by shared allocations (name -> list of quantity strings, one per share)."""

    devices: set[DeviceID] = field(default_factory=set)
    shared: set[tuple[DeviceID, str]] = field(default_factory=set)
    consumed: dict[DeviceID, list[Mapping[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Holdings:
    """What one claim's allocation (or one allocation in flight) holds."""

    devices: tuple[DeviceID, ...] = ()
    shared: tuple[tuple[DeviceID, str], ...] = ()
    consumed: tuple[tuple[DeviceID, Mapping[str, Any]], ...] = ()


def _holdings(claim: ClaimObject | None) -> Holdings:
    """The devices an allocated claim holds (admin access holds none: it shares any device)."""
    allocation = allocation_of(claim) if claim is not None else None
    if allocation is None:
        return Holdings()
    devices: list[DeviceID] = []
    shared: list[tuple[DeviceID, str]] = []
    consumed: list[tuple[DeviceID, Mapping[str, Any]]] = []
    for result in (allocation.get("devices") or {}).get("results") or ():
        if result.get("adminAccess"):
            continue
        device = (str(result.get("driver") or ""), str(result.get("pool") or ""), str(result.get("device") or ""))
        share_id = result.get("shareID")
        if share_id:
            shared.append((device, str(share_id)))
            if result.get("consumedCapacity"):
                consumed.append((device, result["consumedCapacity"]))
            continue
        devices.append(device)
    return Holdings(tuple(devices), tuple(shared), tuple(consumed))


@dataclass
class _InFlight:
    claim: ClaimObject
    sharers: int = 1


def _controller_uid(claim: ClaimObject | None) -> str:
    if claim is None:
        return ""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


class ClaimTracker:
    """kube's claimTracker: claims through an assume cache, in-flight allocations, allocated devices."""

    def __init__(self, journal_length: int = 4096) -> None:
        self._api: dict[str, ClaimObject] = {}  # namespace/name -> the informer's version
        self._assumed: dict[str, ClaimObject] = {}  # namespace/name -> our newer version
        self._in_flight: dict[str, _InFlight] = {}  # claim uid -> allocation between Reserve and PreBind
        self._held: dict[str, Holdings] = {}  # namespace/name -> what its latest version holds
        self._devices: Counter[DeviceID] = Counter()
        self._shared: Counter[tuple[DeviceID, str]] = Counter()
        self._consumed: dict[str, tuple[tuple[DeviceID, Mapping[str, Any]], ...]] = {}
        # Every change of what is held, as (+1 or -1, holdings), the latest `journal_length` of them:
        # readers that keep their own view of the allocated state (DynamicResources' allocator state)
        # patch it from here instead of rebuilding it per pod.
        self._journal: deque[tuple[int, Holdings]] = deque(maxlen=journal_length)
        self._journal_end = 0  # the version: how many changes were ever journalled
        # controller owner uid -> keys of the claims it owns (latest versions), in arrival order:
        # DynamicResources finds a pod's extended-resource claim here, not by walking every claim.
        self._by_owner: dict[str, dict[str, None]] = {}
        self.listeners: list[ClaimListener] = []

    # ---- the assume cache ------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> ClaimObject | None:
        """The assumed version while the informer has nothing newer, else the informer's."""
        key = f"{namespace}/{name}"
        api = self._api.get(key)
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None:
            return None
        return assumed

    def list(self) -> list[ClaimObject]:
        return [claim for key in self._api if (claim := self.get(*key.split("/", 1))) is not None]

    def _latest(self, key: str) -> ClaimObject | None:
        return self.get(*key.split("/", 1))

    def owned_by(self, uid: str) -> builtins.list[ClaimObject]:
        """The claims whose controller owner reference names this uid (a pod's generated claims)."""
        return [claim for key in self._by_owner.get(uid, ()) if (claim := self._latest(key)) is not None]

    def _index_owner(self, key: str, old: ClaimObject | None, new: ClaimObject | None) -> None:
        before, after = _controller_uid(old), _controller_uid(new)
        if before == after:
            return
        if before:
            keys = self._by_owner.get(before)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._by_owner[before]
        if after:
            self._by_owner.setdefault(after, {})[key] = None

    def _changed(self, key: str, old: ClaimObject | None) -> None:
        new = self._latest(key)
        self._index_owner(key, old, new)
        self._set_holdings(key, new)
        if old is new:
            return
        for listener in self.listeners:
            listener(old, new)

    def on_upsert(self, claim: ClaimObject) -> ClaimObject | None:
        """An informer add or update; returns the version it replaces (as the plugins saw it)."""
        key = key_of(claim)
        old = self._latest(key)
        self._api[key] = claim
        assumed = self._assumed.get(key)
        # The apiserver has spoken: an assumption it caught up with (or overtook) is dropped.
        if assumed is not None and resource_version(claim) >= resource_version(assumed):
            del self._assumed[key]
        self._changed(key, old)
        return old

    def on_delete(self, claim: ClaimObject) -> ClaimObject | None:
        key = key_of(claim)
        old = self._latest(key)
        self._api.pop(key, None)
        self._assumed.pop(key, None)
        self._changed(key, old)
        return old

    def assume(self, claim: ClaimObject) -> None:
        """kube's AssumeClaimAfterAPICall: the version the apiserver returned to our write."""
        key = key_of(claim)
        latest = self._latest(key)
        if latest is None:
            raise KeyError(f'could not find ResourceClaim "{key}"')
        if resource_version(claim) < resource_version(latest):
            raise ValueError(
                f'ResourceClaim "{key}" is out of sync (stored: {resource_version(latest)}, '
                f"assume: {resource_version(claim)})"
            )
        self._assumed[key] = claim
        self._changed(key, latest)

    def restore(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        old = self._latest(key)
        if self._assumed.pop(key, None) is not None:
            self._changed(key, old)

    # ---- allocations in flight (Reserve .. PreBind) ------------------------------------------

    def pending_allocation(self, uid: str) -> Mapping[str, Any] | None:
        in_flight = self._in_flight.get(uid)
        return allocation_of(in_flight.claim) if in_flight is not None else None

    def signal_pending_allocation(self, uid: str, allocated: ClaimObject) -> None:
        in_flight = self._in_flight.get(uid)
        if in_flight is not None:
            in_flight.sharers += 1
            return
        meta = allocated.get("metadata") or {}
        current = self.get(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if current is not None and uid_of(current) == uid and allocation_of(current) is not None:
            return  # already allocated in the API: nothing in flight
        self._in_flight[uid] = _InFlight(allocated)
        self._journal_change(1, _holdings(allocated))

    def maybe_remove_pending_allocation(self, uid: str, force: bool) -> bool:
        in_flight = self._in_flight.get(uid)
        if in_flight is None:
            return False
        if force or in_flight.sharers == 1:
            del self._in_flight[uid]
            self._journal_change(-1, _holdings(in_flight.claim))
            return True
        in_flight.sharers -= 1
        return False

    # ---- allocated devices -----------------------------------------------------------------

    def _set_holdings(self, key: str, claim: ClaimObject | None) -> None:
        new = _holdings(claim)
        old = self._held.get(key, Holdings())
        if new == old:
            return
        self._journal_change(-1, old)
        self._journal_change(1, new)
        self._devices.subtract(old.devices)
        self._shared.subtract(old.shared)
        self._devices.update(new.devices)
        self._shared.update(new.shared)
        # Drop the counts that fell to zero: only what the old holdings named can have (copying the
        # whole counter instead made every claim update cost as much as all devices held).
        for device in old.devices:
            if self._devices.get(device, 0) <= 0:
                self._devices.pop(device, None)
        for share in old.shared:
            if self._shared.get(share, 0) <= 0:
                self._shared.pop(share, None)
        if new.devices or new.shared:
            self._held[key] = new
        else:
            self._held.pop(key, None)
        if new.consumed:
            self._consumed[key] = new.consumed
        else:
            self._consumed.pop(key, None)

    def _journal_change(self, sign: int, held: Holdings) -> None:
        if held.devices or held.shared or held.consumed:
            self._journal.append((sign, held))
            self._journal_end += 1

    def holdings_since(self, version: int | None) -> tuple[int, tuple[tuple[int, Holdings], ...] | None]:
        """The current version and the changes since `version` (None: too old, or never read:
        rebuild from `holdings()`)."""
        end = self._journal_end
        if version is None or version < end - len(self._journal) or version > end:
            return end, None
        return end, tuple(itertools.islice(self._journal, len(self._journal) - (end - version), None))

    def holdings(self) -> tuple[Holdings, ...]:
        """What every allocated claim and every allocation in flight holds, one entry each."""
        return (*self._held.values(), *(_holdings(in_flight.claim) for in_flight in self._in_flight.values()))

    def allocated_state(self) -> AllocatedState:
        """What every claim's allocation holds, in-flight allocations included (kube's
        GatherAllocatedState); a fresh copy the caller may change."""
        state = AllocatedState(set(self._devices), set(self._shared))
        consumed_lists = list(self._consumed.values())
        for in_flight in self._in_flight.values():
            held = _holdings(in_flight.claim)
            state.devices.update(held.devices)
            state.shared.update(held.shared)
            consumed_lists.append(held.consumed)
        for consumed in consumed_lists:
            for device, capacity in consumed:
                state.consumed.setdefault(device, []).append(capacity)
        return state


class DraManager:
    """The four resource.k8s.io stores and the claim tracker; the informers feed it."""

    def __init__(self, objects: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> None:
        self.claims = ClaimTracker()
        self._slices: dict[str, Mapping[str, Any]] = {}
        self._classes: dict[str, Mapping[str, Any]] = {}
        self._taint_rules: dict[str, Mapping[str, Any]] = {}
        self._slices_generation = 0
        self._by_resource: dict[str, Mapping[str, Any]] | None = None
        for kind, obj in objects:
            self.upsert(kind, obj)

    def _store(self, kind: str) -> dict[str, Mapping[str, Any]]:
        return {RESOURCE_SLICE: self._slices, DEVICE_CLASS: self._classes, DEVICE_TAINT_RULE: self._taint_rules}[kind]

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Store an object an informer saw; returns the version it replaced."""
        if kind == RESOURCE_CLAIM:
            return self.claims.on_upsert(obj)
        self._invalidate(kind)
        store = self._store(kind)
        key = key_of(obj)
        old = store.get(key)
        store[key] = obj
        return old

    def delete(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if kind == RESOURCE_CLAIM:
            return self.claims.on_delete(obj)
        self._invalidate(kind)
        return self._store(kind).pop(key_of(obj), None)

    def _invalidate(self, kind: str) -> None:
        if kind == DEVICE_CLASS:
            self._by_resource = None
        else:
            self._slices_generation += 1

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        return self._classes.get(name)

    def device_classes(self) -> Mapping[str, Mapping[str, Any]]:
        return self._classes

    def device_class_for_resource(self, resource: str) -> Mapping[str, Any] | None:
        """The DeviceClass backing an extended resource (kube's DeviceClassResolver): the one named
        by `deviceclass.resource.kubernetes.io/<class>`, or whose spec.extendedResourceName it is —
        the newest such class, then the first by name."""
        if self._by_resource is None:
            by_resource: dict[str, Mapping[str, Any]] = {}
            for name, device_class in self._classes.items():
                by_resource[DEVICE_CLASS_PREFIX + name] = device_class
            ranked = sorted(
                (c for c in self._classes.values() if (c.get("spec") or {}).get("extendedResourceName")),
                key=lambda c: (-_created(c), key_of(c)),
            )
            for device_class in ranked:
                by_resource.setdefault(str(device_class["spec"]["extendedResourceName"]), device_class)
            self._by_resource = by_resource
        return self._by_resource.get(resource)

    def taint_rules(self) -> list[Mapping[str, Any]]:
        return list(self._taint_rules.values())

    def resource_slices(self) -> list[Mapping[str, Any]]:
        """Every ResourceSlice as the informer has it (DeviceTaintRules not applied)."""
        return list(self._slices.values())

    @property
    def slices_generation(self) -> int:
        """Moves whenever a ResourceSlice or a DeviceTaintRule changes (caches of patched slices key on it)."""
        return self._slices_generation


def _created(obj: Mapping[str, Any]) -> float:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return 0.0
    return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
