"""InterPodAffinity: place pods near, or away from, pods with given labels in a topology domain.

The adapter: args, the extension-point methods and the queueing hints. PreFilter counts and the
Filter verdicts are filtering.py's, PreScore sums, Score and NormalizeScore scoring.py's, the
parsed terms common.py's and terms.py's (as kube's plugin.go, filtering.go, scoring.go). Namespace
labels come from the handle's namespace lister; the plugin never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import (
    CountingPreFilterExtensions,
    LabelKey,
    changed_objects,
    event_objects,
    pod_event_label_keys,
    selector_keys,
)
from plugins.interpodaffinity.common import NAME as NAME
from plugins.interpodaffinity.common import ExistingPodTerms
from plugins.interpodaffinity.filtering import Filtering, filter_batch, filter_node
from plugins.interpodaffinity.scoring import Scoring, normalize_scores, score_node
from plugins.interpodaffinity.terms import POD_AFFINITY, POD_ANTI_AFFINITY, AffinityTerm, required_terms
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, NodeTable
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
from scheduler.model.selectors import SelectorError, aggregate, invalid_value, unsupported_value

KIND = "InterPodAffinityArgs"
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT, MAX_HARD_POD_AFFINITY_WEIGHT = 0, 100


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


class InterPodAffinity(CountingPreFilterExtensions):
    name = NAME

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        existing = ExistingPodTerms()
        self._filtering = Filtering(handle, existing)
        self._scoring = Scoring(
            handle, existing, args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods
        )

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        if pod.has_pod_affinity:
            return (), Status.unschedulable("pods with InterPodAffinity are not signable", plugin=NAME)
        # Existing pods' required anti-affinity terms select the pod by namespace and labels. (kube
        # signs the labels alone, and nothing with ignorePreferredTermsOfExistingPods, which leaves
        # those required terms out.)
        return ((signing.LABELS, (pod.namespace, signing.string_map(pod.labels))),), None

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return self._filtering.pre_filter(state, pod, nodes)

    def node_local(self, state: CycleState) -> bool:
        return self._filtering.node_local(state)

    def _update(self, state: CycleState, pod: Pod, changed: Pod, node_info: NodeInfo, delta: int) -> Status | None:
        return self._filtering.update(state, pod, changed, node_info, delta)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return filter_node(state, pod, node_info)

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
        return filter_batch(state, pod, table)

    # ---- PreScore / Score --------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self._scoring.pre_score(state, pod, nodes)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return score_node(state, node_info)

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        return normalize_scores(state, scores)

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                _pod_changed,
                POD_EVENT_SCOPE,
            ),
            # Other pods' anti-affinity may have repelled the old labels: always worth a retry.
            ClusterEventWithHint(ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_LABEL)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL), _node_changed
            ),
        ]


def _pending_terms(pod: Pod) -> tuple[tuple[AffinityTerm, ...], tuple[AffinityTerm, ...]]:
    """The pending pod's required affinity and anti-affinity terms as written (selectors unresolved)."""
    return required_terms(pod, POD_AFFINITY), required_terms(pod, POD_ANTI_AFFINITY)


def _all_match(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    return bool(terms) and all(t.matches(pod) for t in terms)


def _pod_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """A bound pod now matching the pod's affinity was added or relabelled, or one matching its anti-affinity went.

    As in 1.34, only the pending pod's own terms are consulted, all of them at once (a deleted
    pod whose anti-affinity repelled the pending one does not requeue it).
    """
    objects = changed_objects(Pod, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
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
    return QueueingHint.QUEUE if old is not None and _all_match(anti_affinity, old) else QueueingHint.SKIP


_AFFINITY_SIDE, _ANTI_AFFINITY_SIDE = "affinity", "anti-affinity"


def _pod_event_pod_keys(pod: Pod) -> frozenset[LabelKey]:
    """A waiting pod's keys for _pod_changed: labels a pod must carry to match all its required
    affinity terms (an added or relabelled pod's new labels) or all its anti-affinity terms (a
    deleted or relabelled pod's old labels). Raises SelectorError as the hint would (every event
    then concerns the pod)."""
    affinity, anti_affinity = _pending_terms(pod)
    return selector_keys(_AFFINITY_SIDE, [t.selector for t in affinity], every=True) | selector_keys(
        _ANTI_AFFINITY_SIDE, [t.selector for t in anti_affinity], every=True
    )


def _pod_event_keys(old: EventObject | None, new: EventObject | None) -> frozenset[LabelKey] | None:
    """The new pod's labels on the affinity side, the old pod's on the anti-affinity side."""
    return pod_event_label_keys(old, new, new_side=_AFFINITY_SIDE, old_side=_ANTI_AFFINITY_SIDE)


# _pod_changed answers SKIP for every pod none of whose keys the event's pods carry: a bound pod's
# labels concern only the pods whose terms need them, not every pod waiting on InterPodAffinity.
POD_EVENT_SCOPE = EventScope(_pod_event_pod_keys, _pod_event_keys)


def _node_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """A node gained an affinity topology key (or its value changed), or lost / changed an anti-affinity one.

    Any added node requeues a pod with anti-affinity.
    """
    objects = event_objects(Node, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
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
