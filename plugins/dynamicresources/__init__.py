"""DynamicResources: place pods whose ResourceClaims can be allocated, and allocate them (DRA).

The adapter, as kube-scheduler v1.37.2's plugin: PreEnqueue holds pods whose claims do not exist
(yet) or are being deleted; PreFilter resolves the pod's claims (by name or, for templates,
through status.resourceClaimStatuses), checks their DeviceClasses, notes allocated claims' node
selectors and sets up the structured allocator over the ResourceSlices with every device already
taken (allocated or in flight); Filter checks those node selectors and binding conditions and
runs the allocator for the node; Score prefers earlier `firstAvailable` alternatives; Reserve
makes the node's allocation visible to the next cycles (in flight); PreBind writes the finalizer,
`status.allocation` and `status.reservedFor` and waits for device binding conditions; PostFilter
deallocates a claim that keeps the pod off every node. Extended resources backed by DRA are
extended.py; the allocator is structured/, the claims' shapes claims.py, the hints queueing.py.

Reads the cluster only through the handle's DraManager; writes only through the handle's client,
in PreBind, Unreserve and PostFilter. Never mutates an object the informers own.
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import structlog

from plugins.dynamicresources import extended as ext
from plugins.dynamicresources.allocation import (
    AllocationSetup,
    NodeAllocator,
    TakenDevices,
    allocator_features,
    new_allocator,
)
from plugins.dynamicresources.claims import (
    ClaimProblem,
    ClaimStore,
    claim_ref,
    meta,
    name_of,
    namespace_of,
    pod_reference,
    pod_resource_claims,
    requests_of,
    reserved_for_pod,
    status_of,
)
from plugins.dynamicresources.queueing import events_to_register
from plugins.dynamicresources.structured import (
    AllocationTimeoutError,
    AllocatorError,
    FailedAllocationOnNodeError,
)
from plugins.helper import default_normalize_batch, default_normalize_score
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.framework.dra import FINALIZER, ClaimObject, allocation_of, uid_of
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    ClusterEventWithHint,
    Code,
    CycleState,
    NodeInfo,
    NodeScore,
    NodeToStatus,
    PreFilterResult,
    StateKey,
    Status,
)
from scheduler.model.durations import go_duration, parse_go_duration
from scheduler.model.objects import Pod
from scheduler.model.selectors import NodeSelector, parse_node_selector

log = structlog.get_logger("dynamicresources")

NAME = "DynamicResources"

DEFAULT_FILTER_TIMEOUT_SECONDS = 10.0
DEFAULT_BINDING_TIMEOUT_SECONDS = 600.0
# How often PreBind looks at the claims while it waits for binding conditions (kube polls 5 s).
BINDING_POLL_SECONDS = 5.0
# resourceapi.FirstAvailableDeviceRequestMaxSize: Score gives an alternative at position i 8 - i.
FIRST_AVAILABLE_MAX_SIZE = 8
# client-go's retry.DefaultRetry: 5 attempts, 10 ms apart (jitter 0.1).
CONFLICT_RETRIES = 5
CONFLICT_RETRY_SECONDS = 0.01

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
DEALLOCATED = "deallocation of ResourceClaim completed"
DELETED = "deletion of ResourceClaim completed"

BINDING_SUCCESS, BINDING_FAILED, BINDING_TIMEOUT, BINDING_ERROR = "success", "failure", "timeout", "error"


@dataclass(frozen=True)
class DynamicResourcesArgs:
    filter_timeout: float = DEFAULT_FILTER_TIMEOUT_SECONDS
    binding_timeout: float = DEFAULT_BINDING_TIMEOUT_SECONDS


def parse_args(args: Mapping[str, Any]) -> DynamicResourcesArgs:
    """DynamicResourcesArgs (filterTimeout, bindingTimeout as Go durations); errors name the field."""
    unknown = set(args) - {"apiVersion", "kind", "filterTimeout", "bindingTimeout"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")

    def duration(name: str, default: float) -> float:
        value = args.get(name)
        if value is None:
            return default
        try:
            return parse_go_duration(str(value))
        except ValueError:
            raise ValueError(f"{name}: Invalid value: {value!r}: not a duration") from None

    filter_timeout = duration("filterTimeout", DEFAULT_FILTER_TIMEOUT_SECONDS)
    if filter_timeout < 0:
        raise ValueError(f'filterTimeout: Invalid value: "{go_duration(filter_timeout)}": must be zero or positive')
    binding_timeout = duration("bindingTimeout", DEFAULT_BINDING_TIMEOUT_SECONDS)
    if binding_timeout < 1:
        raise ValueError(f'bindingTimeout: Invalid value: "{go_duration(binding_timeout)}": must be at least 1 second')
    return DynamicResourcesArgs(filter_timeout, binding_timeout)


class ClaimWriteError(Exception):
    """A claim write PreBind makes failed; the message is kube's (what was written, the apiserver's words)."""

    def __init__(self, message: str, cause: ApiError) -> None:
        super().__init__(message)
        self.conflict = cause.conflict


class DeviceBindingError(Exception):
    """A device's binding failure condition is true (kube's ErrDeviceBindingFailed)."""


class DeviceBindingTimeout(Exception):
    """Binding conditions were not met within bindingTimeout (kube's ErrDeviceBindingTimeout)."""


@dataclass
class _ClaimInfo:
    # The allocated claim's node selector (None: any node, or not allocated).
    available_on: NodeSelector | None = None
    # Set by Reserve, written by PreBind.
    allocation: Mapping[str, Any] | None = None


@dataclass
class _NodeAllocation:
    # One allocation per claim to allocate, in the claim store's order.
    results: list[Mapping[str, Any]]
    # The special claim for extended resources, with this node's requests.
    extended_claim: ClaimObject | None = None
    container_mappings: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _StateData:
    claims: ClaimStore = field(default_factory=ClaimStore)
    infos: list[_ClaimInfo] = field(default_factory=list)
    allocator: NodeAllocator | None = None
    # Indices of allocated claims some node could not use (PostFilter may deallocate one).
    unavailable: set[int] = field(default_factory=set)
    node_allocations: dict[str, _NodeAllocation] = field(default_factory=dict)
    extended: ext.ExtendedRequests | None = None
    # The special claims Filter made per set of DRA-backed amounts (shared by nodes alike).
    node_claims: ext.NodeClaims = field(default_factory=dict)

    def clone(self) -> _StateData:
        # As upstream: shared (preemption's what-ifs change no claim).
        return self


STATE_KEY: StateKey[_StateData] = StateKey(NAME)


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_selector_of(allocation: Mapping[str, Any]) -> NodeSelector | None:
    raw = allocation.get("nodeSelector")
    return parse_node_selector(raw) if raw is not None else None


class DynamicResources:
    name = NAME

    def __init__(self, args: DynamicResourcesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.dra = handle.dra
        self.setup = AllocationSetup(allocator_features(handle.feature_gates))
        # The devices every claim holds, kept between cycles.
        self.taken = TakenDevices()

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        if pod.spec.get("resourceClaims"):
            return (), Status.unschedulable("pods with dra resource claims are not signable", plugin=NAME)
        return (), None

    # ---- PreEnqueue ----------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.spec.get("resourceClaims"):
            return None
        try:
            pod_resource_claims(pod, self.dra.claims)
        except ClaimProblem as exc:
            return Status.unresolvable(str(exc), plugin=NAME)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return events_to_register(self.dra)

    # ---- PreFilter -----------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        data = _StateData()
        state.write(STATE_KEY, data)
        try:
            user_claims = pod_resource_claims(pod, self.dra.claims) if pod.spec.get("resourceClaims") else []
        except ClaimProblem as exc:
            return None, Status.unresolvable(str(exc), plugin=NAME)
        extended_claim = None
        data.extended = ext.pod_extended_requests(pod, self.dra)
        if data.extended is not None:
            extended_claim = ext.find_or_make_claim(pod, self.dra.claims.owned_by(pod.uid))
        claims = ClaimStore.of(user_claims, extended_claim)
        if claims.empty():
            return None, Status(Code.SKIP, plugin=NAME)
        data.infos = [_ClaimInfo() for _ in range(len(claims))]
        to_allocate = 0
        for index, claim in claims.all():
            allocation = allocation_of(claim)
            if allocation is not None:
                data.infos[index].available_on = node_selector_of(allocation)
                continue
            to_allocate += 1
            if self.dra.claims.pending_allocation(uid_of(claim)) is not None:
                return None, Status.unresolvable(
                    f"resource claim {claim_ref(claim)} is in the process of being allocated", plugin=NAME
                )
            if claims.is_extended(index):
                continue  # its requests depend on the node: Filter validates them
            status = self._check_requests(claim)
            if status is not None:
                return None, status
        if to_allocate:
            try:
                data.allocator = new_allocator(
                    self.setup,
                    self.taken.state(self.dra.claims),
                    self.dra.device_classes(),
                    self.setup.slices(self.dra),
                    self.args.filter_timeout,
                )
            except AllocatorError as exc:
                return None, Status.as_error(exc, NAME)
        data.claims = claims
        return None, None

    def _check_requests(self, claim: ClaimObject) -> Status | None:
        for request in requests_of(claim):
            name = str(request.get("name") or "")
            if request.get("exactly") is not None:
                status = self._check_class(str(request["exactly"].get("deviceClassName") or ""), name)
            elif request.get("firstAvailable"):
                status = None
                for sub in request["firstAvailable"]:
                    status = self._check_class(str(sub.get("deviceClassName") or ""), f"{name}/{sub.get('name', '')}")
                    if status is not None:
                        break
            else:
                status = Status.unresolvable(
                    f"resource claim {claim_ref(claim)}, request {name}: unknown request type", plugin=NAME
                )
            if status is not None:
                return status
        return None

    def _check_class(self, class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return Status.as_error(ValueError(f"request {request_name}: unsupported request type"), NAME)
        if self.dra.device_class(class_name) is None:
            return Status.unresolvable(f"request {request_name}: device class {class_name} does not exist", plugin=NAME)
        return None

    def pre_filter_extensions(self) -> None:
        return None

    # ---- Filter --------------------------------------------------------------------------

    def node_local(self, state: CycleState) -> bool:
        """Only when PreFilter skipped: the pod has no claims, and its Reserve and Unreserve leave
        every claim alone. Otherwise Filter and Reserve read and change allocations all nodes share."""
        return NAME in state.skip_filter_plugins

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError("not found"), NAME)
        if data.claims.empty():
            return None
        node = node_info.node
        if node is None:
            return Status.as_error(ValueError("node not found"), NAME)
        node_claim: ClaimObject | None = None
        mappings: list[dict[str, str]] = []
        extended_claim = data.claims.extended_claim()
        if extended_claim is not None and data.extended is not None:
            try:
                node_claim, mappings = ext.node_claim(
                    pod, extended_claim, data.extended, node_info, self.dra, data.node_claims
                )
            except ext.ExtendedProblem as exc:
                return Status.unresolvable(str(exc), plugin=NAME)
        if node_claim is None and data.claims.no_user_claim():
            return None  # device plugins on this node serve the extended resources
        unavailable = []
        for index, claim in data.claims.all():
            selector = data.infos[index].available_on
            if selector is not None and not selector.matches(node):
                unavailable.append(index)
                continue
            if allocation_of(claim) is not None:
                try:
                    ready = claim_ready_for_binding(claim)
                except DeviceBindingError:
                    unavailable.append(index)
                    continue
                if not ready and self._binding_timed_out(claim):
                    unavailable.append(index)
        results: list[Mapping[str, Any]] = []
        if data.allocator is not None:
            to_allocate = []
            for index, claim in data.claims.to_allocate():
                if data.claims.is_extended(index) and node_claim is not None:
                    claim = node_claim
                to_allocate.append(claim)
            try:
                allocated = data.allocator.allocate(node, to_allocate)
            except AllocationTimeoutError:
                return Status.as_error(TimeoutError(f"node {node.name}: timed out trying to allocate devices"), NAME)
            except FailedAllocationOnNodeError as exc:
                return Status.unresolvable(str(exc), plugin=NAME)
            except AllocatorError as exc:
                return Status.as_error(exc, NAME)
            if allocated is None or len(allocated) != len(to_allocate):
                return Status.unresolvable(CANNOT_ALLOCATE, plugin=NAME)
            results = list(allocated)
        if unavailable:
            data.unavailable.update(unavailable)
            return Status.unresolvable(NOT_AVAILABLE, plugin=NAME)
        if data.allocator is not None:
            data.node_allocations[node.name] = _NodeAllocation(results, node_claim, mappings)
        return None

    def _binding_timed_out(self, claim: ClaimObject) -> bool:
        allocation = allocation_of(claim) or {}
        stamp = allocation.get("allocationTimestamp")
        if not stamp:
            return False
        if not any(r.get("bindingConditions") for r in (allocation.get("devices") or {}).get("results") or ()):
            return False
        try:
            allocated_at = datetime.fromisoformat(str(stamp)).timestamp()
        except ValueError:
            return False  # the apiserver validates it; nothing to time out from otherwise
        return allocated_at + self.args.binding_timeout < time.time()

    # ---- PostFilter ----------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        data = state.get(STATE_KEY)
        if data is None:
            # kube's CycleState.Read error: a PreFilter plugin before this one rejected the pod.
            return None, Status(Code.ERROR, ("not found",), KeyError("not found"), NAME)
        if data.claims.empty():
            return None, Status.unschedulable(plugin=NAME)
        extended_claim = data.claims.extended_claim()
        written = extended_claim is not None and name_of(extended_claim) != ext.SPECIAL_CLAIM_NAME
        # kube picks one at random (there is no better heuristic).
        for index in random.sample(sorted(data.unavailable), len(data.unavailable)):
            claim = data.claims.claims[index]
            if data.claims.is_extended(index):
                if written:
                    break
                continue
            reserved = status_of(claim).get("reservedFor") or ()
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                self.handle.spawn(self._deallocate(claim))
                return None, Status.unschedulable(DEALLOCATED, plugin=NAME)
        if written and extended_claim is not None:
            self.handle.spawn(self._delete_claim(extended_claim))
            return None, Status.unschedulable(DELETED, plugin=NAME)
        return None, Status.unschedulable(plugin=NAME)

    async def _deallocate(self, claim: ClaimObject) -> None:
        status = {k: v for k, v in status_of(claim).items() if k not in ("reservedFor", "allocation", "devices")}
        try:
            await self.handle.client.update_resource_claim_status({**claim, "status": status})
        except ApiError as exc:
            log.warning("deallocating a ResourceClaim failed", claim=claim_ref(claim), error=str(exc))

    async def _delete_claim(self, claim: ClaimObject) -> None:
        try:
            await ext.delete_claim(self.handle.client, claim)
        except ApiError as exc:
            log.warning("deleting a ResourceClaim failed", claim=claim_ref(claim), error=str(exc))

    # ---- Score ---------------------------------------------------------------------------

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        data = state.get(STATE_KEY)
        if data is None:
            return 0, Status.as_error(KeyError("not found"), NAME)
        if data.claims.empty():
            return 0, None
        found = data.node_allocations.get(node_info.name)
        if found is None:
            return 0, None
        score = 0
        unallocated = iter(found.results)
        for _, claim in data.claims.all():
            allocation = allocation_of(claim)
            if allocation is None:
                allocation = next(unallocated, None)
                if allocation is None:
                    return 0, Status.as_error(
                        ValueError("number of allocations is smaller than number of claims needing allocation"), NAME
                    )
            chosen = {
                r.get("request")
                for r in (allocation.get("devices") or {}).get("results") or ()
                if str(r.get("request") or "").count("/") == 1
            }
            for request in requests_of(claim):
                if request.get("exactly") is not None:
                    continue
                for i, sub in enumerate(request.get("firstAvailable") or ()):
                    if f"{request.get('name')}/{sub.get('name')}" in chosen:
                        score += FIRST_AVAILABLE_MAX_SIZE - i
        return score, None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        """Every pod without claims scores 0 everywhere: no Python call per node for them."""
        data = state.get(STATE_KEY)
        if data is None or not data.claims.empty():
            return None
        return np.zeros(len(rows), np.int64)

    def score_extensions(self) -> DynamicResources:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    def normalize_batch(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        return default_normalize_batch(MAX_NODE_SCORE, False, scores)

    # ---- Reserve / Unreserve -------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError("not found"), NAME)
        to_allocate = list(data.claims.to_allocate())
        if not to_allocate or data.allocator is None:
            return None
        found = data.node_allocations.get(node_name)
        if found is None or not found.results:
            if all(data.claims.is_extended(index) for index, _ in to_allocate):
                return None  # only extended resources, served by device plugins on this node
            return Status.as_error(RuntimeError("claim allocation not found for node"), NAME)
        if len(found.results) != len(to_allocate):
            return Status.as_error(
                RuntimeError(
                    f"internal error, have {len(found.results)} allocations, {len(to_allocate)} claims to allocate"
                ),
                NAME,
            )
        for (index, claim), shared in zip(to_allocate, found.results, strict=True):
            # The allocator may give the same result to later cycles (outcomes it reuses): ours to change.
            allocation = copy.deepcopy(dict(shared))
            data.infos[index].allocation = allocation
            if data.claims.is_extended(index) and found.extended_claim is not None:
                claim = found.extended_claim
            allocated = copy.deepcopy(dict(claim))
            finalizers = allocated.setdefault("metadata", {}).setdefault("finalizers", [])
            if FINALIZER not in finalizers:
                finalizers.append(FINALIZER)
            allocated.setdefault("status", {})["allocation"] = allocation
            self.dra.claims.signal_pending_allocation(uid_of(claim), allocated)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data = state.get(STATE_KEY)
        if data is None or data.claims.empty():
            return
        for _, claim in data.claims.user_claims():
            if self.dra.claims.maybe_remove_pending_allocation(uid_of(claim), False):
                self.dra.claims.restore(namespace_of(claim), name_of(claim))
            if allocation_of(claim) is not None and reserved_for_pod(pod, claim):
                self.handle.spawn(self._unreserve_claim(claim, pod))
        extended_claim = data.claims.extended_claim()
        if extended_claim is not None:
            if self.dra.claims.maybe_remove_pending_allocation(data.claims.initial_extended_uid, False):
                self.dra.claims.restore(namespace_of(extended_claim), name_of(extended_claim))
            if name_of(extended_claim) != ext.SPECIAL_CLAIM_NAME:
                self.handle.spawn(self._delete_claim(extended_claim))

    async def _unreserve_claim(self, claim: ClaimObject, pod: Pod) -> None:
        patch = {"metadata": {"uid": uid_of(claim)}, "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
        try:
            await self.handle.client.patch_resource_claim_status(namespace_of(claim), name_of(claim), patch)
        except ApiError as exc:
            # The pod's next attempt comes here again.
            log.warning("unreserve", claim=claim_ref(claim), pod=pod.key, error=str(exc))

    # ---- PreBind -------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError("not found"), NAME)
        if data.claims.empty():
            return None
        bound: list[str] = []
        for index, claim in data.claims.all():
            if reserved_for_pod(pod, claim):
                continue
            try:
                written = await self._bind_claim(data, index, pod, node_name)
            except (ApiError, ClaimProblem, ClaimWriteError, ext.ExtendedProblem) as exc:
                return Status.as_error(exc, NAME)
            if written is not None:
                data.claims.claims[index] = written
                if data.infos[index].allocation is not None:
                    bound.append(uid_of(claim))
        status = await self._wait_for_binding_conditions(data, pod, node_name)
        if status is None:
            # Written and assumed: nothing is in flight any more.
            for uid in bound:
                self.dra.claims.maybe_remove_pending_allocation(uid, True)
        return status

    async def _bind_claim(self, data: _StateData, index: int, pod: Pod, node_name: str) -> ClaimObject | None:
        """Record the allocation from Reserve (with the finalizer) and reserve the claim for the pod;
        the claim as written, None when there was nothing to write."""
        claim = data.claims.claims[index]
        allocation = data.infos[index].allocation
        client = self.handle.client
        is_extended = data.claims.is_extended(index)
        if is_extended:
            found = data.node_allocations.get(node_name)
            if allocation is None and not requests_of(claim) and (found is None or found.extended_claim is None):
                return None  # extended resources served by device plugins
            if name_of(claim) == ext.SPECIAL_CLAIM_NAME:
                if found is None or found.extended_claim is None:
                    raise ext.ExtendedProblem("extended resource claim not found for node")
                claim = await ext.create_claim(client, found.extended_claim)
                data.claims.claims[index] = claim
        written: ClaimObject | None = None
        try:
            refresh = False
            for attempt in range(CONFLICT_RETRIES):
                if refresh:
                    try:
                        claim = await client.get_resource_claim(namespace_of(claim), name_of(claim))
                    except ApiError as exc:
                        detail = f"get updated claim {claim_ref(claim)} after conflict: {exc.message}"
                        raise ClaimProblem(detail) from exc
                refresh = True
                try:
                    written = await self._write_claim(claim, allocation, pod)
                    break
                except ClaimWriteError as exc:
                    if not exc.conflict or attempt == CONFLICT_RETRIES - 1:
                        raise
                    await asyncio.sleep(CONFLICT_RETRY_SECONDS)
        finally:
            if written is not None and not is_extended:
                try:
                    self.dra.claims.assume(written)
                except (KeyError, ValueError) as exc:
                    log.debug("claim not stored in assume cache", claim=claim_ref(written), error=str(exc))
        if is_extended and written is not None:
            if not await ext.wait_in_tracker(self.dra, written):
                log.info("created claim not seen by the informer in time", claim=claim_ref(written))
            found = data.node_allocations.get(node_name)
            await ext.patch_pod_status(client, pod, written, found.container_mappings if found else [])
        return written

    async def _write_claim(self, claim: ClaimObject, allocation: Mapping[str, Any] | None, pod: Pod) -> ClaimObject:
        client = self.handle.client
        if meta(claim).get("deletionTimestamp"):
            raise ClaimProblem(f"claim {claim_ref(claim)} got deleted in the meantime")
        body: dict[str, Any] = copy.deepcopy(dict(claim))
        status = body.setdefault("status", {})
        if allocation is not None:
            if status.get("allocation") is not None:
                raise ClaimProblem(f"claim {claim_ref(body)} got allocated elsewhere in the meantime")
            finalizers = body.setdefault("metadata", {}).get("finalizers") or []
            if FINALIZER not in finalizers:
                body["metadata"]["finalizers"] = [*finalizers, FINALIZER]
                try:
                    body = copy.deepcopy(dict(await client.update_resource_claim(body)))
                except ApiError as exc:
                    raise ClaimWriteError(f"add finalizer to claim {claim_ref(body)}: {exc.message}", exc) from exc
                status = body.setdefault("status", {})
            status["allocation"] = copy.deepcopy(dict(allocation))
        status["reservedFor"] = [*(status.get("reservedFor") or ()), pod_reference(pod)]
        if status.get("allocation") is None:
            raise ClaimProblem(f"claim {claim_ref(body)} got deallocated elsewhere in the meantime")
        status["allocation"].setdefault("allocationTimestamp", _now_rfc3339())
        try:
            return await client.update_resource_claim_status(body)
        except ApiError as exc:
            what = "add allocation and reservation" if allocation is not None else "add reservation"
            raise ClaimWriteError(f"{what} to claim {claim_ref(body)}: {exc.message}", exc) from exc

    async def _wait_for_binding_conditions(self, data: _StateData, pod: Pod, node_name: str) -> Status | None:
        if not has_binding_conditions(data.claims):
            return None
        self.handle.event_recorder(pod.scheduler_name).eventf(
            pod,
            None,
            "Normal",
            "BindingConditionsPending",
            "Scheduling",
            f"waiting for binding conditions for device on node {node_name}",
        )
        started = time.monotonic()
        error: Exception | None = None
        label = BINDING_SUCCESS
        try:
            while not self._pod_ready_for_binding(data):
                if time.monotonic() - started >= self.args.binding_timeout:
                    raise DeviceBindingTimeout("device binding timeout: context deadline exceeded")
                await asyncio.sleep(min(BINDING_POLL_SECONDS, self.args.binding_timeout))
        except DeviceBindingTimeout as exc:
            error, label = exc, BINDING_TIMEOUT
        except DeviceBindingError as exc:
            error, label = exc, BINDING_FAILED
        except ClaimProblem as exc:
            error, label = exc, BINDING_ERROR
        duration = time.monotonic() - started
        for _, claim in data.claims.all():
            allocation = allocation_of(claim)
            if allocation is None:
                continue
            results = (allocation.get("devices") or {}).get("results") or ()
            for result in results:
                metrics.child(
                    metrics.dra_binding_conditions_wait_duration, pod.scheduler_name, str(result.get("driver")), label
                ).observe(duration)
                if result.get("bindingConditions"):
                    metrics.child(
                        metrics.dra_binding_conditions_allocations, pod.scheduler_name, str(result.get("driver")), label
                    ).inc()
        return Status.as_error(error, NAME) if error is not None else None

    def _pod_ready_for_binding(self, data: _StateData) -> bool:
        """Raises DeviceBindingError / DeviceBindingTimeout / ClaimProblem."""
        for index, claim in data.claims.all():
            latest = self.dra.claims.get(namespace_of(claim), name_of(claim))
            if latest is None:
                raise ClaimProblem(f'could not find ResourceClaim "{claim_ref(claim)}"')
            data.claims.claims[index] = latest
            if not claim_ready_for_binding(latest):
                if self._binding_timed_out(latest):
                    raise DeviceBindingTimeout(f"device binding timeout: claim={name_of(latest)}")
                return False
        return True


def _condition_true(conditions: Sequence[Mapping[str, Any]], name: str) -> bool:
    return any(c.get("type") == name and c.get("status") == "True" for c in conditions)


def claim_ready_for_binding(claim: ClaimObject) -> bool:
    """All binding conditions of the allocated devices true and no failure condition true (kube's
    isClaimReadyForBinding); raises DeviceBindingError for a true failure condition."""
    allocation = allocation_of(claim)
    if allocation is None:
        return False
    devices = status_of(claim).get("devices") or ()
    for result in (allocation.get("devices") or {}).get("results") or ():
        if not result.get("bindingConditions"):
            continue
        status = next(
            (
                d
                for d in devices
                if (d.get("driver"), d.get("pool"), d.get("device"))
                == (result.get("driver"), result.get("pool"), result.get("device"))
            ),
            None,
        )
        if status is None:
            return False
        conditions = status.get("conditions") or ()
        for failure in result.get("bindingFailureConditions") or ():
            found = next((c for c in conditions if c.get("type") == failure and c.get("status") == "True"), None)
            if found is not None:
                raise DeviceBindingError(
                    f"device binding failed: claim={name_of(claim)}, reason={found.get('reason', '')}, "
                    f'message="{found.get("message", "")}"'
                )
        if not all(_condition_true(conditions, name) for name in result["bindingConditions"]):
            return False
    return True


def has_binding_conditions(claims: ClaimStore) -> bool:
    return any(
        result.get("bindingConditions")
        for _, claim in claims.all()
        if (allocation := allocation_of(claim)) is not None
        for result in (allocation.get("devices") or {}).get("results") or ()
    )


def new(args: Mapping[str, Any], handle: Handle) -> DynamicResources:
    return DynamicResources(parse_args(args), handle)
