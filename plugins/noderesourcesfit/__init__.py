"""NodeResourcesFit: does the node have room for the pod's requests; how full would it be.

The adapter: args, the extension-point methods and the queueing hints. PreFilter and Filter are
filtering.py's (kube's fit.go), PreScore and Score with the LeastAllocated, MostAllocated and
RequestedToCapacityRatio strategies resource_allocation.py's (kube's resource_allocation.go and one
file per strategy), and so is PlacementScore (a pod group's placement, MostAllocated).

Arithmetic is kube's: int64 sums and products that wrap, divisions that truncate. Where that
gives a node a score outside [0, 100] (a node offering 1e14 cpu or 100P memory overflows
(capacity - requested) * 100), kube's framework fails the whole cycle of every pod that scores
the node; here that node's score is clamped into range instead, so it only moves itself. A pod
whose own requests are beyond int64 is rejected at PreFilter, naming the field.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import api_hint, event_objects
from plugins.helper.resource_allocation import delegated_to_dra, is_scalar_resource, sign_requests
from plugins.helper.shape_score import MAX_CUSTOM_SCORE, MAX_UTILIZATION
from plugins.noderesourcesfit.filtering import NAME as NAME
from plugins.noderesourcesfit.filtering import Delegate, filter_batch, filter_node, never_delegate, pre_filter
from plugins.noderesourcesfit.filtering import fits as fits
from plugins.noderesourcesfit.resource_allocation import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    STRATEGIES,
    ResourceAllocationScorer,
    placement_score,
)
from plugins.noderesourcesfit.resource_allocation import ResourceSpec as ResourceSpec
from scheduler.framework.dra import DEVICE_CLASS_PREFIX, DraManager
from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import PodGroupState
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    ActionType,
    ApiObject,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventObject,
    EventResource,
    NodeInfo,
    Placement,
    PreFilterResult,
    QueueingHint,
    Status,
)
from scheduler.model.objects import CPU, EPHEMERAL_STORAGE, MEMORY, Node, Pod


@dataclass(frozen=True, slots=True)
class FitArgs:
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))
    shape: tuple[tuple[int, int], ...] = ()
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()


def parse_args(args: Mapping[str, Any]) -> FitArgs:
    """Validate NodeResourcesFitArgs; errors name the field."""
    unknown = set(args) - {"apiVersion", "kind", "scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type") or LEAST_ALLOCATED
    if kind not in STRATEGIES:
        raise ValueError(
            f"scoringStrategy.type: Unsupported value: {kind!r}: supported values: "
            f'"{LEAST_ALLOCATED}", "{MOST_ALLOCATED}", "{REQUESTED_TO_CAPACITY_RATIO}"'
        )
    resources = []
    for i, item in enumerate(strategy.get("resources") or ({"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1})):
        weight = item.get("weight") or 1  # v1 defaulting: an unset or zero weight is 1
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(
                f"scoringStrategy.resources[{i}].weight: Invalid value: {weight!r}: must be in the range [1, 100]"
            )
        if not item.get("name"):
            raise ValueError(f"scoringStrategy.resources[{i}].name: Required value")
        resources.append(ResourceSpec(item["name"], weight))
    shape: list[tuple[int, int]] = []
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        points = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
        if not points:
            raise ValueError("scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point")
        for i, point in enumerate(points):
            util, score = point.get("utilization", 0), point.get("score", 0)
            if not 0 <= util <= MAX_UTILIZATION:
                raise ValueError(
                    f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: must be in [0, 100]"
                )
            if not 0 <= score <= MAX_CUSTOM_SCORE:
                raise ValueError(f"scoringStrategy.requestedToCapacityRatio.shape[{i}].score: must be in [0, 10]")
            if shape and util <= shape[-1][0]:
                raise ValueError(
                    f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: values must be sorted "
                    "in increasing order"
                )
            shape.append((util, score))
    return FitArgs(
        strategy=kind,
        resources=tuple(resources),
        shape=tuple(shape),
        ignored_resources=frozenset(args.get("ignoredResources") or ()),
        ignored_resource_groups=frozenset(args.get("ignoredResourceGroups") or ()),
    )


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: FitArgs, dra: DraManager | None = None) -> None:
        self.args = args
        self._delegate: Delegate = delegated_to_dra(dra)
        self._scorer = ResourceAllocationScorer(args.strategy, args.resources, args.shape)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return sign_requests(pod, self._delegate, NAME)

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return pre_filter(state, pod)

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the node's allocatable and its pods' requests alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return filter_node(
            state, pod, node_info, self.args.ignored_resources, self.args.ignored_resource_groups, self._delegate
        )

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> FilterVerdicts | None:
        return filter_batch(
            state, pod, table, self.args.ignored_resources, self.args.ignored_resource_groups, self._delegate
        )

    # ---- PreScore / Score --------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self._scorer.pre_score(state, pod, nodes)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return self._scorer.score(state, pod, node_info)

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        return self._scorer.score_batch(state, pod, table, rows)

    def score_extensions(self) -> None:
        return None

    # ---- PlacementScore (TopologyAwareWorkloadScheduling) ------------------------------

    def score_placement(
        self, group: PodGroupState, placement: Placement, assignments: Sequence[tuple[Pod, str]]
    ) -> tuple[int, Status | None]:
        return placement_score(self.args.resources, placement.nodes, [pod for pod, _node in assignments]), None

    def normalize_placement_scores(self, group: PodGroupState, scores: list[int]) -> Status | None:
        return None  # kube's Fit has no PlacementScoreExtensions: its scores are already 0-100

    # ---- requeueing --------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _pod_freed),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                functools.partial(_node_grew, delegate=self._delegate),
            ),
            # In-place resize (GA): a bound pod shrinking frees room; the pod itself shrinking may fit.
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN), _pod_freed
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_SCALE_DOWN)),
            # A DeviceClass may come to back an extended resource the pod asks for.
            ClusterEventWithHint(
                ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE), _device_class_changed
            ),
        ]


def _pod_freed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    """An assigned (or nominated) pod was deleted, finished, or shrank in something this pod asks for."""
    if pod.fit_out_of_range:
        return QueueingHint.SKIP  # only the pod's own update can bring its request within int64
    if new is None:  # deleted
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        nominated = (old.raw.get("status") or {}).get("nominatedNodeName")
        return QueueingHint.QUEUE if old.node_name or nominated else QueueingHint.SKIP
    objects = event_objects(Pod, old, new)
    if objects is None:
        return QueueingHint.QUEUE
    old, new = objects
    if old is None:
        return QueueingHint.QUEUE
    if new.terminal:  # the cache lets a finished pod go as if it were deleted
        return QueueingHint.QUEUE
    if not new.node_name:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if _relevant_resources_decreased(pod, old, new) else QueueingHint.SKIP


def _relevant_resources_decreased(pod: Pod, old: Pod, new: Pod) -> bool:
    """haveEnoughRelevantResourcesDecreased: a resource the target pod requests got smaller."""
    wanted = pod.requests
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        if wanted.get(name) > 0 and old.requests.get(name) > new.requests.get(name):
            return True
    return any(
        amount > 0 and is_scalar_resource(name) and old.requests.scalar.get(name, 0) > new.requests.scalar.get(name, 0)
        for name, amount in wanted.scalar.items()
    )


@api_hint
def _device_class_changed(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None:
        return QueueingHint.SKIP
    resource = (new.get("spec") or {}).get("extendedResourceName")
    if old is not None:
        if (old.get("spec") or {}).get("extendedResourceName") == resource:
            return QueueingHint.SKIP
    elif pod.requests.scalar.get(DEVICE_CLASS_PREFIX + str((new.get("metadata") or {}).get("name") or "")):
        return QueueingHint.QUEUE
    if resource and str(resource) in pod.requests.scalar:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _node_grew(
    pod: Pod, old: EventObject | None, new: EventObject | None, delegate: Delegate = never_delegate
) -> QueueingHint:
    if not isinstance(new, Node) or pod.fit_out_of_range:
        return QueueingHint.SKIP
    if old is None:
        return QueueingHint.QUEUE if fits(pod, new, delegate) else QueueingHint.SKIP
    if not isinstance(old, Node):
        return QueueingHint.QUEUE
    a, b = old.allocatable, new.allocatable
    req = pod.fit_requests
    grew = (
        b.allowed_pods > a.allowed_pods
        or (req.milli_cpu > 0 and b.milli_cpu > a.milli_cpu)
        or (req.memory > 0 and b.memory > a.memory)
        or (req.ephemeral_storage > 0 and b.ephemeral_storage > a.ephemeral_storage)
        or any(amount and b.scalar.get(name, 0) > a.scalar.get(name, 0) for name, amount in req.scalar.items())
    )
    return QueueingHint.QUEUE if grew and fits(pod, new, delegate) else QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(parse_args(args), handle.dra)
