"""Helpers several plugins share (kube-scheduler's plugins/helper). Not a plugin itself."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

import numpy as np

from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import (
    ApiObject,
    CycleState,
    EventObject,
    NodeInfo,
    NodeScore,
    QueueingHint,
    QueueingHintFn,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.selectors import EQUALS, IN, LabelSelector

T = TypeVar("T")


def event_objects(kind: type[T], old: EventObject | None, new: EventObject | None) -> tuple[T | None, T] | None:
    """An add's or update's objects as `kind` (old is None for an add); None when they are anything
    else, a delete's missing new object included.

    A hint returns Queue on None, as upstream's do (with an error), so that no pod is stranded.
    """
    if not isinstance(new, kind) or (old is not None and not isinstance(old, kind)):
        return None
    return old, new


def changed_objects(
    kind: type[T], old: EventObject | None, new: EventObject | None
) -> tuple[T | None, T | None] | None:
    """event_objects for hints that also see deletes, which bring only the old object."""
    if new is None:
        return (old, None) if isinstance(old, kind) else None
    return event_objects(kind, old, new)


def api_hint(fn: Callable[[Pod, ApiObject | None, ApiObject | None], QueueingHint]) -> QueueingHintFn:
    """A storage event's hint, written for the API's mappings; Queue when the event carries a Pod or
    a Node instead (a Mapping cannot be a `kind` for event_objects: it is abstract)."""

    @functools.wraps(fn)
    def hint(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        if isinstance(old, Pod | Node) or isinstance(new, Pod | Node):
            return QueueingHint.QUEUE
        return fn(pod, old, new)

    return hint


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


K = TypeVar("K", bound=Hashable)
Contributions = list[tuple[int, K, int]]  # (which count map, key in it, amount)


class RowCountCache(Generic[K]):
    """Per-key count maps summed over every node, kept across cycles and updated only for rows
    whose NodeInfo generation moved since the last call (a re-laid node table starts over).

    kube-scheduler recounts all nodes in every PreFilter (in parallel); in Python that walk over
    thousands of nodes and their pods dominated the cycle. The caller's `key` must capture
    everything the contributions depend on besides the node (the pod's namespace, selectors...).
    """

    MAX_ENTRIES = 64

    def __init__(self) -> None:
        self._entries: dict[Hashable, _RowCounts[K]] = {}

    def get(
        self,
        key: Hashable,
        table: NodeTable,
        maps: int,
        contributions: Callable[[NodeInfo], Contributions[K]],
        positive_only: bool = False,
    ) -> list[dict[K, int]]:
        """Copies of the count maps (callers may change them); `positive_only` leaves out keys
        counting 0 (which a caller not told of empty domains would drop anyway)."""
        entry = self._entries.get(key)
        if entry is None or entry.layout is not table.layout:
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            entry = self._entries[key] = _RowCounts(table.layout, maps, table.size)
            rows = table.arange.tolist()
        else:
            rows = np.flatnonzero(table.generation != entry.generations).tolist()
        infos = table.infos
        for row in rows:
            for index, k, amount in entry.per_row[row]:
                entry.counts[index][k] -= amount
                entry.rows[index][k] -= 1
            entry.per_row[row] = added = contributions(infos[row])
            for index, k, amount in added:
                entry.counts[index][k] = entry.counts[index].get(k, 0) + amount
                entry.rows[index][k] = entry.rows[index].get(k, 0) + 1
        entry.generations = table.generation.copy()
        # A key stays while some node contributes to it, even with a count of 0 (an empty domain
        # is still a domain); keys no node contributes to any more are dropped.
        if positive_only:  # amounts are positive: a key counting above 0 has contributing rows
            return [{k: v for k, v in c.items() if v} for c in entry.counts]
        return [{k: v for k, v in c.items() if r[k]} for c, r in zip(entry.counts, entry.rows, strict=True)]


class _RowCounts(Generic[K]):
    __slots__ = ("counts", "generations", "layout", "per_row", "rows")

    def __init__(self, layout: object, maps: int, rows: int) -> None:
        self.layout = layout
        self.counts: list[dict[K, int]] = [{} for _ in range(maps)]
        self.rows: list[dict[K, int]] = [{} for _ in range(maps)]  # contributing rows per key
        self.per_row: list[Contributions[K]] = [[] for _ in range(rows)]
        self.generations: IntArray = np.zeros(rows, np.int64)


# ---- label scopes: which waiting pods a bound pod's labels can concern ---------------------------

LabelKey = tuple[str, ...]  # (side,) for "any labels", (side, label key, value) for one label


def selector_pairs(selector: LabelSelector) -> frozenset[tuple[str, str]] | None:
    """Label pairs one of which every label set the selector matches carries: the values of its
    first In (or =) requirement; empty when it matches nothing; None when no requirement names
    values it needs (NotIn, Exists, an empty selector)."""
    if selector.nothing:
        return frozenset()
    for requirement in selector.requirements:
        if requirement.operator in (IN, EQUALS):
            return frozenset((requirement.key, value) for value in requirement.values)
    return None


def selector_keys(side: str, selectors: Sequence[LabelSelector], every: bool) -> frozenset[LabelKey]:
    """A waiting pod's keys for one side of a hint that needs labels matching `every` one of the
    selectors (else any one of them): the pairs of one selector that names some (the fewest), or
    of all of them; (side,) when that is not possible, so that any labels on the side concern it."""
    pairs = [selector_pairs(selector) for selector in selectors]
    if every:
        known = [p for p in pairs if p is not None]
        if selectors and not known:
            return frozenset({(side,)})
        chosen = min(known, key=len) if known else frozenset()
    else:
        if any(p is None for p in pairs):
            return frozenset({(side,)})
        chosen = frozenset().union(*(p for p in pairs if p is not None))
    return frozenset((side, key, value) for key, value in chosen)


def pod_event_label_keys(
    old: EventObject | None, new: EventObject | None, new_side: str, old_side: str
) -> frozenset[LabelKey] | None:
    """A pod event's keys for a scope keyed by labels: each label of the new pod on `new_side` and
    of the old pod on `old_side`, plus (side,) for the waiting pods that any labels on that side
    concern; None for objects that are not pods (their hints queue every pod)."""
    objects = changed_objects(Pod, old, new)
    if objects is None:
        return None
    keys: set[LabelKey] = set()
    for side, pod in ((new_side, objects[1]), (old_side, objects[0])):
        if pod is not None:
            keys.update((side, key, value) for key, value in pod.labels.items())
            keys.add((side,))
    return frozenset(keys)
