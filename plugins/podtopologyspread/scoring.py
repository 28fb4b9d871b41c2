"""PodTopologySpread's PreScore counts, Score and NormalizeScore.

Soft constraints (whenUnsatisfiable: ScheduleAnyway) score: PreScore counts the matching pods per
domain (per node for hostname constraints), Score weighs each constraint's count by log(domains + 2)
plus maxSkew - 1, NormalizeScore reverses so the emptiest node scores 100. The counts over the
whole snapshot are kept across cycles and recounted only for nodes that changed, keyed by what
they read (namespace, constraints, the pod's node affinity and tolerations, whether every key is
required), so a pod's own constraints and default constraints of the same shape share them.
Never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from scheduler.framework.table import NodeTable
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

    def clone(self) -> _PreScoreState:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


class Scoring:
    """PreScore: the matching pods per domain of the soft constraints, and each topology's weight."""

    def __init__(
        self, handle: Handle, constraints: Callable[[Pod, str], list[SpreadConstraint]], system_defaulted: bool
    ) -> None:
        self.handle = handle
        self.constraints = constraints
        self.system_defaulted = system_defaulted
        self._counts: RowCountCache[str] = RowCountCache()

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
        if table is not None and table.size == len(all_nodes):
            key = (pod.namespace, counting_key(constraints), eligibility, require_all_keys)
            totals = self._counts.get(key, table, len(constraints), contributions)
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
        state.write(PRE_SCORE_KEY, _PreScoreState(constraints, frozenset(ignored), counts, weights))
        return None


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
