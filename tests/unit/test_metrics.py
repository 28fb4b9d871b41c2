"""Metrics as kube-scheduler writes them: label values, where they are observed, what is counted.

The registry is process-wide, so every test reads deltas, or uses a profile / label value only it
produces.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kubernetes import client as k8s_client
from prometheus_client import generate_latest

from harness.controlplane import free_ports
from harness.workload import registry_value
from plugins.prioritysort import PrioritySort
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.api.http import Connection, HttpApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.cache import Cache, Snapshot
from scheduler.config import default_config
from scheduler.framework.interface import Plugin
from scheduler.framework.runtime import Framework, FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, Status
from scheduler.informers import Informers
from scheduler.model.objects import Node, Pod
from scheduler.schedule_one import Scheduler

POD = Pod.from_raw({"metadata": {"name": "p", "namespace": "ns", "uid": "p"}, "spec": {"containers": []}})


def sample(name: str, **labels: str) -> float:
    return registry_value(metrics.REGISTRY, name, **labels)


def info(name: str) -> NodeInfo:
    return NodeInfo(Node.from_raw({"metadata": {"name": name}, "status": {"allocatable": {"pods": "10"}}}))


class Pre:
    def __init__(self, name: str, status: Status | None = None) -> None:
        self.name = name
        self.status = status

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, self.status

    def pre_filter_extensions(self) -> None:
        return None


class Filt:
    def __init__(self, name: str, rejects: set[str]) -> None:
        self.name = name
        self.rejects = rejects

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return Status.unresolvable("no") if node_info.name in self.rejects else None


class Scorer:
    def __init__(self, name: str) -> None:
        self.name = name

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return 1, None

    def score_extensions(self) -> None:
        return None


class Binder:
    name = "B"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


class Gate:
    name = "Gate"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated",))


def framework(**points: Sequence[Plugin]) -> Framework:
    plugins: dict[str, Sequence[Plugin]] = {"queueSort": [PrioritySort()], "bind": [Binder()], **points}
    profile = f"profile-{uuid.uuid4().hex[:8]}"
    return Framework(profile, plugins, {}, FrameworkHandle(FakeApiClient(), Snapshot()))


def test_status_label_is_kubes_code_string() -> None:
    # Regression: the label was Code.name.title(), "Unschedulable_And_Unresolvable".
    assert metrics.code_label(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)) == "UnschedulableAndUnresolvable"
    assert metrics.code_label(None) == "Success"
    fw = framework(preFilter=[Pre("P", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("no",)))])
    fw.run_pre_filter(CycleState(), POD, [info("n")])
    count = "scheduler_framework_extension_point_duration_seconds_count"
    labels = {"extension_point": "PreFilter", "profile": fw.profile_name}
    assert sample(count, status="UnschedulableAndUnresolvable", **labels) == 1
    assert sample(count, status="Unschedulable_And_Unresolvable", **labels) == 0


def test_pre_enqueue_is_labelled_success_whatever_it_says_as_kube_does() -> None:
    fw = framework(preEnqueue=[Gate()])
    assert fw.run_pre_enqueue(POD) is not None
    count = "scheduler_framework_extension_point_duration_seconds_count"
    assert sample(count, extension_point="PreEnqueue", status="Success", profile=fw.profile_name) == 1


async def test_every_extension_point_kube_times_is_timed() -> None:
    fw = framework(reserve=[], permit=[], preBind=[], postBind=[])
    state, name = CycleState(), fw.profile_name
    assert fw.run_reserve(state, POD, "n") is None
    assert fw.run_permit(state, POD, "n") is None
    assert await fw.run_pre_bind(state, POD, "n") is None
    assert await fw.run_bind(state, POD, "n") is None
    fw.run_post_bind(state, POD, "n")
    fw.run_unreserve(state, POD, "n")
    count = "scheduler_framework_extension_point_duration_seconds_count"
    for point in ("Reserve", "Permit", "PreBind", "Bind", "PostBind", "Unreserve"):
        assert sample(count, extension_point=point, status="Success", profile=name) == 1, point


def test_plugin_evaluations_count_as_kubes_per_node_loop_calls_plugins() -> None:
    fw = framework(
        preFilter=[Pre("Skipper", Status(Code.SKIP)), Pre("Runner")],
        filter=[Filt("First", rejects={"b"}), Filt("Skipped", rejects=set()), Filt("Second", rejects=set())],
        score=[Scorer("S")],
    )
    state, nodes = CycleState(), [info("a"), info("b"), info("c")]
    fw.run_pre_filter(state, POD, nodes)
    state.skip_filter_plugins.add("Skipped")
    # Two nodes passed every Filter plugin; First rejected the third, so nothing after it saw that one.
    fw.record_filter_evaluations(state, 2, {"b": Status.unresolvable("no", plugin="First")})
    fw.score_nodes(state, POD, [nodes[0], nodes[2]])
    total = "scheduler_plugin_evaluation_total"
    labels = {"profile": fw.profile_name}
    assert sample(total, plugin="Skipper", extension_point="PreFilter", **labels) == 0
    assert sample(total, plugin="Runner", extension_point="PreFilter", **labels) == 1
    assert sample(total, plugin="First", extension_point="Filter", **labels) == 3
    assert sample(total, plugin="Skipped", extension_point="Filter", **labels) == 0
    assert sample(total, plugin="Second", extension_point="Filter", **labels) == 2
    assert sample(total, plugin="S", extension_point="Score", **labels) == 2


async def test_a_cycle_counts_filter_evaluations_whichever_form_ran() -> None:
    sched, inf = setup()
    for name, cpu in (("a", "4"), ("small", "1"), ("c", "4")):
        inf.on_node("ADDED", raw_node(name, cpu=cpu))
    labels = {"plugin": "NodeResourcesFit", "extension_point": "Filter", "profile": "secondary-scheduler"}
    before = sample("scheduler_plugin_evaluation_total", **labels)
    inf.on_pod("ADDED", raw_pod("p", cpu="2"))
    await run_queue(sched)
    assert sample("scheduler_plugin_evaluation_total", **labels) == before + 3


def test_plugin_durations_only_in_sampled_cycles_and_after_a_flush() -> None:
    plugin = f"Timed{uuid.uuid4().hex[:6]}"
    fw = framework(filter=[Filt(plugin, rejects={"b"})])
    count = "scheduler_plugin_execution_duration_seconds_count"
    quiet = CycleState()
    fw.run_filter(quiet, POD, info("a"))
    metrics.recorder.flush()
    assert sample(count, plugin=plugin, extension_point="Filter", status="Success") == 0
    sampled = CycleState()
    sampled.record_plugin_metrics = True
    assert sampled.clone().record_plugin_metrics
    fw.run_filter(sampled, POD, info("a"))
    fw.run_filter(sampled, POD, info("b"))
    assert sample(count, plugin=plugin, extension_point="Filter", status="Success") == 0  # still buffered
    metrics.recorder.flush()
    assert sample(count, plugin=plugin, extension_point="Filter", status="Success") == 1
    assert sample(count, plugin=plugin, extension_point="Filter", status="UnschedulableAndUnresolvable") == 1


def test_async_recorder_drops_what_exceeds_its_buffer_as_upstream() -> None:
    recorder = metrics.AsyncRecorder(size=2)
    plugin = f"Buffered{uuid.uuid4().hex[:6]}"
    for _ in range(5):
        recorder.observe_plugin_duration("Score", plugin, None, 0.001)
    recorder.flush()
    labels = {"plugin": plugin, "extension_point": "Score", "status": "Success"}
    assert sample("scheduler_plugin_execution_duration_seconds_count", **labels) == 2


def test_about_ten_percent_of_cycles_are_sampled() -> None:
    sampled = sum(metrics.should_record_plugin_metrics() for _ in range(20_000))
    assert 1600 < sampled < 2400


def raw_node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def raw_pod(name: str, cpu: str = "1", node: str = "", gated: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "secondary-scheduler",
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/hold"}]
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def setup() -> tuple[Scheduler, Informers]:
    sched = build_scheduler(default_config(), full_registry(), FakeApiClient(), {})
    sched.rng = random.Random(3)
    return sched, Informers(sched)


async def run_queue(sched: Scheduler) -> None:
    while (queued := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(queued)
        await asyncio.sleep(0)
    await sched.drain()


async def test_unschedulable_pods_and_in_flight_events_are_read_from_the_queue() -> None:
    sched, inf = setup()
    inf.on_node("ADDED", raw_node("small", cpu="2"))
    inf.on_pod("ADDED", raw_pod("huge", cpu="64"))
    inf.on_pod("ADDED", raw_pod("held", gated=True))
    popped = sched.queue.pop_nowait()
    assert popped is not None
    assert sample("scheduler_inflight_events", event="PodPopped") == 1
    inf.on_node("ADDED", raw_node("other", cpu="2"))  # kept for the in-flight pod
    assert sample("scheduler_inflight_events", event="NodeAdd") == 1
    sched.schedule_one(popped)
    await sched.drain()
    assert sample("scheduler_inflight_events", event="PodPopped") == 0
    profile = "secondary-scheduler"
    assert sample("scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=profile) == 1
    assert sample("scheduler_unschedulable_pods", plugin="SchedulingGates", profile=profile) == 1
    inf.on_pod("DELETED", raw_pod("huge", cpu="64"))
    # A series once seen stays, at 0, as a Go gauge decremented to nothing.
    labels = {"plugin": "NodeResourcesFit", "profile": profile}
    assert metrics.REGISTRY.get_sample_value("scheduler_unschedulable_pods", labels) == 0


async def test_a_bound_pod_counts_the_algorithm_the_binding_goroutine_and_the_events() -> None:
    sched, inf = setup()
    algorithm = "scheduler_scheduling_algorithm_duration_seconds_count"
    before = sample(algorithm), sample("scheduler_event_handling_duration_seconds_count", event="UnscheduledPodAdd")
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    assert sample(algorithm) == before[0] + 1
    assert sample("scheduler_event_handling_duration_seconds_count", event="UnscheduledPodAdd") == before[1] + 1
    assert sample("scheduler_goroutines", operation="binding") == 0  # back to 0 once the binding cycle ended
    bound = sample("scheduler_event_handling_duration_seconds_count", event="AssignedPodAdd")
    left = sample("scheduler_event_handling_duration_seconds_count", event="UnscheduledPodDelete")
    inf.on_pod("MODIFIED", raw_pod("p", node="n"))
    # kube's two handlers: the pod leaves the unscheduled set (a delete) and joins the assigned one.
    assert sample("scheduler_event_handling_duration_seconds_count", event="AssignedPodAdd") == bound + 1
    assert sample("scheduler_event_handling_duration_seconds_count", event="UnscheduledPodDelete") == left + 1


async def test_a_pod_flushed_from_the_unschedulable_pool_then_bound_is_counted() -> None:
    sched, inf = setup()
    inf.on_node("ADDED", raw_node("n", cpu="1"))
    inf.on_pod("ADDED", raw_pod("waits", cpu="2"))
    await run_queue(sched)
    assert sched.queue.where("uid-waits") == "unschedulable"
    # The node grows without an event reaching the queue (as after a lost watch event)...
    sched.cache.add_or_update_node(Node.from_raw(raw_node("n", cpu="4") | {"metadata": {"name": "n"}}))
    sched.queue.max_in_unschedulable = 0
    sched.queue.initial_backoff = sched.queue.max_backoff = 0
    before = sample("scheduler_pod_scheduled_after_flush_total")
    assert sched.queue.flush_unschedulable_leftover() == 1
    await run_queue(sched)
    assert sched.cache.get_pod("uid-waits") is not None
    assert sample("scheduler_pod_scheduled_after_flush_total") == before + 1


def test_cache_size_counts_assumed_pods_among_pods_as_kube() -> None:
    cache = Cache()
    cache.add_or_update_node(Node.from_raw(raw_node("n")))
    cache.assume_pod(Pod.from_raw(raw_pod("p", node="n")))
    # Regression: "pods" left the assumed ones out (kube's counts every pod state).
    assert cache.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 1}


def test_exposition_has_no_created_series_and_nothing_of_ours_under_kubes_names() -> None:
    text = generate_latest(metrics.REGISTRY).decode()
    assert "_created" not in text
    assert "scheduler_binding_errors" not in text
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names))  # no duplicate families
    assert "process_resident_memory_bytes" in names
    assert "secondary_scheduler_binding_cycle_failures_total" in names


def test_buckets_are_the_same_floats_as_prometheus_go() -> None:
    # Go multiplies step by step; 1e-05 * 1.5**i differs from that in the last digit for 18 of the 20.
    step, go_buckets = 0.00001, []
    for _ in range(20):
        go_buckets.append(step)
        step *= 1.5
    assert metrics.plugin_execution_duration._upper_bounds[:-1] == go_buckets
    assert go_buckets != [0.00001 * 1.5**i for i in range(20)]


def test_deleting_another_schedulers_pending_pod_is_no_event_of_ours() -> None:
    _, inf = setup()
    label = {"event": "UnscheduledPodDelete"}
    before = sample("scheduler_event_handling_duration_seconds_count", **label)
    foreign = raw_pod("foreign")
    foreign["spec"]["schedulerName"] = "default-scheduler"
    inf.on_pod("DELETED", foreign)
    # Regression: every deleted unscheduled pod was observed; kube's handler only sees its own.
    assert sample("scheduler_event_handling_duration_seconds_count", **label) == before
    inf.on_pod("DELETED", raw_pod("mine"))
    assert sample("scheduler_event_handling_duration_seconds_count", **label) == before + 1


async def test_a_request_that_gets_no_response_counts_as_error_like_client_go() -> None:
    (port,) = free_ports(1)  # nothing listens there
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    client = HttpApiClient(Connection(configuration))
    labels = {"code": "<error>", "method": "GET", "host": f"127.0.0.1:{port}"}
    try:
        with pytest.raises(ApiError):
            await client.request("GET", "/api")
    finally:
        await client.close()
    assert sample("rest_client_requests_total", **labels) == 1
    duration = {"verb": "GET", "host": f"127.0.0.1:{port}"}
    assert sample("rest_client_request_duration_seconds_count", **duration) == 1
    assert sample("rest_client_response_size_bytes_count", **duration) == 0  # no response, no size


def test_pre_enqueue_plugin_durations_are_sampled_per_pod() -> None:
    gate = Gate()
    gate.name = f"Gate{uuid.uuid4().hex[:6]}"
    fw = framework(preEnqueue=[gate])
    for _ in range(500):
        fw.run_pre_enqueue(POD)
    metrics.recorder.flush()
    labels = {"plugin": gate.name, "extension_point": "PreEnqueue", "status": "UnschedulableAndUnresolvable"}
    assert 20 < sample("scheduler_plugin_execution_duration_seconds_count", **labels) < 90  # one in ten


class Extended:
    def __init__(self, name: str) -> None:
        self.name = name

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def pre_filter_extensions(self) -> Extended:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None:
        return None

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None:
        return None


def test_pre_filter_extension_durations_in_sampled_cycles() -> None:
    plugin = Extended(f"Ext{uuid.uuid4().hex[:6]}")
    fw = framework(preFilter=[plugin])
    state = CycleState()
    state.record_plugin_metrics = True
    fw.run_pre_filter_add_pod(state, POD, POD, info("n"))
    fw.run_pre_filter_remove_pod(state, POD, POD, info("n"))
    metrics.recorder.flush()
    for point in ("PreFilterExtensionAddPod", "PreFilterExtensionRemovePod"):
        labels = {"plugin": plugin.name, "extension_point": point, "status": "Success"}
        assert sample("scheduler_plugin_execution_duration_seconds_count", **labels) == 1, point


async def test_a_rejected_pod_counts_for_its_plugin_until_it_is_tried_again() -> None:
    sched, inf = setup()
    inf.on_node("ADDED", raw_node("small", cpu="1"))
    inf.on_pod("ADDED", raw_pod("big", cpu="2"))
    await run_queue(sched)
    labels = {"plugin": "NodeResourcesFit", "profile": "secondary-scheduler"}
    assert sample("scheduler_unschedulable_pods", **labels) == 1
    # A node that fits moves it on (backoffQ or activeQ): kube still counts it until it is popped.
    inf.on_node("ADDED", raw_node("large", cpu="4"))
    assert sched.queue.where("uid-big") in ("backoff", "active")
    assert sample("scheduler_unschedulable_pods", **labels) == 1
    popped = sched.queue.pop_nowait()
    assert popped is not None
    assert sample("scheduler_unschedulable_pods", **labels) == 0
