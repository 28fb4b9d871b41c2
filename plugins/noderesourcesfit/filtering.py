"""NodeResourcesFit's PreFilter and Filter: does the node have room for the pod's requests.

As kube's noderesources/fit.go: the pod's effective requests (containers, sidecars, init peak,
overhead), computed once at PreFilter, against allocatable minus what the node's pods request;
free amounts wrap as kube's int64 subtraction does (and as the batch form's numpy columns do). A
pod whose own requests are beyond int64 is rejected at PreFilter, naming the field. Never changes
a NodeInfo.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from plugins.helper.resource_allocation import is_extended_resource
from scheduler.framework.table import BoolArray, FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, StateKey, Status
from scheduler.model.objects import Node, Pod, Resource
from scheduler.model.quantity import go_add

NAME = "NodeResourcesFit"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    requests: Resource

    def clone(self) -> _PreFilterState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)

# Whether a DeviceClass backs this extended resource: where the node does not offer it, it is
# DynamicResources' to allocate (kube's shouldDelegateResourceToDRA, DRAExtendedResource).
Delegate = Callable[[str], bool]


def never_delegate(name: str) -> bool:
    return False


def insufficient_resources(
    requests: Resource,
    node_info: NodeInfo,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
    delegate: Delegate = never_delegate,
) -> list[tuple[str, bool]]:
    """(reason, unresolvable) for every resource the node lacks for these requests."""
    alloc = node_info.allocatable
    used = node_info.requested
    out: list[tuple[str, bool]] = []
    if len(node_info.pods) + 1 > alloc.allowed_pods:
        out.append(("Too many pods", False))
    if requests.is_zero():
        return out
    if requests.milli_cpu > 0 and requests.milli_cpu > go_add(alloc.milli_cpu, -used.milli_cpu):
        out.append(("Insufficient cpu", requests.milli_cpu > alloc.milli_cpu))
    if requests.memory > 0 and requests.memory > go_add(alloc.memory, -used.memory):
        out.append(("Insufficient memory", requests.memory > alloc.memory))
    free_storage = go_add(alloc.ephemeral_storage, -used.ephemeral_storage)
    if requests.ephemeral_storage > 0 and requests.ephemeral_storage > free_storage:
        out.append(("Insufficient ephemeral-storage", requests.ephemeral_storage > alloc.ephemeral_storage))
    for name, amount in requests.scalar.items():
        if amount == 0:
            continue
        if is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
            continue
        capacity = alloc.scalar.get(name, 0)
        if capacity <= 0 and delegate(name):
            continue
        if amount > go_add(capacity, -used.scalar.get(name, 0)):
            out.append((f"Insufficient {name}", amount > capacity))
    return out


def fits(pod: Pod, node: Node, delegate: Delegate = never_delegate) -> bool:
    """Would the pod fit on this node if it were empty (used by queueing hints)."""
    info = NodeInfo(node)
    return not insufficient_resources(pod.fit_requests, info, delegate=delegate)


def pre_filter(state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
    if pod.fit_out_of_range:
        # kube would count such a request as 0 (or a wrapped number) and place the pod anywhere.
        return None, Status.unresolvable(pod.fit_out_of_range, plugin=NAME)
    state.write(PRE_FILTER_KEY, _PreFilterState(pod.fit_requests))
    return None, None


def _requests(state: CycleState, pod: Pod) -> Resource:
    pre = state.get(PRE_FILTER_KEY)
    return pre.requests if pre is not None else pod.fit_requests


def filter_node(
    state: CycleState,
    pod: Pod,
    node_info: NodeInfo,
    ignored: frozenset[str],
    ignored_groups: frozenset[str],
    delegate: Delegate = never_delegate,
) -> Status | None:
    missing = insufficient_resources(_requests(state, pod), node_info, ignored, ignored_groups, delegate)
    if not missing:
        return None
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(u for _, u in missing) else Code.UNSCHEDULABLE
    return Status(code, tuple(r for r, _ in missing), plugin=NAME)


_KEYED_REASONS = ("Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage")


@functools.cache
def _status_of_key(scalars: tuple[str, ...], key: int) -> Status:
    """The Filter status of a rejection key (bit 0: too many pods; then per resource — cpu, memory,
    ephemeral storage, then the pod's extended resources — lacking and lacking even on an empty
    node), shared by every pod asking for the same extended resources."""
    reasons = ["Too many pods"] if key & 1 else []
    unresolvable = False
    for bit, reason in enumerate((*_KEYED_REASONS, *(f"Insufficient {name}" for name in scalars))):
        if key >> (2 * bit + 1) & 1:
            reasons.append(reason)
            unresolvable = unresolvable or bool(key >> (2 * bit + 2) & 1)
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, tuple(reasons), plugin=NAME)


def filter_batch(
    state: CycleState,
    pod: Pod,
    table: NodeTable,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
    delegate: Delegate = never_delegate,
) -> FilterVerdicts | None:
    """filter_node over every row: the resource columns, extended resources through per-resource
    columns (one DRA would allocate passes where the node offers none of it)."""
    requests = _requests(state, pod)
    scalars = _checked_scalars(requests, ignored, ignored_groups)
    delegated = tuple(delegate(name) for name, _ in scalars)
    mask: BoolArray = table.pod_count < table.alloc_pods
    if not requests.is_zero():
        if requests.milli_cpu > 0:
            mask &= requests.milli_cpu <= table.alloc_cpu - table.req_cpu
        if requests.memory > 0:
            mask &= requests.memory <= table.alloc_mem - table.req_mem
        if requests.ephemeral_storage > 0:
            mask &= requests.ephemeral_storage <= table.alloc_eph - table.req_eph
        for (name, amount), to_dra in zip(scalars, delegated, strict=True):
            alloc = table.alloc_scalar(name)
            fits = amount <= alloc - table.req_scalar(name)
            if to_dra:
                fits |= alloc <= 0
            mask &= fits
    return FilterVerdicts(
        mask,
        functools.partial(_rejection_keys, requests, scalars, delegated, table),
        functools.partial(_status_of_key, tuple(name for name, _ in scalars)),
    )


def _checked_scalars(
    requests: Resource, ignored: frozenset[str], ignored_groups: frozenset[str]
) -> tuple[tuple[str, int], ...]:
    """The extended resources insufficient_resources checks, in its order."""
    return tuple(
        (name, amount)
        for name, amount in requests.scalar.items()
        if amount != 0
        and not (is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups))
    )


def _rejection_keys(
    requests: Resource,
    scalars: tuple[tuple[str, int], ...],
    delegated: tuple[bool, ...],
    table: NodeTable,
    rows: IntArray,
) -> IntArray:
    """Per rejected row, the set of what it lacks as one bit per (reason, unresolvable) in
    insufficient_resources' order; worked out only for the rows the scheduler reached."""
    keys: IntArray = (table.pod_count[rows] >= table.alloc_pods[rows]).astype(np.int64)
    if requests.is_zero():
        return keys
    checks = [
        (requests.milli_cpu, table.alloc_cpu[rows], table.req_cpu[rows], False),
        (requests.memory, table.alloc_mem[rows], table.req_mem[rows], False),
        (requests.ephemeral_storage, table.alloc_eph[rows], table.req_eph[rows], False),
    ]
    checks += [
        (amount, table.alloc_scalar(name)[rows], table.req_scalar(name)[rows], to_dra)
        for (name, amount), to_dra in zip(scalars, delegated, strict=True)
    ]
    for bit, (request, alloc, used, to_dra) in enumerate(checks):
        if request > 0:
            lacking = request > alloc - used
            if to_dra:
                lacking &= alloc > 0
            keys |= lacking.astype(np.int64) << (2 * bit + 1)
            keys |= (lacking & (request > alloc)).astype(np.int64) << (2 * bit + 2)
    return keys
