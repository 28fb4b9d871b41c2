"""Helpers several plugins share (kube-scheduler's plugins/helper). Not a plugin itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework.table import IntArray
from scheduler.framework.types import CycleState, NodeInfo, NodeScore, Status
from scheduler.model.objects import Pod


def unexpected_objects(kind: type, old: Any, new: Any) -> bool:
    """Whether a queueing hint got objects other than `kind` (old may be None for an add).

    Upstream's hints return Queue (with an error) then, so that no pod is stranded.
    """
    return not isinstance(new, kind) or (old is not None and not isinstance(old, kind))


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> None:
    """Scale scores in place to [0, max_priority] by the highest one; `reverse` flips them.

    When every score is 0 they stay 0, or all become max_priority when reversed.
    """
    highest = max((s.score for s in scores), default=0)
    if highest <= 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return
    for s in scores:
        product = max_priority * s.score
        # Go's integer division truncates toward zero; a (rare) negative score must too.
        scaled = product // highest if product >= 0 else -(-product // highest)
        s.score = max_priority - scaled if reverse else scaled


def default_normalize_batch(max_priority: int, reverse: bool, scores: IntArray) -> IntArray:
    """default_normalize_score over an array (same integer arithmetic)."""
    highest = int(scores.max()) if len(scores) else 0
    if highest <= 0:
        return np.full(len(scores), max_priority, np.int64) if reverse else scores
    product = max_priority * scores
    # Truncate toward zero like Go for the (rare) negative score.
    scaled = np.where(product >= 0, product // highest, -(-product // highest))
    return max_priority - scaled if reverse else scaled


class CountingPreFilterExtensions:
    """AddPod/RemovePod for plugins whose PreFilter state is counts that a pod adds to or takes from.

    The plugin implements `_update(state, pod, changed, node_info, delta)` with delta +1 or -1.
    """

    def pre_filter_extensions(self) -> CountingPreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod, pod_to_remove, node_info, -1)

    def _update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
        raise NotImplementedError
