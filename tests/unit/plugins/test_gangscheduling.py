"""GangScheduling, ported from v1.37.2's gangscheduling_test.go (the cases without composite pod
groups, which are alpha and off): PreEnqueue and Permit over the pod-group state, PlacementFeasible
step by step, and the queueing hints."""

from __future__ import annotations

from typing import Any

import pytest

from plugins import gangscheduling
from plugins.gangscheduling import GangScheduling
from scheduler.api.fake import FakeApiClient
from scheduler.cache import Snapshot
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupStates, scheduling_group_key
from scheduler.framework.runtime import FrameworkHandle, Wiring
from scheduler.framework.types import Code, CycleState, PlacementProgress, QueueingHint, Status
from scheduler.model.objects import Pod
from scheduler.model.podgroups import PodGroup
from scheduler.testing.builders import make_pod


def raw_pod_group(name: str, min_count: int | None, namespace: str = "ns1") -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"schedulingPolicy": policy},
    }


def pod_group(name: str, min_count: int | None, namespace: str = "ns1") -> PodGroup:
    return PodGroup.from_raw(raw_pod_group(name, min_count, namespace))


def member(name: str, group: str | None = None, namespace: str = "ns1") -> Pod:
    builder = make_pod(name, namespace).uid(name)
    return (builder.pod_group(group) if group else builder).obj()


GANG1 = pod_group("pg1", 3)
GANG2 = pod_group("pg2", 4)
BASIC = pod_group("pg3", None)
P1, P2, P3 = (member(n, "pg1") for n in ("p1", "p2", "p3"))
P4, P5 = (member(n, "pg2") for n in ("p4", "p5"))
BASIC_POD = member("basic-pod", "pg3")
NON_GANG = member("non-gang")


class Recorder:
    """The scheduler's side of the handle: what the plugin activates."""

    def __init__(self) -> None:
        self.activated: list[str] = []

    def activate(self, uids: Any) -> None:
        self.activated.extend(uids)


def plugin_with(pods: list[Pod], groups: list[PodGroup], waiting: list[Pod]) -> tuple[GangScheduling, Recorder]:
    states = PodGroupStates()
    states.add_membership(scheduling_group_key)
    for group in groups:
        states.set_group(GroupKey(POD_GROUP_API, group.namespace, group.name), group)
    for pod in pods:
        states.add_pod(pod)
    for pod in waiting:
        states.assume_pod(pod)
    handle = FrameworkHandle(FakeApiClient(), Snapshot(), pod_groups=states)
    recorder = Recorder()
    standalone = Wiring.standalone(handle.snapshot)
    handle.wire(
        Wiring(
            standalone.snapshot, recorder.activate, standalone.spawn, standalone.pod_exists, standalone.nominator, {}
        )
    )
    return GangScheduling(handle), recorder


def code(status: Status | None) -> Code:
    return Code.SUCCESS if status is None else status.code


@pytest.mark.parametrize(
    ("name", "pod", "initial", "groups", "waiting", "pre_enqueue", "permit", "activated"),
    [
        ("non-gang pod succeeds immediately", NON_GANG, [], [GANG1, GANG2, BASIC], [], None, None, []),
        ("basic policy pod succeeds immediately", BASIC_POD, [], [GANG1, GANG2, BASIC], [], None, None, []),
        (
            "gang pod fails PreEnqueue when pod group is not yet created",
            P1,
            [P2, P3, P4, P5],
            [],
            [],
            (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'waiting for pods\'s pod group "pg1" to appear in scheduling queue'),
            "skip",
            [],
        ),
        (
            "gang pod fails PreEnqueue when quorum is not met",
            P1,
            [P2, P4, P5],
            [GANG1, GANG2],
            [],
            (
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                "waiting for minCount pods from a gang to appear in scheduling queue",
            ),
            "skip",
            [],
        ),
        (
            "gang pod passes PreEnqueue, but waits at Permit",
            P1,
            [P2, P3, P4, P5],
            [GANG1, GANG2],
            [P2, P4, P5],
            None,
            (Code.WAIT, "waiting for minCount pods from a gang to be scheduled"),
            ["p3"],
        ),
        (
            "final gang pod arrives at Permit and allows all waiting pods from a gang",
            P1,
            [P2, P3, P4, P5],
            [GANG1, GANG2],
            [P2, P3, P4, P5],
            None,
            None,
            [],
        ),
    ],
)
def test_gang_scheduling_flow(
    name: str,
    pod: Pod,
    initial: list[Pod],
    groups: list[PodGroup],
    waiting: list[Pod],
    pre_enqueue: tuple[Code, str] | None,
    permit: tuple[Code, str] | str | None,
    activated: list[str],
) -> None:
    plugin, recorder = plugin_with([pod, *initial], groups, waiting)
    status = plugin.pre_enqueue(pod)
    assert (None if status is None else (status.code, status.message)) == pre_enqueue
    if permit == "skip":
        return
    # The pod under test is assumed (reserved) before Permit runs, as in the scheduling cycle.
    plugin.handle.pod_groups.assume_pod(pod)
    status, timeout = plugin.permit(CycleState(), pod, "node")
    assert (None if status is None else (status.code, status.message)) == permit
    if status is not None:
        assert timeout == gangscheduling.PERMIT_TIMEOUT_SECONDS
    assert sorted(recorder.activated) == activated


# (name, minCount (0: basic policy), members in the cycle, already scheduled, member outcomes, verdicts)
PLACEMENT_FEASIBLE = [
    ("All pods succeed, minCount met at end", 2, 2, 0, ("Success", "Success"), ("Wait", "Success")),
    ("First pod fails, minCount not satisfiable", 3, 3, 0, ("Unschedulable",), ("Unschedulable",)),
    ("Second pod fails, minCount not satisfiable", 2, 2, 0, ("Success", "Unschedulable"), ("Wait", "Unschedulable")),
    ("Non-gang pod group with 0 scheduled pods fails", 0, 1, 0, ("Unschedulable",), ("Unschedulable",)),
    ("Non-gang pod group with succeeds once 1 pod is scheduled", 0, 1, 0, ("Success",), ("Success",)),
    ("Non-gang pod group with 1 initially scheduled pod succeeds", 0, 1, 1, ("Unschedulable",), ("Success",)),
    (
        "More than minCount pods, all succeed",
        2,
        3,
        0,
        ("Success", "Success", "Success"),
        ("Wait", "Success", "Success"),
    ),
    (
        "More than minCount pods, first fails",
        2,
        3,
        0,
        ("Unschedulable", "Success", "Success"),
        ("Wait", "Wait", "Success"),
    ),
    (
        "More than minCount pods, minCount not satisfiable",
        2,
        3,
        0,
        ("Unschedulable", "Unschedulable"),
        ("Wait", "Unschedulable"),
    ),
    (
        "1 pod scheduled, 2 unscheduled pods succeed, minCount 3 met",
        3,
        2,
        1,
        ("Success", "Success"),
        ("Wait", "Success"),
    ),
    ("minCount already met by scheduled pods", 2, 1, 2, ("Unschedulable",), ("Success",)),
    (
        "1 pod scheduled, minCount 3, first unscheduled fails, not enough remaining",
        3,
        2,
        1,
        ("Unschedulable",),
        ("Unschedulable",),
    ),
    (
        "1 pod scheduled, minCount 4, first unscheduled succeeds, not enough remaining",
        4,
        2,
        1,
        ("Success",),
        ("Unschedulable",),
    ),
]


@pytest.mark.parametrize(("name", "min_count", "members", "initially", "outcomes", "verdicts"), PLACEMENT_FEASIBLE)
def test_placement_feasible(
    name: str, min_count: int, members: int, initially: int, outcomes: tuple[str, ...], verdicts: tuple[str, ...]
) -> None:
    plugin, _ = plugin_with([], [], [])
    group = pod_group("test-pg", min_count or None, "default")
    key = GroupKey(POD_GROUP_API, "default", "test-pg")
    plugin.handle.pod_groups.set_group(key, group)
    state = plugin.handle.pod_groups.get(key)
    assert state is not None
    scheduled = initially
    for i, (outcome, verdict) in enumerate(zip(outcomes, verdicts, strict=True)):
        scheduled += outcome == "Success"
        status = plugin.placement_feasible(state, PlacementProgress(remaining=members - (i + 1), scheduled=scheduled))
        assert code(status).name.title().replace("_", "") == verdict, f"step {i}"


def test_placement_feasible_messages() -> None:
    plugin, _ = plugin_with([], [GANG1], [])
    state = plugin.handle.pod_groups.get(GroupKey(POD_GROUP_API, "ns1", "pg1"))
    assert state is not None
    waiting = plugin.placement_feasible(state, PlacementProgress(remaining=2, scheduled=1))
    assert waiting == Status(
        Code.WAIT, ("minCount (3) is not yet satisfied: 1 scheduled, 2 remaining",), plugin="GangScheduling"
    )
    refused = plugin.placement_feasible(state, PlacementProgress(remaining=0, scheduled=2))
    assert refused == Status.unschedulable(
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", plugin="GangScheduling"
    )


def _hint(plugin: GangScheduling, resource: str, action: str) -> Any:
    for registered in plugin.events_to_register():
        if registered.event.resource == resource and registered.event.action.name == action:
            return registered.hint
    raise AssertionError(f"{resource}/{action} not registered")


@pytest.mark.parametrize(
    ("name", "pod", "added", "want"),
    [
        ("add a newPod which matches the pod's scheduling group", P1, P2, QueueingHint.QUEUE),
        (
            "add a newPod with NodeName set which matches",
            P1,
            make_pod("p2", "ns1").uid("p2").pod_group("pg1").node("n").obj(),
            QueueingHint.QUEUE,
        ),
        ("add a newPod which doesn't match the pod's namespace", P1, member("p2", "pg1", "ns2"), QueueingHint.SKIP),
        ("add a newPod which doesn't match the pod's pod group name", P1, P4, QueueingHint.SKIP),
        ("pod without a scheduling group", NON_GANG, P2, QueueingHint.SKIP),
    ],
)
def test_is_schedulable_after_pod_added(name: str, pod: Pod, added: Pod, want: QueueingHint) -> None:
    plugin, _ = plugin_with([], [], [])
    assert _hint(plugin, "UnscheduledPod", "ADD")(pod, None, added) == want


@pytest.mark.parametrize(
    ("name", "pod", "group", "want"),
    [
        ("add a pod group which matches the pod's pod group name", P1, raw_pod_group("pg1", 3), QueueingHint.QUEUE),
        ("doesn't match the pod's scheduling group name", P1, raw_pod_group("pg2", 3), QueueingHint.SKIP),
        ("doesn't match the pod's scheduling group namespace", P1, raw_pod_group("pg1", 3, "ns2"), QueueingHint.SKIP),
    ],
)
def test_is_schedulable_after_pod_group_added(name: str, pod: Pod, group: dict[str, Any], want: QueueingHint) -> None:
    plugin, _ = plugin_with([], [], [])
    assert _hint(plugin, "scheduling.k8s.io/PodGroup", "ADD")(pod, None, group) == want


@pytest.mark.parametrize(
    ("name", "pod", "old", "new", "want"),
    [
        (
            "minCount decreased matches target pod",
            P1,
            raw_pod_group("pg1", 5),
            raw_pod_group("pg1", 3),
            QueueingHint.QUEUE,
        ),
        ("update Basic policy", P1, raw_pod_group("pg1", None), raw_pod_group("pg1", None), QueueingHint.SKIP),
        (
            "minCount increased matches target pod",
            P1,
            raw_pod_group("pg1", 3),
            raw_pod_group("pg1", 5),
            QueueingHint.SKIP,
        ),
        (
            "minCount unchanged matches target pod",
            P1,
            raw_pod_group("pg1", 3),
            raw_pod_group("pg1", 3),
            QueueingHint.SKIP,
        ),
        (
            "minCount decreased but name doesn't match",
            P1,
            raw_pod_group("pg2", 5),
            raw_pod_group("pg2", 3),
            QueueingHint.SKIP,
        ),
        (
            "minCount decreased but namespace doesn't match",
            P1,
            raw_pod_group("pg1", 5, "ns2"),
            raw_pod_group("pg1", 3, "ns2"),
            QueueingHint.SKIP,
        ),
        (
            "pod without a scheduling group is skipped",
            NON_GANG,
            raw_pod_group("pg1", 5),
            raw_pod_group("pg1", 3),
            QueueingHint.SKIP,
        ),
    ],
)
def test_is_schedulable_after_pod_group_updated(
    name: str, pod: Pod, old: dict[str, Any], new: dict[str, Any], want: QueueingHint
) -> None:
    plugin, _ = plugin_with([], [], [])
    assert _hint(plugin, "scheduling.k8s.io/PodGroup", "UPDATE")(pod, old, new) == want


SHORT, COMPLETE = [P2], [P1, P2, P3]  # pg1's members known besides the waiting ones (minCount 3)


@pytest.mark.parametrize(
    ("name", "known", "groups", "added", "want"),
    [
        ("pg1 still short of minCount after the add", SHORT, [GANG1], P2, QueueingHint.SKIP),
        ("pg1 complete with the add", COMPLETE, [GANG1], P3, QueueingHint.QUEUE),
        ("pg1's object not seen yet: kube's answer", SHORT, [], P2, QueueingHint.QUEUE),
        ("basic policy: no minCount to wait for", [BASIC_POD], [BASIC], BASIC_POD, QueueingHint.QUEUE),
    ],
)
def test_an_added_member_wakes_its_group_only_once_it_has_min_count_members(
    name: str, known: list[Pod], groups: list[PodGroup], added: Pod, want: QueueingHint
) -> None:
    plugin, _ = plugin_with(known, groups, [])
    waiting = BASIC_POD if added is BASIC_POD else P1
    assert _hint(plugin, "UnscheduledPod", "ADD")(waiting, None, added) == want
    assert _hint(plugin, "AssignedPod", "ADD")(waiting, None, added) == want


def test_every_scoped_registration_skips_the_pods_its_event_does_not_key() -> None:
    """The EventScope promise the queue's waiting index relies on, over every waiting pod, event
    object and group state here: a pod none of whose keys the event gives gets SKIP."""
    waiting_pods = [P1, P2, P4, BASIC_POD, NON_GANG, member("p1", "pg1", "ns2")]
    pods_added = [*waiting_pods, make_pod("b", "ns1").uid("b").pod_group("pg2").node("n").obj()]
    group_objects = [raw_pod_group("pg1", 3), raw_pod_group("pg2", 1), raw_pod_group("pg1", 3, "ns2")]
    checked = 0
    for known, groups in [([], []), (SHORT, [GANG1, GANG2]), ([*COMPLETE, P4, P5], [GANG1, GANG2, BASIC])]:
        plugin, _ = plugin_with(known, groups, [])
        for registered in plugin.events_to_register():
            assert registered.hint is not None and registered.scope is not None, registered.event
            objects: list[Any] = pods_added if registered.event.resource.endswith("Pod") else group_objects
            for new in objects:
                old = raw_pod_group("pg1", 5, new["metadata"]["namespace"]) if isinstance(new, dict) else None
                keys = set(registered.scope.event_keys(old, new) or ())
                for pod in waiting_pods:
                    if not keys & set(registered.scope.pod_keys(pod)):
                        assert registered.hint(pod, old, new) == QueueingHint.SKIP, (registered.event, pod.name)
                        checked += 1
    assert checked > 100
