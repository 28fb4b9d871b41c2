"""What InterPodAffinity's filtering and scoring share: the plugin's name, the remembered terms of
existing pods, and the labels of the incoming pod's namespace.

Owns the parsed-terms cache of existing pods and which label keys their selectors read. Never
reads or writes CycleState, never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping

from plugins.interpodaffinity.terms import NO_TERMS, PodTerms, parse_pod_terms
from scheduler.framework.interface import Handle
from scheduler.framework.podmemo import PodVersionMemo
from scheduler.model.objects import Pod

NAME = "InterPodAffinity"

# Parsed terms of existing pods, by (uid, resourceVersion); cleared when it grows past this.
_TERMS_CACHE_LIMIT = 50_000


class ExistingPodTerms:
    """The parsed terms of pods already placed, and the label keys any of them selects on."""

    def __init__(self) -> None:
        self._terms_cache: PodVersionMemo[PodTerms] = PodVersionMemo(_TERMS_CACHE_LIMIT)
        # Label keys any existing pod's term selects on; bumped `_selector_epoch` when one is new.
        self._selector_keys: set[str] = set()
        self._selector_epoch = 0

    def of(self, pod: Pod) -> PodTerms:
        """An existing pod's terms; a kind that fails to parse is left empty, as the cache's PodInfo does."""
        if not pod.has_pod_affinity:
            return NO_TERMS
        return self._terms_cache.get(pod, self._parse)

    def _parse(self, pod: Pod) -> PodTerms:
        terms, _ = parse_pod_terms(pod)
        self._note_selector_keys(terms)
        return terms

    def _note_selector_keys(self, terms: PodTerms) -> None:
        every = [*terms.required_affinity, *terms.required_anti_affinity]
        every += [w.term for w in (*terms.preferred_affinity, *terms.preferred_anti_affinity)]
        keys = {r.key for term in every for r in term.selector.requirements}
        if not keys <= self._selector_keys:
            self._selector_keys |= keys
            self._selector_epoch += 1

    def label_key(self, pod: Pod) -> tuple[int, frozenset[tuple[str, str]]]:
        """The part of the pod's labels that existing pods' terms can see: only labels whose key some
        term selects on (a selector reads no other key), with the epoch of that key set. Pods that
        differ only in other labels (upstream's per-pod `signature`) share the kept counts."""
        keys = self._selector_keys
        return self._selector_epoch, frozenset(item for item in pod.labels.items() if item[0] in keys)


def namespace_labels(handle: Handle, pod: Pod) -> Mapping[str, str]:
    return dict(handle.namespaces.labels(pod.namespace) or {})
