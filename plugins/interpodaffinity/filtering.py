"""InterPodAffinity's PreFilter counts, their AddPod/RemovePod updates, and the Filter verdicts.

PreFilter counts, once per cycle and per topology pair (key, value): the existing pods whose
required anti-affinity matches the incoming pod (the symmetric rule), and the existing pods
matching the incoming pod's required affinity (all terms at once) and anti-affinity terms; counts
over the whole snapshot are kept across cycles and recounted only for nodes that changed. Filter
then checks a node's labels against those counts, node by node or (filter_batch) over the node
table's topology columns. Never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from plugins.helper import RowCountCache
from plugins.interpodaffinity.common import NAME, ExistingPodTerms, namespace_labels
from plugins.interpodaffinity.terms import PodTerms, TopologyPair, add_to_pair, matches_all, parse_pod_terms
from scheduler.framework.interface import Handle
from scheduler.framework.table import PER_NODE, BoolArray, FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    Code,
    CycleState,
    NodeInfo,
    PreFilterResult,
    StateKey,
    Status,
)
from scheduler.model.objects import Pod
from scheduler.model.selectors import aggregate

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
# Filter's rejections in the order it checks them, by the keys filter_batch gives them (0 passes).
_AFFINITY = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
_ANTI_AFFINITY = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
_EXISTING_ANTI_AFFINITY = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
_REJECTIONS = {1: _AFFINITY, 2: _ANTI_AFFINITY, 3: _EXISTING_ANTI_AFFINITY}


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
    # The pod matches all its own required affinity terms: Filter's first-pod rule, which reads
    # whether a matching pod exists anywhere, may apply.
    self_affinity: bool = False

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.terms,
            self.namespace_labels,
            dict(self.existing_anti_affinity),
            dict(self.affinity),
            dict(self.anti_affinity),
            self.self_affinity,
        )


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


class Filtering:
    """PreFilter and AddPod/RemovePod: the counts Filter reads, kept across cycles where they can be."""

    def __init__(self, handle: Handle, existing: ExistingPodTerms) -> None:
        self.handle = handle
        self.existing = existing
        self._counts: RowCountCache[TopologyPair] = RowCountCache()

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        parsed, errors = parse_pod_terms(pod)
        if errors:
            return None, Status.unresolvable(f"parsing pod: {aggregate(errors)}", plugin=NAME)
        terms = parsed.with_namespaces_resolved(self.handle.namespaces)
        labels_of_namespace = namespace_labels(self.handle, pod)
        affinity, anti_affinity = terms.required_affinity, terms.required_anti_affinity
        existing: dict[TopologyPair, int] = {}
        affinity_counts: dict[TopologyPair, int] = {}
        anti_counts: dict[TopologyPair, int] = {}
        own_terms = bool(affinity or anti_affinity)
        self_affinity = bool(affinity) and matches_all(affinity, pod)
        snapshot = self.handle.snapshot
        table: NodeTable | None = getattr(snapshot, "table", None)
        if (
            (own_terms or snapshot.have_pods_with_required_anti_affinity())
            and table is not None
            and nodes is snapshot.list()
        ):
            # Every node's pods must be walked for the pod's own terms, and the pods with required
            # anti-affinity for everyone: keep the counts across cycles and recount only nodes
            # that changed (pods alike share them). The key is what the counts read of the pod:
            # its namespace and the labels existing terms select on (for their anti-affinity),
            # its required terms with their namespaceSelectors resolved to the names they select
            # now (a relabelled namespace changes the key), its namespace's labels (what existing
            # terms' namespaceSelectors read).
            key = (
                pod.namespace,
                self.existing.label_key(pod),
                affinity,
                anti_affinity,
                frozenset(labels_of_namespace.items()),
            )

            def contributions(info: NodeInfo) -> list[tuple[int, TopologyPair, int]]:
                node = info.node
                if node is None:
                    return []
                labels = node.labels
                out: list[tuple[int, TopologyPair, int]] = []
                # Without terms of its own, only existing pods' required anti-affinity can count.
                for other in (info.pods if own_terms else info.pods_with_required_anti_affinity).values():
                    for term in self.existing.of(other).required_anti_affinity:
                        if term.topology_key in labels and term.matches(pod, labels_of_namespace):
                            out.append((0, (term.topology_key, labels[term.topology_key]), 1))
                    if not own_terms:
                        continue
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

            existing, affinity_counts, anti_counts = self._counts.get(key, table, 3, contributions, positive_only=True)
            if not existing and not own_terms:
                return None, Status(Code.SKIP, plugin=NAME)
            state.write(
                PRE_FILTER_KEY,
                _PreFilterState(terms, labels_of_namespace, existing, affinity_counts, anti_counts, self_affinity),
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
                for term in self.existing.of(other).required_anti_affinity:
                    if term.matches(pod, labels_of_namespace):
                        add_to_pair(existing, labels, term.topology_key, 1)
                if matches_all(affinity, other):
                    for term in affinity:
                        add_to_pair(affinity_counts, labels, term.topology_key, 1)
                for term in anti_affinity:
                    if term.matches(other):
                        add_to_pair(anti_counts, labels, term.topology_key, 1)
        if not existing and not affinity and not anti_affinity:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(
            PRE_FILTER_KEY,
            _PreFilterState(terms, labels_of_namespace, existing, affinity_counts, anti_counts, self_affinity),
        )
        return None, None

    def node_local(self, state: CycleState) -> bool:
        """Whether every topology domain Filter reads for this pod is one node: the keys of its own
        required terms and of every required anti-affinity term of a pod in the snapshot or hidden
        from it for a what-if (the terms of the existing pods that could reject it) each have a value
        no two nodes share, and the first-pod rule (which reads the whole cluster) cannot apply."""
        pre = state.get(PRE_FILTER_KEY)
        snapshot = self.handle.snapshot
        table: NodeTable | None = getattr(snapshot, "table", None)
        hidden: Sequence[Pod] | None = getattr(snapshot, "hidden_pods", None)
        if pre is None or pre.self_affinity or table is None or hidden is None:
            return False
        keys = {t.topology_key for t in pre.terms.required_affinity}
        keys.update(t.topology_key for t in pre.terms.required_anti_affinity)
        for info in snapshot.have_pods_with_required_anti_affinity():
            for other in info.pods_with_required_anti_affinity.values():
                keys.update(t.topology_key for t in self.existing.of(other).required_anti_affinity)
        for other in hidden:
            if other.has_required_anti_affinity:
                keys.update(t.topology_key for t in self.existing.of(other).required_anti_affinity)
        return all(table.values_unique(key) for key in keys)

    def update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
        """AddPod (delta +1) or RemovePod (-1): adjust the counts for `changed` on this node."""
        try:
            pre = state.read(PRE_FILTER_KEY)
        except KeyError as exc:
            return Status.as_error(exc, NAME)
        node = node_info.node
        if node is None:
            return None
        labels = node.labels
        for term in self.existing.of(changed).required_anti_affinity:
            if term.matches(pod, pre.namespace_labels):
                add_to_pair(pre.existing_anti_affinity, labels, term.topology_key, delta)
        if matches_all(pre.terms.required_affinity, changed):
            for term in pre.terms.required_affinity:
                add_to_pair(pre.affinity, labels, term.topology_key, delta)
        for term in pre.terms.required_anti_affinity:
            if term.matches(changed):
                add_to_pair(pre.anti_affinity, labels, term.topology_key, delta)
        return None


def filter_node(state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
    """Filter: the node's labels against the PreFilter counts; the first failure wins."""
    try:
        pre = state.read(PRE_FILTER_KEY)
    except KeyError as exc:
        return Status.as_error(exc, NAME)
    node = node_info.node
    if node is None:
        return Status.as_error(ValueError("node not found"), NAME)
    labels = node.labels
    if not _satisfies_affinity(pre, pod, labels):
        return _AFFINITY
    if pre.anti_affinity and any(
        pre.anti_affinity.get((t.topology_key, labels[t.topology_key]), 0) > 0
        for t in pre.terms.required_anti_affinity
        if t.topology_key in labels
    ):
        return _ANTI_AFFINITY
    if pre.existing_anti_affinity and any(pre.existing_anti_affinity.get(pair, 0) > 0 for pair in labels.items()):
        return _EXISTING_ANTI_AFFINITY
    return None


def filter_batch(state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
    """Filter over every row at once: the PreFilter counts as arrays over each topology key's
    value codes (kube's per-node map lookups, for all nodes in one pass); per row the first check
    it fails, as filter_node orders them. None without PreFilter state (the per-node form reports
    the error); a row without its node is left to the per-node form too."""
    pre = state.get(PRE_FILTER_KEY)
    if pre is None:
        return None
    keys: IntArray = np.zeros(table.size, np.int64)
    # Later checks first, so that an earlier failing check overwrites the key.
    for key in {key for (key, _), count in pre.existing_anti_affinity.items() if count > 0}:
        codes, by_value = table.label_codes(key)
        keys[_positive(pre.existing_anti_affinity, key, by_value)[codes]] = 3
    if pre.anti_affinity:
        for term in pre.terms.required_anti_affinity:
            codes, by_value = table.label_codes(term.topology_key)
            keys[_positive(pre.anti_affinity, term.topology_key, by_value)[codes]] = 2
    affinity_ok = _affinity_mask(pre, pod, table)
    if affinity_ok is not None:
        keys[~affinity_ok] = 1
    keys[~table.has_node()] = PER_NODE
    return FilterVerdicts.from_keys(keys, _REJECTIONS.__getitem__)


def _affinity_mask(pre: _PreFilterState, pod: Pod, table: NodeTable) -> BoolArray | None:
    """_satisfies_affinity for every row, None when the pod has no required affinity terms."""
    affinity_terms = pre.terms.required_affinity
    if affinity_terms:
        has_keys = np.ones(table.size, np.bool_)
        found = np.ones(table.size, np.bool_)
        for term in affinity_terms:
            codes, by_value = table.label_codes(term.topology_key)
            has_keys &= codes >= 0
            found &= _positive(pre.affinity, term.topology_key, by_value)[codes]
        if not pre.affinity and matches_all(affinity_terms, pod):
            found[:] = True
        ok: BoolArray = has_keys & found
        return ok
    return None


def _positive(counts: Mapping[TopologyPair, int], key: str, by_value: Mapping[str, int]) -> BoolArray:
    """Per value code of `key`, whether its pair counts above zero; one more slot (code -1, no
    such label) that never does."""
    out = np.zeros(len(by_value) + 1, np.bool_)
    for (pair_key, value), count in counts.items():
        if count > 0 and pair_key == key:
            code = by_value.get(value)
            if code is not None:
                out[code] = True
    return out


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
