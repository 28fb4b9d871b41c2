"""OpportunisticBatching: signatures, node hints and flushes, end to end against the fake client,
and placements equal to the gate-off runs on random small clusters."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from harness.workload import registry_value
from plugins.dynamicresources import DynamicResources, DynamicResourcesArgs
from plugins.noderesourcesbalancedallocation import NodeResourcesBalancedAllocation
from plugins.noderesourcesfit import NodeResourcesFit
from plugins.noderesourcesfit import parse_args as parse_fit_args
from plugins.podtopologyspread import PodTopologySpread
from plugins.podtopologyspread.defaults import parse_args as parse_spread_args
from scheduler import metrics
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import SchedulerConfig, default_config, parse_config
from scheduler.features import FeatureGates
from scheduler.framework import signing
from scheduler.framework.batch import OpportunisticBatch, SortedScoredNodes
from scheduler.framework.dra import DEVICE_CLASS, DraManager
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import IntArray
from scheduler.framework.types import Code, CycleState, NodeInfo, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import informer_pod, make_handle, make_node, make_pod, node_info

NAME = "batching"
BASE = "example.com/base"
DISABLED = [{"name": "PodTopologySpread"}, {"name": "InterPodAffinity"}]


class NodeRank:
    """A node-local score: the node's base label minus the pods on it. With bases that are distinct
    multiples of 10 and fewer than 10 pods per node, no two nodes ever tie."""

    name = "NodeRank"

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        node = node_info.node
        assert node is not None
        return int(node.labels[BASE]) - len(node_info.pods), None

    def score_extensions(self) -> None:
        return None

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return (), None


def registry() -> Any:
    reg = full_registry()

    def new(args: Mapping[str, Any], handle: Any) -> NodeRank:
        return NodeRank()

    reg.register(NodeRank.name, new)
    return reg


def config(gate: bool, plugins: Mapping[str, Any] | None = None, args: list[Any] | None = None) -> SchedulerConfig:
    profile: dict[str, Any] = {
        "schedulerName": NAME,
        "plugins": plugins
        or {
            "multiPoint": {"disabled": DISABLED},
            "score": {"disabled": [{"name": "*"}], "enabled": [{"name": NodeRank.name, "weight": 1}]},
        },
    }
    if args:
        profile["pluginConfig"] = args
    raw = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}
    return dataclasses.replace(parse_config(raw), feature_gates=FeatureGates({"OpportunisticBatching": gate}))


def setup(cfg: SchedulerConfig) -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    sched = build_scheduler(cfg, registry(), client, {})
    sched.rng = random.Random(5)
    for fw in sched.frameworks.values():
        if fw.batch is not None:
            # A frozen clock: a loaded machine must not expire a batch between two cycles of a test.
            fw.batch.clock = frozen_clock
    return sched, Informers(sched), client


def frozen_clock() -> float:
    return 100.0


def raw_node(name: str, base: int, cpu: int = 4, taint: bool = False, unschedulable: bool = False) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {BASE: str(base)}},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}},
    }
    if taint:
        node["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return node


def raw_pod(name: str, cpu: int = 1, scheduler: str = NAME, **spec: Any) -> dict[str, Any]:
    pod = informer_pod(name, scheduler, str(cpu), labels={"a": "b"}).spec(**spec)
    raw: dict[str, Any] = pod.raw
    return raw


async def run_queue(sched: Scheduler) -> None:
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await sched.drain()


def attempts(result: str, profile: str = NAME) -> float:
    return registry_value(metrics.REGISTRY, "scheduler_batch_attempts_total", profile=profile, result=result)


def flushed(reason: str) -> float:
    return registry_value(metrics.REGISTRY, "scheduler_batch_cache_flushed_total", profile=NAME, reason=reason)


@pytest.fixture
def cluster() -> Iterator[tuple[Scheduler, Informers, FakeApiClient]]:
    sched, inf, client = setup(config(True))
    for name, base in (("a", 30), ("b", 20), ("c", 10)):
        inf.on_node("ADDED", raw_node(name, base, cpu=2))
    yield sched, inf, client


# ---- signatures ----------------------------------------------------------------------------


def test_default_profile_signs_no_pod() -> None:
    # PodTopologySpread's system default constraints make every pod unsignable, as in kube.
    sched, inf, _ = setup(default_config())
    [(profile, fw)] = sched.frameworks.items()
    # Every plugin of the default profile can sign: the profile batches, its pods cannot.
    assert fw.batch is not None and fw.signers is not None
    inf.on_pod("ADDED", raw_pod("p", scheduler=profile))
    info = sched.queue.get("uid-p")
    assert info is not None and info.signature is None


def test_gate_off_builds_no_batch_and_signs_nothing() -> None:
    sched, inf, _ = setup(config(False))
    fw = sched.frameworks[NAME]
    assert fw.batch is None and fw.signers is None
    inf.on_pod("ADDED", raw_pod("p"))
    info = sched.queue.get("uid-p")
    assert info is not None and info.signature is None


def test_identical_pods_share_a_signature_and_differences_show() -> None:
    sched, _, _ = setup(config(True))
    fw = sched.frameworks[NAME]
    assert fw.signers is not None
    sign = fw.sign_pod
    base = sign(Pod.from_raw(raw_pod("p1")))
    assert base is not None
    assert sign(Pod.from_raw(raw_pod("p2"))) == base
    # Volumes from ConfigMaps and Secrets never affect placement.
    config_volume = {"name": "cfg", "configMap": {"name": "p2-config"}}
    assert sign(Pod.from_raw(raw_pod("p2", volumes=[config_volume]))) == base
    different = [
        raw_pod("q", cpu=2),
        raw_pod("q", nodeSelector={"zone": "z1"}),
        raw_pod("q", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        raw_pod("q", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
        make_pod("q", "ns").label("a", "b").req(cpu="1").spec(schedulerName=NAME).host_port(8080).obj().raw,
        raw_pod("q", containers=[{"name": "c", "image": "img", "ports": [{"containerPort": 80, "hostPort": 80}]}]),
    ]
    for raw in different:
        assert sign(Pod.from_raw(raw)) not in (None, base), raw["spec"]
    tcp = sign(Pod.from_raw(different[-1]))
    udp = raw_pod("q", containers=[{"name": "c", "image": "img", "ports": [{"hostPort": 80, "protocol": "UDP"}]}])
    assert sign(Pod.from_raw(udp)) not in (None, tcp)
    # Without InterPodAffinity in the profile, labels do not matter.
    relabelled = raw_pod("q")
    relabelled["metadata"]["labels"] = {"a": "c"}
    assert sign(Pod.from_raw(relabelled)) == base


def test_pod_affinity_makes_a_pod_unsignable_where_interpodaffinity_runs() -> None:
    plugins = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NodeRank.name}]}}
    args = [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}]
    sched, _, _ = setup(config(True, plugins, args))
    sign = sched.frameworks[NAME].sign_pod
    base = sign(Pod.from_raw(raw_pod("p")))
    assert base is not None
    # Labels count, with the namespace: existing pods' anti-affinity terms select by both.
    relabelled = raw_pod("q")
    relabelled["metadata"]["labels"] = {"a": "c"}
    assert sign(Pod.from_raw(relabelled)) not in (None, base)
    moved = raw_pod("q")
    moved["metadata"]["namespace"] = "other"
    assert sign(Pod.from_raw(moved)) not in (None, base)
    term = {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}
    assert (
        sign(
            Pod.from_raw(
                raw_pod("p", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
            )
        )
        is None
    )
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    assert sign(Pod.from_raw(raw_pod("p", topologySpreadConstraints=[constraint]))) is None


def test_a_refusal_changes_who_is_asked_first_not_the_signature() -> None:
    plugins = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NodeRank.name}]}}
    args = [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}]
    sched, _, _ = setup(config(True, plugins, args))
    sign = sched.frameworks[NAME].sign_pod
    before = sign(Pod.from_raw(raw_pod("p")))
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    assert sign(Pod.from_raw(raw_pod("q", topologySpreadConstraints=[constraint]))) is None
    fw = sched.frameworks[NAME]
    assert fw.signers is not None and fw.signers[fw._sign_order[0]].name == "PodTopologySpread"
    assert sign(Pod.from_raw(raw_pod("p"))) == before


def test_queue_signs_again_when_the_pod_changes() -> None:
    sched, inf, _ = setup(config(True))
    old = raw_pod("p")
    inf.on_pod("ADDED", old)
    info = sched.queue.get("uid-p")
    assert info is not None
    before = info.signature
    new = raw_pod("p", cpu=3)
    new["metadata"]["resourceVersion"] = "2"
    inf.on_pod("MODIFIED", new)
    after = sched.queue.get("uid-p")
    assert after is not None and after.signature not in (None, before)


# ---- hints ---------------------------------------------------------------------------------


async def run_pods(
    cfg: SchedulerConfig,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    later: Sequence[tuple[str, dict[str, Any]]] = (),
) -> dict[str, str]:
    """Schedule `pods`, then apply the node events `later` and schedule the same pods once more
    (under new names)."""
    sched, inf, client = setup(cfg)
    for node in nodes:
        inf.on_node("ADDED", node)
    for pod in pods:
        inf.on_pod("ADDED", pod)
    await run_queue(sched)
    if later:
        for event, node in later:
            inf.on_node(event, node)
        for pod in pods:
            again = copy.deepcopy(pod)
            again["metadata"]["name"] += "-again"
            again["metadata"]["uid"] += "-again"
            inf.on_pod("ADDED", again)
        await run_queue(sched)
    return dict(client.bindings)


async def test_identical_pods_take_hints_and_land_where_they_would_without() -> None:
    nodes = [raw_node("a", 30, cpu=2), raw_node("b", 20, cpu=3), raw_node("c", 10, cpu=4)]
    pods = [raw_pod(f"p{i}") for i in range(8)]
    used, not_used = attempts(metrics.BATCH_HINT_USED), attempts(metrics.BATCH_HINT_NOT_USED)
    rescored = registry_value(metrics.REGISTRY, "scheduler_batch_rescore_attempts_total", profile=NAME)
    with_batching = await run_pods(config(True), nodes, pods)
    hints_used = attempts(metrics.BATCH_HINT_USED) - used
    # p0 scores all nodes; p1-p5 go to their hints (a, b, b, b, c) until the kept list is used up;
    # p6 and p7 find only c feasible, a cycle that keeps nothing.
    assert hints_used == 5
    assert attempts(metrics.BATCH_HINT_NOT_USED) == not_used
    assert registry_value(metrics.REGISTRY, "scheduler_batch_rescore_attempts_total", profile=NAME) > rescored
    assert with_batching == await run_pods(config(False), nodes, pods)
    assert attempts(metrics.BATCH_HINT_USED) - used == hints_used  # the gate-off run gave none
    assert sorted(with_batching.values()) == ["a", "a", "b", "b", "b", "c", "c", "c"]


async def test_one_feasible_node_stores_an_empty_list(cluster: tuple[Scheduler, Informers, FakeApiClient]) -> None:
    sched, inf, client = cluster
    before = flushed(metrics.FLUSH_EMPTY_LIST)
    inf.on_pod("ADDED", raw_pod("p", nodeSelector={BASE: "20"}))
    await run_queue(sched)
    assert client.bindings == {"ns/p": "b"}
    assert flushed(metrics.FLUSH_EMPTY_LIST) == before + 1
    batch = sched.frameworks[NAME].batch
    assert batch is not None and batch.batch is None


async def one_by_one(sched: Scheduler, inf: Informers, *pods: dict[str, Any]) -> None:
    for pod in pods:
        inf.on_pod("ADDED", pod)
        await run_queue(sched)


async def test_a_different_pod_then_a_skipped_cycle_flush(cluster: tuple[Scheduler, Informers, FakeApiClient]) -> None:
    sched, inf, client = cluster
    incompatible, skipped = flushed(metrics.FLUSH_POD_INCOMPATIBLE), flushed(metrics.FLUSH_POD_SKIPPED)
    # q differs and fits nowhere: its cycle stores nothing, so p2's cycle does not follow p1's.
    await one_by_one(sched, inf, raw_pod("p1"), raw_pod("q", nodeSelector={BASE: "none"}), raw_pod("p2"))
    assert flushed(metrics.FLUSH_POD_INCOMPATIBLE) == incompatible + 1
    assert flushed(metrics.FLUSH_POD_SKIPPED) == skipped + 1
    assert client.bindings == {"ns/p1": "a", "ns/p2": "a"}


async def test_a_nominated_pod_bypasses_the_batch(cluster: tuple[Scheduler, Informers, FakeApiClient]) -> None:
    sched, inf, client = cluster
    before = flushed(metrics.FLUSH_POD_NOMINATED)
    nominated = raw_pod("p2")
    nominated["status"]["nominatedNodeName"] = "c"
    await one_by_one(sched, inf, raw_pod("p1"), nominated)
    assert flushed(metrics.FLUSH_POD_NOMINATED) == before + 1
    assert client.bindings == {"ns/p1": "a", "ns/p2": "c"}


async def test_an_old_batch_expires(cluster: tuple[Scheduler, Informers, FakeApiClient]) -> None:
    sched, inf, client = cluster
    batch = sched.frameworks[NAME].batch
    assert batch is not None
    now = [100.0]
    batch.clock = lambda: now[0]
    before, used = flushed(metrics.FLUSH_EXPIRED), attempts(metrics.BATCH_HINT_USED)
    await one_by_one(sched, inf, raw_pod("p1"))
    now[0] += 0.4
    await one_by_one(sched, inf, raw_pod("p2"))
    assert attempts(metrics.BATCH_HINT_USED) == used + 1
    now[0] += 0.6
    await one_by_one(sched, inf, raw_pod("p3"))
    assert flushed(metrics.FLUSH_EXPIRED) == before + 1
    assert client.bindings == {"ns/p1": "a", "ns/p2": "a", "ns/p3": "b"}


async def test_a_deleted_chosen_node_flushes(cluster: tuple[Scheduler, Informers, FakeApiClient]) -> None:
    sched, inf, client = cluster
    before = flushed(metrics.FLUSH_NODE_MISSING)
    await one_by_one(sched, inf, raw_pod("p1"))
    inf.on_node("DELETED", raw_node("a", 30, cpu=2))
    await one_by_one(sched, inf, raw_pod("p2"))
    assert flushed(metrics.FLUSH_NODE_MISSING) == before + 1
    assert client.bindings == {"ns/p1": "a", "ns/p2": "b"}


async def test_a_node_joining_within_a_batch_is_not_hinted(
    cluster: tuple[Scheduler, Informers, FakeApiClient],
) -> None:
    # kube's batch has no flush for a node that joins: until the batch ends, hints come from the
    # nodes scored before it (OpportunisticBatching trades this for skipping full cycles).
    sched, inf, client = cluster
    await one_by_one(sched, inf, raw_pod("p1"))
    inf.on_node("ADDED", raw_node("best", 90))
    await one_by_one(sched, inf, raw_pod("p2"))
    assert client.bindings == {"ns/p1": "a", "ns/p2": "a"}
    batch = sched.frameworks[NAME].batch
    assert batch is not None and batch.batched_pods == 1


async def test_an_unsignable_pod_drops_the_batch() -> None:
    plugins = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NodeRank.name}]}}
    args = [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}]
    sched, inf, client = setup(config(True, plugins, args))
    for name, base in (("a", 30), ("b", 20), ("c", 10)):
        inf.on_node("ADDED", raw_node(name, base, cpu=2))
    before = flushed(metrics.FLUSH_POD_NOT_BATCHABLE)
    constraint = {"maxSkew": 5, "topologyKey": BASE, "whenUnsatisfiable": "ScheduleAnyway"}
    await one_by_one(sched, inf, raw_pod("p1", topologySpreadConstraints=[constraint]))
    assert flushed(metrics.FLUSH_POD_NOT_BATCHABLE) == before + 1
    batch = sched.frameworks[NAME].batch
    assert batch is not None and batch.batch is None
    assert list(client.bindings) == ["ns/p1"]


async def test_random_clusters_place_pods_as_without_batching() -> None:
    hints = 0
    for seed in range(40):
        rng = random.Random(seed)
        count = rng.randint(2, 9)
        nodes = [
            raw_node(f"n{i}", base, cpu=rng.randint(1, 4), taint=rng.random() < 0.15, unschedulable=rng.random() < 0.1)
            for i, base in enumerate(rng.sample(range(10, 101, 10), count))
        ]
        # Mostly one shape, now and then another, so batches are built, used, dropped and rebuilt.
        pods = [raw_pod(f"p{i:02}", cpu=1 if rng.random() < 0.8 else 2) for i in range(rng.randint(1, 12))]
        # Then the cluster changes and the pods come again: a node the pods do not tolerate joins
        # (the snapshot's node list is rebuilt), one node may leave, one may be cordoned. (A node
        # that joins or becomes schedulable within a batch is not among its nodes, as in kube: see
        # test_a_node_joining_within_a_batch_is_not_hinted.)
        spare = sorted(set(range(10, 101, 10)) - {int(n["metadata"]["labels"][BASE]) for n in nodes})
        later = [("ADDED", raw_node("late", rng.choice(spare), taint=True))]
        if rng.random() < 0.5:
            later.append(("DELETED", nodes[0]))
        if rng.random() < 0.5:
            cordoned = copy.deepcopy(nodes[-1])
            cordoned["spec"]["unschedulable"] = True
            cordoned["metadata"]["resourceVersion"] = "2"
            later.append(("MODIFIED", cordoned))
        used = attempts(metrics.BATCH_HINT_USED)
        with_batching = await run_pods(config(True), nodes, pods, later)
        hints += int(attempts(metrics.BATCH_HINT_USED) - used)
        assert with_batching == await run_pods(config(False), nodes, pods, later), f"seed {seed}"
    assert hints > 50


# ---- the batch module on its own: errors while refreshing --------------------------------------


class FakeHandle:
    profile_name = NAME

    def __init__(self, infos: Sequence[NodeInfo]) -> None:
        self.infos = {info.name: info for info in infos}
        self.filter_status: Status | None = None
        self.pre_score_status: Status | None = None
        self.score_status: Status | None = None
        self.normalize_status: Status | None = None

    def snapshot_nodes(self) -> Sequence[NodeInfo]:
        return list(self.infos.values())

    def current_node_infos(self, names: Iterable[str]) -> list[NodeInfo] | None:
        found = [self.infos.get(name) for name in names]
        return None if None in found else [info for info in found if info is not None]

    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return self.filter_status

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self.pre_score_status

    def raw_score_node(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[dict[str, int], Status | None]:
        return {"S": 50}, self.score_status

    def normalize_scores(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], raw: Mapping[str, IntArray]
    ) -> tuple[IntArray, Status | None]:
        return raw["S"].copy(), self.normalize_status


def stored_batch(handle: FakeHandle) -> OpportunisticBatch:
    batch = OpportunisticBatch(handle, generic_workload=False, clock=frozen_clock)
    infos = list(handle.infos.values())
    raw = {"S": np.array([90, 70, 30], np.int64)}
    others = SortedScoredNodes(infos, raw, raw["S"].copy(), taken=0)
    batch.store_schedule_results((("k", "v"),), "", infos[0].name, others, cycle=1)
    return batch


def three_nodes() -> list[NodeInfo]:
    return [node_info(make_node(name).capacity(cpu="4")) for name in ("x", "y", "z")]


@pytest.mark.parametrize(
    ("field", "status", "reason"),
    [
        ("filter_status", Status.as_error(RuntimeError("boom")), metrics.FLUSH_FILTER_ERROR),
        ("pre_score_status", Status.as_error(RuntimeError("boom")), metrics.FLUSH_PRESCORE_ERROR),
        ("score_status", Status.as_error(RuntimeError("boom")), metrics.FLUSH_RESCORE_ERROR),
        ("normalize_status", Status.as_error(RuntimeError("boom")), metrics.FLUSH_NORMALIZE_ERROR),
    ],
)
def test_refresh_errors_give_no_hint(field: str, status: Status, reason: str) -> None:
    handle = FakeHandle(three_nodes())
    batch = stored_batch(handle)
    setattr(handle, field, status)
    before = flushed(reason)
    pod = Pod.from_raw(raw_pod("p"))
    assert batch.get_node_hint(pod, (("k", "v"),), False, CycleState(), cycle=2) == ""
    assert flushed(reason) == before + 1


def test_rescored_last_node_competes_with_the_kept_ones() -> None:
    handle = FakeHandle(three_nodes())
    batch = stored_batch(handle)
    pod = Pod.from_raw(raw_pod("p"))
    # x (chosen before) still fits and now scores 50: y (70) first, then x, then z (30).
    assert batch.get_node_hint(pod, (("k", "v"),), False, CycleState(), cycle=2) == "y"
    batch.store_schedule_results((("k", "v"),), "y", "y", None, cycle=2)
    handle.filter_status = Status.unschedulable("full")
    assert batch.get_node_hint(pod, (("k", "v"),), False, CycleState(), cycle=3) == "x"
    batch.store_schedule_results((("k", "v"),), "x", "x", None, cycle=3)
    assert batch.get_node_hint(pod, (("k", "v"),), False, CycleState(), cycle=4) == "z"
    assert batch.batched_pods == 2


def test_pod_group_members_share_a_cycle_only_with_generic_workload() -> None:
    for generic_workload, hinted in ((False, ""), (True, "y")):
        handle = FakeHandle(three_nodes())
        handle.filter_status = Status.unschedulable("full")
        batch = stored_batch(handle)
        batch.generic_workload = generic_workload
        pod = Pod.from_raw(raw_pod("p"))
        assert batch.get_node_hint(pod, (("k", "v"),), False, CycleState(), cycle=1) == hinted


def test_sorted_scored_nodes_pop_best_first_and_skip_the_taken_one() -> None:
    infos = three_nodes()
    totals = np.array([5, 9, 7], np.int64)
    nodes = SortedScoredNodes(infos, {}, totals, taken=1)
    assert len(nodes) == 2
    assert [nodes.pop(), nodes.pop()] == [2, 0]
    assert len(nodes) == 0


# ---- the default plugins (less spreading and pod affinity), ties and normalisation included -----


def default_plugins_config() -> SchedulerConfig:
    return config(True, {"multiPoint": {"disabled": DISABLED}})


def real_node(rng: random.Random, name: str) -> dict[str, Any]:
    taints = [{"key": f"soft{i}", "effect": "PreferNoSchedule"} for i in range(rng.randint(0, 2))]
    if rng.random() < 0.1:
        taints.append({"key": "hard", "effect": "NoSchedule"})
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {"zone": rng.choice("ab")}},
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"cpu": str(rng.randint(1, 8)), "memory": f"{rng.randint(1, 16)}Gi", "pods": "110"},
            "images": [{"names": ["img:latest"], "sizeBytes": 300 * 1024 * 1024}] if rng.random() < 0.3 else [],
        },
    }


async def test_hinted_nodes_are_among_the_best_a_full_cycle_finds() -> None:
    # With real, normalising scorers ties are common, so no two runs need agree: instead each pod's
    # node must be one a full Filter/Score pass at that moment ranks best. (The kept nodes are
    # exactly the feasible ones while nothing else changes the cluster, so NormalizeScore across
    # them sees what a full cycle sees.)
    hints = 0
    for seed in range(15):
        rng = random.Random(seed)
        sched, inf, _ = setup(default_plugins_config())
        fw = sched.frameworks[NAME]
        for i in range(rng.randint(2, 12)):
            inf.on_node("ADDED", real_node(rng, f"n{i}"))
        preferred = [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
        ]
        for i in range(rng.randint(5, 25)):
            pod = raw_pod(
                f"p{i:02}", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
            )
            pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
            inf.on_pod("ADDED", pod)
        used = attempts(metrics.BATCH_HINT_USED)
        while (info := sched.queue.pop_nowait()) is not None:
            sched.cache.update_snapshot(sched.snapshot)
            state = CycleState()
            feasible, _ = sched.find_nodes_that_fit(fw, state, info.pod)
            best: set[str] = set()
            if len(feasible) > 1:
                totals = sched.prioritize_nodes(fw, state, info.pod, feasible)
                best = {feasible[i].name for i in np.flatnonzero(totals == totals.max()).tolist()}
            elif feasible:
                best = {feasible[0].name}
            sched.schedule_one(info)
            assumed = sched.cache.get_pod(info.pod.uid)
            chosen = assumed.node_name if assumed is not None else ""
            assert (chosen in best) if best else not chosen, f"seed {seed} pod {info.pod.name}: {chosen} not in {best}"
            await asyncio.sleep(0)
        await sched.drain()
        hints += int(attempts(metrics.BATCH_HINT_USED) - used)
    assert hints > 30


# ---- plugins that refuse to sign -------------------------------------------------------------


def test_an_extended_resource_dynamic_resources_would_allocate_is_not_signed() -> None:
    resource = "extended.resource.dra.io/something"
    dra = DraManager([(DEVICE_CLASS, {"metadata": {"name": "c"}, "spec": {"extendedResourceName": resource}})])
    fit = NodeResourcesFit(parse_fit_args({}), dra)
    balanced = NodeResourcesBalancedAllocation(("cpu", "memory"), dra)
    backed = make_pod("p").container(requests={"cpu": "1", resource: "1"}).obj()
    device_plugin = make_pod("p").container(requests={"cpu": "1", "example.com/gpu": "1"}).obj()
    for plugin in (fit, balanced):
        fragments, status = plugin.sign_pod(backed)
        assert status is not None and status.code == Code.UNSCHEDULABLE and not fragments
        fragments, status = plugin.sign_pod(device_plugin)
        assert status is None and [key for key, _ in fragments] == [signing.RESOURCES]


def test_claims_and_spreading_constraints_are_not_signed() -> None:
    claims = make_pod("p").spec(resourceClaims=[{"name": "c", "resourceClaimName": "claim"}]).obj()
    dynamic = DynamicResources(DynamicResourcesArgs(), make_handle())
    assert dynamic.sign_pod(claims)[1] is not None
    assert dynamic.sign_pod(make_pod("p").obj()) == ((), None)
    system = PodTopologySpread(parse_spread_args({}), make_handle())
    listed = PodTopologySpread(parse_spread_args({"defaultingType": "List"}), make_handle())
    plain = make_pod("p").obj()
    assert system.sign_pod(plain)[1] is not None  # kube's system defaults: no pod of the profile batches
    assert listed.sign_pod(plain) == ((), None)
    spread = make_pod("p").spread_constraint(1, "zone", "DoNotSchedule", {"matchLabels": {"a": "b"}}).obj()
    assert listed.sign_pod(spread)[1] is not None


# ---- pod groups (GenericWorkload): members share one cycle count -----------------------------------


async def run_gang(gate: bool) -> dict[str, str]:
    cfg = dataclasses.replace(
        config(gate), feature_gates=FeatureGates({"OpportunisticBatching": gate, "GenericWorkload": True})
    )
    sched, inf, client = setup(cfg)
    for name, base in (("a", 40), ("b", 30), ("c", 20), ("d", 10)):
        inf.on_node("ADDED", raw_node(name, base, cpu=2))
    inf.on_pod_group(
        "ADDED",
        {
            "metadata": {"name": "gang", "namespace": "ns", "uid": "uid-gang", "resourceVersion": "1", "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 5}}},
        },
    )
    for i in range(5):
        inf.on_pod("ADDED", raw_pod(f"g{i}", schedulingGroup={"podGroupName": "gang"}))
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_entity(info)
        await asyncio.sleep(0)
    await sched.drain()
    return dict(client.bindings)


async def test_pod_group_members_take_hints_within_their_cycle() -> None:
    used = attempts(metrics.BATCH_HINT_USED)
    with_batching = await run_gang(True)
    assert attempts(metrics.BATCH_HINT_USED) - used == 4
    assert with_batching == await run_gang(False)
    assert sorted(with_batching.values()) == ["a", "a", "b", "b", "c"]
