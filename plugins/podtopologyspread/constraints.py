"""Topology spread constraints: parsing them from a pod and counting matching pods per domain.

Owns the domain rules of PodTopologySpread that do not depend on the framework: which
constraints a pod has (its own, filtered by whenUnsatisfiable, with matchLabelKeys folded
into the selector), which nodes a constraint counts under its inclusion policies, and how
many pods a selector matches on a node. Must never read or write CycleState or NodeInfo
beyond its pods and node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.model.objects import Node, Pod, Toleration
from scheduler.model.selectors import (
    LabelSelector,
    RequiredNodeAffinity,
    find_untolerated_taint,
    is_do_not_schedule,
    label_selector,
    selector_from_set,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

# The minimum reported when no domain is known: Go's math.MaxInt32, so any skew passes.
NO_DOMAIN_MINIMUM = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topologySpreadConstraint with its selector parsed and the 1.34 defaults applied."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def counts_node(self, node_matches_affinity: bool, node_taints_tolerated: bool) -> bool:
        """Whether a node takes part in this constraint's domains under its inclusion policies."""
        if self.node_affinity_policy == HONOR and not node_matches_affinity:
            return False
        return not (self.node_taints_policy == HONOR and not node_taints_tolerated)


def parse_constraints(
    raw: Sequence[Mapping[str, Any]], pod_labels: Mapping[str, str], action: str
) -> list[SpreadConstraint]:
    """The constraints with this whenUnsatisfiable; SelectorError when a labelSelector is malformed.

    The pod's values for matchLabelKeys are ANDed into the selector; keys the pod lacks are
    ignored. A missing labelSelector selects nothing, whatever matchLabelKeys say (kube's
    mergeLabelSetWithSelector keeps a Nothing selector as it is); an empty one selects every pod.
    """
    constraints: list[SpreadConstraint] = []
    for entry in raw:
        if entry.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector(entry.get("labelSelector"))
        keyed = {key: pod_labels[key] for key in entry.get("matchLabelKeys") or () if key in pod_labels}
        if keyed and not selector.nothing:
            selector = LabelSelector(selector_from_set(keyed).requirements + selector.requirements)
        min_domains = entry.get("minDomains")
        constraints.append(
            SpreadConstraint(
                max_skew=int(entry.get("maxSkew") or 0),
                topology_key=str(entry.get("topologyKey") or ""),
                selector=selector,
                min_domains=int(min_domains) if min_domains is not None else 1,
                node_affinity_policy=entry.get("nodeAffinityPolicy") or HONOR,
                node_taints_policy=entry.get("nodeTaintsPolicy") or IGNORE,
            )
        )
    return constraints


def counting_key(constraints: Iterable[SpreadConstraint]) -> tuple[tuple[object, ...], ...]:
    """What counting matching pods per domain reads of the constraints: topology key, selector (in
    canonical form) and inclusion policies, not maxSkew or minDomains. Kept counts keyed by it
    serve a pod's own constraints and default constraints of the same shape alike."""
    return tuple(
        (c.topology_key, c.selector.canonical(), c.node_affinity_policy, c.node_taints_policy) for c in constraints
    )


def has_all_topology_keys(labels: Mapping[str, str], constraints: Iterable[SpreadConstraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def count_matching(pods: Iterable[Pod], selector: LabelSelector, namespace: str) -> int:
    """Pods of this namespace the selector matches; terminating pods do not count.

    An empty selector (`labelSelector: {}`) counts none: kube's countPodsMatchSelector returns 0 for
    labels.Everything(), although the incoming pod itself still matches it (its self-match counts).
    """
    if selector.empty:
        return 0
    return sum(1 for p in pods if p.namespace == namespace and not p.deleting and selector.matches(p.labels))


@dataclass(frozen=True, slots=True)
class NodeEligibility:
    """Whether nodes match the pod's required node affinity and tolerate its taints, computed once per node.

    Parse errors in the pod's node affinity make a term match nothing, as upstream ignores them here.
    Equal (and hashed) by exactly what it reads of the pod, so caches can key on it.
    """

    affinity: RequiredNodeAffinity
    tolerations: tuple[Toleration, ...]

    def tolerates(self, node: Node) -> bool:
        return find_untolerated_taint(node.taints, self.tolerations, is_do_not_schedule) is None

    def counted_indices(self, constraints: Sequence[SpreadConstraint], node: Node) -> list[int]:
        """Indices of the constraints this node takes part in (each node check done at most once)."""
        affinity_ok: bool | None = None
        taints_ok: bool | None = None
        indices: list[int] = []
        for i, c in enumerate(constraints):
            if c.node_affinity_policy == HONOR and affinity_ok is None:
                affinity_ok = self.affinity.matches(node)
            if c.node_taints_policy == HONOR and taints_ok is None:
                taints_ok = self.tolerates(node)
            if c.counts_node(affinity_ok is not False, taints_ok is not False):
                indices.append(i)
        return indices


def topology_normalizing_weight(size: int) -> float:
    """Weight of a topology with `size` domains, so small topologies are not drowned by big ones."""
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    """A domain's raw score; maxSkew - 1 is added so skews within the tolerance weigh less."""
    return count * weight + (max_skew - 1)


def round_half_away_from_zero(value: float) -> int:
    """Go's math.Round (Python's round() rounds halves to even)."""
    magnitude = abs(value)
    floor = math.floor(magnitude)
    rounded = floor + 1 if magnitude - floor >= 0.5 else floor
    return int(math.copysign(rounded, value))
