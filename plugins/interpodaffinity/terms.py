"""Pod (anti-)affinity terms: parsing them from a pod and matching them against pods.

Owns the domain rules InterPodAffinity shares between filtering and scoring: which
namespaces a term covers (its own list, a namespaceSelector, or the pod's namespace when
neither is given), how a namespaceSelector of the incoming pod is resolved to namespace
names once per cycle, and counting per topology pair (key, value). Pure data and functions:
never reads CycleState, never changes a NodeInfo.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler.framework.interface import NamespaceLister
from scheduler.model.objects import Pod
from scheduler.model.selectors import NOTHING, LabelSelector, SelectorError, label_selector

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
POD_AFFINITY = "podAffinity"
POD_ANTI_AFFINITY = "podAntiAffinity"

TopologyPair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A parsed PodAffinityTerm."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector = NOTHING

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None = None) -> bool:
        """Whether `pod` is in one of the term's namespaces and has matching labels.

        `namespace_labels` are the labels of the pod's namespace, for the namespaceSelector;
        unknown labels count as none (so a selector like `NotIn` may still match).
        """
        in_scope = pod.namespace in self.namespaces or self.namespace_selector.matches(namespace_labels or {})
        return in_scope and self.selector.matches(pod.labels)

    def with_namespaces_resolved(self, namespaces: NamespaceLister) -> AffinityTerm:
        """The incoming pod's term with its namespaceSelector replaced by the names it selects now.

        An empty selector (every namespace) is kept: it matches without namespace labels.
        """
        selector = self.namespace_selector
        if selector.empty or selector.nothing:
            return self
        selected = {name for name in namespaces.names() if selector.matches(namespaces.labels(name) or {})}
        return replace(self, namespaces=self.namespaces | selected, namespace_selector=NOTHING)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's inter-pod affinity, parsed."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()

    @property
    def selects_namespaces(self) -> bool:
        """Whether some term has a namespaceSelector: its namespaces change with the cluster's."""
        every = (*self.required_affinity, *self.required_anti_affinity)
        every += tuple(w.term for w in (*self.preferred_affinity, *self.preferred_anti_affinity))
        return any(not t.namespace_selector.nothing for t in every)

    def with_namespaces_resolved(self, namespaces: NamespaceLister) -> PodTerms:
        if self is NO_TERMS:
            return self

        def weighted(terms: Iterable[WeightedTerm]) -> tuple[WeightedTerm, ...]:
            return tuple(WeightedTerm(w.term.with_namespaces_resolved(namespaces), w.weight) for w in terms)

        return PodTerms(
            tuple(t.with_namespaces_resolved(namespaces) for t in self.required_affinity),
            tuple(t.with_namespaces_resolved(namespaces) for t in self.required_anti_affinity),
            weighted(self.preferred_affinity),
            weighted(self.preferred_anti_affinity),
        )


NO_TERMS = PodTerms()


def _affinity_section(pod: Pod, kind: str) -> Mapping[str, Any] | None:
    affinity: Mapping[str, Any] = pod.spec.get("affinity") or {}
    section: Mapping[str, Any] | None = affinity.get(kind)
    return section


def has_preferred_terms(pod: Pod) -> bool:
    """Whether the pod lists preferred podAffinity or podAntiAffinity terms (cheap; no parsing)."""
    return any((_affinity_section(pod, kind) or {}).get(_PREFERRED) for kind in (POD_AFFINITY, POD_ANTI_AFFINITY))


def parse_term(pod: Pod, raw: Mapping[str, Any]) -> AffinityTerm:
    """One PodAffinityTerm of `pod`; SelectorError when a selector is malformed.

    With neither namespaces nor a namespaceSelector the term covers the pod's own namespace;
    a null namespaceSelector selects no namespace, an empty one every namespace.
    """
    selector = label_selector(raw.get("labelSelector"))
    names: Sequence[str] = raw.get("namespaces") or ()
    raw_namespace_selector = raw.get("namespaceSelector")
    own_namespace_only = not names and raw_namespace_selector is None
    namespaces = frozenset((pod.namespace,)) if own_namespace_only else frozenset(names)
    return AffinityTerm(namespaces, selector, str(raw.get("topologyKey") or ""), label_selector(raw_namespace_selector))


def required_terms(pod: Pod, kind: str) -> tuple[AffinityTerm, ...]:
    """The required terms of podAffinity or podAntiAffinity; SelectorError when one is malformed."""
    section = _affinity_section(pod, kind) or {}
    return tuple(parse_term(pod, raw) for raw in section.get(_REQUIRED) or ())


def preferred_terms(pod: Pod, kind: str) -> tuple[WeightedTerm, ...]:
    section = _affinity_section(pod, kind) or {}
    return tuple(
        WeightedTerm(parse_term(pod, raw.get("podAffinityTerm") or {}), int(raw.get("weight") or 0))
        for raw in section.get(_PREFERRED) or ()
    )


def parse_pod_terms(pod: Pod) -> tuple[PodTerms, list[str]]:
    """All four kinds of terms, and an error per kind that failed to parse (that kind is left empty)."""
    if not pod.has_pod_affinity:
        return NO_TERMS, []  # neither podAffinity nor podAntiAffinity: nothing to parse
    errors: list[str] = []
    parsed: dict[str, Any] = {}
    for field, parse, kind, label in (
        ("required_affinity", required_terms, POD_AFFINITY, "requiredAffinityTerms"),
        ("required_anti_affinity", required_terms, POD_ANTI_AFFINITY, "requiredAntiAffinityTerms"),
        ("preferred_affinity", preferred_terms, POD_AFFINITY, "preferredAffinityTerms"),
        ("preferred_anti_affinity", preferred_terms, POD_ANTI_AFFINITY, "preferredAntiAffinityTerms"),
    ):
        try:
            parsed[field] = parse(pod, kind)
        except SelectorError as exc:
            errors.append(f"{label}: {exc}")
    return PodTerms(**parsed), errors


def matches_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """Whether `pod` matches every term (and there is at least one).

    Only for the incoming pod's terms, whose namespaceSelector was resolved to names.
    """
    return bool(terms) and all(t.matches(pod) for t in terms)


def add_to_pair(counts: dict[TopologyPair, int], labels: Mapping[str, str], topology_key: str, delta: int) -> None:
    """Count `delta` for the node's domain of this key (nothing when the node lacks the key); zero counts go."""
    value = labels.get(topology_key)
    if value is None:
        return
    pair = (topology_key, value)
    total = counts.get(pair, 0) + delta
    if total:
        counts[pair] = total
    else:
        counts.pop(pair, None)
