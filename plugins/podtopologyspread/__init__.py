"""PodTopologySpread: spread matching pods evenly across topology domains.

Hard constraints (whenUnsatisfiable: DoNotSchedule) filter: PreFilter counts, once per
cycle, the matching pods of every domain each constraint sees (nodes it counts under
nodeAffinityPolicy / nodeTaintsPolicy); Filter rejects a node when placing the pod there
would leave its domain more than maxSkew above the least populated one (taken as 0 while
fewer than minDomains domains exist). Soft constraints (ScheduleAnyway) score: PreScore
counts per domain, Score weighs each constraint's count by log(domains + 2) plus
maxSkew - 1, NormalizeScore reverses so the emptiest node scores 100. Pods without
constraints get the configured defaults, selecting the pods of their Services and
controller. AddPod/RemovePod adjust only this plugin's PreFilter counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from plugins.helper import CountingPreFilterExtensions, RowCountCache, unexpected_objects
from plugins.podtopologyspread.constraints import (
    DO_NOT_SCHEDULE,
    HONOR,
    HOSTNAME_LABEL,
    NO_DOMAIN_MINIMUM,
    SCHEDULE_ANYWAY,
    NodeEligibility,
    SpreadConstraint,
    count_matching,
    has_all_topology_keys,
    parse_constraints,
    round_half_away_from_zero,
    score_for_count,
    topology_normalizing_weight,
)
from plugins.podtopologyspread.defaults import (
    PodTopologySpreadArgs,
    WorkloadLister,
    default_selector,
    parse_args,
)
from scheduler.framework.interface import Handle
from scheduler.framework.table import NodeTable
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    NodeInfo,
    NodeScore,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.selectors import LabelSelector, SelectorError, required_node_affinity, tolerations_of

NAME = "PodTopologySpread"

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


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: tuple[SpreadConstraint, ...]
    ignored_nodes: frozenset[str]  # filtered nodes missing a topology key: scored 0
    counts: tuple[dict[str, int], ...]  # per constraint; hostname ones are counted per node at Score
    weights: tuple[float, ...]

    def clone(self) -> _PreScoreState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


class PodTopologySpread(CountingPreFilterExtensions):
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle, workloads: WorkloadLister | None = None) -> None:
        self.default_constraints = args.default_constraints
        self.system_defaulted = args.system_defaulted
        self.handle = handle
        self.workloads = workloads
        self._counts: RowCountCache[str] = RowCountCache()

    def constraints(self, pod: Pod, action: str) -> list[SpreadConstraint]:
        """The pod's own constraints with this whenUnsatisfiable, or the defaults when it declares none.

        Defaults apply only with a workload lister and when some Service or controller selects
        the pod (their selectors replace the constraints' own). Raises SelectorError.
        """
        own: Sequence[Mapping[str, Any]] = pod.spec.get("topologySpreadConstraints") or ()
        if own:
            return parse_constraints(own, pod.labels, action)
        if not self.default_constraints or self.workloads is None:
            return []
        defaults = parse_constraints(self.default_constraints, pod.labels, action)
        if not defaults:
            return []
        selector = default_selector(pod, self.workloads)
        if selector.empty:
            return []
        return [replace(c, selector=selector) for c in defaults]

    # ---- PreFilter / Filter ------------------------------------------------------------

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
            key = (pod.namespace, constraints, _eligibility_signature(pod))
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

    def _update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
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

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
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

    # ---- PreScore / Score --------------------------------------------------------------

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
            matching = _MatchingPods(info, pod.namespace)
            for i in eligibility.counted_indices(constraints, node):
                c = constraints[i]
                domain = node.labels.get(c.topology_key, "")
                if domain in counts[i]:
                    counts[i][domain] += matching.count(c.selector)
        state.write(PRE_SCORE_KEY, _PreScoreState(constraints, frozenset(ignored), tuple(counts), weights))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
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

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
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

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                self._pod_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_TOLERATION | ActionType.UPDATE_POD_LABEL),
                self._target_pod_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                ),
                self._node_changed,
            ),
        ]

    def _pod_changed(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A pod of the namespace was bound, relabelled or deleted so that it (un)matches a constraint."""
        # A delete brings only the old object.
        if not isinstance(old, Pod) if new is None else unexpected_objects(Pod, old, new):
            return QueueingHint.QUEUE
        if any(p is not None and not _involved(p, pod) for p in (old, new)):
            return QueueingHint.SKIP
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        if old is not None and new is not None:
            return _label_change_hint(old, new, constraints)
        labels = (new if new is not None else old).labels
        return QueueingHint.QUEUE if any(c.selector.matches(labels) for c in constraints) else QueueingHint.SKIP

    def _target_pod_changed(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The pod itself gained tolerations while a constraint honors taints, or its labels now (un)match one."""
        if unexpected_objects(Pod, old, new):
            return QueueingHint.QUEUE
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        if (old.spec.get("tolerations") or []) != (new.spec.get("tolerations") or []) and any(
            c.node_taints_policy == HONOR for c in constraints
        ):
            return QueueingHint.QUEUE
        return _label_change_hint(old, new, constraints)

    def _node_changed(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A node carrying every topology key appeared or went, or its keys' values or taints changed."""
        # A delete brings only the old object.
        if not isinstance(old, Node) if new is None else unexpected_objects(Node, old, new):
            return QueueingHint.QUEUE
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        had_keys = old is not None and has_all_topology_keys(old.labels, constraints)
        has_keys = new is not None and has_all_topology_keys(new.labels, constraints)
        if old is not None and new is not None:
            if had_keys != has_keys:
                return QueueingHint.QUEUE
            moved = any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key) for c in constraints)
            if has_keys and (moved or old.taints != new.taints):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if (has_keys if new is not None else had_keys) else QueueingHint.SKIP


def _label_change_hint(old: Pod, new: Pod, constraints: Sequence[SpreadConstraint]) -> QueueingHint:
    """Queue when the relabelling makes the pod match (or stop matching) some constraint's selector."""
    if old.labels == new.labels:
        return QueueingHint.SKIP
    changed = any(c.selector.matches(old.labels) != c.selector.matches(new.labels) for c in constraints)
    return QueueingHint.QUEUE if changed else QueueingHint.SKIP


def _node_contributions(
    info: NodeInfo, constraints: Sequence[SpreadConstraint], eligibility: NodeEligibility, namespace: str
) -> list[tuple[int, str, int]]:
    """(constraint index, domain, matching pods) for every constraint this node counts towards."""
    node = info.node
    if node is None or not has_all_topology_keys(node.labels, constraints):
        return []
    matching = _MatchingPods(info, namespace)
    return [
        (i, node.labels[constraints[i].topology_key], matching.count(constraints[i].selector))
        for i in eligibility.counted_indices(constraints, node)
    ]


def _eligibility_signature(pod: Pod) -> str:
    """What NodeEligibility depends on: the pod's required node affinity, selector and tolerations."""
    spec = pod.spec
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return json.dumps(
        [
            spec.get("nodeSelector"),
            affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
            spec.get("tolerations"),
        ],
        sort_keys=True,
    )


class _MatchingPods:
    """Counts of a node's pods per selector, so constraints sharing a selector scan the pods once."""

    __slots__ = ("_counts", "_info", "_namespace")

    def __init__(self, info: NodeInfo, namespace: str) -> None:
        self._info = info
        self._namespace = namespace
        self._counts: dict[LabelSelector, int] = {}

    def count(self, selector: LabelSelector) -> int:
        counted = self._counts.get(selector)
        if counted is None:
            counted = self._counts[selector] = count_matching(self._info.pods.values(), selector, self._namespace)
        return counted


def _involved(other: Pod, pod: Pod) -> bool:
    """The pod itself, or a bound pod of its namespace (only those are counted)."""
    return other.uid == pod.uid or (other.node_name != "" and other.namespace == pod.namespace)


def new(args: Mapping[str, Any], handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(parse_args(args), handle, handle.workloads)
