"""NodeResourcesBalancedAllocation: prefer nodes whose balance the pod would improve.

For each configured resource the node offers, the fraction requested / allocatable, capped at
1; a balance is (1 - standard deviation of the fractions) * 100, truncated. As in
kube-scheduler 1.37 the score rewards the change the pod makes: 50 + (50 + balance with the
pod - balance without it) / 2, so 75 for no change, towards 100 when the pod evens the node
out, towards 50 when it skews it. Requests are the real ones (no 100m/200Mi defaults for
containers that ask for nothing; pod-level resources and in-place resize status count). A
pod that asks for none of the configured resources is skipped at PreScore, so this plugin
adds nothing for it.

Sums wrap as kube's int64 sums do. A fraction below 0 (only a wrapped sum or kube's count of an
allocatable beyond int64 is negative) counts as 0: in kube it drives the score out of [0, 100] and
the framework then fails the cycle of every pod that scores the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plugins.helper.resource_allocation import allocatable_and_requested, delegated_to_dra, sign_requests
from scheduler.framework.dra import DraManager
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, Code, CycleState, NodeInfo, StateKey, Status
from scheduler.model.objects import CPU, MEMORY, Pod
from scheduler.model.quantity import go_add
from scheduler.model.selectors import aggregate

NAME = "NodeResourcesBalancedAllocation"

DEFAULT_RESOURCES = (CPU, MEMORY)


def parse_args(args: Mapping[str, Any]) -> tuple[str, ...]:
    """The resource names of NodeResourcesBalancedAllocationArgs; errors name the field."""
    unknown = set(args) - {"resources", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    kind = "NodeResourcesBalancedAllocationArgs"
    if args.get("kind", kind) != kind:
        raise ValueError(f'kind: Unsupported value: "{args["kind"]}": supported values: "{kind}"')
    resources: Sequence[Mapping[str, Any]] = args.get("resources") or ()
    if not resources:
        return DEFAULT_RESOURCES
    errors: list[str] = []
    names: list[str] = []
    for i, spec in enumerate(resources):
        name = str(spec.get("name") or "")
        if name in names:
            errors.append(f'resources[{i}].name: Duplicate value: "{name}"')
        else:
            names.append(name)
        weight = spec.get("weight") or 1  # an unset (or zero) weight defaults to 1
        if weight != 1:
            errors.append(f"resources[{i}].weight: Invalid value: {weight}: must be 1")
    if errors:
        raise ValueError(aggregate(errors))
    return tuple(names)


def balanced_resource_scorer(requested: Sequence[int], allocated: Sequence[int], allocatable: Sequence[int]) -> int:
    """The 1.37 score: how much the pod improves the node's balance, in [50, 100]."""
    with_pod = balanced_score(requested, allocatable)
    without_pod = balanced_score(allocated, allocatable)
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions = [
        min(max(float(req) / float(alloc), 0.0), 1.0)
        for req, alloc in zip(requested, allocatable, strict=True)
        if alloc != 0
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for fraction in fractions:
            total += fraction
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares += (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    requests: tuple[int, ...]  # per configured resource

    def clone(self) -> _PreScoreState:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


class NodeResourcesBalancedAllocation:
    name = NAME

    def __init__(self, resources: Sequence[str], dra: DraManager | None = None) -> None:
        self.resources = tuple(resources)
        self._delegate = delegated_to_dra(dra)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return sign_requests(pod, self._delegate, NAME)

    def _requests(self, pod: Pod) -> tuple[int, ...]:
        return tuple(pod.requests.get(name) for name in self.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        requests = self._requests(pod)
        if not any(requests):
            return Status(Code.SKIP, plugin=NAME)
        state.write(PRE_SCORE_KEY, _PreScoreState(requests))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        pre = state.get(PRE_SCORE_KEY)
        requests = pre.requests if pre is not None else self._requests(pod)
        if pre is None and not any(requests):
            return 0, None
        allocatable: list[int] = []
        allocated: list[int] = []
        requested: list[int] = []
        for name, pod_request in zip(self.resources, requests, strict=True):
            alloc, used = allocatable_and_requested(node_info, name, pod_request, non_zero=False)
            allocatable.append(alloc)
            allocated.append(used if alloc else 0)
            requested.append(go_add(used, pod_request) if alloc else 0)
        return balanced_resource_scorer(requested, allocated, allocatable), None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        if self.resources != (CPU, MEMORY):
            return None
        pre = state.get(PRE_SCORE_KEY)
        if pre is None:
            return None
        cpu_alloc, mem_alloc = table.alloc_cpu[rows], table.alloc_mem[rows]
        both = (cpu_alloc != 0) & (mem_alloc != 0)
        cpu_used, mem_used = table.req_cpu[rows], table.req_mem[rows]

        cpu_divisor = np.where(cpu_alloc == 0, 1, cpu_alloc)
        mem_divisor = np.where(mem_alloc == 0, 1, mem_alloc)

        def balance(cpu: IntArray, mem: IntArray) -> IntArray:
            cpu_frac = np.clip(cpu / cpu_divisor, 0.0, 1.0)
            mem_frac = np.clip(mem / mem_divisor, 0.0, 1.0)
            # With fewer than two resources on a node the deviation is 0 and the balance 100.
            std = np.where(both, np.abs((cpu_frac - mem_frac) / 2), 0.0)
            result: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
            return result

        with_pod = balance(cpu_used + pre.requests[0], mem_used + pre.requests[1])
        without_pod = balance(cpu_used, mem_used)
        half = MAX_NODE_SCORE // 2
        scores: IntArray = half + (half + with_pod - without_pod) // 2
        return scores

    def score_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(parse_args(args), handle.dra)
