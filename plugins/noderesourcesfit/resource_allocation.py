"""NodeResourcesFit's PreScore, Score and PlacementScore: the scoring strategies over the configured
resources.

As kube's noderesources/{resource_allocation,least_allocated,most_allocated,
requested_to_capacity_ratio}.go: each strategy scores one resource from the node's requested
amount (with the pod, containers without requests at the scheduler's defaults) and allocatable;
the scorer averages those scores by weight. The per-node form is the reference; the batch form
(cpu and memory only) computes the same integers over the node table's columns. A pod group's
placement (TopologyAwareWorkloadScheduling) is scored MostAllocated over the sums of its nodes. Arithmetic is
kube's int64: sums and products wrap, divisions truncate. Never changes a NodeInfo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from plugins.helper.resource_allocation import allocatable_and_requested
from plugins.helper.shape_score import MAX_CUSTOM_SCORE, MAX_UTILIZATION, broken_linear
from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, CycleState, NodeInfo, StateKey, Status
from scheduler.model.objects import CPU, MEMORY, Pod
from scheduler.model.quantity import go_add, go_div, go_mul, wrap_int64

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    requests: tuple[int, ...]  # per configured resource, non-zero defaults for cpu/memory

    def clone(self) -> _PreScoreState:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScoreNodeResourcesFit")


def go_div_batch(a: IntArray, b: IntArray) -> IntArray:
    """Go's truncating division element-wise (b != 0); only negative quotients differ from //."""
    quotient: IntArray = a // b
    if len(quotient) and quotient.min() < 0:
        quotient = quotient + ((quotient < 0) & (quotient * b != a))
    return quotient


def _clamp_score(score: int) -> int:
    return MAX_NODE_SCORE if score > MAX_NODE_SCORE else max(score, 0)


# ---- strategies: one resource's score, per node and over columns -----------------------
# numpy's int64 products wrap as Go's do; a negative capacity (kube's count of an odd
# allocatable) divides as it is. Batch callers pass a capacity of 1 where it is 0 (`safe`).


def least_allocated(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(go_mul(go_add(capacity, -requested), MAX_NODE_SCORE), capacity)


def least_allocated_batch(requested: IntArray, capacity: IntArray, safe: IntArray) -> IntArray:
    return np.where(requested > capacity, 0, go_div_batch((capacity - requested) * MAX_NODE_SCORE, safe))


def most_allocated(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return go_div(go_mul(min(requested, capacity), MAX_NODE_SCORE), capacity)


def most_allocated_batch(requested: IntArray, capacity: IntArray, safe: IntArray) -> IntArray:
    return go_div_batch(np.minimum(requested, capacity) * MAX_NODE_SCORE, safe)


class RequestedToCapacityRatio:
    """The shape (0..10 scores) scaled to 0..100, by utilisation; a table of it for the batch form."""

    def __init__(self, shape: Sequence[tuple[int, int]]) -> None:
        self._ratio = broken_linear([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for u, s in shape])
        self._table: IntArray = np.array([self._ratio(u) for u in range(MAX_UTILIZATION + 1)], np.int64)

    def __call__(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return self._ratio(MAX_UTILIZATION)
        return self._ratio(go_div(go_mul(requested, MAX_UTILIZATION), capacity))

    def batch(self, requested: IntArray, capacity: IntArray, safe: IntArray) -> IntArray:
        utilization = np.where(requested > capacity, MAX_UTILIZATION, go_div_batch(requested * MAX_UTILIZATION, safe))
        # The shape's score below 0 % is its first point's, above 100 % its last point's.
        scores: IntArray = self._table[np.clip(utilization, 0, MAX_UTILIZATION)]
        return scores


class ResourceAllocationScorer:
    """The weighted average of one strategy's per-resource scores (kube's resourceAllocationScorer)."""

    def __init__(self, strategy: str, resources: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> None:
        self.resources = tuple(resources)
        self._weights = [r.weight for r in self.resources]
        self._cpu_memory_only = all(r.name in (CPU, MEMORY) for r in self.resources)
        # RequestedToCapacityRatio averages only the resources that scored and rounds the average.
        self._ratio = strategy == REQUESTED_TO_CAPACITY_RATIO
        self._per_resource: Callable[[int, int], int]
        self._per_resource_batch: Callable[[IntArray, IntArray, IntArray], IntArray]
        if self._ratio:
            ratio = RequestedToCapacityRatio(shape)
            self._per_resource, self._per_resource_batch = ratio, ratio.batch
        elif strategy == LEAST_ALLOCATED:
            self._per_resource, self._per_resource_batch = least_allocated, least_allocated_batch
        else:
            self._per_resource, self._per_resource_batch = most_allocated, most_allocated_batch

    def _pod_requests(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        pre = state.get(PRE_SCORE_KEY)
        if pre is not None:
            return pre.requests
        return tuple(pod.fit_scoring_request(r.name) for r in self.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_KEY, _PreScoreState(tuple(pod.fit_scoring_request(r.name) for r in self.resources)))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        requests = self._pod_requests(state, pod)
        total = weight_sum = 0
        for spec, weight, pod_request in zip(self.resources, self._weights, requests, strict=True):
            capacity, used = allocatable_and_requested(node_info, spec.name, pod_request, non_zero=True)
            if capacity == 0:
                continue
            resource_score = self._per_resource(go_add(used, pod_request), capacity)
            if self._ratio and resource_score <= 0:
                continue
            total = go_add(total, go_mul(resource_score, weight))
            weight_sum += weight
        if weight_sum == 0:
            return 0, None
        if self._ratio:
            # Go's math.Round: halves round away from zero (Python's round() would go to even).
            return (2 * total + weight_sum) // (2 * weight_sum), None
        return _clamp_score(go_div(total, weight_sum)), None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        if not self._cpu_memory_only:
            return None
        requests = self._pod_requests(state, pod)
        total = np.zeros(len(rows), np.int64)
        weight_sum = np.zeros(len(rows), np.int64)
        for spec, weight, pod_request in zip(self.resources, self._weights, requests, strict=True):
            if spec.name == CPU:
                capacity, requested = table.alloc_cpu[rows], table.nz_cpu[rows] + pod_request
            else:
                capacity, requested = table.alloc_mem[rows], table.nz_mem[rows] + pod_request
            present = capacity != 0
            resource_score = self._per_resource_batch(requested, capacity, np.where(capacity == 0, 1, capacity))
            if self._ratio:
                present &= resource_score > 0
            total += np.where(present, resource_score, 0) * weight
            weight_sum += present * weight
        safe = np.maximum(weight_sum, 1)
        if self._ratio:
            result = (2 * total + safe) // (2 * safe)
        else:
            result = np.clip(go_div_batch(total, safe), 0, MAX_NODE_SCORE)
        return np.where(weight_sum == 0, 0, result)


def placement_score(resources: Sequence[ResourceSpec], nodes: Sequence[NodeInfo], pods: Sequence[Pod]) -> int:
    """kube's scorePlacement: MostAllocated, whatever the configured strategy, over the placement as
    one node: its nodes' allocatable and requested amounts summed, plus the members placed in it.

    As kube, a scalar resource counts only once something (the members, or a node already summed)
    requests it, and a node that does not offer a resource adds nothing to it."""
    requested = [0] * len(resources)
    for pod in pods:
        for i, spec in enumerate(resources):
            requested[i] = go_add(requested[i], pod.fit_scoring_request(spec.name))
    allocatable = [0] * len(resources)
    for i, spec in enumerate(resources):
        if spec.name in (CPU, MEMORY):
            # Their amounts do not depend on what was summed before: one pass, wrapped once (a
            # wrap after each addition gives the same int64).
            allocatable[i], used = _summed(nodes, spec.name == CPU)
            requested[i] = go_add(requested[i], used)
            continue
        for node_info in nodes:
            capacity, used = allocatable_and_requested(node_info, spec.name, requested[i], non_zero=True)
            if capacity == 0:
                continue
            allocatable[i] = go_add(allocatable[i], capacity)
            requested[i] = go_add(requested[i], used)
    total = weight_sum = 0
    for spec, amount, capacity in zip(resources, requested, allocatable, strict=True):
        if capacity == 0:
            continue
        total = go_add(total, go_mul(most_allocated(amount, capacity), spec.weight))
        weight_sum += spec.weight
    return go_div(total, weight_sum) if weight_sum else 0


def _summed(nodes: Sequence[NodeInfo], cpu: bool) -> tuple[int, int]:
    """Allocatable and non-zero requested cpu (or memory) of the nodes that offer it, as int64."""
    if cpu:
        pairs = [(alloc, info.non_zero_milli_cpu) for info in nodes if (alloc := info.allocatable.milli_cpu)]
    else:
        pairs = [(alloc, info.non_zero_memory) for info in nodes if (alloc := info.allocatable.memory)]
    return wrap_int64(sum(a for a, _ in pairs)), wrap_int64(sum(u for _, u in pairs))
