"""VolumeRestrictions: keep pods off nodes where their disks or ReadWriteOncePod claims are in use.

Same-disk conflicts (GCE PD, AWS EBS, iSCSI, RBD inline volumes already mounted read-write by a
pod on the node) reject a node; a ReadWriteOncePod claim used by any assigned pod rejects every
node. Reads PVCs through the handle's lister and pods through the snapshot; never the API.
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
    EventObject,
    EventResource,
    NodeInfo,
    PreFilterResult,
    QueueingHint,
    StateKey,
    Status,
)
from scheduler.framework.volumes import PERSISTENT_VOLUME_CLAIM
from scheduler.model.objects import Pod
from scheduler.model.volumes import meta, name_of, pod_pvc_names, pod_volumes, spec

NAME = "VolumeRestrictions"

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)

_RESTRICTED_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _needs_check(volume: Mapping[str, Any]) -> bool:
    return any(volume.get(source) is not None for source in _RESTRICTED_SOURCES)


def _not_both_read_only(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return not (a.get("readOnly") and b.get("readOnly"))


def _same_disk(kind: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if kind == "gcePersistentDisk":
        return a.get("pdName") == b.get("pdName") and _not_both_read_only(a, b)
    if kind == "awsElasticBlockStore":
        return bool(a.get("volumeID") == b.get("volumeID"))
    if kind == "iscsi":
        return a.get("iqn") == b.get("iqn") and _not_both_read_only(a, b)
    # rbd: an overlapping monitor, the same pool (defaulted to "rbd") and image
    return (
        bool(set(a.get("monitors") or ()) & set(b.get("monitors") or ()))
        and (a.get("pool") or "rbd") == (b.get("pool") or "rbd")
        and a.get("image") == b.get("image")
        and _not_both_read_only(a, b)
    )


def _conflicts(volume: Mapping[str, Any], other: Pod) -> bool:
    """Whether the volume cannot be mounted beside the other pod's volumes (isVolumeConflict)."""
    for existing in pod_volumes(other):
        for kind in _RESTRICTED_SOURCES:
            mine, theirs = volume.get(kind), existing.get(kind)
            if mine is not None and theirs is not None and _same_disk(kind, mine, theirs):
                return True
    return False


def satisfies_volume_conflicts(pod: Pod, pods: Sequence[Pod]) -> bool:
    for volume in pod_volumes(pod):
        if _needs_check(volume) and any(_conflicts(volume, other) for other in pods):
            return False
    return True


@dataclass
class _State:
    read_write_once_pod_claims: frozenset[str]
    conflicting_refs: int

    def clone(self) -> _State:
        return _State(self.read_write_once_pod_claims, self.conflicting_refs)

    def conflicts_of(self, pod: Pod) -> int:
        return sum(1 for name in pod_pvc_names(pod) if name in self.read_write_once_pod_claims)


STATE_KEY: StateKey[_State] = StateKey(f"PreFilter{NAME}")


class VolumeRestrictions:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.VOLUMES, signing.volumes(pod)),), None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        needs_check = any(_needs_check(v) for v in pod_volumes(pod))
        rwop: set[str] = set()
        for name in pod_pvc_names(pod):
            pvc = self.handle.volumes.get(PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{name}")
            if pvc is None:
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" not found', plugin=NAME)
            if "ReadWriteOncePod" in (spec(pvc).get("accessModes") or ()):
                rwop.add(name_of(pvc))
        conflicting = 0
        if rwop:
            used = {
                name
                for info in self.handle.snapshot.list()
                for other in info.pods.values()
                if other.namespace == pod.namespace
                for name in pod_pvc_names(other)
            }
            conflicting = len(rwop & used)
        if not needs_check and conflicting == 0:
            return None, Status(Code.SKIP, plugin=NAME)
        state.write(STATE_KEY, _State(frozenset(rwop), conflicting))
        return None, None

    def pre_filter_extensions(self) -> VolumeRestrictions:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is not None:
            data.conflicting_refs += data.conflicts_of(pod_to_add)
        return None

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is not None:
            data.conflicting_refs -= data.conflicts_of(pod_to_remove)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not satisfies_volume_conflicts(pod, list(node_info.pods.values())):
            return Status.unschedulable(ERR_REASON_DISK_CONFLICT, plugin=NAME)
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(KeyError(f'cannot read "{STATE_KEY.name}" from cycleState'), NAME)
        if data.conflicting_refs > 0:
            return Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, plugin=NAME)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD), _after_claim_added
            ),
        ]


@api_hint
def _after_claim_added(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None or meta(new).get("namespace") != pod.namespace:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if name_of(new) in pod_pvc_names(pod) else QueueingHint.SKIP


def _after_pod_deleted(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    if not isinstance(old, Pod) or old.namespace != pod.namespace:
        return QueueingHint.SKIP
    if not satisfies_volume_conflicts(pod, [old]):
        return QueueingHint.QUEUE
    if set(pod_pvc_names(pod)) & set(pod_pvc_names(old)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)
