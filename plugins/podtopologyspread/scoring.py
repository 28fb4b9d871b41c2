"""PodTopologySpread's PreScore counts, Score and NormalizeScore.

Soft constraints (whenUnsatisfiable: ScheduleAnyway) score: PreScore counts the matching pods per
domain (per node for hostname constraints), Score weighs each constraint's count by log(domains + 2)
plus maxSkew - 1, NormalizeScore reverses so the emptiest node scores 100. The counts over the
whole snapshot are kept across cycles and recounted only for nodes that changed, keyed by what
they read (namespace, constraints, the pod's node affinity and tolerations, whether every key is
required), so a pod's own constraints and default constraints of the same shape share them.
Score and NormalizeScore also have array forms over the node table's rows (score_batch,
normalize_batch): the domain of a row comes from the table's label codes, and the hostname
counts are kept as an array per row, refreshed only for rows whose NodeInfo changed. Both forms
keep the per-node arithmetic exactly (float sums in constraint order, Go's rounding, integer
normalisation). Never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from plugins.helper import Contributions, RowCountCache
from plugins.podtopologyspread.common import NAME, MatchingPods
from plugins.podtopologyspread.constraints import (
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    NodeEligibility,
    SpreadConstraint,
    counting_key,
    has_all_topology_keys,
    round_half_away_from_zero,
    score_for_count,
    topology_normalizing_weight,
)
from scheduler.framework.interface import Handle
from scheduler.framework.table import BoolArray, IntArray, NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, Code, CycleState, NodeInfo, NodeScore, StateKey, Status
from scheduler.model.objects import Pod
from scheduler.model.selectors import SelectorError, required_node_affinity, tolerations_of


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: tuple[SpreadConstraint, ...]
    ignored_nodes: frozenset[str]  # filtered nodes missing a topology key: scored 0
    # Per constraint: matching pods per domain, or per node name for hostname constraints (absent: 0).
    counts: tuple[dict[str, int], ...]
    weights: tuple[float, ...]
    require_all_keys: bool
    # For the array forms, when the counts came from the node table: its layout, and per hostname
    # constraint the matching pods per row (None for the other constraints).
    layout: object | None
    host_rows: tuple[IntArray | None, ...]

    def clone(self) -> _PreScoreState:
        return self


@dataclass(frozen=True, slots=True)
class _BatchScores:
    """The raw scores score_batch returned and which of their rows are ignored, for normalize_batch."""

    scores: IntArray
    ignored: BoolArray

    def clone(self) -> _BatchScores:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)
BATCH_SCORES_KEY: StateKey[_BatchScores] = StateKey("BatchScores" + NAME)


class _HostRows:
    """Per hostname constraint, the matching pods of each table row, as of the rows' generations."""

    __slots__ = ("arrays", "generations", "layout")

    def __init__(self, table: NodeTable, hostname_indices: Sequence[int]) -> None:
        self.layout = table.layout
        self.generations: IntArray = np.full(table.size, -1, np.int64)
        self.arrays: dict[int, IntArray] = {i: np.zeros(table.size, np.int64) for i in hostname_indices}


class Scoring:
    """PreScore: the matching pods per domain of the soft constraints, and each topology's weight."""

    def __init__(
        self, handle: Handle, constraints: Callable[[Pod, str], list[SpreadConstraint]], system_defaulted: bool
    ) -> None:
        self.handle = handle
        self.constraints = constraints
        self.system_defaulted = system_defaulted
        self._counts: RowCountCache[str] = RowCountCache()
        self._host_rows: dict[object, _HostRows] = {}

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        all_nodes = self.handle.snapshot.list()
        if not all_nodes:
            return Status(Code.SKIP, plugin=NAME)
        try:
            constraints = tuple(self.constraints(pod, SCHEDULE_ANYWAY))
        except SelectorError as exc:
            return Status.as_error(ValueError(f"calculating preScoreState: {exc}"), NAME)
        if not constraints:
            return Status(Code.SKIP, plugin=NAME)
        # Only the pod's own constraints (or List defaults) need every key: with System
        # defaults a node without a zone label is still spread by hostname.
        require_all_keys = bool(pod.spec.get("topologySpreadConstraints")) or not self.system_defaulted
        # The domains of the filtered nodes are the ones scored; the counts cover every node.
        ignored: set[str] = set()
        domains: list[set[str]] = [set() for _ in constraints]
        for info in nodes:
            node = info.node
            if node is None:
                continue
            if require_all_keys and not has_all_topology_keys(node.labels, constraints):
                ignored.add(node.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != HOSTNAME_LABEL:
                    domains[i].add(node.labels.get(c.topology_key, ""))
        eligibility = NodeEligibility(required_node_affinity(pod), tolerations_of(pod))

        def contributions(info: NodeInfo) -> Contributions[str]:
            return _node_contributions(info, constraints, eligibility, pod.namespace, require_all_keys)

        table: NodeTable | None = getattr(self.handle.snapshot, "table", None)
        layout: object | None = None
        host_rows: tuple[IntArray | None, ...] = tuple(None for _ in constraints)
        if table is not None and table.size == len(all_nodes):
            key = (pod.namespace, counting_key(constraints), eligibility, require_all_keys)
            totals = self._counts.get(key, table, len(constraints), contributions)
            layout = table.layout
            host_rows = self._hostname_rows(key, table, constraints, totals)
        else:
            totals = [{} for _ in constraints]
            for info in all_nodes:
                for i, domain, count in contributions(info):
                    totals[i][domain] = totals[i].get(domain, 0) + count
        counts = tuple(
            totals[i] if c.topology_key == HOSTNAME_LABEL else {d: totals[i].get(d, 0) for d in domains[i]}
            for i, c in enumerate(constraints)
        )
        scored = len(nodes) - len(ignored)
        weights = tuple(
            topology_normalizing_weight(scored if c.topology_key == HOSTNAME_LABEL else len(counts[i]))
            for i, c in enumerate(constraints)
        )
        state.write(
            PRE_SCORE_KEY,
            _PreScoreState(constraints, frozenset(ignored), counts, weights, require_all_keys, layout, host_rows),
        )
        return None

    def _hostname_rows(
        self,
        key: object,
        table: NodeTable,
        constraints: Sequence[SpreadConstraint],
        totals: Sequence[dict[str, int]],
    ) -> tuple[IntArray | None, ...]:
        """The hostname constraints' counts per table row; only rows changed since the last call for
        this key are read again (a row's hostname count comes from its own node alone)."""
        hostname = [i for i, c in enumerate(constraints) if c.topology_key == HOSTNAME_LABEL]
        if not hostname:
            return tuple(None for _ in constraints)
        kept = self._host_rows.get(key)
        if kept is None or kept.layout is not table.layout:
            if len(self._host_rows) >= RowCountCache.MAX_ENTRIES:
                self._host_rows.clear()
            kept = self._host_rows[key] = _HostRows(table, hostname)
        changed = np.flatnonzero(table.generation != kept.generations).tolist()
        infos = table.infos
        for i in hostname:
            counts, per_row = totals[i], kept.arrays[i]
            for row in changed:
                per_row[row] = counts.get(infos[row].name, 0)
        kept.generations = table.generation.copy()
        # Copies: a later cycle refreshes the kept arrays while this cycle's state may still be read.
        return tuple(kept.arrays[i].copy() if i in kept.arrays else None for i in range(len(constraints)))


def _node_contributions(
    info: NodeInfo,
    constraints: Sequence[SpreadConstraint],
    eligibility: NodeEligibility,
    namespace: str,
    require_all_keys: bool,
) -> Contributions[str]:
    """(constraint index, domain or node name, matching pods) of one node.

    Hostname constraints count every node's own pods whatever the inclusion policies (as Score
    reads them), and only nonzero counts are listed; the other constraints count the node into its
    domain when it has the keys required and the constraint's policies include it.
    """
    node = info.node
    if node is None:
        return []
    matching = MatchingPods(info, namespace)
    added: Contributions[str] = []
    for i, c in enumerate(constraints):
        if c.topology_key == HOSTNAME_LABEL:
            count = matching.count(c.selector)
            if count:
                added.append((i, node.name, count))
    if require_all_keys and not has_all_topology_keys(node.labels, constraints):
        return added
    for i in eligibility.counted_indices(constraints, node):
        c = constraints[i]
        if c.topology_key != HOSTNAME_LABEL:
            added.append((i, node.labels.get(c.topology_key, ""), matching.count(c.selector)))
    return added


def score_node(state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
    """Score: each soft constraint's count in the node's domain, weighed by its topology's size."""
    try:
        pre = state.read(PRE_SCORE_KEY)
    except KeyError as exc:
        return 0, Status.as_error(exc, NAME)
    node = node_info.node
    if node is None or node.name in pre.ignored_nodes:
        return 0, None
    total = 0.0
    for c, counts, weight in zip(pre.constraints, pre.counts, pre.weights, strict=True):
        domain = node.labels.get(c.topology_key)
        if domain is None:
            continue
        count = counts.get(node.name if c.topology_key == HOSTNAME_LABEL else domain, 0)
        total += score_for_count(count, c.max_skew, weight)
    return round_half_away_from_zero(total), None


def score_batch(state: CycleState, table: NodeTable, rows: IntArray) -> IntArray | None:
    """score_node for the given table rows at once; None when PreScore did not count over this table."""
    pre = state.read(PRE_SCORE_KEY)
    if pre.layout is not table.layout:
        return None
    total = np.zeros(len(rows), np.float64)
    lacks_key = np.zeros(len(rows), np.bool_)
    for c, counts, weight, host in zip(pre.constraints, pre.counts, pre.weights, pre.host_rows, strict=True):
        codes, code_of = table.label_codes(c.topology_key)
        row_codes = codes[rows]
        present = row_codes >= 0
        lacks_key |= ~present
        if c.topology_key == HOSTNAME_LABEL:
            if host is None:
                return None
            row_counts = host[rows]
        else:
            # One slot per label value plus a last one (read by code -1) left empty.
            by_code = np.zeros(len(code_of) + 1, np.int64)
            for value, code in code_of.items():
                by_code[code] = counts.get(value, 0)
            row_counts = by_code[row_codes]
        # Absent keys add 0.0, which leaves the running float sum exactly as the per-node loop's.
        total += np.where(present, row_counts * weight + (c.max_skew - 1), 0.0)
    magnitude = np.abs(total)
    floor = np.floor(magnitude)
    rounded = np.copysign(np.where(magnitude - floor >= 0.5, floor + 1, floor), total).astype(np.int64)
    ignored = lacks_key if pre.require_all_keys else np.zeros(len(rows), np.bool_)
    rounded[ignored] = 0
    state.write(BATCH_SCORES_KEY, _BatchScores(rounded, ignored))
    return rounded


def normalize_batch(state: CycleState, scores: IntArray) -> IntArray | None:
    """normalize_scores over an array: for the scores score_batch returned (it knows the ignored
    rows), or when no node is ignored; None otherwise (the per-node form reads the names)."""
    pre = state.read(PRE_SCORE_KEY)
    kept = state.get(BATCH_SCORES_KEY)
    if kept is not None and kept.scores is scores:
        ignored = kept.ignored
    elif not pre.ignored_nodes:
        ignored = np.zeros(len(scores), np.bool_)
    else:
        return None
    counted = scores[~ignored]
    lowest = int(counted.min()) if len(counted) else 0
    highest = int(counted.max()) if len(counted) else 0
    if highest == 0:
        normalized = np.full(len(scores), MAX_NODE_SCORE, np.int64)
    else:
        normalized = MAX_NODE_SCORE * (highest + lowest - scores) // highest
    normalized[ignored] = 0
    return normalized


def normalize_scores(state: CycleState, scores: list[NodeScore]) -> Status | None:
    """Fewest matching pods scores 100: max * (max + min - score) / max; ignored nodes score 0."""
    try:
        pre = state.read(PRE_SCORE_KEY)
    except KeyError as exc:
        return Status.as_error(exc, NAME)
    counted = [s.score for s in scores if s.name not in pre.ignored_nodes]
    lowest, highest = min(counted, default=0), max(counted, default=0)
    for s in scores:
        if s.name in pre.ignored_nodes:
            s.score = 0
        elif highest == 0:
            s.score = MAX_NODE_SCORE
        else:
            s.score = MAX_NODE_SCORE * (highest + lowest - s.score) // highest
    return None
