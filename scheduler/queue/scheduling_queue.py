"""PriorityQueue: kube-scheduler's three sub-queues and the rules that move pods between them.

- activeQ: pods ready to be tried, ordered by the profile's QueueSort plugin.
- backoffQ: pods waiting out their exponential backoff, ordered by backoff expiry.
- unschedulable: pods that were rejected and wait for a cluster event that may help them
  (decided by the rejecting plugins' registered events and queueing hints), or for the
  5-minute leftover flush. Pods blocked by a PreEnqueue plugin (scheduling gates) wait here too.

Events that arrive while a pod is being scheduled ("in flight") are remembered and replayed
against it when it comes back unschedulable, so no wake-up is lost.

Pod-group members (GenericWorkload: `group_of` names a pod's group) wait here pod by pod, gated
by PreEnqueue like any pod, but leave as one entity: `take_group` hands the popped member's
whole queued group to the pod-group cycle. Members that come back from that cycle, and members
that arrive while it runs, are held until `add_attempted_group` requeues them together (kube's
pendingPodGroupPods and AddAttemptedPodGroupIfNeeded: backoffQ or activeQ, not the unschedulable
pool). A gated member does not travel with its group.

Owns queue state only; never calls the API, never runs Filter/Score plugins.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler import metrics
from scheduler.framework.events import (
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    POP_FROM_BACKOFF_Q,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
    UNSCHEDULED_POD_ADD,
    pod_scheduling_properties_change,
)
from scheduler.framework.podgroups import GroupKey
from scheduler.framework.signing import Signature
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventObject,
    EventResource,
    QueuedPodGroupInfo,
    QueuedPodInfo,
    QueueingHint,
    QueueingHintFn,
    Status,
    pod_group_member_order,
)
from scheduler.model.objects import Pod
from scheduler.queue.waiting_index import WaitingIndex

ACTIVE_Q = "active"
BACKOFF_Q = "backoff"
UNSCHEDULABLE_Q = "unschedulable"
GATED_Q = "gated"

WILDCARD_EVENT = ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))


def _run_hint(
    hint: QueueingHintFn, plugin: str, event: ClusterEvent, pod: Pod, old: EventObject | None, new: EventObject | None
) -> QueueingHint:
    """A plugin's queueing hint, timed into scheduler_queueing_hint_execution_duration_seconds."""
    started = time.perf_counter()
    try:
        hint_result = hint(pod, old, new)
    except Exception:
        metrics.recorder.observe_queueing_hint_duration(plugin, event.label, "Error", time.perf_counter() - started)
        raise
    metrics.recorder.observe_queueing_hint_duration(
        plugin, event.label, hint_result.value, time.perf_counter() - started
    )
    return hint_result


class _Covering:
    """For one incoming event: which registrations of a profile's plugin cover it (kube's
    MatchClusterEvents), worked out once per plugin rather than once per waiting pod."""

    __slots__ = ("_event", "_gates", "_rejectors")

    def __init__(self, event: ClusterEvent) -> None:
        self._event = event
        self._rejectors: dict[tuple[int, str], tuple[ClusterEventWithHint, ...]] = {}
        self._gates: dict[tuple[int, str], bool] = {}

    def _matching(self, registered: Iterable[ClusterEventWithHint]) -> tuple[ClusterEventWithHint, ...]:
        return tuple(r for r in registered if r.event.matches(self._event))

    def of(self, profile: QueueProfile, plugin: str) -> tuple[ClusterEventWithHint, ...]:
        """The rejecting plugin's registrations that cover the event (one that registered nothing
        is woken by every event)."""
        key = (id(profile), plugin)
        found = self._rejectors.get(key)
        if found is None:
            found = self._rejectors[key] = self._matching(profile.events.get(plugin, (WILDCARD_EVENT,)))
        return found

    def gate(self, profile: QueueProfile, plugin: str) -> bool:
        """Whether the plugin gating a pod registered the event (kube re-runs PreEnqueue then)."""
        key = (id(profile), plugin)
        found = self._gates.get(key)
        if found is None:
            found = self._gates[key] = bool(self._matching(profile.events.get(plugin, ())))
        return found


class Strategy(enum.IntEnum):
    """kube's queueingStrategy: what an event means for a waiting pod (higher wins)."""

    SKIP = 0
    AFTER_BACKOFF = 1
    # A Pending plugin's Queue: straight to activeQ, backoff or not.
    IMMEDIATELY = 2


class Clock(Protocol):
    def now(self) -> float: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
GroupOf = Callable[[Pod], GroupKey | None]
PreEnqueueFn = Callable[[Pod], Status | None]
SignFn = Callable[[Pod], Signature | None]


@dataclass(frozen=True)
class QueueProfile:
    """What the queue needs to know of one profile."""

    less: LessFn
    pre_enqueue: PreEnqueueFn
    # plugin name -> the events (with hints) that may make a pod it rejected schedulable
    events: Mapping[str, Sequence[ClusterEventWithHint]]
    # OpportunisticBatching: the profile's pod signer (None with the gate off).
    sign: SignFn | None = None


class _HeapItem:
    __slots__ = ("info", "less", "removed", "seq")

    def __init__(self, info: QueuedPodInfo, less: LessFn, seq: int) -> None:
        self.info = info
        self.less = less
        self.seq = seq
        self.removed = False

    def __lt__(self, other: _HeapItem) -> bool:
        if self.less(self.info, other.info):
            return True
        if self.less(other.info, self.info):
            return False
        return self.seq < other.seq


class _BackoffItem:
    __slots__ = ("expiry", "info", "removed", "seq")

    def __init__(self, info: QueuedPodInfo, expiry: float, seq: int) -> None:
        self.info = info
        self.expiry = expiry
        self.seq = seq
        self.removed = False

    def __lt__(self, other: _BackoffItem) -> bool:
        return (self.expiry, self.seq) < (other.expiry, other.seq)


class PriorityQueue:
    def __init__(
        self,
        profiles: Mapping[str, QueueProfile],
        clock: Clock | None = None,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        group_of: GroupOf | None = None,
        indexed: bool = True,
    ) -> None:
        self._profiles = dict(profiles)
        # Every event some profile's plugin registered: others are dropped before any pod is looked at.
        self._registered = [
            registered.event
            for profile in self._profiles.values()
            for plugin_events in profile.events.values()
            for registered in plugin_events
        ]
        # is_event_of_interest's answers: events are few (resource x action), pods' events many.
        self._interest: dict[ClusterEvent, bool] = {}
        self._clock = clock or MonotonicClock()
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._seq = itertools.count()
        self._active: list[_HeapItem] = []
        self._active_items: dict[str, _HeapItem] = {}
        # backoffQ is two heaps, as in kube-scheduler 1.34: rejected pods (which an idle pop may
        # take early) and pods that failed with an error (which always wait their backoff out).
        self._backoff: list[_BackoffItem] = []
        self._error_backoff: list[_BackoffItem] = []
        self._backoff_items: dict[str, _BackoffItem] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: set[str] = set()  # uids of the gated pods in the pool (the gauge reads its size)
        # The unschedulable pool by what can wake its pods, so an event visits only those it may
        # concern (None: every event walks the whole pool, the reference the index is tested against).
        self._waiting = (
            WaitingIndex(
                {
                    name: [
                        registered.scope.pod_keys
                        for plugin_events in profile.events.values()
                        for registered in plugin_events
                        if registered.scope is not None
                    ]
                    for name, profile in self._profiles.items()
                }
            )
            if indexed
            else None
        )
        self._in_flight: dict[str, int] = {}  # uid -> event log position when popped
        self._event_log: list[tuple[ClusterEvent, EventObject | None, EventObject | None]] = []
        self._event_log_base = 0  # absolute position of _event_log[0]
        self.scheduling_cycle = 0
        self._wakeup: asyncio.Event | None = None
        self._closed = False
        self._group_of = group_of
        # Members known to the queue (queued or in flight), by group and by pod.
        self._group_members: dict[GroupKey, set[str]] = {}
        self._member_group: dict[str, GroupKey] = {}
        # Groups in a pod-group cycle -> members handed back (or newly arrived) meanwhile.
        # Group -> its members handed back (or arrived) while its cycle runs, by uid, in that order.
        self._groups_in_flight: dict[GroupKey, dict[str, QueuedPodInfo]] = {}
        self._update_gauges()

    # ---- sizes and lookups -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._active_items) + len(self._backoff_items) + len(self._unschedulable)

    def pending(self) -> dict[str, int]:
        gated = len(self._gated)
        return {
            ACTIVE_Q: len(self._active_items),
            BACKOFF_Q: len(self._backoff_items),
            UNSCHEDULABLE_Q: len(self._unschedulable) - gated,
            GATED_Q: gated,
        }

    def where(self, uid: str) -> str | None:
        if uid in self._active_items:
            return ACTIVE_Q
        if uid in self._backoff_items:
            return BACKOFF_Q
        if uid in self._unschedulable:
            return GATED_Q if self._unschedulable[uid].gated else UNSCHEDULABLE_Q
        if uid in self._in_flight:
            return "in-flight"
        return None

    def get(self, uid: str) -> QueuedPodInfo | None:
        if uid in self._active_items:
            return self._active_items[uid].info
        if uid in self._backoff_items:
            return self._backoff_items[uid].info
        return self._unschedulable.get(uid)

    def _update_gauges(self) -> None:
        for queue, count in self.pending().items():
            metrics.child(metrics.pending_pods, queue).set(count)

    # ---- internal moves ----------------------------------------------------------------

    def _profile(self, pod: Pod) -> QueueProfile:
        return self._profiles[pod.scheduler_name]

    def _park(self, info: QueuedPodInfo) -> None:
        """Put a pod in the unschedulable pool (every way in goes through here, for the index)."""
        self._unschedulable[info.pod.uid] = info
        if info.gated:
            self._gated.add(info.pod.uid)
        else:
            self._gated.discard(info.pod.uid)
        if self._waiting is not None:
            self._waiting.add(info)

    def _unpark(self, uid: str) -> QueuedPodInfo | None:
        info = self._unschedulable.pop(uid, None)
        self._gated.discard(uid)
        if info is not None and self._waiting is not None:
            self._waiting.remove(uid)
        return info

    def _enter_active(self, info: QueuedPodInfo, profile: QueueProfile, event: str) -> None:
        """Into activeQ, PreEnqueue passed."""
        info.gated = False
        info.gating_plugin = ""
        if info.initial_attempt_timestamp is None:
            # The SLI's clock starts when the pod first enters activeQ (kube's moveToActiveQ).
            info.initial_attempt_timestamp = self._clock.now()
        item = _HeapItem(info, profile.less, next(self._seq))
        self._active_items[info.pod.uid] = item
        heapq.heappush(self._active, item)
        metrics.child(metrics.queue_incoming_pods, ACTIVE_Q, event).inc()
        if self._wakeup is not None:
            self._wakeup.set()

    def _gate(self, info: QueuedPodInfo, status: Status, event: str, *, parked: bool = False) -> None:
        """PreEnqueue rejected the pod: into the unschedulable pool, counted there. A pod already in
        the pool (`parked`) keeps its place uncounted, its gate updated only if it changed (kube
        counts a pod only into a queue it was not in)."""
        plugins = {status.plugin} if status.plugin else set()
        if parked:
            if info.gated and info.gating_plugin == status.plugin and info.unschedulable_plugins == plugins:
                return
            self._unpark(info.pod.uid)
        info.gated = True
        info.gating_plugin = status.plugin
        info.unschedulable_plugins = plugins
        self._park(info)
        if not parked:
            metrics.child(metrics.queue_incoming_pods, UNSCHEDULABLE_Q, event).inc()

    def _push_backoff(self, info: QueuedPodInfo, event: str) -> None:
        item = _BackoffItem(info, self.backoff_expiry(info), next(self._seq))
        self._backoff_items[info.pod.uid] = item
        heapq.heappush(self._error_backoff if info.error_backoff else self._backoff, item)
        metrics.child(metrics.queue_incoming_pods, BACKOFF_Q, event).inc()
        if self._wakeup is not None and not info.error_backoff:
            self._wakeup.set()  # an idle pop() may take it from backoffQ

    def _remove_anywhere(self, uid: str) -> QueuedPodInfo | None:
        active = self._active_items.pop(uid, None)
        if active is not None:
            active.removed = True
            return active.info
        backoff = self._backoff_items.pop(uid, None)
        if backoff is not None:
            backoff.removed = True
            return backoff.info
        return self._unpark(uid)

    def backoff_duration(self, info: QueuedPodInfo) -> float:
        duration = self.initial_backoff
        for _ in range(1, info.attempts):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return duration

    def backoff_expiry(self, info: QueuedPodInfo) -> float:
        return info.timestamp + self.backoff_duration(info)

    def is_backing_off(self, info: QueuedPodInfo) -> bool:
        return info.attempts > 0 and self.backoff_expiry(info) > self._clock.now()

    def _requeue(
        self, info: QueuedPodInfo, event: str, strategy: Strategy = Strategy.AFTER_BACKOFF, *, parked: bool = False
    ) -> str:
        """Move a pod that some event may help, PreEnqueue first (pods may be popped from backoffQ
        too): backoffQ while backing off (unless the strategy says now), else activeQ. A pod of the
        unschedulable pool (`parked`) that PreEnqueue gates again stays there, uncounted, as kube's
        moveToActiveQ leaves a pod still in its unschedulable map: a gang's members, gated until the
        last one arrives, are asked again on every member's arrival, and are not moved out and back."""
        profile = self._profile(info.pod)
        status = profile.pre_enqueue(info.pod)
        if status is not None:
            if parked:
                info.was_flushed_from_unschedulable = False
            self._gate(info, status, event, parked=parked)
            return UNSCHEDULABLE_Q
        if parked:
            self._unpark(info.pod.uid)
        if strategy == Strategy.AFTER_BACKOFF and self.is_backing_off(info):
            self._push_backoff(info, event)
            return BACKOFF_Q
        self._enter_active(info, profile, event)
        return ACTIVE_Q

    # ---- adding and popping ------------------------------------------------------------

    def add(self, pod: Pod, old: Pod | None = None) -> None:
        """An unscheduled pod appeared or (with `old`, its previous version) changed."""
        if pod.uid in self._in_flight or self.get(pod.uid) is not None or self._held(pod.uid) is not None:
            self.update(pod, old)
            return
        now = self._clock.now()
        info = QueuedPodInfo(pod=pod, timestamp=now)
        self._sign(info)
        key = self._group_of(pod) if self._group_of is not None else None
        if key is not None:
            self._group_members.setdefault(key, set()).add(pod.uid)
            self._member_group[pod.uid] = key
            held = self._groups_in_flight.get(key)
            if held is not None:
                # Its group is being scheduled: it joins the group when the group is requeued.
                held[pod.uid] = info
                return
        self._requeue(info, UNSCHEDULED_POD_ADD.label, Strategy.IMMEDIATELY)
        self._update_gauges()

    def _sign(self, info: QueuedPodInfo) -> None:
        """The pod's signature, computed once per version of it the queue takes in."""
        profile = self._profiles.get(info.pod.scheduler_name)
        sign = profile.sign if profile is not None else None
        info.signature = sign(info.pod) if sign is not None else None

    def _held(self, uid: str) -> QueuedPodInfo | None:
        """A member held for its in-flight group, if `uid` is one."""
        key = self._member_group.get(uid)
        held = self._groups_in_flight.get(key) if key is not None else None
        return held.get(uid) if held else None

    async def pop(self) -> QueuedPodInfo | None:
        """Wait for the next pod to try; None once the queue is closed."""
        while not self._closed:
            info = self.pop_nowait()
            if info is not None:
                return info
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            self._wakeup.clear()
            await self._wakeup.wait()
        return None

    def pop_nowait(self) -> QueuedPodInfo | None:
        """The head of activeQ; when activeQ is empty, the head of backoffQ (kube-scheduler's
        SchedulerPopFromBackoffQ: no point idling while a rejected pod could be retried), except a
        pod backing off after an error. None if there is nothing. Starts the pod's scheduling cycle."""
        info = self._pop_active() or self._pop_backoff()
        if info is None:
            return None
        info.attempts += 1
        self.scheduling_cycle += 1
        self._in_flight[info.pod.uid] = self._event_log_base + len(self._event_log)
        self._update_gauges()
        return info

    def take_group(self, info: QueuedPodInfo) -> QueuedPodGroupInfo | None:
        """If the popped pod is a pod-group member, its group as one entity: every member waiting in
        any sub-queue (gated ones excepted) joins it, in flight from now on. None for other pods."""
        key = self._member_group.get(info.pod.uid)
        if key is None:
            return None
        members = [info]
        position = self._in_flight.get(info.pod.uid, self._event_log_base + len(self._event_log))
        for uid in sorted(self._group_members.get(key, ())):
            if uid == info.pod.uid or uid in self._in_flight:
                continue
            waiting = self._unschedulable.get(uid)
            if waiting is not None and waiting.gated:
                continue
            member = self._remove_anywhere(uid)
            if member is None:
                continue
            member.attempts += 1
            self._in_flight[uid] = position
            members.append(member)
        members.sort(key=pod_group_member_order)
        self._groups_in_flight[key] = {}
        self._update_gauges()
        return QueuedPodGroupInfo(key, members)

    def add_attempted_group(self, group: QueuedPodGroupInfo, succeeded: bool) -> None:
        """The pod-group cycle ended: requeue the members it handed back and those that arrived
        meanwhile, together: straight to activeQ after a success (the rest of the group), else to
        the error backoffQ while backing off."""
        held = self._groups_in_flight.pop(group.key, {})
        # Each member keeps the timestamp its own hand-back (or arrival) gave it, as kube's do: the
        # members' order (PodGroupMemberPodsOrderingFunc) then stays the one of this attempt.
        for info in held.values():
            if succeeded:
                self._requeue(info, SCHEDULE_ATTEMPT_FAILURE, Strategy.IMMEDIATELY)
                continue
            # kube 1.37 records no rejector plugins on a pod-group entity, so a failed group waits its
            # backoff out in full (the error backoffQ), never popped early by an idle queue.
            info.error_backoff = True
            self._requeue(info, SCHEDULE_ATTEMPT_FAILURE)
        self._prune_event_log()
        self._update_gauges()

    def _pop_active(self) -> QueuedPodInfo | None:
        while self._active:
            item = heapq.heappop(self._active)
            if item.removed:
                continue
            del self._active_items[item.info.pod.uid]
            return item.info
        return None

    def _pop_backoff(self) -> QueuedPodInfo | None:
        while self._backoff and self._backoff[0].removed:
            heapq.heappop(self._backoff)
        if not self._backoff:
            return None
        item = heapq.heappop(self._backoff)
        del self._backoff_items[item.info.pod.uid]
        metrics.child(metrics.queue_incoming_pods, ACTIVE_Q, POP_FROM_BACKOFF_Q).inc()
        return item.info

    def close(self) -> None:
        self._closed = True
        if self._wakeup is not None:
            self._wakeup.set()

    def done(self, uid: str) -> None:
        """The pod left the scheduling cycle (bound, assumed, or deleted)."""
        self._in_flight.pop(uid, None)
        self._prune_event_log()

    def _prune_event_log(self) -> None:
        if not self._in_flight:
            self._event_log_base += len(self._event_log)
            self._event_log.clear()
            return
        # Entries are added with the log's position at the time and never re-set, so the first one
        # is the oldest: no walk over a 10000-member group's entries on each member's hand-back.
        oldest = next(iter(self._in_flight.values()))
        drop = oldest - self._event_log_base
        if drop > 0:
            del self._event_log[:drop]
            self._event_log_base = oldest

    def add_unschedulable_if_not_present(self, info: QueuedPodInfo, error: bool = False) -> str:
        """Return a pod whose attempt failed. Which queue depends on why and on in-flight events.

        `error` marks a failure that is not the pod's fault (Error status, API error): it goes
        to backoffQ regardless of plugins.
        """
        uid = info.pod.uid
        start = self._in_flight.pop(uid, None)
        info.timestamp = self._clock.now()
        # The failure handler hands back the informer's latest version of the pod.
        self._sign(info)
        info.was_flushed_from_unschedulable = False
        # kube: a pod no plugin rejected (an error, or no nodes at all) waits in the error backoffQ.
        info.error_backoff = error or not (info.unschedulable_plugins or info.pending_plugins)
        key = self._member_group.get(uid)
        held = self._groups_in_flight.get(key) if key is not None else None
        if held is not None:
            held.setdefault(uid, info)
            self._prune_event_log()
            return "pending"
        if self.get(uid) is not None:
            self._prune_event_log()
            return self.where(uid) or ""
        strategy = self._in_flight_strategy(info, self._events_since(start)) if start is not None else Strategy.SKIP
        if info.error_backoff:
            self._push_backoff(info, SCHEDULE_ATTEMPT_FAILURE)
            queue = BACKOFF_Q
        elif strategy != Strategy.SKIP:
            queue = self._requeue(info, SCHEDULE_ATTEMPT_FAILURE, strategy)
        else:
            self._park(info)
            metrics.child(metrics.queue_incoming_pods, UNSCHEDULABLE_Q, SCHEDULE_ATTEMPT_FAILURE).inc()
            queue = UNSCHEDULABLE_Q
        self._prune_event_log()
        self._update_gauges()
        return queue

    def _events_since(self, start: int) -> Iterable[tuple[ClusterEvent, EventObject | None, EventObject | None]]:
        return self._event_log[max(0, start - self._event_log_base) :]

    # ---- cluster events ----------------------------------------------------------------

    def is_event_of_interest(self, event: ClusterEvent) -> bool:
        """Whether any plugin registered an event that covers this one (kube's isEventOfInterest)."""
        known = self._interest.get(event)
        if known is None:
            known = self._interest[event] = event.is_wildcard or any(
                registered.matches(event) for registered in self._registered
            )
        return known

    def _worth_requeuing(
        self,
        info: QueuedPodInfo,
        event: ClusterEvent,
        old: EventObject | None,
        new: EventObject | None,
        covering: _Covering | None = None,
    ) -> Strategy:
        """What `event` means for the pod, by its rejecting plugins' registered events and hints.

        `covering` carries, across the pods of one event, which registrations of a plugin match it."""
        plugins = info.pending_plugins | info.unschedulable_plugins
        if not plugins or event.is_wildcard:
            return Strategy.AFTER_BACKOFF
        if covering is None:
            covering = _Covering(event)
        profile = self._profile(info.pod)
        strategy = Strategy.SKIP
        for plugin in plugins:
            for registered in covering.of(profile, plugin):
                try:
                    hint = (
                        QueueingHint.QUEUE
                        if registered.hint is None
                        else _run_hint(registered.hint, plugin, event, info.pod, old, new)
                    )
                except Exception:
                    hint = QueueingHint.QUEUE  # an erroring hint must not strand the pod
                if hint is not QueueingHint.QUEUE:
                    continue
                if plugin in info.pending_plugins:
                    return Strategy.IMMEDIATELY
                if not info.pending_plugins:
                    return Strategy.AFTER_BACKOFF
                strategy = Strategy.AFTER_BACKOFF
        return strategy

    def _in_flight_strategy(
        self, info: QueuedPodInfo, events: Iterable[tuple[ClusterEvent, EventObject | None, EventObject | None]]
    ) -> Strategy:
        """The strongest verdict of the events that came while the pod was being scheduled."""
        strategy = Strategy.SKIP
        for event, old, new in events:
            strategy = max(strategy, self._worth_requeuing(info, event, old, new))
            if strategy == Strategy.IMMEDIATELY or (strategy and not info.pending_plugins):
                break
        return strategy

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old: EventObject | None = None,
        new: EventObject | None = None,
        pre_check: Callable[[Pod], bool] | None = None,
    ) -> int:
        """A cluster event happened: wake every unschedulable pod it may help. Returns how many moved."""
        if not self.is_event_of_interest(event):
            return 0
        moved = asked = 0
        covering = _Covering(event)
        for info in self._visits(event, old, new, covering):
            if (
                info.gated
                and event is not FORCE_ACTIVATE
                and not covering.gate(self._profile(info.pod), info.gating_plugin)
            ):
                continue
            if pre_check is not None and not pre_check(info.pod):
                continue
            strategy = self._worth_requeuing(info, event, old, new, covering)
            if strategy != Strategy.SKIP:
                asked += 1
                if self._requeue(info, event.label, strategy, parked=True) != UNSCHEDULABLE_Q:
                    moved += 1
        if self._in_flight:
            self._event_log.append((event, old, new))
        if asked:
            self._update_gauges()
        return moved

    def _visits(
        self, event: ClusterEvent, old: EventObject | None, new: EventObject | None, covering: _Covering
    ) -> list[QueuedPodInfo]:
        """The waiting pods the event may concern, in the pool's order: all of them without the index
        or for a wildcard event, else the index's candidates."""
        pool = self._unschedulable
        if self._waiting is None or event.is_wildcard:
            return list(pool.values())
        profiles = self._profiles
        chosen = self._waiting.candidates(lambda profile, plugin: covering.of(profiles[profile], plugin), old, new)
        if len(chosen) == len(pool):
            return list(pool.values())
        if len(chosen) * 8 < len(pool):
            return [pool[uid] for uid in sorted(chosen, key=self._waiting.order)]
        return [info for uid, info in pool.items() if uid in chosen]

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff expired to activeQ (runs every second)."""
        now = self._clock.now()
        moved = 0
        for heap in (self._backoff, self._error_backoff):
            while heap:
                head = heap[0]
                if head.removed:
                    heapq.heappop(heap)
                    continue
                if head.expiry > now:
                    break
                heapq.heappop(heap)
                del self._backoff_items[head.info.pod.uid]
                self._requeue(head.info, BACKOFF_COMPLETE, Strategy.IMMEDIATELY)
                moved += 1
        if moved:
            self._update_gauges()
        return moved

    def flush_unschedulable_leftover(self) -> int:
        """Pods unschedulable for longer than the limit get another try (runs every 30 s)."""
        now = self._clock.now()
        stale = [
            info
            for info in self._unschedulable.values()
            if not info.gated and now - info.timestamp > self.max_in_unschedulable
        ]
        for info in stale:
            info.was_flushed_from_unschedulable = True
            self._requeue(info, UNSCHEDULABLE_TIMEOUT.label, parked=True)
        if stale:
            self._update_gauges()
        return len(stale)

    async def run_flush_loops(self) -> None:
        """The two periodic flushes, until cancelled."""
        last_leftover = self._clock.now()
        while not self._closed:
            await asyncio.sleep(1.0)
            self.flush_backoff_completed()
            if self._clock.now() - last_leftover >= 30.0:
                last_leftover = self._clock.now()
                self.flush_unschedulable_leftover()

    # ---- pod updates and deletes -------------------------------------------------------

    def update(self, pod: Pod, old: Pod | None = None) -> None:
        """An unscheduled pod changed: refresh it where it waits; the update may unblock it.

        `old` is the informer's previous version when it has one (else the queued one is used).
        """
        uid = pod.uid
        queued = self._active_items.get(uid) or self._backoff_items.get(uid)
        if queued is not None:
            queued.info.pod = pod
            self._sign(queued.info)
            return
        held = self._held(uid)
        if held is not None:
            held.pod = pod
            self._sign(held)
            return
        info = self._unschedulable.get(uid)
        if info is None:
            if uid in self._in_flight:
                # Being scheduled right now: remember the update so a failure is judged against it.
                events = (
                    pod_scheduling_properties_change(pod, old, is_target=True)
                    if old is not None
                    else [ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE)]
                )
                self._event_log.extend((event, old, pod) for event in events)
            else:
                self.add(pod)
            return
        previous = info.pod
        info.pod = pod
        self._sign(info)
        self._park(info)  # re-indexed where it is: its scopes' keys may have changed (claims in its status)
        # A gated pod's rejector is its gating plugin: the update that plugin registered (gates removed)
        # runs PreEnqueue again; a pod still gated comes straight back here.
        for event in pod_scheduling_properties_change(pod, previous, is_target=True):
            strategy = self._worth_requeuing(info, event, previous, pod)
            # As kube: a pod PreEnqueue keeps gated is asked again for the update's next event.
            if strategy != Strategy.SKIP and self._requeue(info, event.label, strategy, parked=True) != UNSCHEDULABLE_Q:
                break
        self._update_gauges()

    def delete(self, uid: str) -> None:
        self._remove_anywhere(uid)
        key = self._member_group.pop(uid, None)
        if key is not None:
            members = self._group_members.get(key)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self._group_members[key]
            held = self._groups_in_flight.get(key)
            if held:
                held.pop(uid, None)
        self._in_flight.pop(uid, None)
        self._prune_event_log()
        self._update_gauges()

    def activate(self, uids: Iterable[str]) -> None:
        """Move the given pods to activeQ now (plugins ask for this through the handle).

        Gated pods go through PreEnqueue again, as kube-scheduler's activate does: a plugin that
        gated a pod (DefaultPreemption while its preemption runs) activates it once it would pass.
        """
        for uid in uids:
            info = self._unschedulable.get(uid)
            if info is not None:
                self._requeue(info, FORCE_ACTIVATE.label, Strategy.IMMEDIATELY, parked=True)
                continue
            item = self._backoff_items.pop(uid, None)
            if item is not None:
                item.removed = True
                self._requeue(item.info, FORCE_ACTIVATE.label, Strategy.IMMEDIATELY)
        self._update_gauges()

    # ---- what the metrics read at scrape time --------------------------------------------

    def unschedulable_pods_by_plugin(self) -> dict[tuple[str, ...], float]:
        """scheduler_unschedulable_pods: queued pods (in any sub-queue, gated ones included; not the
        ones being scheduled) per plugin that rejected, left pending or gated them, and profile."""
        counts: dict[tuple[str, ...], float] = {}
        queued = [
            *self._unschedulable.values(),
            *(item.info for item in self._backoff_items.values()),
            *(item.info for item in self._active_items.values()),
        ]
        for info in queued:
            for plugin in info.unschedulable_plugins | info.pending_plugins:
                key = (plugin, info.pod.scheduler_name)
                counts[key] = counts.get(key, 0.0) + 1
        return counts

    def in_flight_events(self) -> dict[tuple[str, ...], float]:
        """scheduler_inflight_events: pods being scheduled ("PodPopped") and the events kept for them."""
        counts: dict[tuple[str, ...], float] = {(metrics.POD_POPPED_IN_FLIGHT_EVENT,): float(len(self._in_flight))}
        for event, _, _ in list(self._event_log):
            key = (event.label,)
            counts[key] = counts.get(key, 0.0) + 1
        return counts
