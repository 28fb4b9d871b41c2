"""TaintToleration: keep pods off nodes whose taints they don't tolerate; prefer fewer soft taints.

Filter rejects a node with a NoSchedule or NoExecute taint that none of the pod's
tolerations tolerates. Score counts the node's PreferNoSchedule taints the pod does not
tolerate; NormalizeScore reverses the count, so the node with the fewest scores 100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import default_normalize_batch, default_normalize_score, event_objects
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    NodeScore,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import Node, Pod, Taint, Toleration
from scheduler.model.selectors import (
    PREFER_NO_SCHEDULE,
    find_untolerated_taint,
    is_do_not_schedule,
    tolerations_of,
    tolerations_tolerate,
)

NAME = "TaintToleration"

# The pinned 1.34.4 no longer names the taint here: taint keys and values may be sensitive.
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_UNTOLERATED = Status.unresolvable(ERR_REASON_UNTOLERATED, plugin=NAME)


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    # Tolerations that can tolerate a PreferNoSchedule taint: that effect, or no effect at all.
    tolerations: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def untolerated_taint(node: Node, pod: Pod) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the node that the pod does not tolerate."""
    if not any(is_do_not_schedule(t) for t in node.taints):
        return None
    return find_untolerated_taint(node.taints, tolerations_of(pod), is_do_not_schedule)


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    return sum(
        1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, taint)
    )


class TaintToleration:
    name = NAME

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.TOLERATIONS, signing.tolerations(pod)),), None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the Node's taints alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None or untolerated_taint(node, pod) is None:
            return None
        return _UNTOLERATED

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts:
        mask = table.node_mask((NAME, tolerations_of(pod)), lambda node: untolerated_taint(node, pod) is None)
        return FilterVerdicts.from_mask(mask, _UNTOLERATED)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        relevant = tuple(t for t in tolerations_of(pod) if t.effect in ("", PREFER_NO_SCHEDULE))
        state.write(PRE_SCORE_KEY, _PreScoreState(relevant))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        try:
            pre = state.read(PRE_SCORE_KEY)
        except KeyError as exc:
            return 0, Status.as_error(exc, NAME)
        node = node_info.node
        if node is None:
            return 0, None
        return count_intolerable_prefer_no_schedule(node.taints, pre.tolerations), None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        pre = state.get(PRE_SCORE_KEY)
        if pre is None:
            return None
        counts = table.node_values(
            (NAME, "score", pre.tolerations),
            lambda node: count_intolerable_prefer_no_schedule(node.taints, pre.tolerations),
        )
        return counts[rows]

    def score_extensions(self) -> TaintToleration:
        return self

    def normalize_batch(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        return default_normalize_batch(MAX_NODE_SCORE, True, scores)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT), _node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_TOLERATION), _pod_changed
            ),
        ]


def _node_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """The pod now tolerates every NoSchedule/NoExecute taint of a node it did not before."""
    objects = event_objects(Node, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    was_untolerated = old is None or untolerated_taint(old, pod) is not None
    if was_untolerated and untolerated_taint(new, pod) is None:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _pod_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """The rejected pod itself gained tolerations."""
    objects = event_objects(Pod, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    if new.uid != pod.uid or (old is not None and tolerations_of(old) == tolerations_of(new)):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: Mapping[str, Any], handle: Handle) -> TaintToleration:
    return TaintToleration()
