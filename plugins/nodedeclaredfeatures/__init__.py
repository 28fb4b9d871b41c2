"""NodeDeclaredFeatures: a pod goes only to nodes that declare every feature its spec needs.

kube-scheduler 1.37's plugin (GA, last in the default profile). PreFilter infers the pod's
required features from its spec (features.py); a pod needing none is skipped. Filter rejects,
UnschedulableAndUnresolvable, a node whose `status.declaredFeatures` lacks one of them. Must
never read the pod's status: upstream infers from the spec alone at scheduling time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import event_objects
from plugins.nodedeclaredfeatures.features import DEFAULT_REGISTRY, Registry
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.podmemo import PodVersionMemo
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import BoolArray, NodeTable
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.objects import Node, Pod

NAME = "NodeDeclaredFeatures"

ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: frozenset[str]

    def clone(self) -> _PreFilterState:
        return self


PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
# Pod versions whose inferred features are kept; past it the cache starts again.
_REQUIRED_CACHE_LIMIT = 4096


class NodeDeclaredFeatures:
    name = NAME

    def __init__(self, registry: Registry = DEFAULT_REGISTRY) -> None:
        self.registry = registry
        # The features each pod version needs, inferred once: a gang's member is pre-filtered once
        # per placement tried (TopologyAwareScheduling: 50 racks), and every spec walk costs.
        self._features_of: PodVersionMemo[frozenset[str]] = PodVersionMemo(_REQUIRED_CACHE_LIMIT)

    def _required_by(self, pod: Pod) -> frozenset[str]:
        return self._features_of.get(pod, self._infer)

    def _infer(self, pod: Pod) -> frozenset[str]:
        return self.registry.infer_for_pod_scheduling(pod.spec)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.FEATURES, tuple(sorted(self._required_by(pod)))),), None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        required = self._required_by(pod)
        if not required:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(PRE_FILTER_KEY, _PreFilterState(required))
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def _required(self, state: CycleState) -> frozenset[str]:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            raise KeyError(f'error reading "{PRE_FILTER_KEY.name}" from cycle-state: not found')
        return pre.required

    def _node_has(self, required: frozenset[str], node: Node | None) -> bool:
        declared = node.declared_features if node is not None else ()
        return required <= self.registry.node_features(declared)

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the Node's declared features alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        try:
            required = self._required(state)
        except KeyError as exc:
            return Status.as_error(exc, plugin=NAME)
        if self._node_has(required, node_info.node):
            return None
        return Status.unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS, plugin=NAME)

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> BoolArray | None:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return None  # the per-node form reports the missing state
        required = pre.required
        return table.node_mask((NAME, required), lambda node: self._node_has(required, node))

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE), _node_changed),
            ClusterEventWithHint(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE), self._pod_changed),
        ]

    def _pod_changed(self, pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        """The rejected pod's own update changed what it requires."""
        objects = event_objects(Pod, old, new)
        if objects is None:
            return QueueingHint.QUEUE
        old, new = objects
        if old is None:
            return QueueingHint.QUEUE
        if new.uid != pod.uid:
            return QueueingHint.SKIP
        before = self.registry.infer_for_pod_scheduling(old.spec)
        after = self.registry.infer_for_pod_scheduling(new.spec)
        return QueueingHint.SKIP if before == after else QueueingHint.QUEUE


def _node_changed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """A node was added, or its declared features changed."""
    objects = event_objects(Node, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    if old is not None and old.declared_features == new.declared_features:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: Mapping[str, Any], handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures()
