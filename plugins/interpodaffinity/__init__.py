"""InterPodAffinity: place pods near, or away from, pods with given labels in a topology domain.

PreFilter counts, once per cycle and per topology pair (key, value): the existing pods whose
required anti-affinity matches the incoming pod (the symmetric rule), and the existing pods
matching the incoming pod's required affinity (all terms at once) and anti-affinity terms.
Filter then checks a node's labels against those counts. PreScore sums, per topology pair,
the weights of the incoming pod's preferred terms matched by existing pods and of existing
pods' preferred terms (and, with hardPodAffinityWeight, required affinity) matched by the
incoming pod; Score adds a node's pairs, NormalizeScore scales min..max to 0..100.
AddPod/RemovePod adjust only this plugin's PreFilter counts. Namespace labels come from the
handle's namespace lister; the plugin never calls the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import CountingPreFilterExtensions, RowCountCache, unexpected_objects
from plugins.interpodaffinity.terms import (
    NO_TERMS,
    POD_AFFINITY,
    POD_ANTI_AFFINITY,
    AffinityTerm,
    PodTerms,
    TopologyPair,
    WeightedTerm,
    add_to_pair,
    has_preferred_terms,
    matches_all,
    parse_pod_terms,
    required_terms,
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
from scheduler.model.selectors import SelectorError, aggregate, invalid_value, unsupported_value

NAME = "InterPodAffinity"

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

KIND = "InterPodAffinityArgs"
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT, MAX_HARD_POD_AFFINITY_WEIGHT = 0, 100

# Parsed terms of existing pods, by (uid, resourceVersion); cleared when it grows past this.
_TERMS_CACHE_LIMIT = 50_000


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False


def parse_args(args: Mapping[str, Any]) -> InterPodAffinityArgs:
    """Validate InterPodAffinityArgs; errors name the field."""
    unknown = set(args) - {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    if args.get("kind", KIND) != KIND:
        raise ValueError(unsupported_value("kind", args["kind"], (KIND,)))
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    errors: list[str] = []
    if not isinstance(weight, int) or isinstance(weight, bool):
        errors.append(invalid_value("hardPodAffinityWeight", weight, "must be an integer"))
    elif not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        detail = f"not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
        errors.append(invalid_value("hardPodAffinityWeight", weight, detail))
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        errors.append(invalid_value("ignorePreferredTermsOfExistingPods", ignore, "must be a boolean"))
    if errors:
        raise ValueError(aggregate(errors))
    return InterPodAffinityArgs(weight, ignore)


@dataclass(slots=True)
class _PreFilterState:
    terms: PodTerms  # the incoming pod's, namespaceSelectors resolved
    namespace_labels: Mapping[str, str]  # of the incoming pod's namespace
    # Existing pods whose required anti-affinity matches the incoming pod.
    existing_anti_affinity: dict[TopologyPair, int]
    # Existing pods matching all of the incoming pod's required affinity terms.
    affinity: dict[TopologyPair, int]
    # Existing pods matching one of the incoming pod's required anti-affinity terms.
    anti_affinity: dict[TopologyPair, int]

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.terms,
            self.namespace_labels,
            dict(self.existing_anti_affinity),
            dict(self.affinity),
            dict(self.anti_affinity),
        )


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    topology_score: Mapping[str, Mapping[str, int]]  # topology key -> value -> summed weights

    def clone(self) -> _PreScoreState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


class InterPodAffinity(CountingPreFilterExtensions):
    name = NAME

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        self.hard_pod_affinity_weight = args.hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = args.ignore_preferred_terms_of_existing_pods
        self.handle = handle
        self._terms_cache: dict[tuple[str, str], PodTerms] = {}
        self._counts: RowCountCache[TopologyPair] = RowCountCache()
        self._scores: RowCountCache[TopologyPair] = RowCountCache()
        # Label keys any existing pod's term selects on; bumped `_selector_epoch` when one is new.
        self._selector_keys: set[str] = set()
        self._selector_epoch = 0

    def existing_pod_terms(self, pod: Pod) -> PodTerms:
        """An existing pod's terms; a kind that fails to parse is left empty, as the cache's PodInfo does."""
        if not pod.has_pod_affinity:
            return NO_TERMS
        key = (pod.uid, pod.resource_version)
        terms = self._terms_cache.get(key)
        if terms is None:
            terms, _ = parse_pod_terms(pod)
            self._note_selector_keys(terms)
            if pod.resource_version:
                if len(self._terms_cache) >= _TERMS_CACHE_LIMIT:
                    self._terms_cache.clear()
                self._terms_cache[key] = terms
        return terms

    def _note_selector_keys(self, terms: PodTerms) -> None:
        every = [*terms.required_affinity, *terms.required_anti_affinity]
        every += [w.term for w in (*terms.preferred_affinity, *terms.preferred_anti_affinity)]
        keys = {r.key for term in every for r in term.selector.requirements}
        if not keys <= self._selector_keys:
            self._selector_keys |= keys
            self._selector_epoch += 1

    def _label_key(self, pod: Pod) -> tuple[int, frozenset[tuple[str, str]]]:
        """The part of the pod's labels that existing pods' terms can see: only labels whose key some
        term selects on (a selector reads no other key), with the epoch of that key set. Pods that
        differ only in other labels (upstream's per-pod `signature`) share the kept counts."""
        keys = self._selector_keys
        return self._selector_epoch, frozenset(item for item in pod.labels.items() if item[0] in keys)

    def _namespace_labels(self, pod: Pod) -> Mapping[str, str]:
        return dict(self.handle.namespaces.labels(pod.namespace) or {})

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        parsed, errors = parse_pod_terms(pod)
        if errors:
            return None, Status.unresolvable(f"parsing pod: {aggregate(errors)}", plugin=NAME)
        terms = parsed.with_namespaces_resolved(self.handle.namespaces)
        namespace_labels = self._namespace_labels(pod)
        affinity, anti_affinity = terms.required_affinity, terms.required_anti_affinity
        existing: dict[TopologyPair, int] = {}
        affinity_counts: dict[TopologyPair, int] = {}
        anti_counts: dict[TopologyPair, int] = {}
        own_terms = bool(affinity or anti_affinity)
        snapshot = self.handle.snapshot
        table: NodeTable | None = getattr(snapshot, "table", None)
        section = json.dumps((pod.spec.get("affinity") or {}), sort_keys=True)
        if own_terms and table is not None and nodes is snapshot.list() and "namespaceSelector" not in section:
            # Every node's pods must be walked for the pod's own terms: keep the counts across
            # cycles and recount only nodes that changed (pods alike share them).
            key = (pod.namespace, self._label_key(pod), section, frozenset(namespace_labels.items()))

            def contributions(info: NodeInfo) -> list[tuple[int, TopologyPair, int]]:
                node = info.node
                if node is None:
                    return []
                labels = node.labels
                out: list[tuple[int, TopologyPair, int]] = []
                for other in info.pods.values():
                    for term in self.existing_pod_terms(other).required_anti_affinity:
                        if term.topology_key in labels and term.matches(pod, namespace_labels):
                            out.append((0, (term.topology_key, labels[term.topology_key]), 1))
                    if matches_all(affinity, other):
                        out += [
                            (1, (t.topology_key, labels[t.topology_key]), 1)
                            for t in affinity
                            if t.topology_key in labels
                        ]
                    out += [
                        (2, (t.topology_key, labels[t.topology_key]), 1)
                        for t in anti_affinity
                        if t.topology_key in labels and t.matches(other)
                    ]
                return out

            maps = self._counts.get(key, table, 3, contributions)
            existing, affinity_counts, anti_counts = ({k: v for k, v in m.items() if v} for m in maps)
            state.write(
                PRE_FILTER_KEY, _PreFilterState(terms, namespace_labels, existing, affinity_counts, anti_counts)
            )
            return None, None
        # A pod without required terms of its own is only affected by existing pods' required
        # anti-affinity: visit just the nodes (and pods) that have some.
        for info in nodes if own_terms else self.handle.snapshot.have_pods_with_required_anti_affinity():
            node = info.node
            if node is None:
                continue
            labels = node.labels
            for other in (info.pods if own_terms else info.pods_with_required_anti_affinity).values():
                for term in self.existing_pod_terms(other).required_anti_affinity:
                    if term.matches(pod, namespace_labels):
                        add_to_pair(existing, labels, term.topology_key, 1)
                if matches_all(affinity, other):
                    for term in affinity:
                        add_to_pair(affinity_counts, labels, term.topology_key, 1)
                for term in anti_affinity:
                    if term.matches(other):
                        add_to_pair(anti_counts, labels, term.topology_key, 1)
        if not existing and not affinity and not anti_affinity:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(PRE_FILTER_KEY, _PreFilterState(terms, namespace_labels, existing, affinity_counts, anti_counts))
        return None, None

    def _update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
        try:
            pre = state.read(PRE_FILTER_KEY)
        except KeyError as exc:
            return Status.as_error(exc, NAME)
        node = node_info.node
        if node is None:
            return None
        labels = node.labels
        for term in self.existing_pod_terms(changed).required_anti_affinity:
            if term.matches(pod, pre.namespace_labels):
                add_to_pair(pre.existing_anti_affinity, labels, term.topology_key, delta)
        if matches_all(pre.terms.required_affinity, changed):
            for term in pre.terms.required_affinity:
                add_to_pair(pre.affinity, labels, term.topology_key, delta)
        for term in pre.terms.required_anti_affinity:
            if term.matches(changed):
                add_to_pair(pre.anti_affinity, labels, term.topology_key, delta)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        try:
            pre = state.read(PRE_FILTER_KEY)
        except KeyError as exc:
            return Status.as_error(exc, NAME)
        node = node_info.node
        if node is None:
            return Status.as_error(ValueError("node not found"), NAME)
        labels = node.labels
        if not _satisfies_affinity(pre, pod, labels):
            return Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        if pre.anti_affinity and any(
            pre.anti_affinity.get((t.topology_key, labels[t.topology_key]), 0) > 0
            for t in pre.terms.required_anti_affinity
            if t.topology_key in labels
        ):
            return Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        if pre.existing_anti_affinity and any(pre.existing_anti_affinity.get(pair, 0) > 0 for pair in labels.items()):
            return Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        return None

    # ---- PreScore / Score --------------------------------------------------------------

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
        namespace_labels = self._namespace_labels(pod)
        topology_score: dict[str, dict[str, int]] = {}
        snapshot = self.handle.snapshot
        if not has_preferred and not snapshot.any_pods_with_affinity():
            return Status(Code.SKIP, plugin=NAME)  # nothing with (anti-)affinity to count
        table: NodeTable | None = getattr(snapshot, "table", None)
        section = json.dumps((pod.spec.get("affinity") or {}), sort_keys=True)
        if table is not None and "namespaceSelector" not in section:
            # As PreFilter: each node's weights are kept across cycles and recounted only when the
            # node changed, so a cycle costs the nodes that changed, not every pod with affinity.
            key = (
                has_preferred,
                pod.namespace,
                self._label_key(pod),
                section,
                frozenset(namespace_labels.items()),
            )

            def contributions(info: NodeInfo) -> list[tuple[int, TopologyPair, int]]:
                node = info.node
                if node is None or not node.labels:
                    return []
                per_node: dict[str, dict[str, int]] = {}
                for other in (info.pods if has_preferred else info.pods_with_affinity).values():
                    self._score_existing_pod(per_node, terms, namespace_labels, pod, other, node)
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
                self._score_existing_pod(topology_score, terms, namespace_labels, pod, other, node)
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
        existing = self.existing_pod_terms(other)
        if self.hard_pod_affinity_weight > 0:
            for term in existing.required_affinity:
                add(term, self.hard_pod_affinity_weight, pod, namespace_labels)
        add_all(existing.preferred_affinity, 1, pod, namespace_labels)
        add_all(existing.preferred_anti_affinity, -1, pod, namespace_labels)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
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

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
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

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                _pod_changed,
            ),
            # Other pods' anti-affinity may have repelled the old labels: always worth a retry.
            ClusterEventWithHint(ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_LABEL)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL), _node_changed
            ),
        ]


def _satisfies_affinity(pre: _PreFilterState, pod: Pod, labels: Mapping[str, str]) -> bool:
    """Every required affinity term's domain on this node holds a matching pod.

    The first pod of a group that has affinity to itself may go to any node carrying every
    topology key, as long as no pod anywhere matches the terms yet.
    """
    terms = pre.terms.required_affinity
    found_everywhere = True
    for term in terms:
        value = labels.get(term.topology_key)
        if value is None:
            return False
        if pre.affinity.get((term.topology_key, value), 0) <= 0:
            found_everywhere = False
    if found_everywhere:
        return True
    return not pre.affinity and matches_all(terms, pod)


def _pending_terms(pod: Pod) -> tuple[tuple[AffinityTerm, ...], tuple[AffinityTerm, ...]]:
    """The pending pod's required affinity and anti-affinity terms as written (selectors unresolved)."""
    return required_terms(pod, POD_AFFINITY), required_terms(pod, POD_ANTI_AFFINITY)


def _all_match(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    return bool(terms) and all(t.matches(pod) for t in terms)


def _pod_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A bound pod now matching the pod's affinity was added or relabelled, or one matching its anti-affinity went.

    As in 1.34, only the pending pod's own terms are consulted, all of them at once (a deleted
    pod whose anti-affinity repelled the pending one does not requeue it).
    """
    # A delete brings only the old object.
    if not isinstance(old, Pod) if new is None else unexpected_objects(Pod, old, new):
        return QueueingHint.QUEUE
    if any(p is not None and not p.node_name for p in (old, new)):
        return QueueingHint.SKIP
    try:
        affinity, anti_affinity = _pending_terms(pod)
    except SelectorError:
        return QueueingHint.QUEUE
    if old is not None and new is not None:
        if not _all_match(affinity, old) and _all_match(affinity, new):
            return QueueingHint.QUEUE
        if _all_match(anti_affinity, old) and not _all_match(anti_affinity, new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP
    if new is not None:
        return QueueingHint.QUEUE if _all_match(affinity, new) else QueueingHint.SKIP
    return QueueingHint.QUEUE if _all_match(anti_affinity, old) else QueueingHint.SKIP


def _node_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A node gained an affinity topology key (or its value changed), or lost / changed an anti-affinity one.

    Any added node requeues a pod with anti-affinity.
    """
    if unexpected_objects(Node, old, new):
        return QueueingHint.QUEUE
    try:
        affinity, anti_affinity = _pending_terms(pod)
    except SelectorError:
        return QueueingHint.QUEUE
    for term in affinity:
        key = term.topology_key
        if key not in new.labels:
            continue
        if old is None or key not in old.labels or old.labels[key] != new.labels[key]:
            return QueueingHint.QUEUE
    for term in anti_affinity:
        key = term.topology_key
        if old is None or (key in old.labels and old.labels.get(key) != new.labels.get(key)):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(parse_args(args), handle)
