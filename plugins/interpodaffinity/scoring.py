"""InterPodAffinity's PreScore sums, Score and NormalizeScore.

PreScore sums, per topology pair, the weights of the incoming pod's preferred terms matched by
existing pods and of existing pods' preferred terms (and, with hardPodAffinityWeight, required
affinity) matched by the incoming pod; over the whole snapshot the per-node weights are kept
across cycles and recounted only for nodes that changed. Score adds a node's pairs,
NormalizeScore scales min..max to 0..100. Never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from plugins.helper import RowCountCache
from plugins.interpodaffinity.common import NAME, ExistingPodTerms, namespace_labels
from plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodTerms,
    TopologyPair,
    WeightedTerm,
    has_preferred_terms,
    parse_pod_terms,
)
from scheduler.framework.interface import Handle
from scheduler.framework.table import NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, Code, CycleState, NodeInfo, NodeScore, StateKey, Status
from scheduler.model.objects import Node, Pod
from scheduler.model.selectors import aggregate


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    topology_score: Mapping[str, Mapping[str, int]]  # topology key -> value -> summed weights

    def clone(self) -> _PreScoreState:
        return self


PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


class Scoring:
    """PreScore: the summed weights per topology pair, kept across cycles where they can be."""

    def __init__(
        self,
        handle: Handle,
        existing: ExistingPodTerms,
        hard_pod_affinity_weight: int,
        ignore_preferred_terms_of_existing_pods: bool,
    ) -> None:
        self.handle = handle
        self.existing = existing
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        self._scores: RowCountCache[TopologyPair] = RowCountCache()

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        if not nodes:
            return Status(Code.SKIP, plugin=NAME)
        has_preferred = has_preferred_terms(pod)
        if self.ignore_preferred_terms_of_existing_pods and not has_preferred:
            return Status(Code.SKIP, plugin=NAME)
        parsed, errors = parse_pod_terms(pod)
        if errors:
            return Status.as_error(ValueError(f"failed to parse pod: {aggregate(errors)}"), NAME)
        terms = parsed.with_namespaces_resolved(self.handle.namespaces)
        labels_of_namespace = namespace_labels(self.handle, pod)
        topology_score: dict[str, dict[str, int]] = {}
        snapshot = self.handle.snapshot
        if not has_preferred and not snapshot.any_pods_with_affinity():
            return Status(Code.SKIP, plugin=NAME)  # nothing with (anti-)affinity to count
        table: NodeTable | None = getattr(snapshot, "table", None)
        if table is not None:
            # As PreFilter: each node's weights are kept across cycles and recounted only when the
            # node changed, so a cycle costs the nodes that changed, not every pod with affinity.
            # The key is what the weights read of the pod: which pods are walked, its namespace and
            # the labels existing terms select on, its preferred terms (namespaceSelectors resolved
            # to names), its namespace's labels.
            key = (
                has_preferred,
                pod.namespace,
                self.existing.label_key(pod),
                terms.preferred_affinity,
                terms.preferred_anti_affinity,
                frozenset(labels_of_namespace.items()),
            )

            def contributions(info: NodeInfo) -> list[tuple[int, TopologyPair, int]]:
                node = info.node
                if node is None or not node.labels:
                    return []
                per_node: dict[str, dict[str, int]] = {}
                for other in (info.pods if has_preferred else info.pods_with_affinity).values():
                    self._score_existing_pod(per_node, terms, labels_of_namespace, pod, other, node)
                return [
                    (0, (k, value), weight) for k, by_value in per_node.items() for value, weight in by_value.items()
                ]

            (weights,) = self._scores.get(key, table, 1, contributions)
            for (topology_key, value), weight in weights.items():
                topology_score.setdefault(topology_key, {})[value] = weight
            if not topology_score:
                return Status(Code.SKIP, plugin=NAME)
            state.write(PRE_SCORE_KEY, _PreScoreState(topology_score))
            return None
        # Without preferred terms of its own only pods with (anti-)affinity can count: the snapshot
        # keeps the nodes that have such pods, so most cycles look at few nodes, not all.
        for info in snapshot.list() if has_preferred else snapshot.have_pods_with_affinity():
            node = info.node
            if node is None or not node.labels:
                continue
            for other in (info.pods if has_preferred else info.pods_with_affinity).values():
                self._score_existing_pod(topology_score, terms, labels_of_namespace, pod, other, node)
        if not topology_score:
            return Status(Code.SKIP, plugin=NAME)
        state.write(PRE_SCORE_KEY, _PreScoreState(topology_score))
        return None

    def _score_existing_pod(
        self,
        topology_score: dict[str, dict[str, int]],
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        pod: Pod,
        other: Pod,
        node: Node,
    ) -> None:
        """Add the weights of every term, either pod's, that the other pod satisfies on its node's domains."""

        def add(term: AffinityTerm, weight: int, candidate: Pod, labels: Mapping[str, str] | None) -> None:
            value = node.labels.get(term.topology_key)
            if value is not None and term.matches(candidate, labels):
                by_value = topology_score.setdefault(term.topology_key, {})
                by_value[value] = by_value.get(value, 0) + weight

        def add_all(
            weighted: Sequence[WeightedTerm], sign: int, candidate: Pod, labels: Mapping[str, str] | None
        ) -> None:
            for w in weighted:
                add(w.term, sign * w.weight, candidate, labels)

        add_all(terms.preferred_affinity, 1, other, None)
        add_all(terms.preferred_anti_affinity, -1, other, None)
        existing = self.existing.of(other)
        if self.hard_pod_affinity_weight > 0:
            for term in existing.required_affinity:
                add(term, self.hard_pod_affinity_weight, pod, namespace_labels)
        add_all(existing.preferred_affinity, 1, pod, namespace_labels)
        add_all(existing.preferred_anti_affinity, -1, pod, namespace_labels)


def score_node(state: CycleState, node_info: NodeInfo) -> tuple[int, Status | None]:
    """Score: the summed weights of the node's topology pairs."""
    try:
        pre = state.read(PRE_SCORE_KEY)
    except KeyError as exc:
        return 0, Status.as_error(exc, NAME)
    node = node_info.node
    if node is None:
        return 0, None
    total = 0
    for key, by_value in pre.topology_score.items():
        value = node.labels.get(key)
        if value is not None:
            total += by_value.get(value, 0)
    return total, None


def normalize_scores(state: CycleState, scores: list[NodeScore]) -> Status | None:
    """Scale the scored nodes' range to 0..100 (lowest 0, highest 100); all 0 when they are equal."""
    try:
        pre = state.read(PRE_SCORE_KEY)
    except KeyError as exc:
        return Status.as_error(exc, NAME)
    if not pre.topology_score or not scores:
        return None
    lowest = min(s.score for s in scores)
    spread = max(s.score for s in scores) - lowest
    for s in scores:
        s.score = int(float(MAX_NODE_SCORE) * ((s.score - lowest) / spread)) if spread > 0 else 0
    return None
