"""The structured allocator: devices for a pod's unallocated claims on one node.

Owns the search kube-scheduler v1.37.2 runs with its default gates (the `incubating` variant of
k8s.io/dynamic-resource-allocation/structured): claims in order, requests in order, for each
required device the candidates in pool/slice/device order; a candidate must be free (or the
request has admin access), match the class's and the request's CEL selectors, sit on the node
(per-device node selection), fit the consumable capacity that remains, leave enough shared
counters, be tolerated if tainted and keep the claim's constraints; the first complete solution
wins. `firstAvailable` subrequests are tried in order; a claim may hold at most 32 devices.
Candidates of one request are combinations in search order, never permutations, so the search
does not blow up on identical devices; a deadline bounds what remains (kube's Filter timeout).

Must never read the API, mutate its inputs, or know about the framework: the plugin passes raw
resource.k8s.io/v1 dicts in and persists the AllocationResult dicts it gets back.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from plugins.dynamicresources.cel import CELDevice, CELError, CompilationResult, enhance_runtime_error
from scheduler.model.objects import Node

from . import capacity as cap
from .constraints import Constraint, DistinctAttribute, MatchAttribute
from .pools import Pool, PoolID, counter_takes, gather_pools, node_matches
from .types import (
    ALLOCATION_RESULTS_MAX_SIZE,
    SUPPORTED_FEATURES,
    AllocatedState,
    AllocationTimeoutError,
    AllocatorError,
    ConsumedCapacity,
    DeviceID,
    FailedAllocationOnNodeError,
    Features,
    add_capacity,
)

Raw = Mapping[str, Any]

# How many search steps run between two looks at the clock.
_DEADLINE_CHECK_EVERY = 256


# Compiles (and caches) one CEL expression; never raises, a compile error is in `.error`.
CELCompiler = Callable[[str], CompilationResult]


def klog_name(obj: Raw) -> str:
    """klog.KObj: namespace/name, or name for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


class _Request:
    """A request with `exactly`, or one of a request's `firstAvailable` subrequests; its fields
    are read once, the search reads them at every step."""

    __slots__ = (
        "admin_access",
        "capacity",
        "class_name",
        "count",
        "has_admin_access",
        "mode",
        "name",
        "selectors",
        "spec",
        "tolerations",
    )

    def __init__(self, name: str, spec: Raw, admin_access: bool, has_admin_access: bool) -> None:
        self.name = name
        self.spec = spec
        self.admin_access = admin_access
        self.has_admin_access = has_admin_access
        self.class_name = str(spec.get("deviceClassName") or "")
        self.mode = str(spec.get("allocationMode") or "")
        self.count = int(spec.get("count") or 0)
        self.selectors: list[Raw] = list(spec.get("selectors") or ())
        self.tolerations: list[Raw] = list(spec.get("tolerations") or ())
        self.capacity: Raw | None = spec.get("capacity")


@dataclass(slots=True)
class _RequestData:
    request: _Request
    parent: str  # the request's name for a subrequest, "" otherwise
    device_class: Raw | None = None
    num_devices: int = 0
    selected_sub_request: int = 0
    all_devices: list[_Candidate] = field(default_factory=list)
    # Candidate index -> whether the device is selectable for this (sub)request.
    matches: dict[int, bool] = field(default_factory=dict)
    # Candidate index -> whether the request fits the device's capacity, as long as no share of
    # the device is being allocated (then the answer depends on the search's state).
    fits_unshared: dict[int, bool] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass(frozen=True, slots=True)
class _CounterFloor:
    """One shared counter of a pool, and for each candidate index i the least that any candidate
    from i on takes of it (None past the last one)."""

    pool: Pool
    counter_set: str
    name: str
    least: list[Decimal | None]


class _Candidate:
    """One device of a usable pool as the search meets it; `index` is its place in search order."""

    __slots__ = ("_cel_device", "_takes", "device", "has_capacity", "id", "index", "pool", "slice", "verdicts")

    def __init__(self, index: int, device_id: DeviceID, device: Raw, slice_: Raw, pool: Pool) -> None:
        self.index = index
        self.id = device_id
        self.device = device
        self.slice = slice_
        self.pool = pool
        self.has_capacity = bool(device.get("capacity"))
        self._cel_device: CELDevice | None = None
        self._takes: tuple[tuple[str, str, Decimal], ...] | None = None
        # Selector expression -> its verdict on this device (True, False or the CELError): a
        # pure function of the two, kept as long as the candidate is (see NodeDevicesCache).
        self.verdicts: dict[str, bool | CELError] = {}

    def takes(self) -> tuple[tuple[str, str, Decimal], ...]:
        """The device's counter consumption as (counter set, counter, amount), parsed once for as
        long as the candidate is kept (its pool parsed it already, so it cannot fail here)."""
        if self._takes is None:
            self._takes = counter_takes(self.device)
        return self._takes

    def cel_device(self) -> CELDevice:
        """The device as CEL sees it, converted once for every selector of every request."""
        if self._cel_device is None:
            device = self.device
            self._cel_device = CELDevice(
                self.id.driver,
                device.get("attributes") or {},
                device.get("capacity") or {},
                bool(device.get("allowMultipleAllocations")),
            )
        return self._cel_device

    def matches(self, compiled: CompilationResult) -> bool:
        """The selector's verdict on this device, evaluated once; CELError as `matches` raises it."""
        verdict = self.verdicts.get(compiled.expression)
        if verdict is None:
            try:
                verdict = compiled.matches(self.cel_device())
            except CELError as exc:
                verdict = exc
            if len(self.verdicts) < _VERDICTS_PER_DEVICE:
                self.verdicts[compiled.expression] = verdict
        if isinstance(verdict, CELError):
            raise verdict
        return verdict


# Nodes whose devices NodeDevicesCache keeps at most.
_CACHED_NODES = 50_000
# Distinct selectors whose verdicts one device keeps (a cluster has a handful of classes).
_VERDICTS_PER_DEVICE = 64


class NodeDevicesCache:
    """What one node's allocation starts from, kept across scheduling cycles while the slices
    (the same list object: the caller builds a new one when a slice or taint rule changes), the
    features and the Node object stay the same: the slices split by node, each node's pools
    (GatherPools) and its candidates in search order, with their CEL conversions and verdicts.
    No AllocatedState is kept here: each cycle's allocator gets the one its PreFilter took; each
    node's last outcome is kept with what was taken of its devices then (Allocator.allocate)."""

    def __init__(self) -> None:
        self._key: tuple[Sequence[Raw], Features] | None = None
        self.slices_on_node: dict[str, list[Raw]] = {}
        self.slices_shared: list[Raw] = []
        self.nodes: dict[str, tuple[Node, list[Pool], list[_Candidate]]] = {}
        # Node name -> its candidates (the list above) and their counter floors (_Run._counter_floors).
        self.floors: dict[str, tuple[list[_Candidate], list[_CounterFloor]]] = {}
        # Node name -> the last search's outcome there, with what it depended on (Allocator.allocate).
        self.outcomes: dict[str, _Outcome] = {}

    def use(self, slices: Sequence[Raw], features: Features) -> None:
        """Start over unless these are the slices and features of the last call."""
        key = self._key
        if key is not None and key[0] is slices and key[1] == features:
            return
        self._key = (slices, features)  # holds the list: its identity cannot be reused meanwhile
        self.nodes = {}
        self.floors = {}
        self.outcomes = {}
        self.slices_on_node = {}
        self.slices_shared = []
        for slice_ in slices:
            node_name = (slice_.get("spec") or {}).get("nodeName") or ""
            if node_name:
                self.slices_on_node.setdefault(node_name, []).append(slice_)
            else:
                self.slices_shared.append(slice_)


@dataclass(slots=True)
class _Outcome:
    """One node's search outcome and every input it depended on besides the node's devices
    (`candidates`, gathered for `node`) and what NodeDevicesCache.use keys on: the claims' specs
    and their classes (`key[0]`, `key[1]`, the classes held here so their ids stay theirs) and
    what is taken of those devices (`key[2]`)."""

    node: Node
    candidates: list[_Candidate]
    classes: tuple[Raw | None, ...]
    key: tuple[Any, ...]
    result: list[dict[str, Any]] | None
    # Whether the result holds a shared device: each reuse draws new share ids.
    shares: bool


@dataclass(slots=True)
class _DeviceResult:
    request: str
    parent: str
    id: DeviceID
    device: Raw
    slice: Raw
    shared: bool  # allocated with allowMultipleAllocations: the result gets a fresh share id
    consumed: dict[str, cap.Amount] | None
    admin_access: bool

    @property
    def request_name(self) -> str:
        return f"{self.parent}/{self.request}" if self.parent else self.request


class _MaxSizeExceeded(Exception):
    """The claim cannot hold the devices still needed: backtrack further (kube's sentinel)."""


@dataclass(slots=True)
class Stats:
    """How much searching the allocator did (kube's NumAllocateOneInvocations), and how many
    nodes' outcomes came from an earlier cycle's search instead (`outcomes_reused`)."""

    allocate_one_invocations: int = 0
    outcomes_reused: int = 0


def _taint_tolerated(taint: Raw, tolerations: Sequence[Raw]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if key and key != taint.get("key"):
            continue
        operator = toleration.get("operator") or ""
        if operator in ("", "Equal"):
            if (toleration.get("value") or "") == (taint.get("value") or ""):
                return True
        elif operator == "Exists":
            return True
    return False


def taint_prevents_allocation(device: Raw, tolerations: Sequence[Raw]) -> bool:
    """A NoSchedule or NoExecute taint no toleration of the request tolerates (other effects,
    None included, never prevent allocation)."""
    taints = device.get("taints")
    if not taints:
        return False  # most devices: asked at every step of the search
    return any(
        taint.get("effect") in ("NoExecute", "NoSchedule") and not _taint_tolerated(taint, tolerations)
        for taint in taints
    )


class Allocator:
    """Allocates claims on one node at a time; reusable for every node of one scheduling cycle.

    `classes` maps DeviceClass names to their dicts; `slices` are all ResourceSlices (with
    DeviceTaintRules already applied to device taints); `cel` compiles selectors (a cache).
    """

    def __init__(
        self,
        features: Features,
        allocated_state: AllocatedState,
        classes: Mapping[str, Raw],
        slices: Sequence[Raw],
        cel: CELCompiler,
        cache: NodeDevicesCache | None = None,
    ) -> None:
        unsupported = features.gate_names() - SUPPORTED_FEATURES.gate_names()
        if unsupported:
            raise AllocatorError(
                f"internal error: no allocator available for feature set {sorted(features.gate_names())}, "
                f"unsupported: {', '.join(sorted(unsupported))}"
            )
        self.features = features
        self.allocated_state = allocated_state
        self.classes = classes
        self.cel = cel
        self.all_slices = slices
        self.cache = cache if cache is not None else NodeDevicesCache()
        self.cache.use(slices, features)
        # Counters left per pool once allocated devices are subtracted; fixed for this allocator.
        self.available_counters: dict[PoolID, dict[str, dict[str, Decimal]]] = {}
        self.overdrawn_pools: set[PoolID] = set()
        self.stats = Stats()
        # The search gives up a request early once shared counters cannot cover it (_Run.
        # _counters_run_out); False searches every combination as kube's does (the tests' reference).
        self.prune_by_counters = True
        # A node's outcome is reused while nothing it depended on changed (_outcome_key); False
        # searches every node in every cycle as kube's does (the tests' reference).
        self.reuse_outcomes = True
        self._shared_devices: set[DeviceID] | None = None
        # id(claim) -> the claim (held, so the id stays its own), its spec as a key, its class names.
        self._claim_keys: dict[int, tuple[Raw, str, tuple[str, ...]]] = {}

    def allocate(self, node: Node, claims: Sequence[Raw], deadline: float | None = None) -> list[dict[str, Any]] | None:
        """One v1 AllocationResult dict per claim, in order, or None when they do not fit.

        Raises AllocatorError (claim-level, kube's message), FailedAllocationOnNodeError (this node
        only) or AllocationTimeoutError once time.monotonic() passes `deadline`.

        The same claims (by spec) on a node whose devices, and what is taken of them, have not
        changed since the last search there get that search's outcome again, the same objects
        (results are read-only for the caller) but for a fresh share id wherever a device is
        shared. In a steady cluster most nodes are such nodes in every cycle, and a search
        (partitions, backtracking, capacity) costs far more than the check.
        """
        claims = list(claims)
        cache = self.cache
        key: tuple[Any, ...] | None = None
        classes: tuple[Raw | None, ...] = ()
        if self.reuse_outcomes:
            gathered = cache.nodes.get(node.name)
            if gathered is not None and gathered[0] is node:
                key, classes = self._outcome_key(gathered[1], gathered[2], claims)
                outcome = cache.outcomes.get(node.name)
                if (
                    key is not None
                    and outcome is not None
                    and outcome.node is node
                    and outcome.candidates is gathered[2]
                    and outcome.key == key
                ):
                    self.stats.outcomes_reused += 1
                    result = outcome.result
                    return _with_fresh_shares(result) if result is not None and outcome.shares else result
        run = _Run(self, node, claims, deadline)
        result = run.allocate()
        if self.reuse_outcomes:
            if key is None:
                key, classes = self._outcome_key(run.pools, run.candidates, claims)
            if key is not None:
                if len(cache.outcomes) >= _CACHED_NODES:
                    cache.outcomes.clear()
                shares = result is not None and any(
                    "shareID" in entry for allocation in result for entry in allocation["devices"]["results"]
                )
                cache.outcomes[node.name] = _Outcome(node, run.candidates, classes, key, result, shares)
        return result

    def _outcome_key(
        self, pools: Sequence[Pool], candidates: Sequence[_Candidate], claims: Sequence[Raw]
    ) -> tuple[tuple[Any, ...] | None, tuple[Raw | None, ...]]:
        """What a search on these devices depends on besides them: the claims' specs, their
        classes (by identity: a changed class is a new object) and, per device, whether it is
        taken, the capacity shares of it consume and whether the devices its pool's counters
        count are taken (shares included: a shared device's counters are spent once)."""
        features = self.features
        specs = []
        class_names: list[str] = []
        for claim in claims:
            entry = self._claim_keys.get(id(claim))
            if entry is None or entry[0] is not claim:
                entry = (claim, json.dumps(claim.get("spec"), sort_keys=True, default=str), _class_names(claim))
                self._claim_keys[id(claim)] = entry
            specs.append(entry[1])
            class_names.extend(entry[2])
        classes = tuple(self.classes.get(name) for name in class_names)
        state = self.allocated_state
        taken = state.devices
        held: tuple[Any, ...] = tuple([candidate.id in taken for candidate in candidates])
        if state.aggregated_capacity:
            consumed = state.aggregated_capacity
            held += tuple(consumed.get(candidate.id) for candidate in candidates)
        if features.partitionable_devices:
            allocated = self._allocated_anyhow
            for pool in pools:
                if pool.consumers and not (pool.incomplete or pool.invalid):
                    held += tuple([allocated(device_id) for device_id, _ in pool.consumers])
        return (tuple(specs), tuple(map(id, classes)), held), classes

    def _shared(self) -> set[DeviceID]:
        """The devices some share holds, gathered once."""
        if self._shared_devices is None:
            self._shared_devices = {shared.device_id for shared in self.allocated_state.shared_device_ids}
        return self._shared_devices

    def _allocated_anyhow(self, device_id: DeviceID) -> bool:
        """AllocatedState.is_device_allocated, with the shares' devices gathered once."""
        state = self.allocated_state
        return device_id in state.devices or device_id in self._shared() or device_id in state.aggregated_capacity

    def counters_left(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        """The pool's shared counters less what its allocated devices consume (may be negative:
        then the pool is in `overdrawn_pools`); computed once per allocator."""
        cached = self.available_counters.get(pool.id)
        if cached is not None:
            return cached
        available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        allocated = self._allocated_anyhow
        for device_id, takes in pool.consumers:
            if allocated(device_id):
                for set_name, name, value in takes:
                    counter_set = available.get(set_name)
                    if counter_set is not None and name in counter_set:
                        counter_set[name] -= value
        self.available_counters[pool.id] = available
        if any(value < 0 for counters in available.values() for value in counters.values()):
            self.overdrawn_pools.add(pool.id)
        return available


def _with_fresh_shares(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reused result whose shared devices get new share ids, as a new search would draw them."""
    fresh = []
    for allocation in result:
        devices = allocation["devices"]
        entries = [
            {**entry, "shareID": str(uuid.uuid4())} if "shareID" in entry else entry for entry in devices["results"]
        ]
        fresh.append({**allocation, "devices": {**devices, "results": entries}})
    return fresh


def _class_names(claim: Raw) -> tuple[str, ...]:
    names: list[str] = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        exactly = request.get("exactly")
        if exactly is not None:
            names.append(str(exactly.get("deviceClassName") or ""))
        for sub in request.get("firstAvailable") or ():
            names.append(str(sub.get("deviceClassName") or ""))
    return tuple(names)


class _Run:
    """State of one Allocate call; discarded afterwards."""

    def __init__(self, allocator: Allocator, node: Node, claims: list[Raw], deadline: float | None) -> None:
        self.a = allocator
        self.features = allocator.features
        self.node = node
        self.claims = claims
        self.deadline = deadline
        self.pools: list[Pool] = []
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[Constraint]] = []
        # Every device of the usable pools, in search order: pools, their slices, their devices.
        self.candidates: list[_Candidate] = []
        self.consumed_counters: dict[PoolID, dict[str, dict[str, Decimal]]] = {}
        self.allocating_devices: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, ConsumedCapacity] = {}
        self.results: list[list[_DeviceResult]] = [[] for _ in claims]
        self._floors: list[_CounterFloor] | None = None
        self.num_requests = [len(((c.get("spec") or {}).get("devices") or {}).get("requests") or ()) for c in claims]

    # ---- set-up --------------------------------------------------------------------------

    def allocate(self) -> list[dict[str, Any]] | None:
        self.pools, self.candidates = self._node_devices()

        for claim_index, claim in enumerate(self.claims):
            self._check_claim(claim_index, claim)

        try:
            done = self._allocate_one(
                claim_index=0, request_index=0, sub_index=0, device_index=0, in_sub=False, start=0
            )
        except _MaxSizeExceeded as exc:
            # Only the first claim's alternatives can all run out of room up to here, which the
            # claims' minimum device counts (checked above) rule out; kube returns its sentinel.
            raise AllocatorError("allocation max size exceeded") from exc
        if not done:
            if any(pool.invalid for pool in self.pools):
                raise FailedAllocationOnNodeError("invalid resource pools were encountered")
            return None
        return [self._result(i, claim) for i, claim in enumerate(self.claims)]

    def _node_devices(self) -> tuple[list[Pool], list[_Candidate]]:
        """The node's pools and their devices in search order, from the cache when the node is
        the one they were gathered for. Read-only from here on."""
        a, node = self.a, self.node
        cache = a.cache
        cached = cache.nodes.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1], cached[2]
        slices_for_node = cache.slices_on_node.get(node.name, []) + cache.slices_shared
        try:
            pools = gather_pools(slices_for_node, node, self.features, a.all_slices)
        except AllocatorError as exc:
            raise AllocatorError(f"gather pool information: {exc}") from exc
        candidates: list[_Candidate] = []
        for pool in pools:
            if pool.incomplete or pool.invalid:
                continue  # Nothing is allocated from them, but other pools may still do.
            for slice_ in pool.device_slices:
                for device in (slice_.get("spec") or {}).get("devices") or ():
                    device_id = DeviceID(pool.id.driver, pool.id.pool, str(device.get("name") or ""))
                    candidates.append(_Candidate(len(candidates), device_id, device, slice_, pool))
        if len(cache.nodes) >= _CACHED_NODES:
            cache.nodes.clear()  # names of nodes long gone, when slices stayed put that long
        cache.nodes[node.name] = (node, pools, candidates)
        return pools, candidates

    def _check_claim(self, claim_index: int, claim: Raw) -> None:
        name = klog_name(claim)
        devices = (claim.get("spec") or {}).get("devices") or {}
        min_devices_claim = 0
        for request_index, request in enumerate(devices.get("requests") or ()):
            request_name = str(request.get("name") or "")
            sub_requests = request.get("firstAvailable") or ()
            if not self.features.prioritized_list and sub_requests:
                raise AllocatorError(
                    f"claim {name}, request {request_name}: has subrequests, "
                    "but the DRAPrioritizedList feature is disabled"
                )
            exactly = request.get("exactly") or {}
            if not self.features.consumable_capacity:
                if exactly.get("capacity") is not None:
                    raise AllocatorError(
                        f"claim {name}, request {request_name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled"
                    )
                for sub in sub_requests:
                    if sub.get("capacity") is not None:
                        raise AllocatorError(
                            f"claim {name}, subrequest {sub.get('name', '')}: has capacity requests, "
                            "but the DRAConsumableCapacity feature is disabled"
                        )
            if sub_requests:
                min_devices = None
                for sub_index, sub in enumerate(sub_requests):
                    data = self._validate_request(
                        claim_index,
                        (request_index, sub_index),
                        _Request(str(sub.get("name") or ""), sub, False, False),
                        request_name,
                    )
                    self.request_data[(claim_index, request_index, sub_index)] = data
                    min_devices = data.num_devices if min_devices is None else min(min_devices, data.num_devices)
                min_devices_request = min_devices or 0
            else:
                admin = exactly.get("adminAccess")
                data = self._validate_request(
                    claim_index, (request_index, 0), _Request(request_name, exactly, bool(admin), admin is not None), ""
                )
                self.request_data[(claim_index, request_index, 0)] = data
                min_devices_request = data.num_devices
            if min_devices_request > ALLOCATION_RESULTS_MAX_SIZE - min_devices_claim:
                raise AllocatorError(
                    f"claim {name}, request {request_name}: adding {min_devices_request} devices exceeds "
                    f"the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_devices_claim} already accounted for"
                )
            min_devices_claim += min_devices_request

        constraints: list[Constraint] = []
        for i, constraint in enumerate(devices.get("constraints") or ()):
            requests = [str(r) for r in constraint.get("requests") or ()]
            if constraint.get("matchAttribute") is not None:
                constraints.append(MatchAttribute(requests, str(constraint["matchAttribute"])))
            elif constraint.get("distinctAttribute") is not None:
                constraints.append(DistinctAttribute(requests, str(constraint["distinctAttribute"])))
            else:
                raise AllocatorError(f"claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)")
        self.constraints.append(constraints)

    def _validate_request(
        self, claim_index: int, indices: tuple[int, int], request: _Request, parent: str
    ) -> _RequestData:
        claim_name = klog_name(self.claims[claim_index])
        data = _RequestData(request, parent)
        where = f"claim {claim_name}, request {request.name}"
        if request.spec.get("derivedAttributes"):
            raise AllocatorError(f"{where}: cannot handle request with derived attributes, the feature is disabled")
        for i, selector in enumerate(request.selectors):
            if selector.get("cel") is None:
                raise AllocatorError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not self.features.admin_access and request.has_admin_access:
            raise AllocatorError(f"{where}: admin access is requested, but the feature is disabled")
        if not request.class_name:
            raise AllocatorError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.a.classes.get(request.class_name)
        if device_class is None:
            raise AllocatorError(
                f"{where}: could not retrieve device class {request.class_name}: "
                f'deviceclass.resource.k8s.io "{request.class_name}" not found'
            )
        data.device_class = device_class
        key = (claim_index, indices[0], indices[1])
        if request.mode == "ExactCount":
            data.num_devices = request.count
        elif request.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocatorError(
                        f"{where}: asks for all devices, but resource pool {pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocatorError(
                        f"{where}: asks for all devices, but resource pool {pool.id} is currently invalid"
                    )
            # No pool is incomplete or invalid here, so the candidates are all their devices.
            for candidate in self.candidates:
                if not self._selectable(key[0], data, candidate):
                    continue
                if self.features.consumable_capacity:
                    # Only the static capacity here: what others hold is checked while
                    # allocating, so a busy matching device makes "All" fail.
                    device = candidate.device
                    try:
                        fits = cap.fits(
                            None,
                            request.capacity,
                            device.get("capacity") or {},
                            None,
                            self.features.fractional_capacity_range,
                        )
                    except cap.CapacityError as exc:
                        raise AllocatorError(
                            f"{where}: checking capacity for device {device.get('name', '')}: {exc}"
                        ) from exc
                    if not fits:
                        continue
                data.all_devices.append(candidate)
            data.num_devices = len(data.all_devices)
        else:
            raise AllocatorError(f"{where}: unsupported count mode {request.mode}")
        return data

    # ---- the search ----------------------------------------------------------------------

    def _tick(self) -> None:
        stats = self.a.stats
        stats.allocate_one_invocations += 1
        if (
            self.deadline is not None
            and stats.allocate_one_invocations % _DEADLINE_CHECK_EVERY == 1
            and time.monotonic() > self.deadline
        ):
            raise AllocationTimeoutError("filter operation aborted: context deadline exceeded")

    def _allocate_one(
        self,
        claim_index: int,
        request_index: int,
        sub_index: int,
        device_index: int,
        in_sub: bool,
        start: int,
    ) -> bool:
        """allocateOne: true once every remaining device of every claim is found."""
        self._tick()
        if claim_index >= len(self.claims):
            return True
        if request_index >= self.num_requests[claim_index]:
            try:
                return self._allocate_one(claim_index + 1, 0, 0, 0, False, 0)
            except _MaxSizeExceeded:
                # A later claim ran out of room; other choices here may still leave it enough.
                return False

        key = (claim_index, request_index, sub_index)
        data = self.request_data[key]
        if not in_sub and data.parent:
            all_exceeded = True
            sub = 0
            while (claim_index, request_index, sub) in self.request_data:
                try:
                    success = self._allocate_one(claim_index, request_index, sub, device_index, True, 0)
                except _MaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if success:
                    data.selected_sub_request = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSizeExceeded
            return False

        request = data.request
        all_mode = request.mode == "All"
        if all_mode and not data.all_devices:
            return False
        if device_index >= data.num_devices:
            return self._allocate_one(claim_index, request_index + 1, 0, 0, False, 0)
        if data.num_devices - device_index > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[claim_index]):
            raise _MaxSizeExceeded

        if all_mode:
            candidate = data.all_devices[device_index]
            undo = self._allocate_device(claim_index, key, candidate, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(claim_index, request_index, sub_index, device_index + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done

        state = self.a.allocated_state
        consumable = self.features.consumable_capacity
        candidates = self.candidates
        if self._counters_run_out(data, data.num_devices - device_index, start):
            return False
        for index in range(start, len(candidates)):
            candidate = candidates[index]
            device_id = candidate.id
            if request.admin_access:
                if claim_index in self.allocating_devices.get(device_id, ()):
                    continue
            elif device_id in state.devices or self.allocating_devices.get(device_id):
                continue
            if not self._selectable(claim_index, data, candidate):
                continue
            if (
                consumable
                and (request.capacity is not None or candidate.has_capacity)
                and not self._capacity_fits(claim_index, data, candidate, "checking")
            ):
                continue
            undo = self._allocate_device(claim_index, key, candidate, must=False)
            if undo is None:
                continue
            try:
                # The request's next device comes after this one: combinations, not permutations.
                done = self._allocate_one(claim_index, request_index, sub_index, device_index + 1, in_sub, index + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    def _capacity_fits(self, claim_index: int, data: _RequestData, candidate: _Candidate, verb: str) -> bool:
        """CmpRequestOverCapacity for the request and the device as the search stands."""
        device_id = candidate.id
        allocating = self.allocating_capacity.get(device_id)
        if allocating is None:
            cached = data.fits_unshared.get(candidate.index)
            if cached is not None:
                return cached
        request = data.request
        try:
            fits = cap.fits(
                self.a.allocated_state.aggregated_capacity.get(device_id),
                request.capacity,
                candidate.device.get("capacity") or {},
                allocating,
                self.features.fractional_capacity_range,
            )
        except cap.CapacityError as exc:
            raise AllocatorError(
                f"claim {klog_name(self.claims[claim_index])}, request {request.name}: "
                f"{verb} capacity for device {device_id}: {exc}"
            ) from exc
        if allocating is None:
            data.fits_unshared[candidate.index] = fits
        return fits

    def _selectable(self, claim_index: int, data: _RequestData, candidate: _Candidate) -> bool:
        """isSelectable: class and request selectors match, the device is on this node."""
        device = candidate.device
        if not self.features.device_binding_and_status and device.get("bindingConditions"):
            return False
        cached = data.matches.get(candidate.index)
        if cached is not None:
            return cached
        result = True
        if data.device_class is not None:
            class_selectors = (data.device_class.get("spec") or {}).get("selectors") or ()
            result = self._selectors_match(claim_index, candidate, data.device_class, class_selectors)
        if result:
            result = self._selectors_match(claim_index, candidate, None, data.request.selectors)
        if result and (candidate.slice.get("spec") or {}).get("perDeviceNodeSelection"):
            result = node_matches(
                self.node, device.get("nodeName") or "", bool(device.get("allNodes")), device.get("nodeSelector")
            )
        data.matches[candidate.index] = result
        return result

    def _selectors_match(
        self, claim_index: int, candidate: _Candidate, device_class: Raw | None, selectors: Sequence[Raw]
    ) -> bool:
        if device_class is not None:
            owner = f"class {(device_class.get('metadata') or {}).get('name', '')}"
        else:
            owner = f"claim {klog_name(self.claims[claim_index])}"
        for i, selector in enumerate(selectors):
            compiled = self.a.cel(str((selector.get("cel") or {}).get("expression") or ""))
            if compiled.error is not None:
                raise AllocatorError(f"{owner}: selector #{i}: CEL compile error: {compiled.error}")
            try:
                matches = candidate.matches(compiled)
            except CELError as exc:
                raise AllocatorError(
                    f"{owner}: selector #{i} on device {candidate.id}: "
                    f"CEL runtime error: {enhance_runtime_error(str(exc))}"
                ) from exc
            if not matches:
                return False
        return True

    def _allocate_device(
        self, claim_index: int, key: tuple[int, int, int], candidate: _Candidate, must: bool
    ) -> Callable[[], None] | None:
        """allocateDevice: take the candidate if it is free, has counters, is tolerated and keeps
        the constraints; the returned function gives it back. None when it cannot be taken."""
        data = self.request_data[key]
        request = data.request
        device, device_id = candidate.device, candidate.id
        features = self.features
        allow_multiple = features.consumable_capacity and bool(device.get("allowMultipleAllocations"))
        if not allow_multiple and request.admin_access and claim_index in self.allocating_devices.get(device_id, ()):
            return None
        if not request.admin_access and (
            device_id in self.a.allocated_state.devices or self.allocating_devices.get(device_id)
        ):
            return None
        consumes = device.get("consumesCounters") or ()
        if not features.partitionable_devices and consumes:
            return None
        counters_reserved = False
        if consumes and not (allow_multiple and self._capacity_in_use(device_id)):
            if not self._reserve_counters(candidate):
                return None
            counters_reserved = True

        base, sub = (data.parent, request.name) if data.parent else (request.name, "")
        added: list[Constraint] = []
        marked = False
        inserted: dict[str, Decimal] | None = None
        entry_existed = False

        def rollback() -> None:
            if inserted is not None:
                self._remove_capacity(device_id, inserted, entry_existed)
            if marked:
                self.allocating_devices[device_id].discard(claim_index)
            for constraint in reversed(added):
                constraint.remove(base, sub, device, device_id)
            if counters_reserved:
                self._release_counters(candidate)

        if features.device_taints and taint_prevents_allocation(device, request.tolerations):
            rollback()
            return None
        for constraint in self.constraints[claim_index]:
            if not constraint.add(base, sub, device, device_id):
                rollback()
                if must:
                    raise AllocatorError(
                        f"claim {klog_name(self.claims[claim_index])}, request {request.name}: cannot add device "
                        f"{device_id} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(constraint)
        if not allow_multiple:
            self.allocating_devices.setdefault(device_id, set()).add(claim_index)
            marked = True

        consumed: dict[str, cap.Amount] | None = None
        shared = False
        if features.consumable_capacity:
            # Nothing to recheck when neither side names a capacity.
            if request.capacity is not None or candidate.has_capacity:
                try:
                    fits = self._capacity_fits(claim_index, data, candidate, "rechecking")
                except AllocatorError:
                    rollback()
                    raise
                if not fits:
                    rollback()
                    return None
            if allow_multiple:
                try:
                    consumed = cap.consumed_by_request(
                        request.capacity, device.get("capacity") or {}, features.fractional_capacity_range
                    )
                except cap.CapacityError as exc:
                    rollback()
                    raise AllocatorError(
                        f"claim {klog_name(self.claims[claim_index])}, request {request.name}: "
                        f"computing consumed capacity for device {device_id}: {exc}"
                    ) from exc
                shared = True
                entry_existed = device_id in self.allocating_capacity
                inserted = {name: value.value for name, value in consumed.items()}
                add_capacity(self.allocating_capacity.setdefault(device_id, {}), inserted)

        results = self.results[claim_index]
        results.append(
            _DeviceResult(
                request=request.name,
                parent=data.parent,
                id=device_id,
                device=device,
                slice=candidate.slice,
                shared=shared,
                consumed=consumed or None,
                admin_access=request.admin_access,
            )
        )
        position = len(results) - 1

        def undo() -> None:
            del results[position:]
            rollback()

        return undo

    def _remove_capacity(self, device_id: DeviceID, consumed: Mapping[str, Decimal], entry_existed: bool) -> None:
        """ConsumedCapacityCollection.Remove; an earlier share's (possibly empty) entry stays, it
        marks the device as already shared."""
        entry = self.allocating_capacity.get(device_id)
        if entry is not None:
            for name, value in consumed.items():
                if name in entry:
                    entry[name] -= value
            if all(value == 0 for value in entry.values()):
                del self.allocating_capacity[device_id]
        if entry_existed and device_id not in self.allocating_capacity:
            self.allocating_capacity[device_id] = {}

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """deviceCapacityInUse: an allow-multiple device some share already holds."""
        state = self.a.allocated_state
        if device_id in state.aggregated_capacity:
            return True
        if any(shared.device_id == device_id for shared in state.shared_device_ids):
            return True
        return device_id in self.allocating_capacity

    # ---- shared counters -----------------------------------------------------------------

    def _counter_floors(self) -> list[_CounterFloor]:
        """Per pool counter a candidate consumes: the least that any candidate from index i on
        would take of it (0 for a device that may share an allocation and so skip its counters)."""
        if self._floors is not None:
            return self._floors
        candidates = self.candidates
        cached = self.a.cache.floors.get(self.node.name)
        if cached is not None and cached[0] is candidates:
            self._floors = cached[1]
            return cached[1]
        floors: list[_CounterFloor] = []
        if self.features.partitionable_devices:
            takes: dict[tuple[PoolID, str, str], dict[int, Decimal]] = {}
            for candidate in candidates:
                for set_name, name, value in candidate.takes():
                    per_device = takes.setdefault((candidate.pool.id, set_name, name), {})
                    per_device[candidate.index] = per_device.get(candidate.index, Decimal(0)) + value
            shares = self.features.consumable_capacity
            for (_, set_name, name), per_device in takes.items():
                least: list[Decimal | None] = [None] * (len(candidates) + 1)
                for candidate in reversed(candidates):
                    if shares and candidate.device.get("allowMultipleAllocations"):
                        value = Decimal(0)
                    else:
                        value = per_device.get(candidate.index, Decimal(0))
                    after = least[candidate.index + 1]
                    least[candidate.index] = value if after is None else min(value, after)
                pool = next(c.pool for c in candidates if c.index in per_device)
                floors.append(_CounterFloor(pool, set_name, name, least))
        self._floors = floors
        if len(self.a.cache.floors) >= _CACHED_NODES:
            self.a.cache.floors.clear()
        self.a.cache.floors[self.node.name] = (candidates, floors)
        return floors

    def _counters_run_out(self, data: _RequestData, needed: int, start: int) -> bool:
        """Whether `needed` more devices from candidates[start:] would overdraw some pool counter
        even if each took the least any of them takes: then no choice below this point completes
        the request, and the search backs off now instead of trying every combination (a claim
        for 7 of 8 partitions whose first one is too big: upstream's PartitionableBacktracking).

        Exact: the search would only have found that out. Used only where nothing it skips can
        raise: every candidate's selectors already evaluated for this request, and no
        consumable-capacity arithmetic (which can)."""
        if not self.a.prune_by_counters:
            return False
        floors = self._counter_floors()
        if not floors:
            return False
        for floor in floors:
            least = floor.least[start]
            if not least:
                continue
            pool = floor.pool
            if pool.id in self.a.overdrawn_pools:
                continue
            available = self._available_counters(pool).get(floor.counter_set, {}).get(floor.name)
            if available is None:
                continue
            used = self.consumed_counters.get(pool.id, {}).get(floor.counter_set, {}).get(floor.name, Decimal(0))
            if used + needed * least > available:
                break
        else:
            return False
        if self.features.consumable_capacity and (data.request.capacity is not None or self._any_capacity()):
            return False
        matches = data.matches
        return all(index in matches for index in range(start, len(self.candidates)))

    def _any_capacity(self) -> bool:
        return any(candidate.has_capacity for candidate in self.candidates)

    def _available_counters(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        cached = self.a.available_counters.get(pool.id)
        return cached if cached is not None else self.a.counters_left(pool)

    def _reserve_counters(self, candidate: _Candidate) -> bool:
        """checkAvailableCounters: add the device's counters to what this attempt consumes; undo
        and refuse if any counter of the pool is then over its availability.

        kube compares every counter of the pool; only the ones this device consumes can newly
        exceed theirs, unless allocated devices already overdrew one (then no device that
        consumes counters fits), so those are all that are compared here."""
        available = self._available_counters(candidate.pool)
        consumed = self.consumed_counters.setdefault(candidate.pool.id, {})
        consumption = candidate.takes()
        for set_name, name, value in consumption:
            counter_set = consumed.setdefault(set_name, {})
            counter_set[name] = counter_set.get(name, Decimal(0)) + value
        overdrawn = candidate.pool.id in self.a.overdrawn_pools
        if overdrawn or any(
            name in available.get(set_name, {}) and available[set_name][name] < consumed[set_name][name]
            for set_name, name, _ in consumption
        ):
            self._release_counters(candidate)
            return False
        return True

    def _release_counters(self, candidate: _Candidate) -> None:
        consumed = self.consumed_counters[candidate.pool.id]
        for set_name, name, value in candidate.takes():
            consumed[set_name][name] -= value

    # ---- results -------------------------------------------------------------------------

    def _result(self, claim_index: int, claim: Raw) -> dict[str, Any]:
        devices_spec = (claim.get("spec") or {}).get("devices") or {}
        requests = list(devices_spec.get("requests") or ())
        device_results: list[dict[str, Any]] = []
        for internal in self.results[claim_index]:
            entry: dict[str, Any] = {
                "request": internal.request_name,
                "driver": internal.id.driver,
                "pool": internal.id.pool,
                "device": internal.id.device,
            }
            if internal.admin_access:
                entry["adminAccess"] = True
            tolerations = self._tolerations_of(requests, internal)
            if tolerations:
                entry["tolerations"] = tolerations
            if internal.shared:
                # Drawn only for the solution, not for every candidate the search tries.
                entry["shareID"] = str(uuid.uuid4())
            if internal.consumed:
                entry["consumedCapacity"] = {name: value.text for name, value in internal.consumed.items()}
            if self.features.device_binding_and_status:
                if internal.device.get("bindingConditions"):
                    entry["bindingConditions"] = list(internal.device["bindingConditions"])
                if internal.device.get("bindingFailureConditions"):
                    entry["bindingFailureConditions"] = list(internal.device["bindingFailureConditions"])
            device_results.append(entry)

        chosen_names = self._chosen_request_names(claim_index, requests)
        config = self._class_configs(claim_index, requests)
        for claim_config in devices_spec.get("config") or ():
            names = list(claim_config.get("requests") or ())
            if not names or any(name in names for request_names in chosen_names for name in request_names):
                config.append(_allocation_config("FromClaim", names, claim_config))
        for entry in config:
            named = entry.get("requests")
            if named and all(any(name in named for name in request_names) for request_names in chosen_names):
                del entry["requests"]

        result: dict[str, Any] = {"devices": {"results": device_results}}
        if config:
            result["devices"]["config"] = config
        try:
            node_selector = self._node_selector(self.results[claim_index])
        except AllocatorError as exc:
            name = (claim.get("metadata") or {}).get("name", "")
            raise AllocatorError(f"create NodeSelector for claim {name}: {exc}") from exc
        if node_selector is not None:
            result["nodeSelector"] = node_selector
        return result

    @staticmethod
    def _tolerations_of(requests: Sequence[Raw], internal: _DeviceResult) -> list[Raw]:
        wanted = internal.parent or internal.request
        for request in requests:
            if request.get("name") != wanted:
                continue
            if not internal.parent:
                return list((request.get("exactly") or {}).get("tolerations") or ())
            for sub in request.get("firstAvailable") or ():
                if sub.get("name") == internal.request:
                    return list(sub.get("tolerations") or ())
        return []

    def _chosen_request_names(self, claim_index: int, requests: Sequence[Raw]) -> list[tuple[str, ...]]:
        """Per request the names a config may use for it: the request, and for one with
        subrequests also `request/subrequest` of the subrequest that was picked."""
        names: list[tuple[str, ...]] = []
        for request_index, request in enumerate(requests):
            request_name = str(request.get("name") or "")
            data = self.request_data[(claim_index, request_index, 0)]
            if data.parent:
                chosen = self.request_data[(claim_index, request_index, data.selected_sub_request)]
                names.append((request_name, chosen.full_name))
            else:
                names.append((request_name,))
        return names

    def _class_configs(self, claim_index: int, requests: Sequence[Raw]) -> list[dict[str, Any]]:
        """Each class's configs once, naming every request (or picked subrequest) of that class."""
        config: list[dict[str, Any]] = []
        by_class: dict[str, list[dict[str, Any]]] = {}
        for request_index in range(len(requests)):
            data = self.request_data[(claim_index, request_index, 0)]
            if data.parent:
                data = self.request_data[(claim_index, request_index, data.selected_sub_request)]
            if data.device_class is None:
                continue
            class_name = str((data.device_class.get("metadata") or {}).get("name") or "")
            existing = by_class.get(class_name)
            if existing is not None:
                for entry in existing:
                    entry["requests"].append(data.full_name)
                continue
            entries = [
                _allocation_config("FromClass", [data.full_name], class_config)
                for class_config in (data.device_class.get("spec") or {}).get("config") or ()
            ]
            by_class[class_name] = entries
            config.extend(entries)
        return config

    def _node_selector(self, results: Sequence[_DeviceResult]) -> dict[str, Any] | None:
        """createNodeSelector: the node itself once a device is local to it or binds to it;
        otherwise the union of the slices' one-term selectors; None when available everywhere."""
        fields: list[Raw] = []
        expressions: list[Raw] = []
        for internal in results:
            spec = internal.slice.get("spec") or {}
            source = internal.device if spec.get("perDeviceNodeSelection") else spec
            if source.get("nodeName") is not None or internal.device.get("bindsToNode"):
                return {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node.name]}]}
                    ]
                }
            selector = source.get("nodeSelector")
            if selector is None:
                continue
            terms = selector.get("nodeSelectorTerms") or ()
            if len(terms) > 1:
                raise AllocatorError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _add_requirements(terms[0].get("matchFields") or (), fields)
                _add_requirements(terms[0].get("matchExpressions") or (), expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _allocation_config(source: str, requests: list[str], device_config: Raw) -> dict[str, Any]:
    entry: dict[str, Any] = {key: value for key, value in device_config.items() if key != "requests"}
    entry["source"] = source
    if requests:
        entry["requests"] = list(requests)
    return entry


def _add_requirements(new: Sequence[Raw], into: list[Raw]) -> None:
    for requirement in new:
        values = set(requirement.get("values") or ())
        if not any(
            existing.get("key") == requirement.get("key")
            and existing.get("operator") == requirement.get("operator")
            and set(existing.get("values") or ()) == values
            for existing in into
        ):
            into.append(requirement)
