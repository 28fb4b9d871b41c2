"""A bounded memo of what a plugin derives from one pod version (uid and resourceVersion): the
derivation runs once per version, not once per cycle that reads the pod. A pod without a
resourceVersion (built in memory, never from the API) is derived every time; past `limit`
versions the memo starts again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from scheduler.model.objects import Pod

T = TypeVar("T")


class PodVersionMemo(Generic[T]):
    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._values: dict[tuple[str, str], T] = {}

    def get(self, pod: Pod, derive: Callable[[Pod], T]) -> T:
        if not pod.resource_version:
            return derive(pod)
        key = (pod.uid, pod.resource_version)
        value = self._values.get(key)
        if value is None:
            value = derive(pod)
            if len(self._values) >= self._limit:
                self._values.clear()
            self._values[key] = value
        return value
