"""Fine-grained cluster events and queueing strategies as kube-scheduler 1.37 has them.

framework/events.go (NodeSchedulingPropertiesChange, PodSchedulingPropertiesChange), framework/types.go
(MatchClusterEvents, Label), eventhandlers.go and backend/queue (isEventOfInterest, queueImmediately
for Pending plugins, InitialAttemptTimestamp at the first activeQ entry, the `15+` attempts label).
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from harness.workload import registry_value
from plugins.prioritysort import PrioritySort
from scheduler import metrics
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import parse_config
from scheduler.framework.events import node_scheduling_properties_change, pod_scheduling_properties_change
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    NodeInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)
from scheduler.informers import Informers
from scheduler.model.objects import Node, Pod
from scheduler.queue.scheduling_queue import ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q, PriorityQueue, QueueProfile
from scheduler.schedule_one import Scheduler
from tests.unit.test_schedule_one import raw_node, raw_pod

A = ActionType
NAME = "secondary-scheduler"


def node(**changes: Any) -> Node:
    raw: dict[str, Any] = {
        "metadata": {"name": "n", "resourceVersion": "1", "labels": {"zone": "a"}, "annotations": {"x": "1"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-01T10:00:00Z"}],
        },
    }
    for path, value in changes.items():
        section, field = path.split("__")
        raw[section][field] = value
    return Node.from_raw(raw)


@pytest.mark.parametrize(
    ("changes", "actions"),
    [
        ({}, []),
        (
            {"status__conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-01T10:01:00Z"}]},
            [],
        ),
        ({"status__conditions": [{"type": "Ready", "status": "False"}]}, [A.UPDATE_NODE_CONDITION]),
        ({"metadata__labels": {"zone": "b"}}, [A.UPDATE_NODE_LABEL]),
        ({"spec__taints": []}, [A.UPDATE_NODE_TAINT]),
        ({"status__allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}, [A.UPDATE_NODE_ALLOCATABLE]),
        ({"metadata__annotations": {}}, [A.UPDATE_NODE_ANNOTATION]),
        ({"status__declaredFeatures": ["FeatureA"]}, [A.UPDATE_NODE_DECLARED_FEATURE]),
        ({"spec__podPreemptionPolicy": "Never"}, [A.UPDATE_NODE_PREEMPTION_POLICY]),
        ({"spec__unschedulable": True}, []),  # cordoning makes nothing more schedulable
        (
            {"metadata__labels": {"zone": "b"}, "status__allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"}},
            [A.UPDATE_NODE_ALLOCATABLE, A.UPDATE_NODE_LABEL],
        ),
    ],
)
def test_node_update_events(changes: dict[str, Any], actions: list[ActionType]) -> None:
    events = node_scheduling_properties_change(node(**changes), node())
    assert events == [ClusterEvent(EventResource.NODE, action) for action in actions]


def test_uncordon_is_a_taint_update() -> None:
    events = node_scheduling_properties_change(node(), node(spec__unschedulable=True))
    assert [e.label for e in events] == ["NodeUpdateNodeTaint"]


def pod_raw(**spec: Any) -> dict[str, Any]:
    raw = raw_pod("p")
    raw["spec"].update(spec)
    return raw


def test_pod_update_events() -> None:
    old = Pod.from_raw(pod_raw(schedulingGates=[{"name": "g"}]))
    relabelled = copy.deepcopy(old.raw)
    relabelled["metadata"]["labels"] = {"app": "x"}
    relabelled["spec"]["schedulingGates"] = []
    relabelled["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    events = pod_scheduling_properties_change(Pod.from_raw(relabelled), old, is_target=True)
    assert [e.label for e in events] == [
        "TargetPodUpdatePodLabel",
        "TargetPodUpdatePodSchedulingGatesEliminated",
        "TargetPodUpdatePodToleration",
    ]
    status_only = copy.deepcopy(old.raw)
    status_only["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert pod_scheduling_properties_change(Pod.from_raw(status_only), old, is_target=False) == [
        ClusterEvent(EventResource.UNSCHEDULED_POD, A.UPDATE)
    ]
    bound = Pod.from_raw(raw_pod("p", node="n"))
    shrunk = Pod.from_raw(raw_pod("p", node="n", cpu="500m"))
    assert [e.label for e in pod_scheduling_properties_change(shrunk, bound, is_target=False)] == [
        "AssignedPodUpdatePodScaleDown"
    ]
    assert [e.label for e in pod_scheduling_properties_change(bound, shrunk, is_target=False)] == [
        "AssignedPodUpdatePodScaleUp"
    ]


def test_labels_and_matching_follow_kube() -> None:
    assert ClusterEvent(EventResource.NODE, A.ADD).label == "NodeAdd"
    assert ClusterEvent(EventResource.ASSIGNED_POD, A.DELETE).label == "AssignedPodDelete"
    assert ClusterEvent(EventResource.UNSCHEDULED_POD, A.ADD).label == "UnscheduledPodAdd"
    assert ClusterEvent(EventResource.ASSIGNED_POD, A.UPDATE).label == "AssignedPodUpdate"
    registered = ClusterEvent(EventResource.NODE, A.ADD | A.UPDATE_NODE_LABEL)
    assert registered.matches(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_LABEL))
    assert not registered.matches(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_TAINT))
    # A general update (nothing more specific could be told) matches only general registrations.
    assert not registered.matches(ClusterEvent(EventResource.NODE, A.UPDATE))
    assert ClusterEvent(EventResource.POD, A.UPDATE).matches(ClusterEvent(EventResource.TARGET_POD, A.UPDATE_POD_LABEL))


# ---- through the informers ---------------------------------------------------------------------


class Watcher:
    """A Filter plugin that rejects every pod and records the hints the queue asks it."""

    name = "Watcher"

    def __init__(self, events: Sequence[ClusterEvent], verdict: Status) -> None:
        self.events = events
        self.verdict = verdict
        self.asked: list[tuple[Any, Any]] = []

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return self.verdict

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(event, self.hint) for event in self.events]

    def hint(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        self.asked.append((old, new))
        return QueueingHint.QUEUE


def cluster(*events: ClusterEvent, verdict: Status | None = None) -> tuple[Scheduler, Informers, Watcher]:
    watcher = Watcher(events, verdict or Status.unschedulable("watched"))
    registry = full_registry()

    def new(args: Mapping[str, Any], handle: Any) -> Watcher:
        return watcher

    registry.register("Watcher", new)
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": NAME,
                    "plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [
                        {"name": "PrioritySort"}, {"name": "DefaultBinder"}, {"name": "Watcher"}
                    ]}},
                }
            ],
        }
    )  # fmt: skip
    sched = build_scheduler(config, registry, FakeApiClient(), {})
    sched.rng = random.Random(1)
    inf = Informers(sched)
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_pod("ADDED", raw_pod("pending"))
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)
    assert sched.queue.where("uid-pending") == UNSCHEDULABLE_Q
    return sched, inf, watcher


def incoming(event: str, queue: str = BACKOFF_Q) -> float:
    return registry_value(metrics.REGISTRY, "scheduler_queue_incoming_pods_total", queue=queue, event=event)


def bumped(raw: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    new = copy.deepcopy(raw)
    new["metadata"]["resourceVersion"] = str(int(new["metadata"]["resourceVersion"]) + 1)
    new["metadata"].update(metadata)
    return new


async def test_node_label_update_wakes_a_plugin_registered_for_labels_under_kubes_label() -> None:
    sched, inf, watcher = cluster(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_LABEL))
    before = incoming("NodeUpdateNodeLabel")
    updated = bumped(raw_node("n1"), labels={"zone": "b"})
    inf.on_node("MODIFIED", updated)
    assert len(watcher.asked) == 1
    assert sched.queue.where("uid-pending") == BACKOFF_Q
    assert incoming("NodeUpdateNodeLabel") == before + 1
    await sched.drain()


async def test_node_taint_update_does_not_ask_a_plugin_registered_for_labels() -> None:
    sched, inf, watcher = cluster(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_LABEL))
    updated = bumped(raw_node("n1"))
    updated["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    inf.on_node("MODIFIED", updated)
    assert watcher.asked == []
    assert sched.queue.where("uid-pending") == UNSCHEDULABLE_Q
    await sched.drain()


async def test_node_condition_change_reaches_the_queue() -> None:
    sched, inf, watcher = cluster(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_CONDITION))
    updated = bumped(raw_node("n1"))
    updated["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    inf.on_node("MODIFIED", updated)
    assert len(watcher.asked) == 1
    assert sched.queue.where("uid-pending") == BACKOFF_Q
    # The cached node is kept: a condition is nothing a plugin reads from the snapshot.
    cached = sched.cache.get_node_info("n1")
    assert cached is not None and cached.node is not None
    assert "conditions" not in cached.node.raw["status"]
    heartbeat = bumped(updated)
    inf.on_node("MODIFIED", heartbeat)
    assert len(watcher.asked) == 1  # compared with the last seen node, not the cached one
    await sched.drain()


async def test_status_only_update_of_a_bound_pod_runs_no_hint() -> None:
    sched, inf, watcher = cluster(ClusterEvent(EventResource.ASSIGNED_POD, A.ADD | A.UPDATE_POD_LABEL | A.DELETE))
    bound = raw_pod("other", node="n1", scheduler="default-scheduler")
    inf.on_pod("ADDED", bound)
    assert len(watcher.asked) == 1  # AssignedPodAdd
    sched.queue.add_unschedulable_if_not_present(sched.queue.pop_nowait() or pytest.fail("requeued"))
    running = bumped(bound)
    running["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    inf.on_pod("MODIFIED", running)
    assert len(watcher.asked) == 1
    assert not sched.queue.is_event_of_interest(ClusterEvent(EventResource.ASSIGNED_POD, A.UPDATE))
    relabelled = bumped(running, labels={"app": "x"})
    inf.on_pod("MODIFIED", relabelled)
    assert len(watcher.asked) == 2
    await sched.drain()


async def test_unscheduled_pod_add_is_labelled_like_kube() -> None:
    sched, inf, _ = cluster(ClusterEvent(EventResource.NODE, A.ADD))
    before = incoming("UnscheduledPodAdd", ACTIVE_Q)
    inf.on_pod("ADDED", raw_pod("second"))
    assert incoming("UnscheduledPodAdd", ACTIVE_Q) == before + 1
    await sched.drain()


async def test_attempts_label_caps_at_15_plus() -> None:
    client = FakeApiClient()
    sched = build_scheduler(
        parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}),
        full_registry(),
        client,
        {},
    )
    inf = Informers(sched)
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    info.attempts = 16

    def observed(label: str) -> float:
        name = "scheduler_pod_scheduling_sli_duration_seconds_count"
        return registry_value(metrics.REGISTRY, name, attempts=label)

    before = observed("15+"), observed("16")
    sched.schedule_one(info)
    await asyncio.sleep(0)
    await sched.drain()
    assert client.bindings == {"ns/p": "n1"}
    assert (observed("15+"), observed("16")) == (before[0] + 1, before[1])


# ---- queue strategies ------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


def pending_pod(name: str, gates: tuple[str, ...] = ()) -> Pod:
    raw = raw_pod(name)
    raw["spec"]["schedulerName"] = "s"
    if gates:
        raw["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return Pod.from_raw(raw)


def queue_with(clock: FakeClock, events: Mapping[str, Sequence[ClusterEventWithHint]]) -> PriorityQueue:
    def gates(pod: Pod) -> Status | None:
        return Status.unresolvable("gated", plugin="Gates") if pod.scheduling_gates else None

    return PriorityQueue({"s": QueueProfile(PrioritySort().less, gates, events)}, clock=clock)


NODE_ADD = ClusterEvent(EventResource.NODE, A.ADD)


def test_pending_plugin_queue_hint_skips_backoff() -> None:
    clock = FakeClock()
    queue = queue_with(clock, {"P": [ClusterEventWithHint(NODE_ADD)], "U": [ClusterEventWithHint(NODE_ADD)]})
    for name, plugins in (("pending", "pending_plugins"), ("rejected", "unschedulable_plugins")):
        queue.add(pending_pod(name))
        info = queue.pop_nowait()
        assert info is not None
        setattr(info, plugins, {"P" if name == "pending" else "U"})
        assert queue.add_unschedulable_if_not_present(info) == UNSCHEDULABLE_Q
    assert queue.move_all_to_active_or_backoff(NODE_ADD, None, None) == 2
    # Still within its backoff, yet a Pending plugin's Queue sends it straight to activeQ.
    assert queue.where("uid-pending") == ACTIVE_Q
    assert queue.where("uid-rejected") == BACKOFF_Q


def test_sli_clock_starts_when_the_pod_first_enters_active_q() -> None:
    clock = FakeClock()
    queue = queue_with(clock, {})
    queue.add(pending_pod("p"))
    clock.t += 7
    info = queue.pop_nowait()
    assert info is not None
    assert info.initial_attempt_timestamp == 1000.0
    queue.add(pending_pod("gated", gates=("g",)))
    clock.t += 5
    queue.update(pending_pod("gated"), pending_pod("gated", gates=("g",)))
    gated: QueuedPodInfo | None = queue.pop_nowait()
    assert gated is not None
    assert gated.initial_attempt_timestamp == 1012.0


async def test_pending_filter_status_is_a_rejection_that_queues_immediately() -> None:
    # kube's IsRejected includes Pending: the pod is Unschedulable (not a SchedulerError), its plugin
    # is pending, and a Queue from that plugin skips the backoff.
    sched, inf, _ = cluster(NODE_ADD, verdict=Status(Code.PENDING, ("waiting for a device",)))
    client = sched.client
    assert isinstance(client, FakeApiClient)
    info = sched.queue.get("uid-pending")
    assert info is not None
    assert (info.unschedulable_plugins, info.pending_plugins) == ({"Watcher"}, {"Watcher"})
    await sched.drain()
    assert client.conditions["ns/pending"]["reason"] == "Unschedulable"
    assert client.conditions["ns/pending"]["message"] == "0/1 nodes are available: 1 waiting for a device."
    inf.on_node("ADDED", raw_node("n2"))
    assert sched.queue.where("uid-pending") == ACTIVE_Q  # still within its backoff: straight to activeQ


def test_popping_from_backoff_counts_as_kube_labels_it() -> None:
    clock = FakeClock()
    queue = queue_with(clock, {"U": [ClusterEventWithHint(NODE_ADD)]})
    queue.add(pending_pod("p"))
    info = queue.pop_nowait()
    assert info is not None
    info.unschedulable_plugins = {"U"}
    queue.add_unschedulable_if_not_present(info)
    queue.move_all_to_active_or_backoff(NODE_ADD, None, None)
    assert queue.where("uid-p") == BACKOFF_Q
    before = incoming("PopFromBackoffQ", ACTIVE_Q)
    assert queue.pop_nowait() is not None  # activeQ is empty: the backoffQ head is tried early
    assert incoming("PopFromBackoffQ", ACTIVE_Q) == before + 1


async def test_a_declared_feature_change_reaches_the_cache_too() -> None:
    sched, inf, _ = cluster(ClusterEvent(EventResource.NODE, A.UPDATE_NODE_DECLARED_FEATURE))
    updated = bumped(raw_node("n1"))
    updated["status"]["declaredFeatures"] = ["FeatureA"]
    inf.on_node("MODIFIED", updated)
    cached = sched.cache.get_node_info("n1")
    assert cached is not None and cached.node is not None
    assert cached.node.raw["status"]["declaredFeatures"] == ["FeatureA"]
    assert sched.queue.where("uid-pending") == BACKOFF_Q
    await sched.drain()
