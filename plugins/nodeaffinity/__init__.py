"""NodeAffinity: spec.nodeSelector and required node affinity as a filter, preferred terms as a score.

PreFilter narrows the candidate nodes to the names a pod's required terms list in
`matchFields: metadata.name In [...]` (when every term lists some). Filter checks the
scheduler-enforced `addedAffinity` first, then the pod's own nodeSelector and required
terms. Score sums the weights of the preferred terms (the pod's and addedAffinity's) a node
matches; NormalizeScore scales by the best node.
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
    Code,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    NodeScore,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.selectors import (
    IN,
    NODE_NAME_FIELD,
    NodeSelector,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    SelectorError,
    parse_node_selector,
    parse_preferred_terms,
    pod_node_affinity,
    required_node_affinity,
)

NAME = "NodeAffinity"

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
# Filter's rejections, by the keys filter_batch gives them (0 passes).
_REJECTIONS = {
    1: Status.unresolvable(ERR_REASON_ENFORCED, plugin=NAME),
    2: Status.unresolvable(ERR_REASON_POD, plugin=NAME),
}

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_required: NodeSelector | None = None
    added_preferred: PreferredSchedulingTerms | None = None


def parse_args(args: Mapping[str, Any]) -> NodeAffinityArgs:
    """Validate NodeAffinityArgs; errors name the field (addedAffinity.…)."""
    unknown = set(args) - {"addedAffinity", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    if args.get("kind", "NodeAffinityArgs") != "NodeAffinityArgs":
        raise ValueError(f'kind: Unsupported value: "{args["kind"]}": supported values: "NodeAffinityArgs"')
    added: Mapping[str, Any] | None = args.get("addedAffinity")
    if added is None:
        return NodeAffinityArgs()
    errors: list[str] = []
    required: NodeSelector | None = None
    preferred: PreferredSchedulingTerms | None = None
    if added.get(_REQUIRED) is not None:
        try:
            required = parse_node_selector(added[_REQUIRED], f"addedAffinity.{_REQUIRED}", strict=True)
        except SelectorError as exc:
            errors.extend(exc.errors)
    if added.get(_PREFERRED):
        try:
            preferred = parse_preferred_terms(added[_PREFERRED], f"addedAffinity.{_PREFERRED}")
        except SelectorError as exc:
            errors.extend(exc.errors)
    if errors:
        raise SelectorError(errors)
    return NodeAffinityArgs(required, preferred)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: RequiredNodeAffinity

    def clone(self) -> _PreFilterState:
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredSchedulingTerms | None

    def clone(self) -> _PreScoreState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def _pod_preferred(pod: Pod) -> PreferredSchedulingTerms | None:
    """The pod's preferred terms (None when it has none); SelectorError when they are malformed."""
    raw = pod_node_affinity(pod).get(_PREFERRED)
    return parse_preferred_terms(raw) if raw is not None else None


def _named_nodes(terms: Sequence[Mapping[str, Any]]) -> set[str] | None:
    """Node names the required terms can match at most, or None when some term allows any node.

    Within a term `metadata.name In` lists intersect (ANDed); across terms they unite (ORed).
    """
    names: set[str] = set()
    for t in terms:
        term_names: set[str] | None = None
        for requirement in t.get("matchFields") or ():
            if requirement.get("key") == NODE_NAME_FIELD and requirement.get("operator") == IN:
                values = set(requirement.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity:
    name = NAME

    def __init__(self, args: NodeAffinityArgs) -> None:
        self.added_required = args.added_required
        self.added_preferred = args.added_preferred

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return (
            (signing.NODE_AFFINITY, signing.node_affinity(pod)),
            (signing.NODE_SELECTOR, signing.string_map(pod.spec.get("nodeSelector"))),
        ), None

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        required = pod_node_affinity(pod).get(_REQUIRED)
        if required is None and self.added_required is None and pod.spec.get("nodeSelector") is None:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(PRE_FILTER_KEY, _PreFilterState(required_node_affinity(pod)))
        terms = (required or {}).get("nodeSelectorTerms") or ()
        if not terms:
            return None, None
        names = _named_nodes(terms)
        if names is None:
            return None, None
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT, plugin=NAME)
        return PreFilterResult(names), None

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the Node's labels and fields alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return None
        pre = state.get(PRE_FILTER_KEY)
        required = pre.required if pre is not None else required_node_affinity(pod)
        key = self._rejection_key(required, node)
        return _REJECTIONS[key] if key else None

    def _rejection_key(self, required: RequiredNodeAffinity, node: Node) -> int:
        if self.added_required is not None and not self.added_required.matches(node):
            return 1
        return 0 if required.matches(node) else 2

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts:
        # Pods with the same selector and required terms share one evaluation per node change; the
        # key is all the verdict reads (with the enforced affinity, which differs by profile).
        pre = state.get(PRE_FILTER_KEY)
        required = pre.required if pre is not None else required_node_affinity(pod)
        return table.node_verdicts(
            (NAME, "filter", self.added_required, required),
            lambda node: self._rejection_key(required, node),
            _REJECTIONS.__getitem__,
        )

    # ---- PreScore / Score --------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            preferred = _pod_preferred(pod)
        except SelectorError as exc:
            return Status.as_error(exc, NAME)
        if preferred is None and self.added_preferred is None:
            return Status(Code.SKIP, plugin=NAME)
        state.write(PRE_SCORE_KEY, _PreScoreState(preferred))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        node = node_info.node
        if node is None:
            return 0, None
        total = self.added_preferred.score(node) if self.added_preferred is not None else 0
        pre = state.get(PRE_SCORE_KEY)
        if pre is None:
            try:
                pre = _PreScoreState(_pod_preferred(pod))
            except SelectorError as exc:
                return 0, Status.as_error(exc, NAME)
        if pre.preferred is not None:
            total += pre.preferred.score(node)
        return total, None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        pre = state.get(PRE_SCORE_KEY)
        if pre is None:
            return None  # no PreScore state: the per-node form says why
        # Keyed, as filter_batch, by all the score reads: the pod's preferred terms and the added ones.
        key = (NAME, self.added_preferred, pre.preferred)
        values = table.node_values(key, lambda node: self.score(state, pod, NodeInfo(node))[0])
        return values[rows]

    def score_extensions(self) -> NodeAffinity:
        return self

    def normalize_batch(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        return default_normalize_batch(MAX_NODE_SCORE, False, scores)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL), self._node_changed
            )
        ]

    def _node_changed(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """A node was added that matches, or changed from not matching to matching."""
        objects = event_objects(Node, old, new)
        if objects is None:
            return QueueingHint.QUEUE
        old, new = objects
        if self.added_required is not None and not self.added_required.matches(new):
            return QueueingHint.SKIP
        required = required_node_affinity(pod)
        matched, errors = required.match_with_errors(new)
        if errors:
            return QueueingHint.QUEUE  # broken terms: let a real cycle report it
        if not matched:
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        was_matched, errors = required.match_with_errors(old)
        if errors or not was_matched:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> NodeAffinity:
    return NodeAffinity(parse_args(args))
