"""AssumeCache: the binder's view of PVs and PVCs, its own in-flight decisions laid over the store.

Reserve assumes a PV bound (claimRef set) or a PVC annotated with its selected node before the
API knows, so that the next pod's cycle never picks the same PV. An assumption lives until the
store holds a newer resourceVersion of the object (the apiserver has spoken) or it is restored
(Unreserve, a failed API update). Never writes to the API and never mutates the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.framework.interface import VolumeLister
from scheduler.model.volumes import key_of, resource_version


class AssumeError(Exception):
    pass


class AssumeCache:
    def __init__(self, store: VolumeLister, kind: str) -> None:
        self._store = store
        self._kind = kind
        self._assumed: dict[str, Mapping[str, Any]] = {}

    def get_api_obj(self, key: str) -> Mapping[str, Any] | None:
        return self._store.get(self._kind, key)

    def get(self, key: str) -> Mapping[str, Any] | None:
        """The assumed version while the store has nothing newer, else the store's."""
        api_obj = self._store.get(self._kind, key)
        assumed = self._assumed.get(key)
        if assumed is None:
            return api_obj
        if api_obj is None or resource_version(api_obj) > resource_version(assumed):
            del self._assumed[key]
            return api_obj
        return assumed

    def list(self) -> Iterator[Mapping[str, Any]]:
        for obj in list(self._store.list(self._kind)):
            latest = self.get(key_of(obj))
            if latest is not None:
                yield latest

    def assume(self, obj: Mapping[str, Any]) -> None:
        key = key_of(obj)
        latest = self.get(key)
        if latest is None:
            raise AssumeError(f"{self._kind.lower()} {key!r} not found")
        if resource_version(obj) < resource_version(latest):
            raise AssumeError(
                f"{key!r} is out of sync (stored: {resource_version(latest)}, assume: {resource_version(obj)})"
            )
        self._assumed[key] = obj

    def restore(self, key: str) -> None:
        self._assumed.pop(key, None)
