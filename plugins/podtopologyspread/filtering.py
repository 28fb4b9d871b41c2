"""PodTopologySpread's PreFilter counts, their AddPod/RemovePod updates, and the Filter verdicts.

Hard constraints (whenUnsatisfiable: DoNotSchedule) filter: PreFilter counts, once per cycle, the
matching pods of every domain each constraint sees (nodes it counts under nodeAffinityPolicy /
nodeTaintsPolicy), over the whole snapshot kept across cycles and recounted only for nodes that
changed; Filter rejects a node when placing the pod there would leave its domain more than maxSkew
above the least populated one (taken as 0 while fewer than minDomains domains exist). Never
changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from plugins.helper import RowCountCache
from plugins.podtopologyspread.common import NAME, MatchingPods
from plugins.podtopologyspread.constraints import (
    DO_NOT_SCHEDULE,
    NO_DOMAIN_MINIMUM,
    NodeEligibility,
    SpreadConstraint,
    counting_key,
    has_all_topology_keys,
)
from scheduler.framework.interface import Handle
from scheduler.framework.table import PER_NODE, FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, StateKey, Status
from scheduler.model.objects import Pod
from scheduler.model.selectors import SelectorError, required_node_affinity, tolerations_of

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


class _DomainCounts:
    """Matching pods per domain (topology value) of one constraint, with the smallest count at hand.

    The minimum is kept exactly: lowered on the spot, recomputed lazily only when the
    domain holding it grows, so Filter reads it in O(1) while AddPod/RemovePod stay cheap.
    """

    __slots__ = ("_minimum", "counts")

    def __init__(self, counts: dict[str, int], minimum: int | None = None) -> None:
        self.counts = counts
        self._minimum = minimum

    def minimum(self) -> int:
        if self._minimum is None:
            self._minimum = min(self.counts.values(), default=NO_DOMAIN_MINIMUM)
        return self._minimum

    def add(self, domain: str, delta: int) -> None:
        old = self.counts.get(domain)
        new = (old or 0) + delta
        self.counts[domain] = new
        if self._minimum is None:
            return
        if new < self._minimum:
            self._minimum = new
        elif old == self._minimum and new > old:
            self._minimum = None

    def clone(self) -> _DomainCounts:
        return _DomainCounts(dict(self.counts), self._minimum)


@dataclass(slots=True)
class _PreFilterState:
    constraints: tuple[SpreadConstraint, ...]
    domains: list[_DomainCounts]
    eligibility: NodeEligibility  # the incoming pod's node affinity and tolerations

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.constraints, [d.clone() for d in self.domains], self.eligibility)


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


class Filtering:
    """PreFilter and AddPod/RemovePod: the domain counts Filter reads, kept across cycles where they can be."""

    def __init__(self, handle: Handle, constraints: Callable[[Pod, str], list[SpreadConstraint]]) -> None:
        self.handle = handle
        self.constraints = constraints
        self._counts: RowCountCache[str] = RowCountCache()

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = tuple(self.constraints(pod, DO_NOT_SCHEDULE))
        except SelectorError as exc:
            return None, Status.as_error(ValueError(f"get constraints from pod: {exc}"), NAME)
        if not constraints:
            return None, Status(Code.SKIP, plugin=NAME)
        eligibility = NodeEligibility(required_node_affinity(pod), tolerations_of(pod))
        snapshot = self.handle.snapshot
        table: NodeTable | None = getattr(snapshot, "table", None)
        if table is not None and nodes is snapshot.list() and table.size == len(nodes):
            key = (pod.namespace, counting_key(constraints), eligibility)
            counts: list[dict[str, int]] = self._counts.get(
                key,
                table,
                len(constraints),
                lambda info: _node_contributions(info, constraints, eligibility, pod.namespace),
            )
        else:
            counts = [{} for _ in constraints]
            for info in nodes:
                for i, domain, count in _node_contributions(info, constraints, eligibility, pod.namespace):
                    counts[i][domain] = counts[i].get(domain, 0) + count
        state.write(PRE_FILTER_KEY, _PreFilterState(constraints, [_DomainCounts(c) for c in counts], eligibility))
        return None, None


def update_counts(state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
    """AddPod (delta +1) or RemovePod (-1): adjust the domain counts for `changed` on this node."""
    try:
        pre = state.read(PRE_FILTER_KEY)
    except KeyError as exc:
        return Status.as_error(exc, NAME)
    node = node_info.node
    if node is None or changed.namespace != pod.namespace:
        return None
    if not has_all_topology_keys(node.labels, pre.constraints):
        return None
    for i in pre.eligibility.counted_indices(pre.constraints, node):
        c = pre.constraints[i]
        if c.selector.matches(changed.labels):
            pre.domains[i].add(node.labels[c.topology_key], delta)
    return None


def filter_node(state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
    """Filter: reject the node when the pod there would exceed some constraint's maxSkew."""
    try:
        pre = state.read(PRE_FILTER_KEY)
    except KeyError as exc:
        return Status.as_error(exc, NAME)
    node = node_info.node
    if node is None:
        return Status.as_error(ValueError("node not found"), NAME)
    for c, domains in zip(pre.constraints, pre.domains, strict=True):
        domain = node.labels.get(c.topology_key)
        if domain is None:
            return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=NAME)
        # Too few eligible domains: the global minimum counts as 0, so empty domains are preferred.
        minimum = domains.minimum() if len(domains.counts) >= c.min_domains else 0
        self_match = 1 if c.selector.matches(pod.labels) else 0
        if domains.counts.get(domain, 0) + self_match - minimum > c.max_skew:
            return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=NAME)
    return None


_NOT_MATCH = 1
_LABEL_MISSING = 2
_REJECTIONS = {
    _NOT_MATCH: Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=NAME),
    _LABEL_MISSING: Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=NAME),
}


def filter_batch(state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
    """filter_node for every row at once: each constraint's domain counts laid over the table's
    column of its topology key; per row the first constraint it fails, as filter_node checks them.
    None without PreFilter state (the per-node form reports the error); rows without their node
    are left to the per-node form."""
    pre = state.get(PRE_FILTER_KEY)
    if pre is None:
        return None
    keys: IntArray = np.zeros(table.size, np.int64)
    # The last constraint first, so that a row's earliest failing constraint writes its key last.
    for c, domains in reversed(list(zip(pre.constraints, pre.domains, strict=True))):
        codes, by_value = table.label_codes(c.topology_key)
        counts = domains.counts
        per_code: IntArray = np.zeros(len(by_value) + 1, np.int64)  # the extra slot: code -1
        per_code[:-1] = np.fromiter((counts.get(value, 0) for value in by_value), np.int64, len(by_value))
        minimum = domains.minimum() if len(counts) >= c.min_domains else 0
        self_match = 1 if c.selector.matches(pod.labels) else 0
        too_skewed = per_code + (self_match - minimum) > c.max_skew
        missing = codes < 0
        keys[too_skewed[codes] & ~missing] = _NOT_MATCH
        keys[missing] = _LABEL_MISSING
    keys[~table.has_node()] = PER_NODE
    return FilterVerdicts.from_keys(keys, _REJECTIONS.__getitem__)


def _node_contributions(
    info: NodeInfo, constraints: Sequence[SpreadConstraint], eligibility: NodeEligibility, namespace: str
) -> list[tuple[int, str, int]]:
    """(constraint index, domain, matching pods) for every constraint this node counts towards."""
    node = info.node
    if node is None or not has_all_topology_keys(node.labels, constraints):
        return []
    matching = MatchingPods(info, namespace)
    return [
        (i, node.labels[constraints[i].topology_key], matching.count(constraints[i].selector))
        for i in eligibility.counted_indices(constraints, node)
    ]
