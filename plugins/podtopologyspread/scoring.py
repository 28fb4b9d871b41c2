"""PodTopologySpread's PreScore counts, Score and NormalizeScore.

Soft constraints (whenUnsatisfiable: ScheduleAnyway) score: PreScore counts the matching pods per
domain, Score weighs each constraint's count by log(domains + 2) plus maxSkew - 1, NormalizeScore
reverses so the emptiest node scores 100. Never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from plugins.podtopologyspread.common import NAME, MatchingPods
from plugins.podtopologyspread.constraints import (
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    NodeEligibility,
    SpreadConstraint,
    count_matching,
    has_all_topology_keys,
    round_half_away_from_zero,
    score_for_count,
    topology_normalizing_weight,
)
from scheduler.framework.interface import Handle
from scheduler.framework.types import MAX_NODE_SCORE, Code, CycleState, NodeInfo, NodeScore, StateKey, Status
from scheduler.model.objects import Pod
from scheduler.model.selectors import SelectorError, required_node_affinity, tolerations_of


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: tuple[SpreadConstraint, ...]
    ignored_nodes: frozenset[str]  # filtered nodes missing a topology key: scored 0
    counts: tuple[dict[str, int], ...]  # per constraint; hostname ones are counted per node at Score
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
        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for info in nodes:
            node = info.node
            if node is None:
                continue
            if require_all_keys and not has_all_topology_keys(node.labels, constraints):
                ignored.add(node.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != HOSTNAME_LABEL:
                    counts[i].setdefault(node.labels.get(c.topology_key, ""), 0)
        scored = len(nodes) - len(ignored)
        weights = tuple(
            topology_normalizing_weight(scored if c.topology_key == HOSTNAME_LABEL else len(counts[i]))
            for i, c in enumerate(constraints)
        )
        eligibility = NodeEligibility(required_node_affinity(pod), tolerations_of(pod))
        for info in all_nodes:
            node = info.node
            if node is None or (require_all_keys and not has_all_topology_keys(node.labels, constraints)):
                continue
            matching = MatchingPods(info, pod.namespace)
            for i in eligibility.counted_indices(constraints, node):
                c = constraints[i]
                domain = node.labels.get(c.topology_key, "")
                if domain in counts[i]:
                    counts[i][domain] += matching.count(c.selector)
        state.write(PRE_SCORE_KEY, _PreScoreState(constraints, frozenset(ignored), tuple(counts), weights))
        return None


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
        if c.topology_key == HOSTNAME_LABEL:
            count = count_matching(node_info.pods.values(), c.selector, pod.namespace)
        else:
            count = counts.get(domain, 0)
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
