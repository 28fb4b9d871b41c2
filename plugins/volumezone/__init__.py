"""VolumeZone: keep pods in the zones and regions of the bound PVs they use.

A PV labelled with topology.kubernetes.io/zone or region (or the failure-domain.beta ones, a
`__`-separated list of values) admits only nodes carrying one of those values; nodes without any
zone or region label are not constrained. Unbound WaitForFirstConsumer claims are VolumeBinding's
business and skipped here. Reads PVs, PVCs and StorageClasses through the handle; never the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.helper import api_hint
from scheduler.framework import signing
from scheduler.framework.interface import Handle
from scheduler.framework.signing import SignFragment
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
from scheduler.framework.volumes import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS
from scheduler.model.objects import Pod
from scheduler.model.volumes import (
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    meta,
    name_of,
    pod_pvc_names,
    pod_volumes,
    spec,
)

NAME = "VolumeZone"

ERR_REASON_CONFLICT = "node(s) had no available volume zone"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}


@dataclass(frozen=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: Mapping[str, Any]) -> list[PVTopology]:
    """The PV's zone/region constraints; a label with an empty list entry is ignored, as upstream."""
    labels = meta(pv).get("labels") or {}
    out = []
    for key in TOPOLOGY_LABELS:
        if key not in labels:
            continue
        values = [v.strip() for v in str(labels[key]).split("__")]
        if any(not v for v in values):
            continue
        out.append(PVTopology(name_of(pv), key, frozenset(values)))
    return out


@dataclass
class _State:
    topologies: list[PVTopology]

    def clone(self) -> _State:
        return self


STATE_KEY: StateKey[_State] = StateKey(f"PreFilter{NAME}")


class VolumeZone:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.volumes = handle.volumes

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.VOLUMES, signing.volumes(pod)),), None

    def _topologies(self, pod: Pod) -> tuple[list[PVTopology], Status | None]:
        topologies: list[PVTopology] = []
        for claim_name in pod_pvc_names(pod):
            if not claim_name:
                return [], Status.unresolvable("PersistentVolumeClaim had no name", plugin=NAME)
            pvc = self.volumes.get(PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{claim_name}")
            if pvc is None:
                return [], Status.unresolvable(f'persistentvolumeclaim "{claim_name}" not found', plugin=NAME)
            pv_name = str(spec(pvc).get("volumeName") or "")
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return [], Status.unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name", plugin=NAME
                    )
                storage_class = self.volumes.get(STORAGE_CLASS, class_name)
                if storage_class is None:
                    return [], Status.unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found', plugin=NAME)
                mode = storage_class.get("volumeBindingMode")
                if mode is None:
                    return [], Status.unresolvable(
                        f'VolumeBindingMode not set for StorageClass "{class_name}"', plugin=NAME
                    )
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return [], Status.unresolvable("PersistentVolume had no name", plugin=NAME)
            pv = self.volumes.get(PERSISTENT_VOLUME, pv_name)
            if pv is None:
                return [], Status.unresolvable(f'persistentvolume "{pv_name}" not found', plugin=NAME)
            topologies += pv_topologies(pv)
        return topologies, None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = self._topologies(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(STATE_KEY, _State(topologies))
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the Node's topology labels against the pod's PVs alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod_volumes(pod):
            return None
        data = state.get(STATE_KEY)
        if data is not None:
            topologies = data.topologies
        else:
            topologies, status = self._topologies(pod)
            if status is not None:
                return status
        node = node_info.node
        labels = node.labels if node is not None else {}
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return None
        for topology in topologies:
            value = labels.get(topology.key)
            if value is None:
                value = labels.get(_GA_LABEL.get(topology.key, topology.key))
            if value is None or value not in topology.values:
                return Status.unresolvable(ERR_REASON_CONFLICT, plugin=NAME)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD), _after_storage_class_added),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, add_update), _after_claim_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, add_update), _after_volume_change),
        ]


@api_hint
def _after_claim_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None or meta(new).get("namespace") != pod.namespace:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if name_of(new) in pod_pvc_names(pod) else QueueingHint.SKIP


@api_hint
def _after_storage_class_added(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None or new.get("volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


@api_hint
def _after_volume_change(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if pv_topologies(old) != pv_topologies(new) else QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> VolumeZone:
    return VolumeZone(handle)
