"""VolumeBinding: place pods where their PersistentVolumeClaims can be bound, and bind them.

The adapter (extension points, args, queueing hints); the domain core is binder.py, the Score
arithmetic scoring.py (as kube's volume_binding.go, binder.go, scorer.go). PreFilter
rejects pods whose claims are missing, lost, being deleted, or unbound with Immediate binding;
Filter checks bound claims' PV node affinity and finds PVs or provisioning for unbound
WaitForFirstConsumer claims per node; Reserve assumes the node's choice; PreBind writes it and
waits for the PV controller; Unreserve drops the assumptions. Reads only the handle's listers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plugins.helper import api_hint
from plugins.helper.shape_score import MAX_CUSTOM_SCORE, MAX_UTILIZATION
from plugins.volumebinding.binder import (
    UNBOUND_IMMEDIATE,
    BinderError,
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    volume_limit,
)
from plugins.volumebinding.scoring import build_scorer
from scheduler.api.client import ApiError
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import BoolArray, NodeTable
from scheduler.framework.types import (
    ActionType,
    ApiObject,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    NodeInfo,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.model.csi_translation import MIGRATED_PLUGINS_ANNOTATION
from scheduler.model.objects import Node, Pod
from scheduler.model.volumes import (
    annotations_of,
    meta,
    name_of,
    pod_claim_names,
    pod_volumes,
    spec,
)

NAME = "VolumeBinding"

DEFAULT_BIND_TIMEOUT_SECONDS = 600
# 1.37's default shape (StorageCapacityScoring is beta and on): emptier nodes score higher.
DEFAULT_SHAPE = ((0, MAX_CUSTOM_SCORE), (MAX_UTILIZATION, 0))


@dataclass(frozen=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[tuple[int, int], ...] = DEFAULT_SHAPE


def parse_args(args: Mapping[str, Any]) -> VolumeBindingArgs:
    """Validate VolumeBindingArgs; errors name the field."""
    unknown = set(args) - {"apiVersion", "kind", "bindTimeoutSeconds", "shape"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    timeout = args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
        raise ValueError(
            f"bindTimeoutSeconds: Invalid value: {timeout!r}: "
            "invalid BindTimeoutSeconds, should not be a negative value"
        )
    points = args.get("shape") or ()
    shape: list[tuple[int, int]] = []
    for i, point in enumerate(points):
        util, score = point.get("utilization", 0), point.get("score", 0)
        if not isinstance(util, int) or not 0 <= util <= MAX_UTILIZATION:
            raise ValueError(f"shape[{i}].utilization: Invalid value: {util!r}: not in valid range [0, 100]")
        if not isinstance(score, int) or not 0 <= score <= MAX_CUSTOM_SCORE:
            raise ValueError(f"shape[{i}].score: Invalid value: {score!r}: not in valid range [0, 10]")
        if shape and util <= shape[-1][0]:
            raise ValueError(f"shape[{i}].utilization: Invalid value: {util!r}: utilization values must be sorted")
        shape.append((util, score))
    return VolumeBindingArgs(timeout, tuple(shape) or DEFAULT_SHAPE)


@dataclass
class _StateData:
    claims: PodVolumeClaims | None = None
    volumes_by_node: dict[str, PodVolumes] = field(default_factory=dict)
    has_static_bindings: bool = False
    all_bound: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clone(self) -> _StateData:
        # As upstream: the same object (preemption's what-ifs never change volumes).
        return self


STATE_KEY: StateKey[_StateData] = StateKey(f"PreFilter{NAME}")


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.binder = VolumeBinder(
            handle.volumes,
            handle.client,
            self._node,
            float(args.bind_timeout_seconds),
            self._pod_exists,
        )
        self._score = build_scorer(args.shape)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.VOLUMES, signing.volumes(pod)),), None

    def _pod_exists(self, pod: Pod) -> bool:
        return self.handle.pod_exists(pod)  # read at each call: the scheduler wires it after the plugins are built

    def _node(self, name: str) -> Node | None:
        info = self.handle.snapshot.get(name)
        return info.node if info is not None else None

    # ---- PreFilter / Filter ------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        has_claims, problem = self.binder.pod_claims_problem(pod)
        if problem is not None:
            return None, Status.unresolvable(problem, plugin=NAME)
        if not has_claims:
            state.write(STATE_KEY, _StateData())
            return None, Status(Code.SKIP, plugin=NAME)
        try:
            claims = self.binder.get_pod_volume_claims(pod)
        except BinderError as exc:
            return None, Status.as_error(exc, NAME)
        if claims.unbound_immediate:
            return None, Status.unresolvable(UNBOUND_IMMEDIATE, plugin=NAME)
        state.write(STATE_KEY, _StateData(claims))
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Only when PreFilter skipped: the pod has no PVCs, and its Reserve assumes no PV. Otherwise
        Filter and Reserve read and change PV bindings all nodes share."""
        return NAME in state.skip_filter_plugins

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None or data.claims is None:
            return Status.as_error(KeyError(f"{STATE_KEY.name} not found in cycle state"), NAME)
        node = node_info.node
        if node is None:
            return Status.as_error(BinderError("node not found"), NAME)
        try:
            volumes, reasons = self.binder.find_pod_volumes(pod, data.claims, node)
        except (BinderError, ValueError) as exc:
            return Status.as_error(exc, NAME)
        if reasons:
            return Status.unresolvable(*reasons, plugin=NAME)
        with data.lock:
            data.volumes_by_node[node.name] = volumes
            data.has_static_bindings = data.has_static_bindings or bool(volumes.static_bindings)
        return None

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> BoolArray | None:
        """Every node at once when the answer cannot depend on the node: all claims bound to PVs
        that exist, have no node affinity and gain none (nor fail) when translated to CSI on nodes
        where their in-tree plugin is migrated (Filter would record empty PodVolumes everywhere,
        and Reserve and Score treat a node without PodVolumes the same). Otherwise None: per node."""
        data = state.get(STATE_KEY)
        if data is None or data.claims is None:
            return None
        claims = data.claims
        if claims.unbound_delay_binding or claims.unbound_immediate:
            return None
        for pvc in claims.bound:
            pv = self.binder.pv_cache.get(str(spec(pvc).get("volumeName") or ""))
            if pv is None or (spec(pv).get("nodeAffinity") or {}).get("required") is not None:
                return None
            if self.binder.translation_may_differ(pv):
                return None
        return np.ones(table.size, np.bool_)

    # ---- Score ---------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None or data.claims is None:
            return Status(Code.SKIP, plugin=NAME)
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        data = state.get(STATE_KEY)
        volumes = data.volumes_by_node.get(node_info.name) if data is not None else None
        if volumes is None:
            return 0, None
        return self._score(volumes), None

    def score_extensions(self) -> None:
        return None

    # ---- Reserve / PreBind ---------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError(f"{STATE_KEY.name} not found in cycle state"), NAME)
        volumes = data.volumes_by_node.get(node_name)
        if volumes is None:
            data.all_bound = True
            return None
        try:
            data.all_bound = self.binder.assume_pod_volumes(pod, node_name, volumes)
        except Exception as exc:
            return Status.as_error(exc, NAME)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data = state.get(STATE_KEY)
        volumes = data.volumes_by_node.get(node_name) if data is not None else None
        if volumes is not None:
            self.binder.revert_assumed_pod_volumes(volumes)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError(f"{STATE_KEY.name} not found in cycle state"), NAME)
        if data.all_bound:
            return None
        volumes = data.volumes_by_node.get(node_name)
        if volumes is None:
            return Status.as_error(BinderError(f'no pod volume found for node "{node_name}"'), NAME)
        try:
            await self.binder.bind_pod_volumes(pod, node_name, volumes)
        except (BinderError, ApiError) as exc:
            return Status.as_error(exc, NAME)
        return None

    # ---- queueing hints ------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, add_update), _after_storage_class_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, add_update), _after_claim_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, add_update)),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, add_update), _after_csi_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE), _after_csi_driver_change),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, add_update), _after_storage_capacity_change
            ),
        ]


@api_hint
def _after_claim_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None or meta(new).get("namespace") != pod.namespace:
        return QueueingHint.SKIP
    if any(name == name_of(new) for name, _ in pod_claim_names(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


@api_hint
def _after_storage_class_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    if old.get("allowedTopologies") != new.get("allowedTopologies"):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


@api_hint
def _after_csi_node_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    # A missing annotation and an empty one are the same list (kube compares the map's values).
    if (annotations_of(old).get(MIGRATED_PLUGINS_ANNOTATION) or "") != (
        annotations_of(new).get(MIGRATED_PLUGINS_ANNOTATION) or ""
    ):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


@api_hint
def _after_csi_driver_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    for volume in pod_volumes(pod):
        csi = volume.get("csi")
        if csi is None or csi.get("driver") != name_of(new):
            continue
        if spec(old).get("storageCapacity") and not spec(new).get("storageCapacity"):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


@api_hint
def _after_storage_capacity_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    old_limit, new_limit = volume_limit(old), volume_limit(new)
    if new_limit is not None and (old_limit is None or new_limit > old_limit):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> VolumeBinding:
    return VolumeBinding(parse_args(args), handle)
