"""PodTopologySpread: spread matching pods evenly across topology domains.

The adapter: the extension-point methods and the queueing hints. PreFilter counts and the Filter
verdicts (hard constraints) are filtering.py's, PreScore counts, Score and NormalizeScore (soft
constraints) scoring.py's, the constraints a pod is held to common.py's, constraints.py's and
defaults.py's (as kube's plugin.go, filtering.go, scoring.go, common.go). Pods without constraints
get the configured defaults, selecting the pods of their Services and controller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plugins.helper import (
    CountingPreFilterExtensions,
    LabelKey,
    changed_objects,
    event_objects,
    pod_event_label_keys,
    selector_keys,
)
from plugins.podtopologyspread.common import NAME as NAME
from plugins.podtopologyspread.common import pod_constraints
from plugins.podtopologyspread.constraints import (
    DO_NOT_SCHEDULE,
    HONOR,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
    has_all_topology_keys,
    parse_constraints,
)
from plugins.podtopologyspread.defaults import PodTopologySpreadArgs, WorkloadLister, parse_args
from plugins.podtopologyspread.filtering import Filtering, filter_batch, filter_node, update_counts
from plugins.podtopologyspread.scoring import Scoring, normalize_batch, normalize_scores, score_batch, score_node
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventObject,
    EventResource,
    EventScope,
    NodeInfo,
    NodeScore,
    PreFilterResult,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.selectors import SelectorError


class PodTopologySpread(CountingPreFilterExtensions):
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle, workloads: WorkloadLister | None = None) -> None:
        self.default_constraints = args.default_constraints
        self.workloads = workloads
        # The defaults parsed once per whenUnsatisfiable, when none reads the pod's labels
        # (matchLabelKeys); else parsed for each pod. A malformed one is left to parse (and fail) per pod.
        self._parsed_defaults: dict[str, list[SpreadConstraint]] = {}
        if not any(c.get("matchLabelKeys") for c in self.default_constraints):
            for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                try:
                    self._parsed_defaults[action] = parse_constraints(self.default_constraints, {}, action)
                except SelectorError:
                    self._parsed_defaults.clear()
                    break
        self._filtering = Filtering(handle, self.constraints)
        self._scoring = Scoring(handle, self.constraints, args.system_defaulted)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        if pod.spec.get("topologySpreadConstraints"):
            return (), Status.unschedulable("pods with topology constraints are not signable", plugin=NAME)
        if self.default_constraints:
            return (), Status.unschedulable("pods with default topology constraints are not signable", plugin=NAME)
        return (), None

    def constraints(self, pod: Pod, action: str) -> list[SpreadConstraint]:
        """The pod's own constraints with this whenUnsatisfiable, or the defaults (raises SelectorError)."""
        parsed = self._parsed_defaults.get(action)
        return pod_constraints(pod, action, self.default_constraints, self.workloads, parsed)

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return self._filtering.pre_filter(state, pod, nodes)

    def _update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
        return update_counts(state, pod, changed, node_info, delta)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return filter_node(state, pod, node_info)

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
        return filter_batch(state, pod, table)

    # ---- PreScore / Score --------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self._scoring.pre_score(state, pod, nodes)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return score_node(state, pod, node_info)

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        return score_batch(state, table, rows)

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        return normalize_scores(state, scores)

    def normalize_batch(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray | None:
        return normalize_batch(state, scores)

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                self._pod_changed,
                EventScope(self._pod_event_pod_keys, _pod_event_keys),
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

    def _pod_changed(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """A pod of the namespace was bound, relabelled or deleted so that it (un)matches a constraint."""
        objects = changed_objects(Pod, old, new)
        if objects is None:
            return QueueingHint.QUEUE
        old, new = objects
        if any(p is not None and not _involved(p, pod) for p in (old, new)):
            return QueueingHint.SKIP
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        if old is not None and new is not None:
            return _label_change_hint(old, new, constraints)
        changed = new if new is not None else old  # an add's or a delete's pod
        labels = changed.labels if changed is not None else {}
        return QueueingHint.QUEUE if any(c.selector.matches(labels) for c in constraints) else QueueingHint.SKIP

    def _pod_event_pod_keys(self, pod: Pod) -> frozenset[LabelKey]:
        """A waiting pod's keys for _pod_changed: labels a pod must carry to match one of its hard
        constraints' selectors. Default constraints follow the cluster's Services and controllers,
        which can change while the pod waits: a pod held to them is concerned by every event.
        Raises SelectorError as the hint would (every event then concerns the pod)."""
        if not pod.spec.get("topologySpreadConstraints") and self.default_constraints:
            return frozenset({(_SPREAD_SIDE,)})
        selectors = [c.selector for c in self.constraints(pod, DO_NOT_SCHEDULE)]
        return selector_keys(_SPREAD_SIDE, selectors, every=False)

    def _target_pod_changed(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """The pod itself gained tolerations while a constraint honors taints, or its labels now (un)match one."""
        objects = event_objects(Pod, old, new)
        if objects is None:
            return QueueingHint.QUEUE
        old, new = objects
        if old is None:  # the pod's own update always has both
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

    def _node_changed(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """A node carrying every topology key appeared or went, or its keys' values or taints changed."""
        node_objects = changed_objects(Node, old, new)
        if node_objects is None:
            return QueueingHint.QUEUE
        old, new = node_objects
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


_SPREAD_SIDE = "spread"


def _pod_event_keys(old: EventObject | None, new: EventObject | None) -> frozenset[LabelKey] | None:
    """The labels of the event's pods, old and new (a relabelling matters when either side matches)."""
    return pod_event_label_keys(old, new, new_side=_SPREAD_SIDE, old_side=_SPREAD_SIDE)


def _label_change_hint(old: Pod, new: Pod, constraints: Sequence[SpreadConstraint]) -> QueueingHint:
    """Queue when the relabelling makes the pod match (or stop matching) some constraint's selector."""
    if old.labels == new.labels:
        return QueueingHint.SKIP
    changed = any(c.selector.matches(old.labels) != c.selector.matches(new.labels) for c in constraints)
    return QueueingHint.QUEUE if changed else QueueingHint.SKIP


def _involved(other: Pod, pod: Pod) -> bool:
    """The pod itself, or a bound pod of its namespace (only those are counted)."""
    return other.uid == pod.uid or (other.node_name != "" and other.namespace == pod.namespace)


def new(args: Mapping[str, Any], handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(parse_args(args), handle, handle.workloads)
