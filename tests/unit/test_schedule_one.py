"""schedule_one end to end against the in-memory fake ApiClient."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.workload import registry_value
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.cache import PlacementNodes
from scheduler.config import default_config, parse_config
from scheduler.framework.types import CycleState, NodeInfo
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler, num_feasible_nodes_to_find, select_best

NAME = "secondary-scheduler"
NO_VICTIMS_ON_ONE_NODE = (
    "0/1 nodes are available: 1 Insufficient cpu. "
    "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)


def raw_node(name: str, cpu: str = "4", mem: str = "32Gi", pods: str = "110") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": pods}},
    }


def raw_pod(name: str, cpu: str = "1", scheduler: str = NAME, node: str = "", priority: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}],
        },
        "status": {"phase": "Pending"},
    }


def setup(config_raw: dict[str, Any] | None = None) -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    config = parse_config(config_raw) if config_raw else default_config()
    sched = build_scheduler(config, full_registry(), client, {})
    sched.rng = random.Random(7)
    return sched, Informers(sched), client


async def run_queue(sched: Scheduler) -> None:
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await sched.drain()


def test_num_feasible_nodes_to_find_is_adaptive() -> None:
    assert num_feasible_nodes_to_find(None, 50) == 50
    assert num_feasible_nodes_to_find(0, 1000) == 1000 * 42 // 100
    assert num_feasible_nodes_to_find(0, 5000) == 5000 * 10 // 100
    assert num_feasible_nodes_to_find(0, 100_000) == 100_000 * 5 // 100
    assert num_feasible_nodes_to_find(10, 500) == 100  # never fewer than 100
    assert num_feasible_nodes_to_find(100, 500) == 500


def test_select_best_picks_the_best_and_breaks_ties_fairly() -> None:
    rng = random.Random(1)
    assert select_best(np.array([1, 5, 3]), rng) == 1
    picks = [select_best(np.array([5, 5, 1]), rng) for _ in range(400)]
    assert picks.count(2) == 0
    assert 150 < picks.count(0) < 250


async def test_binds_to_least_allocated_node_and_reports_event() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("busy"))
    inf.on_node("ADDED", raw_node("idle"))
    inf.on_pod("ADDED", raw_pod("existing", cpu="3", node="busy", scheduler="default-scheduler"))
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    assert client.bindings == {"ns/p": "idle"}
    scheduled = [e for e in client.events if e.reason == "Scheduled"]
    assert [e.message for e in scheduled] == ["Successfully assigned ns/p to idle"]
    assert sched.cache.is_assumed("uid-p")


async def test_fit_error_message_and_condition() -> None:
    sched, inf, client = setup()
    for i in range(3):
        inf.on_node("ADDED", raw_node(f"n{i}", cpu="1"))
    inf.on_node("ADDED", raw_node("full", cpu="8", pods="0"))
    inf.on_pod("ADDED", raw_pod("big", cpu="2"))
    await run_queue(sched)
    message = (
        "0/4 nodes are available: 1 Too many pods, 3 Insufficient cpu. preemption: 0/4 nodes are available: "
        "1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    assert client.conditions["ns/big"]["reason"] == "Unschedulable"
    assert client.conditions["ns/big"]["message"] == message
    assert client.failed_scheduling() == [message]
    assert sched.queue.where("uid-big") == "unschedulable"


def attempts(result: str) -> float:
    return registry_value(metrics.REGISTRY, "scheduler_schedule_attempts_total", result=result, profile=NAME)


async def test_no_nodes_is_unschedulable_and_backs_off() -> None:
    # kube 1.37: ErrNoNodesAvailable becomes an UnschedulableAndUnresolvable status (reason Unschedulable,
    # result "unschedulable"), with no rejecting plugin, so the pod waits in the error backoffQ.
    sched, inf, client = setup()
    before = attempts("unschedulable"), attempts("error")
    inf.on_pod("ADDED", raw_pod("p"))
    await run_queue(sched)
    assert client.conditions["ns/p"]["reason"] == "Unschedulable"
    assert client.conditions["ns/p"]["message"] == "no nodes available to schedule pods"
    assert client.failed_scheduling() == ["no nodes available to schedule pods"]
    assert (attempts("unschedulable"), attempts("error")) == (before[0] + 1, before[1])
    assert sched.queue.where("uid-p") == "backoff"
    info = sched.queue.get("uid-p")
    assert info is not None and info.error_backoff and not info.unschedulable_plugins


async def test_other_schedulers_pods_are_ignored_but_counted() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n", cpu="2"))
    inf.on_pod("ADDED", raw_pod("theirs-pending", scheduler="default-scheduler"))
    inf.on_pod("ADDED", raw_pod("theirs-bound", cpu="1500m", scheduler="default-scheduler", node="n"))
    inf.on_pod("ADDED", raw_pod("mine", cpu="1"))
    await run_queue(sched)
    assert client.bindings == {}
    assert "ns/theirs-pending" not in client.conditions
    assert client.conditions["ns/mine"]["message"] == NO_VICTIMS_ON_ONE_NODE


async def test_failed_bind_forgets_the_pod_and_requeues_it() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod("p"))
    client.bind_errors["ns/p"] = ApiError(500, "etcd is sad", "InternalError")
    await run_queue(sched)
    assert client.bindings == {}
    assert not sched.cache.is_assumed("uid-p")
    info = sched.cache.get_node_info("n")
    assert info is not None
    assert info.requested.milli_cpu == 0
    assert sched.queue.where("uid-p") == "backoff"
    assert client.conditions["ns/p"]["reason"] == "SchedulerError"


async def test_pod_deleted_before_bind_leaves_nothing_behind() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    client.bind_errors["ns/p"] = ApiError(404, 'pods "p" not found', "NotFound")
    sched.schedule_one(info)  # assumed; binding task spawned but not yet run
    assert sched.cache.is_assumed("uid-p")
    inf.on_pod("DELETED", raw_pod("p"))
    await sched.drain()
    assert not sched.cache.is_assumed("uid-p")
    assert sched.cache.get_pod("uid-p") is None
    assert sched.queue.where("uid-p") is None
    assert "ns/p" not in client.conditions


async def test_pod_exists_follows_the_informers_not_the_assume() -> None:
    """What VolumeBinding's PreBind wait asks (kube's pod lister): an assumed pod exists until the
    informer deletes it; a pod bound by the informer's view exists; one never seen does not."""
    sched, inf, _ = setup()
    inf.on_node("ADDED", raw_node("n"))
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.pop_nowait()
    assert info is not None
    pod = info.pod
    sched.schedule_one(info)
    assert sched.cache.is_assumed("uid-p") and sched.pod_exists(pod)
    inf.on_pod("DELETED", raw_pod("p"))
    assert sched.cache.is_assumed("uid-p")  # still assumed until its binding cycle ends
    assert not sched.pod_exists(pod)
    await sched.drain()
    inf.on_pod("ADDED", raw_pod("q", node="n"))
    bound = sched.cache.get_pod("uid-q")
    assert bound is not None and sched.pod_exists(bound)
    assert all(fw.handle.pod_exists(bound) for fw in sched.frameworks.values())


async def test_node_add_requeues_a_pod_that_now_fits() -> None:
    sched, inf, _ = setup()
    inf.on_node("ADDED", raw_node("small", cpu="1"))
    inf.on_pod("ADDED", raw_pod("p", cpu="2"))
    await run_queue(sched)
    assert sched.queue.where("uid-p") == "unschedulable"
    inf.on_node("ADDED", raw_node("big", cpu="8"))
    assert sched.queue.where("uid-p") in ("active", "backoff")


async def test_round_robin_start_index_moves_across_cycles() -> None:
    sched, inf, client = setup(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 50,
        }
    )
    for i in range(200):
        inf.on_node("ADDED", raw_node(f"n{i:03d}"))
    inf.on_pod("ADDED", raw_pod("first"))
    await run_queue(sched)
    # 50% of 200 nodes = 100 feasible nodes looked at, all of them fit: the next cycle starts at 100.
    assert sched.next_start_node_index == 100
    assert client.bindings["ns/first"] < "n100"
    inf.on_pod("ADDED", raw_pod("second"))
    await run_queue(sched)
    assert client.bindings["ns/second"] >= "n100"
    assert sched.next_start_node_index == 0


async def test_nominated_higher_priority_pod_keeps_its_room() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("only", cpu="2"))
    nominated = raw_pod("vip", cpu="1500m", priority=100)
    nominated["status"]["nominatedNodeName"] = "only"
    inf.on_pod("ADDED", nominated)
    sched.queue.delete("uid-vip")  # keep the VIP waiting (as if backing off) while others try
    inf.on_pod("ADDED", raw_pod("low", cpu="1", priority=0))
    await run_queue(sched)
    # With the VIP counted on its nominated node, the low-priority pod does not fit.
    assert "ns/low" not in client.bindings
    assert client.conditions["ns/low"]["message"] == NO_VICTIMS_ON_ONE_NODE
    # An equal-or-higher priority pod is filtered without the nomination too, but must fit with it first.
    inf.on_pod("ADDED", raw_pod("peer", cpu="500m", priority=100))
    await run_queue(sched)
    assert client.bindings.get("ns/peer") == "only"


def test_replicaset_pods_get_system_default_spreading() -> None:
    sched, inf, _ = setup()
    for i in range(3):
        node = raw_node(f"n{i}")
        node["metadata"]["labels"] = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": "z"}
        inf.on_node("ADDED", node)
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": True}]
    inf.on_workload(
        "apps/v1",
        "ReplicaSet",
        "ADDED",
        {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}},
    )
    for i in range(2):
        existing = raw_pod(f"old-{i}", node="n0", scheduler="default-scheduler")
        existing["metadata"].update(labels={"app": "web"}, ownerReferences=owner)
        inf.on_pod("ADDED", existing)
    fresh = raw_pod("new")
    fresh["metadata"].update(labels={"app": "web"}, ownerReferences=owner)
    pod = Pod.from_raw(fresh)
    sched.cache.update_snapshot(sched.snapshot)
    fw = sched.frameworks[NAME]
    nodes = sched.snapshot.list()
    state = CycleState()
    fw.run_pre_filter(state, pod, nodes)
    assert fw.run_pre_score(state, pod, nodes) is None
    assert "PodTopologySpread" not in state.skip_score_plugins
    _, per_plugin, status = fw.score_nodes(state, pod, nodes)
    assert status is None
    spread = dict(zip([n.name for n in nodes], per_plugin["PodTopologySpread"].tolist(), strict=True))
    assert spread["n0"] < spread["n1"] == spread["n2"]
    # Without an owner nothing is selected by default: the plugin skips scoring.
    plain = Pod.from_raw(raw_pod("plain"))
    state = CycleState()
    fw.run_pre_filter(state, plain, nodes)
    fw.run_pre_score(state, plain, nodes)
    assert "PodTopologySpread" in state.skip_score_plugins


async def test_nodes_left_out_by_prefilter_are_counted_in_the_message() -> None:
    sched, inf, client = setup()
    for i in range(3):
        inf.on_node("ADDED", raw_node(f"n{i}", cpu="1"))
    raw = raw_pod("pinned", cpu="2")
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]
            }
        }
    }
    inf.on_pod("ADDED", raw)
    await run_queue(sched)
    assert client.conditions["ns/pinned"]["message"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


@settings(max_examples=200, deadline=None)
@given(
    removed=st.sets(st.integers(0, 63), max_size=20),
    named=st.sets(st.integers(0, 80), max_size=12),
    placement=st.one_of(st.none(), st.sets(st.integers(0, 63), min_size=1, max_size=40)),
)
def test_named_nodes_finds_by_name_what_a_walk_over_every_node_finds(
    removed: set[int], named: set[int], placement: set[int] | None
) -> None:
    """A PreFilterResult's names (a DaemonSet pod's one node) are looked up by position, not found
    by walking all 15000 nodes per pod: same nodes, in the snapshot's order, with or without a
    pod-group placement, after nodes were removed (positions moved), names of absent nodes too."""
    sched, inf, _ = setup()
    for i in range(64):
        inf.on_node("ADDED", raw_node(f"n{i}"))
    for i in removed:
        inf.on_node("DELETED", raw_node(f"n{i}"))
    sched.cache.update_snapshot(sched.snapshot)
    names = {f"n{i}" for i in named}
    if placement is not None:
        sched.placement = PlacementNodes(frozenset(f"n{i}" for i in placement))
        all_nodes = sched.placement.infos(sched.snapshot)
    else:
        all_nodes = list(sched.snapshot.list())
    reference = [info for info in all_nodes if info.name in names]
    assert sched.named_nodes(all_nodes, names) == reference


def test_a_prefilter_result_naming_one_node_is_not_found_by_a_walk_over_every_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards 85e8030 by counting work, not time: a DaemonSet pod's node affinity names its one
    node (matchFields metadata.name), and finding that node must not visit every node of the
    cluster. Before it, the PreFilterResult's names were matched by a walk over all the nodes, once
    per pod (SchedulingDaemonset/15000Nodes: 7.2 ms of CPU per pod, kube 3.2). Counted: the node
    infos whose name is read while finding the pod's nodes, in clusters of N and 4N nodes."""
    slot = vars(NodeInfo)["name"]  # NodeInfo's `name` slot, read and written through a counter
    reads = [0]

    def read(info: NodeInfo) -> str:
        reads[0] += 1
        name: str = slot.__get__(info, NodeInfo)
        return name

    monkeypatch.setattr(NodeInfo, "name", property(read, slot.__set__))

    def visited(count: int) -> int:
        sched, inf, _ = setup()
        for i in range(count):
            inf.on_node("ADDED", raw_node(f"n{i}"))
        sched.cache.update_snapshot(sched.snapshot)
        pinned = f"n{count // 2}"
        raw = raw_pod("daemon")
        raw["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pinned]}]}
                    ]
                }
            }
        }
        pod = Pod.from_raw(raw)
        reads[0] = 0
        feasible, _ = sched.find_nodes_that_fit(sched.frameworks[NAME], CycleState(), pod)
        seen = reads[0]
        assert [info.name for info in feasible] == [pinned]
        return seen

    small, large = 250, 1000
    at_small, at_large = visited(small), visited(large)
    # The walk read every node's name: 250 and 1000 here. Looked up by name, no node is walked past.
    assert at_large <= at_small < small // 10, (at_small, at_large)


def zoned_nodes(inf: Informers, count: int, zones: int) -> None:
    for i in range(count):
        node = raw_node(f"n{i}", cpu="4")
        node["metadata"]["labels"] = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": f"z{i % zones}"}
        inf.on_node("ADDED", node)


def cached_and_fresh_pre_filter(
    sched: Scheduler, raw: dict[str, Any], probe_name: str
) -> tuple[CycleState, CycleState]:
    """PreFilter for a pod like `raw` twice: over the snapshot's own list (counts kept across cycles)
    and over a copy of it (counted from scratch)."""
    probe = Pod.from_raw(raw | {"metadata": {**raw["metadata"], "uid": probe_name, "name": probe_name}})
    sched.cache.update_snapshot(sched.snapshot)
    nodes = sched.snapshot.list()
    fw = sched.frameworks[NAME]
    cached, fresh = CycleState(), CycleState()
    fw.run_pre_filter(cached, probe, nodes)
    fw.run_pre_filter(fresh, probe, list(nodes))
    return cached, fresh


async def test_spread_counts_kept_across_cycles_match_a_fresh_count() -> None:
    from plugins.podtopologyspread.filtering import PRE_FILTER_KEY as SPREAD_KEY

    sched, inf, client = setup()
    zoned_nodes(inf, 9, 3)
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    for i in range(12):
        raw = raw_pod(f"s{i}", cpu="100m")
        raw["metadata"]["labels"] = {"app": "spread"}
        raw["spec"]["topologySpreadConstraints"] = [constraint]
        inf.on_pod("ADDED", raw)
        await run_queue(sched)
        cached, fresh = cached_and_fresh_pre_filter(sched, raw, f"probe{i}")
        assert [d.counts for d in cached.read(SPREAD_KEY).domains] == [d.counts for d in fresh.read(SPREAD_KEY).domains]
    per_zone = {f"z{z}": 0 for z in range(3)}
    for node_name in client.bindings.values():
        per_zone[f"z{int(node_name[1:]) % 3}"] += 1
    assert sorted(per_zone.values()) == [4, 4, 4]


async def test_anti_affinity_counts_kept_across_cycles_match_a_fresh_count() -> None:
    from plugins.interpodaffinity.filtering import PRE_FILTER_KEY as AFFINITY_KEY

    sched, inf, client = setup()
    zoned_nodes(inf, 6, 2)
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    for i in range(7):
        raw = raw_pod(f"a{i}", cpu="100m")
        raw["metadata"]["labels"] = {"app": "solo"}
        raw["spec"]["affinity"] = anti
        inf.on_pod("ADDED", raw)
        await run_queue(sched)
        cached, fresh = cached_and_fresh_pre_filter(sched, raw, f"probe{i}")
        a, b = cached.read(AFFINITY_KEY), fresh.read(AFFINITY_KEY)
        assert (a.existing_anti_affinity, a.affinity, a.anti_affinity) == (
            b.existing_anti_affinity,
            b.affinity,
            b.anti_affinity,
        )
    # One per node: six bound, the seventh has nowhere to go.
    assert len(client.bindings) == 6
    assert len(set(client.bindings.values())) == 6
    assert "ns/a6" in client.conditions
