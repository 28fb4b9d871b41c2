"""PodMap: a node's pods by uid that copies in constant time however many pods the node holds.

The snapshot copies every node the cache changed before each cycle (kube's NodeInfo.Snapshot).
kube's copy is a memcpy of a pointer slice; a Python dict copy touches every pod it holds, so a
node with 40000 pods (scheduler_perf's SchedulingWhileGated puts every pod on one node) cost more
than the rest of the cycle. A NodeInfo keeps a plain dict while it is small (what every real node
is) and moves to a PodMap past SPLIT_AT pods: the pods spread over BUCKETS dicts by uid, a copy
shares the buckets, and whichever side writes to a shared bucket copies that one bucket first.

Reads follow the dict's (get, [], in, len, iteration, keys/values/items); writes are `put` and
`pop`. Iteration order is by bucket, then by insertion within a bucket.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Generic, TypeVar

V = TypeVar("V")

BUCKETS = 128
_MASK = BUCKETS - 1
# A dict grows into a PodMap past SPLIT_AT entries and returns to one below MERGE_AT (the gap
# keeps a node hovering at the threshold from converting back and forth).
SPLIT_AT = 1024
MERGE_AT = 256


class PodMap(Generic[V]):
    __slots__ = ("_buckets", "_len", "_owned")

    def __init__(self, buckets: list[dict[str, V]], length: int, owned: list[bool]) -> None:
        self._buckets = buckets
        self._len = length
        # Whether this map may write to the bucket in place (no copy shares it).
        self._owned = owned

    @classmethod
    def split(cls, entries: dict[str, V]) -> PodMap[V]:
        buckets: list[dict[str, V]] = [{} for _ in range(BUCKETS)]
        for key, value in entries.items():
            buckets[hash(key) & _MASK][key] = value
        return cls(buckets, len(entries), [True] * BUCKETS)

    def merged(self) -> dict[str, V]:
        out: dict[str, V] = {}
        for bucket in self._buckets:
            out.update(bucket)
        return out

    def copy(self) -> PodMap[V]:
        self._owned = [False] * BUCKETS
        return PodMap(self._buckets.copy(), self._len, [False] * BUCKETS)

    def _writable(self, index: int) -> dict[str, V]:
        bucket = self._buckets[index]
        if not self._owned[index]:
            bucket = self._buckets[index] = bucket.copy()
            self._owned[index] = True
        return bucket

    def put(self, key: str, value: V) -> None:
        bucket = self._writable(hash(key) & _MASK)
        if key not in bucket:
            self._len += 1
        bucket[key] = value

    def pop(self, key: str, default: V | None = None) -> V | None:
        index = hash(key) & _MASK
        if key not in self._buckets[index]:
            return default
        self._len -= 1
        return self._writable(index).pop(key)

    def get(self, key: str, default: V | None = None) -> V | None:
        return self._buckets[hash(key) & _MASK].get(key, default)

    def __getitem__(self, key: str) -> V:
        return self._buckets[hash(key) & _MASK][key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._buckets[hash(key) & _MASK]

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._buckets)

    def keys(self) -> Iterator[str]:
        return chain.from_iterable(self._buckets)

    def values(self) -> Iterator[V]:
        return chain.from_iterable(bucket.values() for bucket in self._buckets)

    def items(self) -> Iterator[tuple[str, V]]:
        return chain.from_iterable(bucket.items() for bucket in self._buckets)

    def __repr__(self) -> str:
        return f"PodMap({len(self)} entries in {BUCKETS} buckets)"


def put(entries: dict[str, V] | PodMap[V], key: str, value: V) -> dict[str, V] | PodMap[V]:
    """Store key -> value; returns the map to keep (a dict past SPLIT_AT comes back a PodMap)."""
    if isinstance(entries, dict):
        entries[key] = value
        if len(entries) > SPLIT_AT:
            return PodMap.split(entries)
        return entries
    entries.put(key, value)
    return entries


def pop(entries: dict[str, V] | PodMap[V], key: str) -> tuple[V | None, dict[str, V] | PodMap[V]]:
    """Remove key; returns its value (None if absent) and the map to keep (a PodMap below MERGE_AT
    comes back a dict)."""
    if isinstance(entries, dict):
        return entries.pop(key, None), entries
    old = entries.pop(key)
    if old is not None and len(entries) < MERGE_AT:
        return old, entries.merged()
    return old, entries
