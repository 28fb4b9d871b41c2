"""NodeResourcesFit: does the node have room for the pod's requests; how full would it be.

Filter compares the pod's effective requests (containers, sidecars, init peak, overhead)
with allocatable minus what the node's pods request. Score ranks nodes by the configured
strategy (LeastAllocated by default, MostAllocated, RequestedToCapacityRatio).

Arithmetic is kube's: int64 sums and products that wrap, divisions that truncate. Where that
gives a node a score outside [0, 100] (a node offering 1e14 cpu or 100P memory overflows
(capacity - requested) * 100), kube's framework fails the whole cycle of every pod that scores
the node; here that node's score is clamped into range instead, so it only moves itself. A pod
whose own requests are beyond int64 is rejected at PreFilter, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugins.helper import unexpected_objects
from plugins.helper.shape_score import MAX_CUSTOM_SCORE, MAX_UTILIZATION, broken_linear
from scheduler.framework.interface import Handle
from scheduler.framework.table import FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    NodeInfo,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import CPU, EPHEMERAL_STORAGE, MEMORY, Node, Pod, Resource
from scheduler.model.quantity import go_add, go_div, go_mul

NAME = "NodeResourcesFit"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class FitArgs:
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))
    shape: tuple[tuple[int, int], ...] = ()
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()


def parse_args(args: Mapping[str, Any]) -> FitArgs:
    """Validate NodeResourcesFitArgs; errors name the field."""
    unknown = set(args) - {"apiVersion", "kind", "scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type") or LEAST_ALLOCATED
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
        raise ValueError(
            f"scoringStrategy.type: Unsupported value: {kind!r}: supported values: "
            f'"{LEAST_ALLOCATED}", "{MOST_ALLOCATED}", "{REQUESTED_TO_CAPACITY_RATIO}"'
        )
    resources = []
    for i, item in enumerate(strategy.get("resources") or ({"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1})):
        weight = item.get("weight") or 1  # v1 defaulting: an unset or zero weight is 1
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(
                f"scoringStrategy.resources[{i}].weight: Invalid value: {weight!r}: must be in the range [1, 100]"
            )
        if not item.get("name"):
            raise ValueError(f"scoringStrategy.resources[{i}].name: Required value")
        resources.append(ResourceSpec(item["name"], weight))
    shape: list[tuple[int, int]] = []
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        points = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
        if not points:
            raise ValueError("scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point")
        for i, point in enumerate(points):
            util, score = point.get("utilization", 0), point.get("score", 0)
            if not 0 <= util <= MAX_UTILIZATION:
                raise ValueError(
                    f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: must be in [0, 100]"
                )
            if not 0 <= score <= MAX_CUSTOM_SCORE:
                raise ValueError(f"scoringStrategy.requestedToCapacityRatio.shape[{i}].score: must be in [0, 10]")
            if shape and util <= shape[-1][0]:
                raise ValueError(
                    f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: values must be sorted "
                    "in increasing order"
                )
            shape.append((util, score))
    return FitArgs(
        strategy=kind,
        resources=tuple(resources),
        shape=tuple(shape),
        ignored_resources=frozenset(args.get("ignoredResources") or ()),
        ignored_resource_groups=frozenset(args.get("ignoredResourceGroups") or ()),
    )


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    requests: Resource

    def clone(self) -> _PreFilterState:
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    requests: tuple[int, ...]  # per configured resource, non-zero defaults for cpu/memory

    def clone(self) -> _PreScoreState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def _is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: qualified, and not in any *kubernetes.io/ namespace."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _is_scalar(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, *kubernetes.io/-prefixed, attachable volumes."""
    return _is_extended(name) or name.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in name


def _go_div_batch(a: IntArray, b: IntArray) -> IntArray:
    """Go's truncating division element-wise (b != 0); only negative quotients differ from //."""
    quotient: IntArray = a // b
    if len(quotient) and quotient.min() < 0:
        quotient = quotient + ((quotient < 0) & (quotient * b != a))
    return quotient


def _clamp_score(score: int) -> int:
    return MAX_NODE_SCORE if score > MAX_NODE_SCORE else max(score, 0)


def insufficient_resources(
    requests: Resource,
    node_info: NodeInfo,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> list[tuple[str, bool]]:
    """(reason, unresolvable) for every resource the node lacks for these requests."""
    alloc = node_info.allocatable
    used = node_info.requested
    out: list[tuple[str, bool]] = []
    if len(node_info.pods) + 1 > alloc.allowed_pods:
        out.append(("Too many pods", False))
    if requests.is_zero():
        return out
    # Free amounts wrap as kube's int64 subtraction does (and as the batch form's numpy columns do).
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
        if _is_extended(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
            continue
        capacity = alloc.scalar.get(name, 0)
        if amount > go_add(capacity, -used.scalar.get(name, 0)):
            out.append((f"Insufficient {name}", amount > capacity))
    return out


_KEYED_REASONS = ("Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage")


def _status_of_key(key: int) -> Status:
    """The Filter status of a filter_batch key (bit 0: too many pods; then per resource, lacking
    and lacking even on an empty node)."""
    reasons = ["Too many pods"] if key & 1 else []
    unresolvable = False
    for bit, reason in enumerate(_KEYED_REASONS):
        if key >> (2 * bit + 1) & 1:
            reasons.append(reason)
            unresolvable = unresolvable or bool(key >> (2 * bit + 2) & 1)
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, tuple(reasons), plugin=NAME)


def fits(pod: Pod, node: Node) -> bool:
    """Would the pod fit on this node if it were empty (used by queueing hints)."""
    info = NodeInfo(node)
    return not insufficient_resources(pod.fit_requests, info)


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(go_mul(go_add(capacity, -requested), MAX_NODE_SCORE), capacity)


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return go_div(go_mul(min(requested, capacity), MAX_NODE_SCORE), capacity)


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: FitArgs) -> None:
        self.args = args
        self._weights = [r.weight for r in args.resources]
        self._cpu_memory_only = all(r.name in (CPU, MEMORY) for r in args.resources)
        self._ratio = args.strategy == REQUESTED_TO_CAPACITY_RATIO
        self._ratio_table: IntArray = np.zeros(MAX_UTILIZATION + 1, np.int64)
        if args.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # Shape scores are 0..10; the scheduler's scores 0..100.
            ratio = broken_linear([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for u, s in args.shape])
            self._ratio_table = np.array([ratio(u) for u in range(MAX_UTILIZATION + 1)], np.int64)

            def per_resource(requested: int, capacity: int) -> int:
                if capacity == 0 or requested > capacity:
                    return ratio(MAX_UTILIZATION)
                return ratio(go_div(go_mul(requested, MAX_UTILIZATION), capacity))

            self._per_resource = per_resource
        else:
            self._per_resource = _least if args.strategy == LEAST_ALLOCATED else _most

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.fit_out_of_range:
            # kube would count such a request as 0 (or a wrapped number) and place the pod anywhere.
            return None, Status.unresolvable(pod.fit_out_of_range, plugin=NAME)
        state.write(PRE_FILTER_KEY, _PreFilterState(pod.fit_requests))
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        pre = state.get(PRE_FILTER_KEY)
        requests = pre.requests if pre is not None else pod.fit_requests
        missing = insufficient_resources(
            requests, node_info, self.args.ignored_resources, self.args.ignored_resource_groups
        )
        if not missing:
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(u for _, u in missing) else Code.UNSCHEDULABLE
        return Status(code, tuple(r for r, _ in missing), plugin=NAME)

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
        pre = state.get(PRE_FILTER_KEY)
        requests = pre.requests if pre is not None else pod.fit_requests
        if any(requests.scalar.values()):
            return None  # extended resources: the per-node form handles them
        # One bit per (reason, unresolvable) in insufficient_resources' order: a row's key is the
        # set of what it lacks, and each distinct set becomes one status.
        keys: IntArray = (table.pod_count >= table.alloc_pods).astype(np.int64)
        if not requests.is_zero():
            for bit, (request, alloc, used) in enumerate(
                (
                    (requests.milli_cpu, table.alloc_cpu, table.req_cpu),
                    (requests.memory, table.alloc_mem, table.req_mem),
                    (requests.ephemeral_storage, table.alloc_eph, table.req_eph),
                )
            ):
                if request > 0:
                    lacking = request > alloc - used
                    keys |= lacking.astype(np.int64) << (2 * bit + 1)
                    keys |= (lacking & (request > alloc)).astype(np.int64) << (2 * bit + 2)
        return FilterVerdicts.from_keys(keys, _status_of_key)

    # ---- PreScore / Score --------------------------------------------------------------

    def _pod_request(self, pod: Pod, resource: str) -> int:
        return pod.fit_scoring_request(resource)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_KEY, _PreScoreState(tuple(self._pod_request(pod, r.name) for r in self.args.resources)))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        pre = state.get(PRE_SCORE_KEY)
        requests = (
            pre.requests if pre is not None else tuple(self._pod_request(pod, r.name) for r in self.args.resources)
        )
        alloc = node_info.allocatable
        total = weight_sum = 0
        for spec, weight, pod_request in zip(self.args.resources, self._weights, requests, strict=True):
            name = spec.name
            if name == CPU:
                capacity, used = alloc.milli_cpu, node_info.non_zero_milli_cpu
            elif name == MEMORY:
                capacity, used = alloc.memory, node_info.non_zero_memory
            elif name == EPHEMERAL_STORAGE:
                capacity, used = alloc.ephemeral_storage, node_info.requested.ephemeral_storage
            else:
                if pod_request == 0 and _is_scalar(name):
                    continue  # an extended resource the pod does not ask for is not scored
                # Anything else only counts as a scalar resource the node offers ("pods" does not).
                capacity = alloc.scalar.get(name, 0)
                used = node_info.requested.scalar.get(name, 0)
            requested = go_add(used, pod_request)
            if capacity == 0:
                continue
            resource_score = self._per_resource(requested, capacity)
            if self._ratio and resource_score <= 0:
                continue  # RequestedToCapacityRatio averages only the resources that scored
            total = go_add(total, go_mul(resource_score, weight))
            weight_sum += weight
        if weight_sum == 0:
            return 0, None
        if self.args.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # Go's math.Round: halves round away from zero (Python's round() would go to even).
            return (2 * total + weight_sum) // (2 * weight_sum), None
        return _clamp_score(go_div(total, weight_sum)), None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        if not self._cpu_memory_only:
            return None
        pre = state.get(PRE_SCORE_KEY)
        requests = (
            pre.requests if pre is not None else tuple(self._pod_request(pod, r.name) for r in self.args.resources)
        )
        total = np.zeros(len(rows), np.int64)
        weight_sum = np.zeros(len(rows), np.int64)
        for spec, weight, pod_request in zip(self.args.resources, self._weights, requests, strict=True):
            if spec.name == CPU:
                capacity, requested = table.alloc_cpu[rows], table.nz_cpu[rows] + pod_request
            else:
                capacity, requested = table.alloc_mem[rows], table.nz_mem[rows] + pod_request
            present = capacity != 0
            resource_score = self._per_resource_batch(requested, capacity)
            if self._ratio:
                present &= resource_score > 0
            total += np.where(present, resource_score, 0) * weight
            weight_sum += present * weight
        safe = np.maximum(weight_sum, 1)
        if self.args.strategy == REQUESTED_TO_CAPACITY_RATIO:
            result = (2 * total + safe) // (2 * safe)
        else:
            result = np.clip(_go_div_batch(total, safe), 0, MAX_NODE_SCORE)
        return np.where(weight_sum == 0, 0, result)

    def _per_resource_batch(self, requested: IntArray, capacity: IntArray) -> IntArray:
        # numpy's int64 products wrap as Go's do; a negative capacity (kube's count of an odd
        # allocatable) divides as it is.
        safe = np.where(capacity == 0, 1, capacity)
        if self.args.strategy == LEAST_ALLOCATED:
            return np.where(requested > capacity, 0, _go_div_batch((capacity - requested) * MAX_NODE_SCORE, safe))
        if self.args.strategy == MOST_ALLOCATED:
            return _go_div_batch(np.minimum(requested, capacity) * MAX_NODE_SCORE, safe)
        utilization = np.where(requested > capacity, MAX_UTILIZATION, _go_div_batch(requested * MAX_UTILIZATION, safe))
        # The shape's score below 0 % is its first point's, above 100 % its last point's.
        scores: IntArray = self._ratio_table[np.clip(utilization, 0, MAX_UTILIZATION)]
        return scores

    def score_extensions(self) -> None:
        return None

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _pod_freed),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE), _node_grew
            ),
            # In-place resize (GA): a bound pod shrinking frees room; the pod itself shrinking may fit.
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN), _pod_freed
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_SCALE_DOWN)),
        ]


def _pod_freed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """An assigned (or nominated) pod was deleted, finished, or shrank in something this pod asks for."""
    if pod.fit_out_of_range:
        return QueueingHint.SKIP  # only the pod's own update can bring its request within int64
    if new is None:  # deleted
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        nominated = (old.raw.get("status") or {}).get("nominatedNodeName")
        return QueueingHint.QUEUE if old.node_name or nominated else QueueingHint.SKIP
    if unexpected_objects(Pod, old, new) or old is None:
        return QueueingHint.QUEUE
    if new.terminal:  # the cache lets a finished pod go as if it were deleted
        return QueueingHint.QUEUE
    if not new.node_name:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if _relevant_resources_decreased(pod, old, new) else QueueingHint.SKIP


def _relevant_resources_decreased(pod: Pod, old: Pod, new: Pod) -> bool:
    """haveEnoughRelevantResourcesDecreased: a resource the target pod requests got smaller."""
    wanted = pod.requests
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        if wanted.get(name) > 0 and old.requests.get(name) > new.requests.get(name):
            return True
    return any(
        amount > 0 and _is_scalar(name) and old.requests.scalar.get(name, 0) > new.requests.scalar.get(name, 0)
        for name, amount in wanted.scalar.items()
    )


def _node_grew(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, Node) or pod.fit_out_of_range:
        return QueueingHint.SKIP
    if old is None:
        return QueueingHint.QUEUE if fits(pod, new) else QueueingHint.SKIP
    if not isinstance(old, Node):
        return QueueingHint.QUEUE
    a, b = old.allocatable, new.allocatable
    req = pod.fit_requests
    grew = (
        b.allowed_pods > a.allowed_pods
        or (req.milli_cpu > 0 and b.milli_cpu > a.milli_cpu)
        or (req.memory > 0 and b.memory > a.memory)
        or (req.ephemeral_storage > 0 and b.ephemeral_storage > a.ephemeral_storage)
        or any(amount and b.scalar.get(name, 0) > a.scalar.get(name, 0) for name, amount in req.scalar.items())
    )
    return QueueingHint.QUEUE if grew and fits(pod, new) else QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(parse_args(args))
