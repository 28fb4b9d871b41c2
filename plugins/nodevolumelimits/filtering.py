"""NodeVolumeLimits' Filter: count a node's attached CSI volumes per driver against its CSINode's limits.

Owns what a pod attaches (each unique volume once, in-tree volumes under their CSI driver where
migration is on), the memos of existing pods' and nodes' attached volumes, and the verdict. Reads
the handle's listers only; never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.framework.interface import VolumeLister
from scheduler.framework.types import CycleState, NodeInfo, StateKey, Status
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
)
from scheduler.model.csi_translation import BY_NAME, is_migration_on, plugin_of, volume_handle
from scheduler.model.objects import Pod
from scheduler.model.volumes import claim_class, claim_name, ephemeral_owner_error, meta, name_of, pod_volumes, spec

NAME = "NodeVolumeLimits"

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

Raw = Mapping[str, Any]


class NotFound(Exception):
    """A lookup the new pod needs failed: UnschedulableAndUnresolvable."""


def counts_in_pre_filter(volume: Raw) -> bool:
    if volume.get("persistentVolumeClaim") is not None or volume.get("ephemeral") is not None:
        return True
    return plugin_of(volume) is not None


def volume_limits(csi_node: Raw | None) -> dict[str, int]:
    if csi_node is None:
        return {}
    limits = {}
    for driver in spec(csi_node).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None:
            limits[str(driver.get("name"))] = int(count)
    return limits


_EXISTING_MEMO_SIZE = 50_000


def _version(obj: Raw) -> str:
    return str(meta(obj).get("resourceVersion") or "")


class CycleData:
    """What Filter works out once per pod cycle instead of once per node: the new pod's attachable
    volumes (they depend on the node only through whether it has a CSINode), which drivers must be
    installed, and the VolumeAttachments by node."""

    __slots__ = ("attachments", "drivers", "new_volumes")

    def __init__(self) -> None:
        # has a CSINode -> (removals when computed, volumes or the lookup error)
        self.new_volumes: dict[bool, tuple[tuple[int, int] | None, dict[str, str] | Exception]] = {}
        self.drivers: dict[str, bool] = {}  # driver -> preventPodSchedulingIfMissing
        self.attachments: dict[str, dict[str, str]] | None = None

    def clone(self) -> CycleData:
        return self  # nothing in it depends on the node or on the pods preemption moves


STATE_KEY: StateKey[CycleData] = StateKey(f"PreFilter{NAME}")


class Filtering:
    """The attachable-volume lookups and their memos; `filter` is the plugin's Filter."""

    def __init__(self, volumes: VolumeLister, snapshot_node: Callable[[str], NodeInfo | None] | None = None) -> None:
        self.volumes = volumes
        # The snapshot's own NodeInfo by name: only those are remembered per node (preemption and the
        # nominated-pods pass filter copies they change in place under the same generation).
        self._snapshot_node = snapshot_node
        self._volume_id_prefix = uuid.uuid4().hex
        # An existing pod's attachable volumes, per (uid, resourceVersion, CSINode resourceVersion),
        # with the resourceVersions of the PVs they were read from: Filter asks again for every pod
        # of every node it looks at, and a bound pod's volumes only change with its PVs.
        self._existing: dict[tuple[str, str, str], tuple[dict[str, str], tuple[int, int]]] = {}
        # node name -> (its NodeInfo, generation, CSINode object, removals, attached volumes)
        self._per_node: dict[str, tuple[NodeInfo, int, Raw | None, tuple[int, int], dict[str, str]]] = {}
        self._limits: dict[str, tuple[Raw, dict[str, int]]] = {}  # node name -> (CSINode object, its limits)

    # ---- what a pod attaches -----------------------------------------------------------

    def _driver_info_from_class(self, csi_node: Raw | None, pvc: Raw) -> tuple[str, str]:
        class_name = claim_class(pvc)
        storage_class = self.volumes.get(STORAGE_CLASS, class_name) if class_name else None
        if storage_class is None:
            return "", ""
        handle = f"{self._volume_id_prefix}-{meta(pvc).get('namespace')}/{name_of(pvc)}"
        provisioner = str(storage_class.get("provisioner") or "")
        in_tree = BY_NAME.get(provisioner)
        if in_tree is not None:
            if not is_migration_on(csi_node, provisioner):
                return "", ""
            return in_tree.csi_driver, handle
        return provisioner, handle

    def _driver_info(self, csi_node: Raw | None, pvc: Raw) -> tuple[str, str]:
        pv_name = str(spec(pvc).get("volumeName") or "")
        pv = self.volumes.get(PERSISTENT_VOLUME, pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(csi_node, pvc)
        csi = spec(pv).get("csi")
        if csi is not None:
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        plugin = plugin_of(spec(pv))
        if plugin is None or not is_migration_on(csi_node, plugin.name):
            return "", ""
        return plugin.csi_driver, volume_handle(plugin, spec(pv), pv)

    def _removals(self) -> tuple[int, int] | None:
        """How many claims and PVs were ever deleted or replaced; None when the lister cannot say."""
        removals = getattr(self.volumes, "removals", None)
        if removals is None:
            return None
        return removals[PERSISTENT_VOLUME_CLAIM], removals[PERSISTENT_VOLUME]

    def existing_attachable_volumes(self, pod: Pod, csi_node: Raw | None) -> dict[str, str]:
        """attachable_volumes of a pod already on the node, remembered while none of the claims and
        PVs it was read from can have changed what they say: a bound claim's volumeName and a PV's
        source are immutable in the API, so only a deletion or a replacement (another uid under the
        same name) can, and the store counts those."""
        removals = self._removals()
        key = (pod.uid, pod.resource_version, _version(csi_node) if csi_node else "")
        found = self._existing.get(key)
        if found is not None and removals is not None and found[1] == removals:
            return found[0]
        sources_seen: list[tuple[str, str, str]] = []
        volumes = self.attachable_volumes(pod, csi_node, new_pod=False, sources=sources_seen)
        stable = sources_seen and all(kind for kind, _, _ in sources_seen)
        if stable and removals is not None and pod.resource_version:
            if len(self._existing) >= _EXISTING_MEMO_SIZE:
                self._existing.clear()
            self._existing[key] = (volumes, removals)
        return volumes

    def _attached_on(self, node_info: NodeInfo, csi_node: Raw | None) -> dict[str, str]:
        """The union of the node's pods' attachable volumes, remembered per snapshot NodeInfo (a new
        object at every change of the node), CSINode object and removal counts."""
        removals = self._removals()
        found = self._per_node.get(node_info.name)
        if (
            found is not None
            and found[0] is node_info
            and found[1] == node_info.generation
            and found[2] is csi_node
            and found[3] == removals
        ):
            return found[4]
        attached: dict[str, str] = {}
        for existing in node_info.pods.values():
            attached.update(self.existing_attachable_volumes(existing, csi_node))
        lookup = self._snapshot_node
        if removals is not None and lookup is not None and lookup(node_info.name) is node_info:
            self._per_node[node_info.name] = (node_info, node_info.generation, csi_node, removals, attached)
        return attached

    def _node_limits(self, name: str, csi_node: Raw | None) -> dict[str, int]:
        if csi_node is None:
            return {}
        found = self._limits.get(name)
        if found is not None and found[0] is csi_node:
            return found[1]
        limits = volume_limits(csi_node)
        self._limits[name] = (csi_node, limits)
        return limits

    def attachable_volumes(
        self, pod: Pod, csi_node: Raw | None, new_pod: bool, sources: list[tuple[str, str, str]] | None = None
    ) -> dict[str, str]:
        """unique volume name (driver/handle) -> driver for the pod's attachable volumes.

        `sources` collects (kind, key, resourceVersion) of every claim resolved through its PV and of
        that PV, and ("", "", "") for anything else that could change without the pod (a missing claim, a claim
        resolved through its StorageClass), which makes the answer not worth remembering."""
        result: dict[str, str] = {}
        for volume in pod_volumes(pod):
            name = claim_name(pod, volume)
            if name is None:
                plugin = plugin_of(volume)
                if plugin is not None and is_migration_on(csi_node, plugin.name):
                    result[f"{plugin.csi_driver}/{volume_handle(plugin, volume)}"] = plugin.csi_driver
                continue
            if not name:
                raise ValueError("PersistentVolumeClaim had no name")
            pvc = self.volumes.get(PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{name}")
            if sources is not None:
                pv_name = str(spec(pvc).get("volumeName") or "") if pvc is not None else ""
                pv = self.volumes.get(PERSISTENT_VOLUME, pv_name) if pv_name else None
                if pvc is None or pv is None:
                    sources.append(("", "", ""))
                else:
                    sources.append((PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{name}", _version(pvc)))
                    sources.append((PERSISTENT_VOLUME, pv_name, _version(pv)))
            if pvc is None:
                if new_pod:
                    raise NotFound(f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found')
                continue
            if volume.get("ephemeral") is not None:
                problem = ephemeral_owner_error(pod, pvc)
                if problem:
                    raise ValueError(problem)
            driver, handle = self._driver_info(csi_node, pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver
        return result

    def _attachments_by_node(self) -> dict[str, dict[str, str]]:
        """node name -> {driver/handle: attacher} of the VolumeAttachments of CSI PVs."""
        out: dict[str, dict[str, str]] = {}
        for attachment in self.volumes.list(VOLUME_ATTACHMENT):
            attachment_spec = spec(attachment)
            attacher = str(attachment_spec.get("attacher") or "")
            pv_name = (attachment_spec.get("source") or {}).get("persistentVolumeName")
            node_name = attachment_spec.get("nodeName")
            if not node_name or not attacher or not pv_name:
                continue
            pv = self.volumes.get(PERSISTENT_VOLUME, str(pv_name))
            csi = spec(pv).get("csi") if pv is not None else None
            if csi is None:
                continue
            out.setdefault(str(node_name), {})[f"{attacher}/{csi.get('volumeHandle') or ''}"] = attacher
        return out

    def _must_be_installed(self, driver: str) -> bool:
        csi_driver = self.volumes.get(CSI_DRIVER, driver)
        return csi_driver is not None and bool(spec(csi_driver).get("preventPodSchedulingIfMissing"))

    def _new_volumes(self, data: CycleData | None, pod: Pod, csi_node: Raw | None) -> dict[str, str]:
        """The incoming pod's attachable volumes (raises NotFound or ValueError); read-only."""
        if data is None:
            return self.attachable_volumes(pod, csi_node, new_pod=True)
        removals = self._removals()
        found = data.new_volumes.get(csi_node is not None)
        if found is None or found[0] != removals or removals is None:
            try:
                result: dict[str, str] | Exception = self.attachable_volumes(pod, csi_node, new_pod=True)
            except (NotFound, ValueError) as exc:
                result = exc
            found = data.new_volumes[csi_node is not None] = (removals, result)
        if isinstance(found[1], Exception):
            raise found[1]
        return found[1]

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod_volumes(pod):
            return None
        csi_node = self.volumes.get(CSI_NODE, node_info.name)
        data = state.get(STATE_KEY)
        try:
            new_volumes = self._new_volumes(data, pod, csi_node)
        except NotFound as exc:
            return Status.unresolvable(str(exc), plugin=NAME)
        except ValueError as exc:
            return Status.as_error(exc, NAME)
        if not new_volumes:
            return None
        drivers = data.drivers if data is not None else {}
        for driver in new_volumes.values():
            prevent = drivers.get(driver)
            if prevent is None:
                prevent = drivers[driver] = self._must_be_installed(driver)
            if prevent and (
                csi_node is None or not any(d.get("name") == driver for d in spec(csi_node).get("drivers") or ())
            ):
                return Status.unschedulable(f"{driver} CSI driver is not installed on the node", plugin=NAME)
        limits = self._node_limits(node_info.name, csi_node)
        if not limits:
            return None
        try:
            attached = self._attached_on(node_info, csi_node)
        except ValueError as exc:
            return Status.as_error(exc, NAME)
        attached_count: dict[str, int] = {}
        for driver in attached.values():
            attached_count[driver] = attached_count.get(driver, 0) + 1
        if data is None:
            by_node = self._attachments_by_node()
        else:
            if data.attachments is None:
                data.attachments = self._attachments_by_node()
            by_node = data.attachments
        for unique, driver in by_node.get(node_info.name, {}).items():
            if unique not in attached:
                attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for unique, driver in new_volumes.items():
            if unique not in attached:  # one volume used by several pods counts once
                new_count[driver] = new_count.get(driver, 0) + 1
        for driver, count in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + count > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=NAME)
        return None
