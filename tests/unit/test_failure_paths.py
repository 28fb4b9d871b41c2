"""Failure paths of the scheduling and binding cycles with the fake client: plugins that raise,
a Permit rejection, a bounded drain, a pod field no plugin can parse, a deposed leader."""

from __future__ import annotations

import asyncio
import random
from collections.abc import MutableMapping, Sequence
from typing import Any

import structlog

from plugins.prioritysort import PrioritySort
from scheduler.api.fake import FakeApiClient
from scheduler.cache import Cache, Snapshot
from scheduler.framework.interface import Plugin
from scheduler.framework.runtime import Framework, FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, QueuedPodInfo, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.queue import PriorityQueue
from scheduler.queue.scheduling_queue import QueueProfile
from scheduler.schedule_one import Scheduler
from tests.unit.test_schedule_one import raw_node, raw_pod, run_queue, setup

NAME = "secondary-scheduler"


class Boom(Exception):
    pass


class CrashySort(PrioritySort):
    """Raises when comparing against a pod named "sort-bomb"."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if "sort-bomb" in (a.pod.name, b.pod.name):
            raise Boom("cannot compare")
        return super().less(a, b)


class CrashyPreEnqueue:
    name = "CrashyPreEnqueue"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if pod.name == "enqueue-bomb":
            raise Boom("pre-enqueue blew up")
        return None


class CrashyUnreserve:
    name = "CrashyUnreserve"

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise Boom("unreserve blew up")


class CrashyPostBind:
    name = "CrashyPostBind"

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise Boom("post-bind blew up")


class FailingBinder:
    """Binds through the fake client, except pods named "bind-fails"."""

    name = "FailingBinder"

    def __init__(self, client: FakeApiClient) -> None:
        self.client = client

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if pod.name == "bind-fails":
            return Status.as_error(RuntimeError("the apiserver said no"), self.name)
        await self.client.bind(pod, node_name)
        return None


class CrashyExtensions:
    name = "CrashyExtensions"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[None, None]:
        return None, None

    def pre_filter_extensions(self) -> CrashyExtensions:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None:
        raise Boom("add-pod blew up")

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None:
        raise Boom("remove-pod blew up")


class Waiter:
    name = "Waiter"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), 60


def scheduler_with(client: FakeApiClient, **points: Sequence[Plugin]) -> tuple[Scheduler, Informers]:
    plugins: dict[str, Sequence[Plugin]] = {"queueSort": [PrioritySort()], "bind": [FailingBinder(client)], **points}
    fw = Framework(NAME, plugins, {}, FrameworkHandle(client, Snapshot()))
    queue = PriorityQueue({NAME: QueueProfile(fw.less, fw.run_pre_enqueue, fw.events)})
    sched = Scheduler({NAME: fw}, queue, Cache(), client, rng=random.Random(1))
    return sched, Informers(sched, workloads=fw.handle.workloads)


def crash_logs(logs: Sequence[MutableMapping[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["extension_point"], e["plugin"], e["pod"]) for e in logs if e["event"] == "plugin raised an exception"]


async def test_plugins_that_raise_never_stop_the_loop_and_are_logged_once() -> None:
    client = FakeApiClient()
    sched, inf = scheduler_with(
        client,
        queueSort=[CrashySort()],
        preEnqueue=[CrashyPreEnqueue()],
        reserve=[CrashyUnreserve()],
        postBind=[CrashyPostBind()],
    )
    inf.on_node("ADDED", raw_node("n1"))
    with structlog.testing.capture_logs() as logs:
        for name in ("a", "sort-bomb", "enqueue-bomb", "bind-fails", "c"):
            inf.on_pod("ADDED", raw_pod(name))  # must not raise out of the informer handler
        await run_queue(sched)
        # The failed pod comes back after its backoff; its Unreserve raises again, and is not logged again.
        info = sched.queue.get("uid-bind-fails")
        assert info is not None
        sched.schedule_one(info)
        await sched.drain()
    assert client.bindings == {"ns/a": "n1", "ns/sort-bomb": "n1", "ns/c": "n1"}
    assert sched.queue.where("uid-enqueue-bomb") == "gated"  # held, as kube holds a pod its PreEnqueue fails
    assert sched.queue.where("uid-bind-fails") == "backoff"
    assert not sched.cache.is_assumed("uid-bind-fails")
    # PostBind raising after the Binding was written must not undo the bind.
    assert sched.cache.is_assumed("uid-a")
    crashes = crash_logs(logs)
    assert sorted(set(crashes)) == sorted(crashes)  # each (point, plugin, pod) once
    assert ("PreEnqueue", "CrashyPreEnqueue", "ns/enqueue-bomb") in crashes
    assert ("Unreserve", "CrashyUnreserve", "ns/bind-fails") in crashes
    assert any(e["event"] == "PostBind plugin failed" and e["pod"] == "ns/a" for e in logs)
    assert any(point == "QueueSort" for point, _, _ in crashes)


def test_prefilter_extensions_that_raise_become_error_statuses() -> None:
    client = FakeApiClient()
    ext = CrashyExtensions()
    fw = Framework(NAME, {"queueSort": [PrioritySort()], "bind": [FailingBinder(client)], "preFilter": [ext]}, {},
                   FrameworkHandle(client, Snapshot()))  # fmt: skip
    pod = Pod.from_raw(raw_pod("p"))
    other = Pod.from_raw(raw_pod("q", node="n1"))
    node = NodeInfo()
    with structlog.testing.capture_logs() as logs:
        added = fw.run_pre_filter_add_pod(CycleState(), pod, other, node)
        removed = fw.run_pre_filter_remove_pod(CycleState(), pod, other, node)
        fw.run_pre_filter_add_pod(CycleState(), pod, other, node)
    assert added is not None and added.code == Code.ERROR and added.plugin == "CrashyExtensions"
    assert "add-pod blew up" in added.message
    assert removed is not None and removed.code == Code.ERROR and "remove-pod blew up" in removed.message
    assert len(crash_logs(logs)) == 2


async def test_permit_rejected_pod_is_not_woken_by_its_own_undo() -> None:
    client = FakeApiClient()
    sched, inf = scheduler_with(client, permit=[Waiter()])
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)
    await asyncio.sleep(0)
    fw = sched.frameworks[NAME]
    fw.handle.reject_waiting_pod("uid-p", "Waiter", "not now")
    await sched.drain()
    # Rejected by a plugin: it waits for a cluster event, not for the room its own undo freed.
    assert sched.queue.where("uid-p") == "unschedulable"
    assert client.bindings == {}


async def test_drain_is_bounded_and_cancels_what_is_left() -> None:
    sched, _, _ = setup()
    never = asyncio.Event()
    sched.spawn(never.wait())
    await asyncio.wait_for(sched.drain(grace=0.05), timeout=5)
    assert not sched._tasks


async def test_unparseable_preferred_term_is_logged_once_per_pod_without_traceback() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_node("ADDED", raw_node("n2"))
    raw = raw_pod("odd")
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1.5x"]}]}}
            ]
        }
    }
    inf.on_pod("ADDED", raw)
    inf.on_pod("ADDED", raw_pod("fine"))
    with structlog.testing.capture_logs() as logs:
        await run_queue(sched)
        for _ in range(3):  # retries after backoff fail the same way
            info = sched.queue.get("uid-odd")
            assert info is not None
            sched.schedule_one(info)
        await sched.drain()
    failures = [e for e in logs if e["event"] == "scheduling cycle failed"]
    assert len(failures) == 1, failures
    assert failures[0]["pod"] == "ns/odd"
    assert "1.5x" in failures[0]["error"] and "matchExpressions[0].values[0]" in failures[0]["error"]
    assert not failures[0].get("exc_info")
    assert "ns/fine" in client.bindings


async def test_a_deposed_leader_drops_binding_cycles_before_bind_and_writes_nothing() -> None:
    client = FakeApiClient()
    sched, inf = scheduler_with(client, permit=[Waiter()])
    inf.on_node("ADDED", raw_node("n1"))
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)
    await asyncio.sleep(0)
    leading = False
    sched.may_write = lambda: leading
    sched.frameworks[NAME].handle.allow_waiting_pod("uid-p", "Waiter")
    await sched.drain()
    assert client.bindings == {}
    assert client.events == [] and client.conditions == {}
    assert not sched.cache.is_assumed("uid-p")


def test_an_unparseable_node_or_bound_pod_is_logged_once_however_often_it_is_updated() -> None:
    """A node heartbeat or a bound pod's status update re-sends the same bad object: one line each,
    again only when the error changes or the object comes back after a delete."""
    _, inf, _ = setup()
    node = raw_node("odd", cpu="lots")
    bound = raw_pod("bound", node="n1")
    bound["spec"]["priority"] = "high"
    with structlog.testing.capture_logs() as logs:
        for version in range(5):
            node["metadata"]["resourceVersion"] = str(version)
            bound["metadata"]["resourceVersion"] = str(version)
            inf.on_node("MODIFIED", node)
            inf.on_pod("MODIFIED", bound)
        inf.on_node("DELETED", node)
        inf.on_pod("DELETED", bound)
        inf.on_node("ADDED", node)
        inf.on_pod("ADDED", bound)
    nodes = [e for e in logs if e["event"] == "ignoring node that cannot be parsed"]
    pods = [e for e in logs if e["event"] == "ignoring unparseable pod"]
    assert len(nodes) == 2 and "lots" in nodes[0]["error"], nodes
    assert len(pods) == 2 and "spec.priority" in pods[0]["error"], pods
