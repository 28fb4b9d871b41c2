"""NodeVolumeLimits: keep a node's attached CSI volumes within its CSINode allocatable count.

The adapter: the extension-point methods and the queueing hints; the counting and the Filter
verdict are filtering.py's. Per driver, the volumes of the pods on the node, plus
VolumeAttachments to the node, plus the pod's new volumes (each unique volume once) must not
exceed CSINode.spec.drivers[].allocatable.count. In-tree volumes count under their CSI driver
where migration is on (scheduler/model/csi_translation.py). With VolumeLimitScaling (on in 1.37) a
CSIDriver that sets preventPodSchedulingIfMissing rejects nodes whose CSINode lacks it. Reads the
handle's listers only; never the API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plugins.helper import api_hint
from plugins.nodevolumelimits.filtering import (
    NAME as NAME,
)
from plugins.nodevolumelimits.filtering import (
    STATE_KEY,
    CycleData,
    Filtering,
    counts_in_pre_filter,
    volume_limits,
)
from scheduler.framework import signing
from scheduler.framework.interface import Handle, VolumeLister
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
    Status,
)
from scheduler.model.csi_translation import plugin_of
from scheduler.model.objects import Pod
from scheduler.model.volumes import claim_name, meta, name_of, pod_volumes, spec


class NodeVolumeLimits:
    name = NAME

    def __init__(self, volumes: VolumeLister, snapshot_node: Callable[[str], NodeInfo | None] | None = None) -> None:
        self._filtering = Filtering(volumes, snapshot_node)

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.VOLUMES, signing.volumes(pod)),), None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if any(counts_in_pre_filter(v) for v in pod_volumes(pod)):
            state.write(STATE_KEY, CycleData())
            return None, None
        return None, Status(Code.SKIP, plugin=NAME)

    def pre_filter_extensions(self) -> None:
        return None

    def node_local(self, state: CycleState) -> bool:
        """Filter reads the node's pods' volumes, its CSINode and VolumeAttachments alone; no extensions, no Reserve."""
        return True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return self._filtering.filter(state, pod, node_info)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE), _after_csi_node_updated),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _after_pod_deleted),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD), _after_claim_added
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.VOLUME_ATTACHMENT, ActionType.DELETE), _after_attachment_deleted
            ),
        ]


@api_hint
def _after_csi_node_updated(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if old is None or new is None:
        return QueueingHint.QUEUE
    old_limits = volume_limits(old)
    for driver, limit in volume_limits(new).items():
        if limit > old_limits.get(driver, 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pod_deleted(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    if not isinstance(old, Pod) or not pod_volumes(old):
        return QueueingHint.SKIP
    if not old.node_name and not (old.raw.get("status") or {}).get("nominatedNodeName"):
        return QueueingHint.SKIP
    if any(counts_in_pre_filter(v) for v in pod_volumes(old)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


@api_hint
def _after_claim_added(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    if new is None or meta(new).get("namespace") != pod.namespace:
        return QueueingHint.SKIP
    names = {claim_name(pod, v) for v in pod_volumes(pod)}
    return QueueingHint.QUEUE if name_of(new) in names else QueueingHint.SKIP


@api_hint
def _after_attachment_deleted(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
    attacher = spec(old).get("attacher") if old is not None else None
    for volume in pod_volumes(pod):
        if volume.get("persistentVolumeClaim") is not None:
            return QueueingHint.QUEUE
        plugin = plugin_of(volume)
        if plugin is not None and plugin.csi_driver == attacher:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any], handle: Handle) -> NodeVolumeLimits:
    # Through the handle each time: the scheduler gives it its snapshot after the plugins are built.
    return NodeVolumeLimits(handle.volumes, lambda name: handle.snapshot.get(name))  # noqa: PLW0108
