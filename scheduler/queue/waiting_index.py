"""WaitingIndex: the unschedulable pool's pods by what can wake them, so an event visits few of them.

A cluster event used to visit every waiting pod and run every covering hint on it; with thousands of
pods waiting for their own ResourceClaims and a claim event per allocation, that walk was quadratic.
The index keeps, for each waiting pod, the (profile, plugin) pairs holding it (rejecting, pending or
gating it) and the keys each of its profile's EventScopes gives it. For an event, a pod is a
candidate when it is held by no plugin, or some plugin holding it has a covering registration without
a scope (or whose scope cannot narrow this event), or its keys meet the event's keys for a scoped
registration. Every other pod would get SKIP from every covering hint: that is the scope's promise.

Owns index state only; it decides nothing: the queue still runs the hints on each candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence

from scheduler.framework.types import ClusterEventWithHint, EventObject, PodKeysFn, QueuedPodInfo

# The bucket of pods whose keys could not be worked out: every scoped event visits them.
_EVERY = object()

# (profile name, plugin) -> the plugin's registrations that cover the incoming event.
CoveringFn = Callable[[str, str], Sequence[ClusterEventWithHint]]


def _pod_keys(keyer: PodKeysFn, info: QueuedPodInfo) -> frozenset[Hashable]:
    try:
        return frozenset(keyer(info.pod))
    except Exception:
        return frozenset((_EVERY,))  # a pod the scope cannot read is visited by every event


class _Entry:
    __slots__ = ("holders", "keys", "order")

    def __init__(self, order: int) -> None:
        self.order = order
        self.holders: tuple[tuple[str, str], ...] = ()
        self.keys: tuple[tuple[PodKeysFn, frozenset[Hashable]], ...] = ()


class WaitingIndex:
    def __init__(self, scopes: Mapping[str, Sequence[PodKeysFn]]) -> None:
        # profile name -> the distinct pod-key functions of its registrations' scopes
        self._keyers = {name: tuple(dict.fromkeys(keyers)) for name, keyers in scopes.items()}
        self._entries: dict[str, _Entry] = {}
        self._stamps = itertools.count()
        self._by_holder: dict[tuple[str, str], set[str]] = {}
        self._unheld: set[str] = set()
        self._by_key: dict[PodKeysFn, dict[Hashable, set[str]]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, info: QueuedPodInfo) -> None:
        """Index a pod entering the pool, or re-index one already in it (its pod or plugins changed);
        a pod already in keeps its place in the pool's order, as a dict entry does."""
        uid = info.pod.uid
        entry = self._entries.get(uid)
        if entry is None:
            entry = self._entries[uid] = _Entry(next(self._stamps))
        else:
            self._unlink(uid, entry)
        profile = info.pod.scheduler_name
        entry.holders = tuple((profile, plugin) for plugin in info.pending_plugins | info.unschedulable_plugins)
        for holder in entry.holders:
            self._by_holder.setdefault(holder, set()).add(uid)
        if not entry.holders:
            self._unheld.add(uid)
        entry.keys = tuple((keyer, _pod_keys(keyer, info)) for keyer in self._keyers.get(profile, ()))
        for keyer, keys in entry.keys:
            buckets = self._by_key.setdefault(keyer, {})
            for key in keys:
                buckets.setdefault(key, set()).add(uid)

    def remove(self, uid: str) -> None:
        entry = self._entries.pop(uid, None)
        if entry is not None:
            self._unlink(uid, entry)

    def _unlink(self, uid: str, entry: _Entry) -> None:
        for holder in entry.holders:
            held = self._by_holder[holder]
            held.discard(uid)
            if not held:
                del self._by_holder[holder]
        self._unheld.discard(uid)
        for keyer, keys in entry.keys:
            buckets = self._by_key[keyer]
            for key in keys:
                bucket = buckets[key]
                bucket.discard(uid)
                if not bucket:
                    del buckets[key]

    def order(self, uid: str) -> int:
        """The pod's place in the pool (when it entered it)."""
        return self._entries[uid].order

    def candidates(self, covering: CoveringFn, old: EventObject | None, new: EventObject | None) -> set[str]:
        """The waiting pods an event with these objects may concern; every other pod is certain to
        stay where it is."""
        chosen = set(self._unheld)
        event_keys: dict[int, Collection[Hashable] | None] = {}
        for holder, held in self._by_holder.items():
            narrowed: list[tuple[PodKeysFn, Collection[Hashable]]] = []
            for registered in covering(*holder):
                keys = self._event_keys(registered, old, new, event_keys)
                if keys is None or registered.scope is None:
                    chosen |= held
                    break
                narrowed.append((registered.scope.pod_keys, keys))
            else:
                for keyer, keys in narrowed:
                    buckets = self._by_key.get(keyer)
                    if not buckets:
                        continue
                    for key in (*keys, _EVERY):
                        bucket = buckets.get(key)
                        if bucket:
                            chosen.update(bucket & held)
        return chosen

    @staticmethod
    def _event_keys(
        registered: ClusterEventWithHint,
        old: EventObject | None,
        new: EventObject | None,
        known: dict[int, Collection[Hashable] | None],
    ) -> Collection[Hashable] | None:
        """The registration's keys for the event, worked out once per event; None: every pod."""
        scope = registered.scope
        if scope is None:
            return None
        if id(registered) in known:
            return known[id(registered)]
        try:
            keys = scope.event_keys(old, new)
            result: Collection[Hashable] | None = None if keys is None else frozenset(keys)
        except Exception:
            result = None  # an event the scope cannot read may concern anyone
        known[id(registered)] = result
        return result
