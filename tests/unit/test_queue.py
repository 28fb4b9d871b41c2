"""Scheduling queue transitions, driven by a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plugins.noderesourcesfit import NAME as FIT
from plugins.noderesourcesfit import NodeResourcesFit, parse_args
from plugins.prioritysort import PrioritySort
from plugins.schedulinggates import SchedulingGates
from scheduler import metrics
from scheduler.framework.podgroups import scheduling_group_key
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueuedPodInfo,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.queue.scheduling_queue import (
    ACTIVE_Q,
    BACKOFF_Q,
    GATED_Q,
    UNSCHEDULABLE_Q,
    PriorityQueue,
    QueueProfile,
)

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")
NAME_MISMATCH_PLUGIN = "NodeName"


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


def pod(name: str, priority: int = 0, cpu: str = "1", gates: tuple[str, ...] = ()) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "s",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return Pod.from_raw({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec})


def node(name: str, cpu: str) -> Node:
    return Node.from_raw({"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "pods": "10"}}})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> PriorityQueue:
    fit = NodeResourcesFit(parse_args({}))
    gates = SchedulingGates()
    profile = QueueProfile(
        less=PrioritySort().less,
        pre_enqueue=gates.pre_enqueue,
        events={FIT: fit.events_to_register(), gates.name: gates.events_to_register(), NAME_MISMATCH_PLUGIN: []},
    )
    return PriorityQueue({"s": profile}, clock=clock)


def fail(queue: PriorityQueue, info: QueuedPodInfo, plugin: str) -> str:
    info.unschedulable_plugins = {plugin}
    return queue.add_unschedulable_if_not_present(info)


def test_pops_by_priority_then_queue_time(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("low", priority=1))
    clock.t += 1
    queue.add(pod("high-late", priority=10))
    clock.t += 1
    queue.add(pod("low-late", priority=1))
    queue.add(pod("high-later", priority=10))
    order = []
    while (info := queue.pop_nowait()) is not None:
        order.append(info.pod.name)
    assert order == ["high-late", "high-later", "low", "low-late"]


def test_backoff_doubles_and_caps(queue: PriorityQueue) -> None:
    info = QueuedPodInfo(pod=pod("p"), timestamp=0)
    durations = []
    for attempts in range(1, 7):
        info.attempts = attempts
        durations.append(queue.backoff_duration(info))
    assert durations == [1, 2, 4, 8, 10, 10]


def test_unschedulable_pod_waits_for_a_helpful_event(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p", cpu="8"))
    info = queue.pop_nowait()
    assert info is not None
    queue.done("x")  # unrelated pod finishing does not matter
    assert fail(queue, info, FIT) == UNSCHEDULABLE_Q
    # A node too small for the pod: the hint says skip.
    assert queue.move_all_to_active_or_backoff(NODE_ADD, None, node("small", "4")) == 0
    assert queue.where("p") == UNSCHEDULABLE_Q
    # A big enough node while still backing off (1 s after 1 attempt): backoffQ.
    assert queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16")) == 1
    assert queue.where("p") == BACKOFF_Q
    assert queue.flush_backoff_completed() == 0
    clock.t += 1.01
    assert queue.flush_backoff_completed() == 1
    assert queue.where("p") == ACTIVE_Q


def test_event_after_backoff_goes_straight_to_active(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p", cpu="8"))
    info = queue.pop_nowait()
    assert info is not None
    fail(queue, info, FIT)
    clock.t += 5
    queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16"))
    assert queue.where("p") == ACTIVE_Q


def test_event_unrelated_to_the_rejecting_plugin_does_not_requeue(queue: PriorityQueue) -> None:
    queue.add(pod("p"))
    info = queue.pop_nowait()
    assert info is not None
    # NodeName registered no events at all: nothing but the leftover flush helps it.
    fail(queue, info, NAME_MISMATCH_PLUGIN)
    assert queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16")) == 0
    assert queue.move_all_to_active_or_backoff(POD_DELETE, pod("gone"), None) == 0
    assert queue.where("p") == UNSCHEDULABLE_Q


def test_plugin_without_enqueue_extensions_is_woken_by_any_event(queue: PriorityQueue) -> None:
    queue.add(pod("p"))
    info = queue.pop_nowait()
    assert info is not None
    fail(queue, info, "SomeOutOfTreePlugin")
    assert queue.move_all_to_active_or_backoff(NODE_ADD, None, node("n", "1")) == 1


def test_errors_go_to_backoff(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p"))
    info = queue.pop_nowait()
    assert info is not None
    assert queue.add_unschedulable_if_not_present(info, error=True) == BACKOFF_Q
    clock.t += 0.5
    assert queue.flush_backoff_completed() == 0
    clock.t += 0.6
    assert queue.flush_backoff_completed() == 1
    again = queue.pop_nowait()
    assert again is not None
    assert again.attempts == 2


def test_event_while_in_flight_is_not_lost(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p", cpu="8"))
    info = queue.pop_nowait()
    assert info is not None
    # The node arrives while the pod's cycle is running...
    queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16"))
    clock.t += 2
    # ...so its failure (computed on the old snapshot) must not park it in unschedulable.
    assert fail(queue, info, FIT) in (ACTIVE_Q, BACKOFF_Q)


def test_leftover_flush_after_five_minutes(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p"))
    info = queue.pop_nowait()
    assert info is not None
    fail(queue, info, NAME_MISMATCH_PLUGIN)
    clock.t += 299
    assert queue.flush_unschedulable_leftover() == 0
    clock.t += 2
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.where("p") == ACTIVE_Q


def test_gated_pod_waits_until_gates_are_removed(queue: PriorityQueue) -> None:
    queue.add(pod("p", gates=("example.com/wait",)))
    assert queue.where("p") == GATED_Q
    assert queue.pop_nowait() is None
    assert queue.pending()[GATED_Q] == 1
    # Cluster events do not release a gated pod.
    queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16"))
    assert queue.where("p") == GATED_Q
    queue.update(pod("p"))
    assert queue.where("p") == ACTIVE_Q


def test_event_of_the_gating_plugin_reruns_pre_enqueue(clock: FakeClock) -> None:
    """As kube's queue: a pod held at PreEnqueue by a plugin (DynamicResources holds one whose claim
    does not exist yet) is looked at again for that plugin's registered events, through its hint;
    other events pass it by."""
    claims: set[str] = set()
    claim_add = ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD)

    def pre_enqueue(p: Pod) -> Status | None:
        return None if p.name in claims else Status.unresolvable("no claim", plugin="Holder")

    def hint(p: Pod, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.QUEUE if new["metadata"]["name"] == p.name else QueueingHint.SKIP

    fit = NodeResourcesFit(parse_args({}))
    profile = QueueProfile(
        less=PrioritySort().less,
        pre_enqueue=pre_enqueue,
        events={FIT: fit.events_to_register(), "Holder": [ClusterEventWithHint(claim_add, hint)]},
    )
    queue = PriorityQueue({"s": profile}, clock=clock)
    queue.add(pod("p"))
    assert queue.where("p") == GATED_Q
    queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16"))  # not the gating plugin's
    claims.add("p")
    queue.move_all_to_active_or_backoff(claim_add, None, {"metadata": {"name": "other"}})  # its hint says skip
    assert queue.where("p") == GATED_Q
    queue.move_all_to_active_or_backoff(claim_add, None, {"metadata": {"name": "p"}})
    assert queue.where("p") == ACTIVE_Q


def test_a_pod_pre_enqueue_keeps_gated_stays_in_the_pool_uncounted(clock: FakeClock) -> None:
    """kube's moveToActiveQ on a gated pod its hint woke: PreEnqueue gates it again and it stays in
    the unschedulable map, not counted as incoming again (kube counts a pod only into a queue it
    was not in). A gang's members, gated until the last arrives, are woken by every arrival."""
    arrived: set[str] = set()
    member_add = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD)

    def pre_enqueue(p: Pod) -> Status | None:
        return None if len(arrived) >= 3 else Status.unresolvable("waiting for pods", plugin="Gang")

    fit = NodeResourcesFit(parse_args({}))
    profile = QueueProfile(
        less=PrioritySort().less,
        pre_enqueue=pre_enqueue,
        events={FIT: fit.events_to_register(), "Gang": [ClusterEventWithHint(member_add)]},
    )
    queue = PriorityQueue({"s": profile}, clock=clock)

    def incoming(queue_name: str) -> float:
        metrics.child(metrics.queue_incoming_pods, queue_name, member_add.label)  # the series exists from here
        value = metrics.REGISTRY.get_sample_value(
            "scheduler_queue_incoming_pods_total", {"queue": queue_name, "event": member_add.label}
        )
        assert value is not None
        return value

    before = incoming(UNSCHEDULABLE_Q), incoming(ACTIVE_Q)
    for name in ("a", "b"):
        arrived.add(name)
        queue.add(pod(name))
        queue.move_all_to_active_or_backoff(member_add, None, pod(name))
    assert queue.where("a") == GATED_Q and queue.where("b") == GATED_Q
    # Two adds counted the pods in (as UnscheduledPodAdd); "a" woken by "b" and gated again is not.
    assert incoming(UNSCHEDULABLE_Q) - before[0] == 2
    arrived.add("c")
    queue.add(pod("c"))
    assert queue.move_all_to_active_or_backoff(member_add, None, pod("c")) == 2
    assert [queue.where(n) for n in "abc"] == [ACTIVE_Q] * 3
    assert incoming(UNSCHEDULABLE_Q) - before[0] == 2
    assert incoming(ACTIVE_Q) - before[1] == 3


def test_update_in_place_and_delete(queue: PriorityQueue) -> None:
    queue.add(pod("a", priority=1))
    queue.add(pod("b", priority=2))
    queue.update(pod("a", priority=1, cpu="2"))
    queue.delete("b")
    info = queue.pop_nowait()
    assert info is not None
    assert info.pod.name == "a"
    assert info.pod.requests.milli_cpu == 2000
    assert queue.pop_nowait() is None
    assert len(queue) == 0


def test_activate_moves_unschedulable_and_backoff_pods(queue: PriorityQueue) -> None:
    queue.add(pod("a"))
    queue.add(pod("b"))
    first, second = queue.pop_nowait(), queue.pop_nowait()
    assert first is not None
    assert second is not None
    fail(queue, first, NAME_MISMATCH_PLUGIN)
    queue.add_unschedulable_if_not_present(second, error=True)
    queue.activate([first.pod.uid, second.pod.uid])
    assert queue.where("a") == ACTIVE_Q
    assert queue.where("b") == ACTIVE_Q


async def test_pop_waits_for_a_pod_and_close_releases_it(queue: PriorityQueue) -> None:
    import asyncio

    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add(pod("p"))
    info = await asyncio.wait_for(waiter, 1)
    assert info is not None
    assert info.pod.name == "p"
    closing = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    queue.close()
    assert await asyncio.wait_for(closing, 1) is None


def test_update_of_an_in_flight_pod_is_not_lost(queue: PriorityQueue, clock: FakeClock) -> None:
    queue.add(pod("p", gates=()))
    info = queue.pop_nowait()
    assert info is not None
    # While its cycle runs, the pod gains a toleration (an update its rejecting plugin cares about).
    queue.update(pod("p"))
    clock.t += 2
    info.unschedulable_plugins = {"TaintToleration"}
    assert queue.add_unschedulable_if_not_present(info) in (ACTIVE_Q, BACKOFF_Q)


def test_idle_pop_takes_a_rejected_pod_from_backoff_but_not_an_errored_one(queue: PriorityQueue) -> None:
    queue.add(pod("rejected", cpu="8"))
    queue.add(pod("errored"))
    first, second = queue.pop_nowait(), queue.pop_nowait()
    assert first is not None
    assert second is not None
    fail(queue, first, FIT)
    queue.add_unschedulable_if_not_present(second, error=True)
    # A node that fits arrives while "rejected" still backs off: it lands in backoffQ...
    queue.move_all_to_active_or_backoff(NODE_ADD, None, node("big", "16"))
    assert queue.where("rejected") == BACKOFF_Q
    # ...and with activeQ empty it is tried at once (kube-scheduler's SchedulerPopFromBackoffQ).
    again = queue.pop_nowait()
    assert again is not None
    assert again.pod.name == "rejected"
    assert again.attempts == 2
    # The pod that failed with an error waits its backoff out.
    assert queue.pop_nowait() is None
    assert queue.where("errored") == BACKOFF_Q
    # activeQ still comes first.
    queue.add(pod("fresh"))
    head = queue.pop_nowait()
    assert head is not None
    assert head.pod.name == "fresh"


# ---- pod groups (GenericWorkload): one entity at pop, held while in flight, requeued together ----


def member(name: str, group: str, priority: int = 0) -> Pod:
    raw = pod(name, priority).raw
    return Pod.from_raw({**raw, "spec": {**raw["spec"], "schedulingGroup": {"podGroupName": group}}})


@pytest.fixture
def group_queue(clock: FakeClock) -> PriorityQueue:
    profile = QueueProfile(less=PrioritySort().less, pre_enqueue=SchedulingGates().pre_enqueue, events={})
    return PriorityQueue({"s": profile}, clock=clock, group_of=scheduling_group_key)


def test_a_popped_member_brings_its_whole_group_in_kubes_member_order(group_queue: PriorityQueue) -> None:
    for p in (member("b", "g"), member("a", "g", priority=5), pod("solo"), member("c", "g")):
        group_queue.add(p)
    first = group_queue.pop_nowait()
    assert first is not None and first.pod.name == "a"
    group = group_queue.take_group(first)
    assert group is not None and str(group.key) == "ns/g"
    # Higher priority first, then (same attempts) the earlier queue timestamp, then the name.
    assert [m.pod.name for m in group.members] == ["a", "b", "c"]
    assert all(m.attempts == 1 for m in group.members)
    solo = group_queue.pop_nowait()
    assert solo is not None and group_queue.take_group(solo) is None
    assert group_queue.pop_nowait() is None


def test_members_handed_back_or_arriving_in_flight_are_requeued_with_the_group(
    group_queue: PriorityQueue, clock: FakeClock
) -> None:
    group_queue.add(member("a", "g"))
    group_queue.add(member("b", "g"))
    head = group_queue.pop_nowait()
    assert head is not None
    group = group_queue.take_group(head)
    assert group is not None
    group_queue.add(member("late", "g"))  # arrives while the group is being scheduled
    group_queue.add(member("gone", "g"))
    group_queue.delete("gone")
    for info in group.members:
        assert group_queue.add_unschedulable_if_not_present(info) == "pending"
    assert group_queue.pop_nowait() is None  # nothing of the group is queued while it is in flight
    group_queue.add_attempted_group(group, succeeded=False)
    assert group_queue.pending()[BACKOFF_Q] == 2 and group_queue.pending()[ACTIVE_Q] == 1
    assert group_queue.pop_nowait() is not None  # the newcomer has no backoff to wait out
    clock.t += 10
    group_queue.flush_backoff_completed()
    assert group_queue.pending()[ACTIVE_Q] == 2


def test_a_big_groups_hand_back_keeps_the_event_log_to_what_the_oldest_in_flight_pod_needs(
    group_queue: PriorityQueue, clock: FakeClock
) -> None:
    """A 3000-member group failing before scheduling hands every member back one by one: each
    hand-back finds its member among the held ones and prunes the event log from the oldest
    in-flight pod without walking the whole group (it was n^2: a 10000-member gang held the loop
    for a minute). Interleaved pods, events and deletions keep the log exactly as long as the oldest
    in-flight pod needs."""
    members = [member(f"m{i:04}", "g") for i in range(3000)]
    for p in members:
        group_queue.add(p)
    head = group_queue.pop_nowait()
    assert head is not None
    group = group_queue.take_group(head)
    assert group is not None and len(group.members) == 3000

    def needed_from() -> int | None:
        starts = list(group_queue._in_flight.values())
        return min(starts) if starts else None

    for i, info in enumerate(group.members):
        if i % 500 == 0:
            group_queue.add(pod(f"solo{i}"))
            solo = group_queue.pop_nowait()
            assert solo is not None and solo.pod.name == f"solo{i}"
            group_queue.move_all_to_active_or_backoff(NODE_ADD)
        if i % 700 == 1:
            group_queue.delete(info.pod.uid)
            continue
        assert group_queue.add_unschedulable_if_not_present(info) == "pending"
        oldest = needed_from()
        assert oldest is None or group_queue._event_log_base == oldest
    group_queue.add_attempted_group(group, succeeded=False)
    assert group_queue.pending()[BACKOFF_Q] == 3000 - 5


class _ComparedUid(str):
    """A pod uid that counts the == comparisons made with it: finding a member by scanning the
    members held for its group compares uids, a lookup by uid in a dict does not (same object)."""

    tally: list[int]

    def __eq__(self, other: object) -> bool:
        self.tally[0] += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


class _VisitedPositions(dict[str, int]):
    """The queue's in-flight entries (uid -> event log position when popped), counting how many
    positions are read through values(): pruning the event log reads them to find the oldest."""

    def __init__(self) -> None:
        super().__init__()
        self.visited = 0

    def values(self) -> Iterator[int]:  # type: ignore[override]
        for position in super().values():
            self.visited += 1
            yield position


def _hand_back_work(monkeypatch: pytest.MonkeyPatch, size: int) -> tuple[int, int]:
    """A `size`-member group taken and handed back member by member: (uid comparisons, in-flight
    positions read)."""
    clock = FakeClock()
    profile = QueueProfile(less=PrioritySort().less, pre_enqueue=SchedulingGates().pre_enqueue, events={})
    queue = PriorityQueue({"s": profile}, clock=clock, group_of=scheduling_group_key)
    positions = _VisitedPositions()
    monkeypatch.setattr(queue, "_in_flight", positions)  # still a dict, read through a counting values()
    tally = [0]
    for i in range(size):
        raw = member(f"m{i:05}", "g").raw
        uid = _ComparedUid(f"m{i:05}")
        uid.tally = tally
        queue.add(Pod.from_raw({**raw, "metadata": {**raw["metadata"], "uid": uid}}))
    head = queue.pop_nowait()
    assert head is not None
    group = queue.take_group(head)
    assert group is not None and len(group.members) == size
    tally[0] = 0
    positions.visited = 0
    for info in group.members:
        assert queue.add_unschedulable_if_not_present(info) == "pending"
    queue.add_attempted_group(group, succeeded=False)
    assert queue.pending()[BACKOFF_Q] == size
    return tally[0], positions.visited


def test_a_groups_hand_back_does_work_linear_in_its_members(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards 0f40cdf by counting work, not time: a group failing before scheduling hands every
    member back one by one, and each hand-back must cost about the same however big the group.
    Before it, each hand-back scanned the members already held (a list, uid by uid) and pruned the
    event log with min() over every in-flight entry, so the whole hand-back was n^2 (py-spy of
    StarvationPodGroup: 67 % of the CPU there, a 10000-member gang held the loop for a minute).
    Counted: uid comparisons, and in-flight positions read, for groups of n and 2n members."""
    small, large = 400, 800
    at_small, at_large = _hand_back_work(monkeypatch, small), _hand_back_work(monkeypatch, large)
    for what, n, twice_n in zip(("uid comparisons", "in-flight positions read"), at_small, at_large, strict=True):
        # A few per member at most (the quadratic forms did ~n/2 per member: 200 and 400 here), and
        # twice the members about twice the work (four times for the quadratic forms).
        assert n <= 3 * small and twice_n <= 3 * large and twice_n <= 2.5 * max(n, 1), (what, n, twice_n)
