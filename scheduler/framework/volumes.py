"""VolumeStore: the storage objects the volume plugins read, kept by the informers.

StorageClasses, PersistentVolumes, PersistentVolumeClaims, CSINodes, CSIDrivers and
CSIStorageCapacities and VolumeAttachments as raw API JSON, keyed like client-go's listers (namespace/name or name).
It holds what the apiserver last said and nothing else: the volume binder's assumptions live in
its own assume cache on top. Never talks to the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.model.volumes import key_of

STORAGE_CLASS = "StorageClass"
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
CSI_NODE = "CSINode"
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
VOLUME_ATTACHMENT = "VolumeAttachment"
KINDS = (
    STORAGE_CLASS,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    CSI_NODE,
    CSI_DRIVER,
    CSI_STORAGE_CAPACITY,
    VOLUME_ATTACHMENT,
)


class VolumeStore:
    """A VolumeLister over dicts; the informers upsert and delete, tests fill it directly."""

    def __init__(self, objects: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> None:
        self._objects: dict[str, dict[str, Mapping[str, Any]]] = {kind: {} for kind in KINDS}
        # Per kind: objects deleted or replaced by another object of the same name (another uid).
        # What was read from objects that were neither stays true (plugins remember such reads).
        self.removals: dict[str, int] = dict.fromkeys(KINDS, 0)
        for kind, obj in objects:
            self.upsert(kind, obj)

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Store the object; returns the version it replaced."""
        objects = self._objects[kind]
        key = key_of(obj)
        old = objects.get(key)
        objects[key] = obj
        if old is not None and (old.get("metadata") or {}).get("uid") != (obj.get("metadata") or {}).get("uid"):
            self.removals[kind] += 1
        return old

    def delete(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        old = self._objects[kind].pop(key_of(obj), None)
        if old is not None:
            self.removals[kind] += 1
        return old

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        """By namespace/name (claims, capacities) or name (cluster-scoped kinds)."""
        return self._objects[kind].get(key)

    def list(self, kind: str) -> Iterable[Mapping[str, Any]]:
        return self._objects[kind].values()
