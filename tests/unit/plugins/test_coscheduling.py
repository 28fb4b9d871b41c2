"""Coscheduling: args, QueueSort, PreFilter, PostFilter, Permit, Unreserve.

Cases ported from kubernetes-sigs/scheduler-plugins' pkg/coscheduling/coscheduling_test.go
(TestPodGroupBackoffTime, TestLess, TestPermit, TestLessAfterScheduleFailure, TestPostFilter,
TestPostFilterRejectThreshold), core/core_test.go (TestPreFilter, TestPermit,
TestCheckClusterResource, TestMarkAndClearPodGroupScheduleFailure) and
apis/config/validation (TestValidateCoschedulingArgs); the Permit wait, the release of a whole
gang and the rejection of its waiting members are this port's own cases.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from plugins.coscheduling import NAME, Coscheduling, parse_args
from plugins.coscheduling.core import POD_GROUP_LABEL, check_cluster_resource
from plugins.registry import in_tree_registry
from scheduler.config import parse_config
from scheduler.framework.podgroups import SCHEDULER_PLUGINS_POD_GROUP_API as API
from scheduler.framework.podgroups import GroupKey
from scheduler.framework.runtime import FrameworkHandle, WaitingPod
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    EventResource,
    NodeToStatus,
    QueuedPodInfo,
    Status,
)
from scheduler.model.objects import Pod
from scheduler.profile import build_profiles
from scheduler.testing.builders import PodBuilder, make_handle, make_node, make_pod, node_info

CPU4 = {"cpu": "4", "pods": "32"}
# Queue time is wall time here (clock=time.time), so PodGroup creation and pod arrival compare directly.
NOW = float(int(time.time()))


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_group(
    name: str,
    namespace: str = "ns",
    min_member: int | None = None,
    min_resources: Mapping[str, str] | None = None,
    timeout: int | None = None,
    created: float = NOW,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if min_member is not None:
        spec["minMember"] = min_member
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(created), "resourceVersion": "1"},
        "spec": spec,
    }


def member(name: str, group: str, namespace: str = "ns") -> PodBuilder:
    return make_pod(name, namespace).uid(name).label(POD_GROUP_LABEL, group)


def setup(
    pods: Sequence[PodBuilder] = (),
    groups: Sequence[Mapping[str, Any]] = (),
    nodes: Sequence[tuple[str, Mapping[str, str]]] = (("node", CPU4),),
    args: Mapping[str, Any] | None = None,
    clock: Any = time.time,
    activated: list[str] | None = None,
) -> tuple[Coscheduling, FrameworkHandle]:
    """The plugin over these nodes (bound pods on theirs), pods known to the informers, PodGroups."""
    built = [p.obj() for p in pods]
    infos = [node_info(make_node(n).capacity(cap), *[p for p in built if p.node_name == n]) for n, cap in nodes]
    handle = make_handle(*infos)
    if activated is not None:
        handle.wire(dataclasses.replace(handle.wiring, activate=activated.extend))
    plugin = Coscheduling(parse_args(args or {}), handle, clock=clock)
    for pod in built:
        handle.pod_groups.add_pod(pod)
    for raw in groups:
        meta = raw["metadata"]
        handle.pod_groups.set_group(GroupKey(API, meta["namespace"], meta["name"]), raw)
    return plugin, handle


def assume(handle: FrameworkHandle, pod: Pod, node: str = "node") -> Pod:
    """What the scheduler's cache does before Reserve: the member counts as assumed."""
    placed = dataclasses.replace(pod, node_name=node)
    handle.pod_groups.assume_pod(placed)
    return placed


# ---- args (TestValidateCoschedulingArgs) -----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 60, "podGroupRejectPercentage": 10}, None),
        ({"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0, "podGroupRejectPercentage": 0}, None),
        ({"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0, "podGroupRejectPercentage": 100}, None),
        (
            {"permitWaitingTimeSeconds": -10, "podGroupBackoffSeconds": 60, "podGroupRejectPercentage": 10},
            "permitWaitingTimeSeconds: Invalid value: -10: must be greater than 0",
        ),
        (
            {"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": -20, "podGroupRejectPercentage": 10},
            "podGroupBackoffSeconds: Invalid value: -20: must be greater than 0",
        ),
        (
            {"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0, "podGroupRejectPercentage": -1},
            "podGroupRejectPercentage: Invalid value: -1: must be between 0 and 100",
        ),
        (
            {"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0, "podGroupRejectPercentage": 101},
            "podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100",
        ),
        (
            {"permitWaitingTimeSeconds": -1, "podGroupBackoffSeconds": -2},
            "[permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0, "
            "podGroupBackoffSeconds: Invalid value: -2: must be greater than 0]",
        ),
        ({"permitWaitingTimeSeconds": "10"}, "permitWaitingTimeSeconds: Invalid value: '10': must be an integer"),
        ({"permitWaitingTime": 10}, "unknown field(s) ['permitWaitingTime']"),
    ],
)
def test_validate_args(args: dict[str, Any], error: str | None) -> None:
    if error is None:
        parse_args(args)
        return
    with pytest.raises(ValueError) as raised:
        parse_args(args)
    assert str(raised.value) == error


def test_args_defaults_and_kube_config_keys() -> None:
    parsed = parse_args({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "CoschedulingArgs"})
    assert (parsed.permit_waiting_time_seconds, parsed.pod_group_backoff_seconds) == (60, 0)
    assert parsed.pod_group_reject_percentage == 10


# ---- PreFilter (core TestPreFilter) ----------------------------------------------------------

GATED = {"schedulingGates": [{"name": "example-gate"}]}


@pytest.mark.parametrize(
    ("pod", "pending", "groups", "ok"),
    [
        pytest.param(
            make_pod("p"),
            [member("p1", "pg1"), member("p2", "pg2")],
            [pod_group("pg1", min_member=1), pod_group("pg2", min_member=1)],
            True,
            id="pod does not belong to any pg",
        ),
        pytest.param(member("p", "pg-non-existent"), [], [pod_group("pg1", min_member=1)], True, id="non-existent pg"),
        pytest.param(
            member("p", "pg1"),
            [member("pg2-1", "pg2")],
            [pod_group("pg1", min_member=2), pod_group("pg2", min_member=2)],
            False,
            id="pod count less than minMember",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1"), member("p1c", "pg1")],
            [pod_group("pg1", min_member=2), pod_group("pg2", min_member=2)],
            True,
            id="pod count more than minMember",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1")],
            [pod_group("pg1", min_member=2)],
            True,
            id="pod count equal minMember",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1"), member("p1c", "pg1").spec(**GATED)],
            [pod_group("pg1", min_member=2)],
            True,
            id="gated pods but still meeting quorum",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1").spec(**GATED), member("p1c", "pg1")],
            [pod_group("pg1", min_member=3)],
            False,
            id="gated pods push group below quorum",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1").spec(**GATED), member("p1c", "pg1").spec(**GATED)],
            [pod_group("pg1", min_member=2)],
            False,
            id="all sibling pods are gated",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1"), member("p1c", "pg1")],
            [pod_group("pg1", min_member=2, min_resources={"cpu": "6"})],
            True,
            id="cluster's resource satisfies minResource",
        ),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1"), member("p1c", "pg1")],
            [pod_group("pg1", min_member=2, min_resources={"cpu": "10"})],
            False,
            id="cluster's resource cannot satisfy minResource",
        ),
    ],
)
def test_pre_filter(pod: PodBuilder, pending: list[PodBuilder], groups: list[dict[str, Any]], ok: bool) -> None:
    plugin, handle = setup([*pending, pod], groups, nodes=(("node-a", CPU4), ("node-b", CPU4)))
    _, status = plugin.pre_filter(CycleState(), pod.obj(), handle.snapshot.list())
    assert (status is None) == ok, status
    if not ok:
        assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_pre_filter_messages() -> None:
    plugin, handle = setup([member("p", "pg1")], [pod_group("pg1", min_member=2)])
    _, status = plugin.pre_filter(CycleState(), member("p", "pg1").obj(), handle.snapshot.list())
    assert status == Status.unresolvable(
        "pre-filter pod p cannot find enough sibling pods, current pods number: 1, minMember of group: 2"
    )
    plugin, handle = setup(
        [member("a", "pg1"), member("b", "pg1")], [pod_group("pg1", min_member=2, min_resources={"cpu": "9"})]
    )
    _, status = plugin.pre_filter(CycleState(), member("a", "pg1").obj(), handle.snapshot.list())
    assert status == Status.unresolvable("resource gap: map[cpu:5]")


def test_pre_filter_remembers_a_passed_resource_check_for_the_permit_wait() -> None:
    clock = Clock()
    pods = [member("a", "pg1"), member("b", "pg1")]
    plugin, handle = setup(
        pods,
        [pod_group("pg1", min_member=2, min_resources={"cpu": "4"})],
        args={"permitWaitingTimeSeconds": 10},
        clock=clock,
    )
    assert plugin.pre_filter(CycleState(), pods[0].obj(), handle.snapshot.list())[1] is None
    # The cluster filled up meanwhile: within permitWaitingTimeSeconds the group is not checked again.
    full = [node_info(make_node("node").capacity(CPU4), make_pod("x").uid("x").node("node").req(cpu="4").obj())]
    assert plugin.pre_filter(CycleState(), pods[1].obj(), full)[1] is None
    clock.now += 10
    _, status = plugin.pre_filter(CycleState(), pods[1].obj(), full)
    assert status == Status.unresolvable("resource gap: map[cpu:4]")


def test_invalid_pod_group_fails_only_its_own_pods() -> None:
    bad = pod_group("bad", min_member=2, min_resources={"cpu": "lots"})
    plugin, handle = setup([member("a", "bad"), member("b", "good")], [bad, pod_group("good", min_member=1)])
    _, status = plugin.pre_filter(CycleState(), member("a", "bad").obj(), handle.snapshot.list())
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("PodGroup ns/bad is invalid: spec.minResources.cpu: ")
    assert plugin.pre_filter(CycleState(), member("b", "good").obj(), handle.snapshot.list())[1] is None


# ---- CheckClusterResource (core TestCheckClusterResource) ------------------------------------


@pytest.mark.parametrize(
    ("existing", "ok"),
    [
        pytest.param([make_pod("p1", "ns").uid("p1").node("node-a").req(cpu="2")], True, id="enough"),
        pytest.param(
            [
                make_pod("p1", "ns").uid("p1").node("node-a").req(cpu="2"),
                make_pod("p2", "ns").uid("p2").node("node-b").req(cpu="1"),
            ],
            False,
            id="not enough",
        ),
        pytest.param(
            [
                member("p1", "pg1").node("node-a").req(cpu="2"),
                make_pod("p2", "ns").uid("p2").node("node-b").req(cpu="1"),
            ],
            True,
            id="the group's own pod counts as free",
        ),
    ],
)
def test_check_cluster_resource(existing: list[PodBuilder], ok: bool) -> None:
    pods = [p.obj() for p in existing]
    cpu3 = {"cpu": "3", "pods": "32"}
    nodes = [
        node_info(make_node(n).capacity(cpu3), *[p for p in pods if p.node_name == n]) for n in ("node-a", "node-b")
    ]
    assert (check_cluster_resource(nodes, {"cpu": 4000}, "ns/pg1") is None) == ok


# ---- Permit (core TestPermit, TestPermit) ----------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "existing", "groups", "code", "message"),
    [
        pytest.param(make_pod("p", "ns").uid("p"), [], [pod_group("pg1", min_member=2)], None, "", id="no pg"),
        pytest.param(
            member("p", "pg-non-existent"),
            [],
            [pod_group("pg1", min_member=2)],
            Code.UNSCHEDULABLE,
            "PodGroup not found",
            id="pg not found",
        ),
        pytest.param(member("p", "pg1"), [], [pod_group("pg1", min_member=2)], Code.WAIT, "", id="no quorum"),
        pytest.param(
            member("p1a", "pg1"),
            [member("p1b", "pg1").node("node")],
            [pod_group("pg1", min_member=2)],
            None,
            "",
            id="quorum with a bound member",
        ),
        pytest.param(
            member("p", "pg1"),
            [],
            [pod_group("pg1", min_member=1), pod_group("pg2", min_member=2)],
            None,
            "",
            id="quorum of one",
        ),
    ],
)
def test_permit(
    pod: PodBuilder, existing: list[PodBuilder], groups: list[dict[str, Any]], code: Code | None, message: str
) -> None:
    plugin, handle = setup([*existing, pod], groups)
    status, _ = plugin.permit(CycleState(), assume(handle, pod.obj()), "node")
    assert (status.code if status is not None else None) == code
    assert (status.message if status is not None else "") == message


@pytest.mark.parametrize(
    ("group_timeout", "args_timeout", "want"),
    [(None, None, 60.0), (None, 10, 10.0), (5, 10, 5.0), (0, 10, 10.0), (None, 0, 60.0)],
)
def test_permit_wait_time(group_timeout: int | None, args_timeout: int | None, want: float) -> None:
    args = {} if args_timeout is None else {"permitWaitingTimeSeconds": args_timeout}
    plugin, handle = setup([member("p", "pg1")], [pod_group("pg1", min_member=2, timeout=group_timeout)], args=args)
    status, timeout = plugin.permit(CycleState(), assume(handle, member("p", "pg1").obj()), "node")
    assert status == Status(Code.WAIT) and timeout == want


async def test_quorum_allows_every_waiting_member() -> None:
    pods = [member(f"p{i}", "pg1") for i in range(3)]
    plugin, handle = setup(
        [*pods, member("other", "pg2")], [pod_group("pg1", min_member=3), pod_group("pg2", min_member=2)]
    )
    waiting = []
    for pod in [*pods[:2], member("other", "pg2")]:
        placed = assume(handle, pod.obj())
        assert plugin.permit(CycleState(), placed, "node")[0] == Status(Code.WAIT)
        handle.waiting_pods[placed.uid] = entry = WaitingPod(placed, {NAME: 60.0})
        waiting.append(entry)
    status, _ = plugin.permit(CycleState(), assume(handle, pods[2].obj()), "node")
    assert status is None
    assert [w.future.done() and w.future.result() for w in waiting] == [None, None, False]


async def test_unreserve_rejects_the_waiting_members() -> None:
    clock = Clock()
    pods = [member(f"p{i}", "pg1") for i in range(3)]
    plugin, handle = setup(pods, [pod_group("pg1", min_member=3)], clock=clock)
    placed = [assume(handle, p.obj()) for p in pods[:2]]
    handle.waiting_pods[placed[0].uid] = waiting = WaitingPod(placed[0], {NAME: 60.0})
    plugin.unreserve(CycleState(), placed[1], "node")
    assert waiting.future.result() == Status.unschedulable("rejection in Unreserve", plugin=NAME)
    assert plugin.manager.last_failed == {GroupKey(API, "ns", "pg1"): clock.now}


# ---- PostFilter (TestPostFilter, TestPostFilterRejectThreshold) ------------------------------

REJECTED = Status.unschedulable("PodGroup ns/pg1 gets rejected due to Pod p is unschedulable even after PostFilter")


@pytest.mark.parametrize(
    ("pod", "existing", "groups", "want"),
    [
        pytest.param(
            make_pod("p", "ns").uid("p"),
            [],
            [pod_group("pg1", min_member=2)],
            Status.unschedulable("can not find pod group"),
            id="no pod group",
        ),
        pytest.param(
            member("p", "pg1"),
            [member("p1", "pg1").node("node")],
            [pod_group("pg1", min_member=1)],
            Status(Code.UNSCHEDULABLE),
            id="enough pods assigned, do not reject all",
        ),
        pytest.param(
            member("p", "pg1"),
            [member("p1", "pg1").node("node")],
            [pod_group("pg1", min_member=2)],
            REJECTED,
            id="pod failed at filter phase, reject all pods",
        ),
    ],
)
def test_post_filter(pod: PodBuilder, existing: list[PodBuilder], groups: list[dict[str, Any]], want: Status) -> None:
    plugin, _ = setup([*existing, pod], groups)
    assert plugin.post_filter(CycleState(), pod.obj(), NodeToStatus()) == (None, want)


@pytest.mark.parametrize(
    ("percentage", "min_member", "assigned", "rejects"),
    [
        (10, 10, 9, False),
        (10, 10, 8, True),
        (0, 10, 9, True),
        (100, 10, 0, False),
        (50, 10, 6, False),
        (50, 10, 4, True),
    ],
)
def test_post_filter_reject_threshold(percentage: int, min_member: int, assigned: int, rejects: bool) -> None:
    bound = [member(f"assigned-{i}", "pg1").node("node") for i in range(assigned)]
    plugin, _ = setup(
        [*bound, member("p", "pg1")],
        [pod_group("pg1", min_member=min_member)],
        args={"podGroupRejectPercentage": percentage},
    )
    _, status = plugin.post_filter(CycleState(), member("p", "pg1").obj(), NodeToStatus())
    assert status == (REJECTED if rejects else Status(Code.UNSCHEDULABLE))


async def test_post_filter_rejects_waiting_members_and_backs_off() -> None:
    """TestPodGroupBackoffTime: the first member waits and activates its siblings; a sibling's
    PostFilter rejects the group, whose next member then fails PreFilter while it backs off."""
    clock, activated = Clock(), list[str]()
    pods = [member(f"pod{i}", "pg1") for i in (1, 2, 3)]
    plugin, handle = setup(
        pods, [pod_group("pg1", min_member=3)], args={"podGroupBackoffSeconds": 1}, clock=clock, activated=activated
    )
    first = assume(handle, pods[0].obj(), "test")
    assert plugin.permit(CycleState(), first, "test")[0] == Status(Code.WAIT)
    assert sorted(activated) == ["pod2", "pod3"]
    handle.waiting_pods[first.uid] = waiting = WaitingPod(first, {NAME: 10.0})
    plugin.post_filter(CycleState(), pods[1].obj(), NodeToStatus())
    assert waiting.future.result() == Status.unschedulable("optimistic rejection in PostFilter", plugin=NAME)
    _, status = plugin.pre_filter(CycleState(), pods[2].obj(), handle.snapshot.list())
    assert status == Status.unresolvable("podGroup ns/pg1 failed recently")
    clock.now += 1
    assert plugin.pre_filter(CycleState(), pods[2].obj(), handle.snapshot.list())[1] is None


# ---- QueueSort (TestLess, TestLessAfterScheduleFailure, TestMarkAndClear...) ------------------

LOW, HIGH = 10, 100


def queued(name: str, namespace: str, priority: int, group: str = "", first: float | None = None) -> QueuedPodInfo:
    pod = make_pod(name, namespace).uid(name).priority(priority)
    if group:
        pod.label(POD_GROUP_LABEL, group)
    return QueuedPodInfo(pod=pod.obj(), timestamp=NOW, initial_attempt_timestamp=first)


@pytest.mark.parametrize(
    ("p1", "p2", "groups", "want"),
    [
        (queued("p1", "ns1", LOW), queued("p2", "ns2", HIGH), [], False),
        (queued("p1", "ns1", HIGH), queued("p2", "ns2", LOW), [], True),
        (queued("p1", "ns1", HIGH, first=NOW + 1), queued("p2", "ns2", HIGH, first=NOW + 2), [], True),
        (queued("p1", "ns1", HIGH, first=NOW + 2), queued("p2", "ns2", HIGH, first=NOW + 1), [], False),
        (queued("p1", "ns1", LOW, "pg1"), queued("p2", "ns2", HIGH), [pod_group("pg1", "ns1")], False),
        (queued("p1", "ns1", HIGH, "pg1"), queued("p2", "ns2", LOW), [pod_group("pg1", "ns1")], True),
        (
            queued("p1", "ns1", HIGH, "pg1", NOW + 1),
            queued("p2", "ns2", HIGH, first=NOW + 2),
            [pod_group("pg1", "ns1", created=NOW + 1)],
            True,
        ),
        (
            queued("p1", "ns1", HIGH, "pg1", NOW + 2),
            queued("p2", "ns2", HIGH, first=NOW + 1),
            [pod_group("pg1", "ns1", created=NOW + 2)],
            False,
        ),
        (
            queued("p1", "ns1", LOW, "pg1"),
            queued("p2", "ns2", HIGH, "pg2"),
            [pod_group("pg1", "ns1", created=NOW + 1), pod_group("pg2", "ns2", created=NOW + 2)],
            False,
        ),
        (
            queued("p1", "ns1", HIGH, "pg1"),
            queued("p2", "ns2", LOW, "pg1"),
            [pod_group("pg1", "ns1", created=NOW + 1), pod_group("pg2", "ns2", created=NOW + 2)],
            True,
        ),
        (
            queued("p1", "ns1", HIGH, "pg1", NOW + 1),
            queued("p2", "ns2", HIGH, "pg2", NOW + 2),
            [pod_group("pg1", "ns1", created=NOW + 1), pod_group("pg2", "ns2", created=NOW + 2)],
            True,
        ),
        (
            queued("p1", "ns", LOW, "pg2", NOW + 1),
            queued("p2", "ns", HIGH, "pg1", NOW + 2),
            [pod_group("pg1", "ns", created=NOW + 1), pod_group("pg2", "ns", created=NOW + 2)],
            False,
        ),
        (
            queued("p1", "ns1", HIGH, "pg2", NOW + 1),
            queued("p2", "ns2", HIGH, "pg2", NOW + 1),
            [pod_group("pg1", "ns1", created=NOW + 1), pod_group("pg2", "ns2", created=NOW + 2)],
            True,
        ),
        (
            queued("p1", "ns1", HIGH, first=NOW + 1),
            queued("p2", "ns2", HIGH, "pg2", NOW + 1),
            [pod_group("pg2", "ns2", created=NOW + 2)],
            True,
        ),
        # The same group and time: the pods' namespace/name decide.
        (
            queued("p2", "ns", HIGH, "pg1", NOW + 1),
            queued("p1", "ns", HIGH, "pg1", NOW + 5),
            [pod_group("pg1", "ns", created=NOW)],
            False,
        ),
    ],
)
def test_less(p1: QueuedPodInfo, p2: QueuedPodInfo, groups: list[dict[str, Any]], want: bool) -> None:
    plugin, _ = setup(groups=groups)
    assert plugin.less(p1, p2) == want


def test_less_after_schedule_failure() -> None:
    clock = Clock(NOW)
    plugin, _ = setup(
        groups=[pod_group("pg1", min_member=3, created=NOW - 10), pod_group("pg2", min_member=3, created=NOW - 5)],
        clock=clock,
    )
    p1, p2 = queued("p1", "ns", HIGH, "pg1", NOW), queued("p2", "ns", HIGH, "pg2", NOW)
    key = GroupKey(API, "ns", "pg1")
    assert plugin.less(p1, p2)
    plugin.manager.mark_failure(key)
    assert not plugin.less(p1, p2) and plugin.less(p2, p1)
    plugin.manager.clear_failure(key)
    assert plugin.less(p1, p2)


async def test_quorum_clears_the_failure_mark() -> None:
    plugin, handle = setup([member("p", "pg1")], [pod_group("pg1", min_member=1)])
    key = GroupKey(API, "ns", "pg1")
    plugin.manager.mark_failure(key)
    assert plugin.permit(CycleState(), assume(handle, member("p", "pg1").obj()), "node")[0] is None
    assert key not in plugin.manager.last_failed


def test_events_to_register() -> None:
    plugin, _ = setup()
    assert [e.event for e in plugin.events_to_register()] == [
        ClusterEvent(EventResource.POD, ActionType.ADD),
        ClusterEvent(EventResource.SCHEDULER_PLUGINS_POD_GROUP, ActionType.ADD | ActionType.UPDATE),
    ]


# scheduler-plugins' two ways to configure it: manifests/coscheduling/scheduler-config.yaml, and the
# as-a-second-scheduler chart's ConfigMap (every plugin in multiPoint, PrioritySort disabled there).
MANIFEST_PLUGINS = {
    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
}
HELM_CHART_PLUGINS = {"multiPoint": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}}


@pytest.mark.parametrize("plugins", [MANIFEST_PLUGINS, HELM_CHART_PLUGINS], ids=["manifest", "helm-chart"])
def test_as_a_second_scheduler_config(plugins: dict[str, Any]) -> None:
    """Coscheduling configured as scheduler-plugins configures it, every default plugin kept."""
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "secondary-scheduler",
                    "plugins": plugins,
                    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
                }
            ],
        }
    )
    handle = make_handle()
    fw = build_profiles(config, in_tree_registry(), handle)["secondary-scheduler"]
    names = fw.plugin_names()
    assert names["queueSort"] == ["Coscheduling"]
    for point in ("preFilter", "reserve", "permit"):
        assert "Coscheduling" in names[point], point
    # The default profile's PostFilter plugins (DynamicResources, DefaultPreemption), then Coscheduling.
    assert names["postFilter"] == ["DynamicResources", "DefaultPreemption", "Coscheduling"]
    assert handle.pod_groups.key_of(member("p", "pg1").obj()) == GroupKey(API, "ns", "pg1")
