"""Framework support for preemption: absent-node statuses reach PostFilter, filtering with
nominated pods lives in the framework, and a nomination is neither counted twice nor kept
after the apiserver cleared it."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.framework.types import Code, CycleState, NodeToStatus, Status
from scheduler.model.objects import Pod
from tests.unit.test_schedule_one import NAME, raw_node, raw_pod, run_queue, setup


class RecordingPostFilter:
    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[NodeToStatus] = []

    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        self.seen.append(node_to_status)
        return None, Status.unschedulable("recorded")


def pinned(name: str, node: str, cpu: str) -> dict[str, Any]:
    raw = raw_pod(name, cpu=cpu)
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    return raw


async def test_post_filter_sees_the_status_of_nodes_a_pre_filter_left_out() -> None:
    sched, inf, _ = setup()
    recorder = RecordingPostFilter()
    sched.frameworks[NAME].post_filter_plugins = [recorder]
    for i in range(3):
        inf.on_node("ADDED", raw_node(f"n{i}", cpu="1"))
    inf.on_pod("ADDED", raw_pod("busy", cpu="500m", node="n0", scheduler="default-scheduler"))
    inf.on_pod("ADDED", pinned("pinned", "n0", cpu="1"))
    await run_queue(sched)
    (statuses,) = recorder.seen
    assert statuses.get("n0").code == Code.UNSCHEDULABLE
    assert statuses.get("n0").reasons == ("Insufficient cpu",)
    for absent in ("n1", "n2"):
        assert statuses.get(absent).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert statuses.get(absent).reasons == ("node(s) didn't satisfy plugin(s) [NodeAffinity]",)
    sched.cache.update_snapshot(sched.snapshot)
    assert [n.name for n in statuses.nodes_for_code(sched.snapshot.list(), Code.UNSCHEDULABLE)] == ["n0"]


async def test_post_filter_message_is_appended_as_the_plugin_wrote_it() -> None:
    sched, inf, client = setup()
    sched.frameworks[NAME].post_filter_plugins = [RecordingPostFilter()]
    inf.on_node("ADDED", raw_node("n0", cpu="1"))
    inf.on_pod("ADDED", raw_pod("big", cpu="2"))
    await run_queue(sched)
    # kube-scheduler adds the PostFilter message after a space, with no punctuation of its own.
    assert client.conditions["ns/big"]["message"] == "0/1 nodes are available: 1 Insufficient cpu. recorded"


def test_framework_filters_with_nominated_pods_of_higher_or_equal_priority() -> None:
    sched, inf, _ = setup()
    inf.on_node("ADDED", raw_node("only", cpu="2"))
    fw = sched.frameworks[NAME]
    sched.nominator.add(Pod.from_raw(raw_pod("vip", cpu="1500m", priority=100)), "only")
    sched.cache.update_snapshot(sched.snapshot)
    node = sched.snapshot.get("only")
    assert node is not None
    for name, priority, fits in (("low", 0, False), ("higher", 200, True)):
        pod = Pod.from_raw(raw_pod(name, cpu="1", priority=priority))
        state = CycleState()
        fw.run_pre_filter(state, pod, sched.snapshot.list())
        status = fw.run_filter_with_nominated(state, pod, node)
        assert (status is None) == fits, name
        if not fits:
            assert status is not None and status.reasons == ("Insufficient cpu",)
    # The handle reaches the same framework (what a PostFilter plugin calls for its dry runs).
    assert fw.handle.framework(NAME) is fw


def test_nominated_pods_placed_on_a_node_are_reused_until_the_nomination_changes() -> None:
    """The copy of a nominated pod bound to its node is made once per (pod object, node), not per
    filter call; a new object for the pod (an update) makes a new copy, with the new requests."""
    sched, inf, _ = setup()
    inf.on_node("ADDED", raw_node("only", cpu="2"))
    fw = sched.frameworks[NAME]
    vip = Pod.from_raw(raw_pod("vip", cpu="1500m", priority=100))
    sched.nominator.add(vip, "only")
    sched.cache.update_snapshot(sched.snapshot)
    node = sched.snapshot.get("only")
    assert node is not None

    def verdict(cpu: str) -> Status | None:
        pod = Pod.from_raw(raw_pod("incoming", cpu=cpu, priority=0))
        state = CycleState()
        fw.run_pre_filter(state, pod, sched.snapshot.list())
        return fw.run_filter_with_nominated(state, pod, node)

    assert verdict("1") is not None  # 1500m nominated + 1 > 2
    placed = fw._placed_on(vip, "only")
    assert placed.node_name == "only" and placed is fw._placed_on(vip, "only")
    assert verdict("400m") is None
    smaller = Pod.from_raw(raw_pod("vip", cpu="500m", priority=100))
    sched.nominator.add(smaller, "only")  # the nominated pod updated: a new object
    assert verdict("1") is None  # 500m nominated + 1 fits: the old copy was not used
    assert fw._placed_on(smaller, "only") is not placed


async def test_an_assumed_pod_is_not_also_counted_as_nominated() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("only", cpu="2"))
    vip = raw_pod("vip", cpu="1", priority=100)
    vip["status"]["nominatedNodeName"] = "only"
    inf.on_pod("ADDED", vip)
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)  # assumed on "only"; the bind has not run yet
    assert sched.cache.is_assumed("uid-vip")
    assert sched.nominator.nominated_node("uid-vip") == ""
    # A status update of the still-unbound pod arrives while it is assumed.
    updated = copy.deepcopy(vip)
    updated["metadata"]["resourceVersion"] = "2"
    inf.on_pod("MODIFIED", updated)
    assert sched.nominator.nominated_node("uid-vip") == ""
    inf.on_pod("ADDED", raw_pod("low", cpu="1", priority=0))
    await run_queue(sched)
    # 1 cpu assumed + 1 cpu fits in 2: counted twice, "low" would not fit.
    assert client.bindings == {"ns/vip": "only", "ns/low": "only"}


def test_clearing_nominated_node_name_deletes_the_nomination() -> None:
    sched, inf, _ = setup()
    inf.on_node("ADDED", raw_node("only", cpu="1"))
    raw = raw_pod("p", cpu="2")
    raw["status"]["nominatedNodeName"] = "only"
    inf.on_pod("ADDED", raw)
    assert sched.nominator.nominated_node("uid-p") == "only"
    cleared = copy.deepcopy(raw)
    cleared["metadata"]["resourceVersion"] = "2"
    del cleared["status"]["nominatedNodeName"]
    inf.on_pod("MODIFIED", cleared)
    assert sched.nominator.nominated_node("uid-p") == ""
    assert sched.nominator.pods_for_node("only") == []


def test_in_memory_nomination_survives_updates_that_never_carried_one() -> None:
    sched, inf, _ = setup()
    raw = raw_pod("p", cpu="2")
    inf.on_pod("ADDED", raw)
    sched.nominator.add(sched.pending_pods["uid-p"], "n0")  # nominated, status patch not seen yet
    newer = copy.deepcopy(raw)
    newer["metadata"]["resourceVersion"] = "2"
    inf.on_pod("MODIFIED", newer)
    assert sched.nominator.nominated_node("uid-p") == "n0"
