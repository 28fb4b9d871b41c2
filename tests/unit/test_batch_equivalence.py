"""Property test: every batch (array) form agrees with its per-node form on random clusters.

Same verdicts per node, same raw and normalised scores, and the scheduler's batch filtering
path returns the same feasible nodes and the same per-node statuses as the reference path.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import SchedulerConfig, default_config, parse_config
from scheduler.framework.table import FilterVerdicts
from scheduler.framework.types import Code, CycleState, Diagnosis, FitError, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler

NAME = "secondary-scheduler"
ZONES = ["a", "b", "c"]
TAINTS = [
    {"key": "k1", "value": "v1", "effect": "NoSchedule"},
    {"key": "k1", "value": "v2", "effect": "PreferNoSchedule"},
    {"key": "k2", "value": "v1", "effect": "NoExecute"},
    {"key": "k2", "value": "", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "k1", "operator": "Equal", "value": "v1", "effect": "NoSchedule"},
    {"key": "k1", "operator": "Exists"},
    {"key": "k2", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
IMAGES = {"nginx:latest": 300 * 2**20, "redis:7": 120 * 2**20, "big:1": 900 * 2**20}
# Nodes may report another size for the same image name: kube's cache keeps the first one.
OTHER_SIZE = {"nginx:latest": 40 * 2**20, "redis:7": 700 * 2**20, "big:1": 2000 * 2**20}
APPS = ["web", "db"]
FEATURES = ["RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport", "ExtendWebSocketsToKubelet"]
SHAPES = [
    [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
    [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
    # falling segments that do not divide evenly (Go truncates toward zero)
    [{"utilization": 0, "score": 10}, {"utilization": 30, "score": 3}, {"utilization": 70, "score": 9}],
    [{"utilization": 10, "score": 8}, {"utilization": 45, "score": 1}, {"utilization": 90, "score": 6}],
]

cpu = st.sampled_from(["0", "100m", "500m", "1", "2", "4"])
memory = st.sampled_from(["0", "128Mi", "1Gi", "4Gi", "32Gi"])
maybe = st.one_of(st.none(), st.just(True))


@st.composite
def node(draw: Any, i: int) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": f"n{i}"}
    zone = draw(st.sampled_from([*ZONES, None]))
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    disk = draw(st.sampled_from(["ssd", "hdd", None]))
    if disk:
        labels["disk"] = disk
    images = draw(st.lists(st.sampled_from(sorted(IMAGES)), unique=True, max_size=2))
    sizes = {image: draw(st.sampled_from([IMAGES[image], OTHER_SIZE[image]])) for image in images}
    declared = sorted(draw(st.lists(st.sampled_from(FEATURES), unique=True, max_size=2)))
    return {
        "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": labels},
        "spec": {
            "unschedulable": draw(st.booleans()),
            "taints": draw(st.lists(st.sampled_from(TAINTS), unique_by=lambda t: (t["key"], t["effect"]), max_size=2)),
        },
        "status": {
            "allocatable": {
                "cpu": draw(st.sampled_from(["0", "500m", "1", "2", "4"])),
                "memory": draw(st.sampled_from(["0", "1Gi", "4Gi", "32Gi"])),
                "pods": draw(st.sampled_from(["0", "1", "3", "110"])),
                # Extended resources, offered by some nodes (device plugins), asked for by some pods.
                **({"example.com/gpu": gpu} if (gpu := draw(st.sampled_from([None, "0", "1", "2", "4"]))) else {}),
            },
            "images": [{"names": [image], "sizeBytes": sizes[image]} for image in images],
            **({"declaredFeatures": declared} if declared else {}),
        },
    }


def requirement(draw: Any) -> dict[str, Any]:
    key = draw(st.sampled_from(["topology.kubernetes.io/zone", "disk"]))
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    values = draw(st.lists(st.sampled_from([*ZONES, "ssd", "hdd"]), min_size=1, max_size=2, unique=True))
    return {"key": key, "operator": op, **({"values": values} if op in ("In", "NotIn") else {})}


def spread_constraint(draw: Any) -> dict[str, Any]:
    """A topologySpreadConstraint over keys every node, some nodes or no node carries."""
    hard = draw(st.booleans())
    out: dict[str, Any] = {
        "maxSkew": draw(st.integers(1, 2)),
        "topologyKey": draw(st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone", "disk"])),
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(APPS))}},
    }
    if hard and draw(st.booleans()):
        out["minDomains"] = draw(st.integers(1, 4))
    for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        if draw(st.booleans()):
            out[policy] = draw(st.sampled_from(["Honor", "Ignore"]))
    return out


@st.composite
def pod(draw: Any, name: str, node_name: str = "") -> dict[str, Any]:
    resources: dict[str, str] = {}
    if draw(st.booleans()):
        resources["cpu"] = draw(cpu)
    if draw(st.booleans()):
        resources["memory"] = draw(memory)
    for resource in ("example.com/gpu", "ignored.example.com/fpga"):
        if draw(st.integers(0, 3)) == 0:
            resources[resource] = draw(st.sampled_from(["1", "2"]))
    spec: dict[str, Any] = {
        "schedulerName": NAME,
        "nodeName": node_name,
        "containers": [
            {"name": "c", "image": draw(st.sampled_from([*IMAGES, "other:1"])), "resources": {"requests": resources}}
        ],
        "tolerations": draw(st.lists(st.sampled_from(TOLERATIONS), max_size=3)),
    }
    if not node_name:
        if draw(st.booleans()):
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
        if draw(st.booleans()):
            terms = [
                {"matchExpressions": [requirement(draw) for _ in range(draw(st.integers(1, 2)))]}
                for _ in range(draw(st.integers(1, 2)))
            ]
            spec.setdefault("affinity", {})["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        if draw(st.booleans()):
            preferred = [
                {"weight": draw(st.integers(1, 100)), "preference": {"matchExpressions": [requirement(draw)]}}
                for _ in range(draw(st.integers(1, 2)))
            ]
            spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
                "preferredDuringSchedulingIgnoredDuringExecution"
            ] = preferred
        if draw(st.booleans()):
            spec["topologySpreadConstraints"] = [spread_constraint(draw) for _ in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        # NodePorts' batch form reads the node table's port index: every IP/protocol combination.
        port: dict[str, Any] = {"containerPort": 80, "hostPort": draw(st.sampled_from([80, 8080]))}
        host_ip = draw(st.sampled_from([None, "0.0.0.0", "10.0.0.1", "10.0.0.2"]))
        protocol = draw(st.sampled_from([None, "TCP", "UDP"]))
        if host_ip is not None:
            port["hostIP"] = host_ip
        if protocol is not None:
            port["protocol"] = protocol
        spec["containers"][0]["ports"] = [port]
    status: dict[str, Any] = {}
    resource_shapes(draw, spec, status, assigned=bool(node_name))
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": name}
    if draw(st.booleans()):
        metadata["labels"] = {"app": draw(st.sampled_from(APPS))}
    return {"metadata": metadata, "spec": spec, "status": status}


def resource_shapes(draw: Any, spec: dict[str, Any], status: dict[str, Any], assigned: bool) -> None:
    """Pod-level resources, overhead, init containers and sidecars; for assigned pods an in-place
    resize (allocated/actual resources, an Infeasible resize); a restart rule needing a feature."""
    if draw(st.booleans()):
        level = {"cpu": draw(cpu)} if draw(st.booleans()) else {}
        if draw(st.booleans()):
            level["memory"] = draw(memory)
        if level:
            spec["resources"] = {"requests": level}
    if draw(st.booleans()):
        spec["overhead"] = {"cpu": draw(cpu), "memory": draw(memory)}
    if draw(st.booleans()):
        init = {"name": "init", "resources": {"requests": {"cpu": draw(cpu)}}}
        if draw(st.booleans()):
            init["restartPolicy"] = "Always"
        spec["initContainers"] = [init]
    if draw(st.booleans()):
        rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}
        spec["containers"][0].update(restartPolicy="Never", restartPolicyRules=[rule])
    if assigned and draw(st.booleans()):
        container_status: dict[str, Any] = {"name": "c", "allocatedResources": {"cpu": draw(cpu)}}
        if draw(st.booleans()):
            container_status["resources"] = {"requests": {"memory": draw(memory)}}
        status["containerStatuses"] = [container_status]
        if draw(st.booleans()):
            status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]


@st.composite
def cluster(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [draw(node(i)) for i in range(draw(st.integers(1, 10)))]
    existing = [
        draw(pod(f"e{i}", node_name=f"n{draw(st.integers(0, len(nodes) - 1))}"))
        for i in range(draw(st.integers(0, 12)))
    ]
    pending = [draw(pod(f"p{i}")) for i in range(draw(st.integers(1, 4)))]
    return nodes, existing, pending


@st.composite
def scheduler_config(draw: Any) -> SchedulerConfig:
    """The default profile, or one with a non-default NodeResourcesFit scoring strategy."""
    kind = draw(st.sampled_from(["default", "MostAllocated", "RequestedToCapacityRatio", "ignoring"]))
    if kind == "default":
        return default_config(NAME)
    if kind == "ignoring":
        # Extended resources NodeResourcesFit leaves alone, by name or by group.
        ignored = draw(
            st.sampled_from(
                [{"ignoredResources": ["example.com/gpu"]}, {"ignoredResourceGroups": ["ignored.example.com"]}]
            )
        )
        return parse_config(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": NAME, "pluginConfig": [{"name": "NodeResourcesFit", "args": ignored}]}],
            }
        )
    strategy: dict[str, Any] = {"type": kind}
    if draw(st.booleans()):
        strategy["resources"] = [{"name": "cpu", "weight": draw(st.integers(1, 5))}, {"name": "memory", "weight": 1}]
    if kind == "RequestedToCapacityRatio":
        strategy["requestedToCapacityRatio"] = {"shape": draw(st.sampled_from(SHAPES))}
    raw = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": NAME,
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}],
            }
        ],
    }
    return parse_config(raw)


Described = tuple[Any, tuple[str, ...], str] | bool | None


def described(status: Status | None, plugin: str) -> Described:
    """A Filter status as compared between the forms: code, reasons and the plugin named."""
    return None if status is None else (status.code, status.reasons, status.plugin or plugin)


def agrees(result: Any, expected: list[Status | None], plugin: str) -> bool:
    """A batch Filter's answer against the per-node statuses: its verdicts' statuses, or only
    rejected or not for a bare mask and for rows it defers to the per-node form."""
    if not isinstance(result, FilterVerdicts):
        return bool(result.tolist() == [s is None for s in expected])
    explained = iter(result.statuses(np.flatnonzero(~result.passes)))
    got = [
        None if ok else False if (status := next(explained)) is None else described(status, "")
        for ok in result.passes.tolist()
    ]
    want = [False if g is False and s else described(s, plugin) for g, s in zip(got, expected, strict=True)]
    return got == want


def diagnosed(feasible: list[Any], diagnosis: Diagnosis, pod: Pod, sched: Scheduler) -> tuple[Any, ...]:
    """What a cycle's Filter leaves behind for PostFilter and the FailedScheduling message: the
    feasible nodes, every recorded status in the order recorded, the plugins, the message."""
    return (
        [n.name for n in feasible],
        [(k, v.code, v.reasons, v.plugin) for k, v in diagnosis.node_to_status.items()],
        sorted(diagnosis.unschedulable_plugins),
        sorted(diagnosis.pending_plugins),
        str(FitError(pod, len(sched.snapshot), diagnosis)),
        sched.next_start_node_index,
    )


def load(
    nodes: list[dict[str, Any]], existing: list[dict[str, Any]], config: SchedulerConfig | None = None
) -> Scheduler:
    sched = build_scheduler(config or default_config(NAME), full_registry(), FakeApiClient(), {"default": {}})
    informers = Informers(sched)
    for raw in nodes:
        informers.on_node("ADDED", raw)
    for raw in existing:
        informers.on_pod("ADDED", raw)
    sched.cache.update_snapshot(sched.snapshot)
    return sched


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster(), scheduler_config())
def test_batch_forms_agree_with_per_node_forms(
    data: tuple[list[Any], list[Any], list[Any]], config: SchedulerConfig
) -> None:
    nodes, existing, pending = data
    sched = load(nodes, existing, config)
    fw = sched.frameworks[NAME]
    infos = sched.snapshot.list()
    table = sched.snapshot.table
    rows = table.arange
    for raw in pending:
        pod = Pod.from_raw(raw)
        state = CycleState()
        _, status, _ = fw.run_pre_filter(state, pod, infos)
        if status is None:
            for plugin in fw.filter_plugins:
                batch = getattr(plugin, "filter_batch", None)
                if plugin.name in state.skip_filter_plugins or batch is None:
                    continue
                result = batch(state, pod, table)
                if result is None:
                    continue
                expected = [plugin.filter(state, pod, info) for info in infos]
                assert agrees(result, expected, plugin.name), plugin.name
        if fw.run_pre_score(state, pod, infos) is not None:
            continue
        for scorer in fw.score_plugins:
            score_batch = getattr(scorer, "score_batch", None)
            if scorer.name in state.skip_score_plugins or score_batch is None:
                continue
            scores = score_batch(state, pod, table, rows)
            if scores is None:
                continue
            expected_scores = [scorer.score(state, pod, info)[0] for info in infos]
            assert scores.tolist() == expected_scores, scorer.name
        totals_batch, per_batch, status_b = fw.score_nodes(state, pod, infos, table, rows)
        totals_node, per_node, status_n = fw.score_nodes(state, pod, infos)
        assert status_b is None
        assert status_n is None
        assert totals_batch.tolist() == totals_node.tolist()
        assert {k: v.tolist() for k, v in per_batch.items()} == {k: v.tolist() for k, v in per_node.items()}


@st.composite
def nominations(draw: Any) -> list[tuple[dict[str, Any], int]]:
    """Pods nominated to node indices, with priorities around the pending pods' 0 (some count)."""
    out = []
    for i in range(draw(st.integers(0, 4))):
        raw = draw(pod(f"nominated{i}"))
        raw["spec"]["priority"] = draw(st.integers(-2, 2))
        out.append((raw, draw(st.integers(0, 9))))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster(), st.integers(0, 50), st.sampled_from([None, 10, 50, 100]), nominations())
def test_batch_filtering_path_matches_reference_path(
    data: tuple[list[Any], list[Any], list[Any]],
    start: int,
    percentage: int | None,
    nominated: list[tuple[dict[str, Any], int]],
) -> None:
    """Also with pods nominated to some nodes: the batch path checks those nodes with the
    nominated pods as the reference path does (kube's two passes)."""
    nodes, existing, pending = data
    sched = load(nodes, existing)
    fw = sched.frameworks[NAME]
    fw.percentage_of_nodes_to_score = percentage
    for raw, index in nominated:
        sched.nominator.add(Pod.from_raw(raw), f"n{index % len(nodes)}")
    for raw in pending:
        pod = Pod.from_raw(raw)
        results = []
        for path in ("batch", "reference"):
            sched.next_start_node_index = start
            state = CycleState()
            _, status, _ = fw.run_pre_filter(state, pod, sched.snapshot.list())
            if status is not None:
                break
            if path == "batch":
                feasible, diagnosis = sched._find_batch(fw, state, pod, Diagnosis())
            else:
                feasible, diagnosis = sched._find_per_node(fw, state, pod, sched.snapshot.list(), Diagnosis())
            results.append(diagnosed(feasible, diagnosis, pod, sched))
        if len(results) == 2:
            assert results[0] == results[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster(), st.integers(0, 50), st.sampled_from([None, 50]), nominations(), st.sets(st.integers(0, 9)))
def test_batch_filtering_over_a_placements_nodes_matches_reference_path(
    data: tuple[list[Any], list[Any], list[Any]],
    start: int,
    percentage: int | None,
    nominated: list[tuple[dict[str, Any], int]],
    chosen: set[int],
) -> None:
    """A pod-group placement's nodes (a subset of the table, the start index taken modulo its
    size, advanced over all nodes): the batch path at their rows finds, records and advances as
    the per-node path over the same nodes."""
    nodes, existing, pending = data
    sched = load(nodes, existing)
    fw = sched.frameworks[NAME]
    fw.percentage_of_nodes_to_score = percentage
    for raw, index in nominated:
        sched.nominator.add(Pod.from_raw(raw), f"n{index % len(nodes)}")
    subset = [info for i, info in enumerate(sched.snapshot.list()) if i in chosen]
    rows = np.array([sched.snapshot.position[info.name] for info in subset], np.int64)
    for raw in pending:
        pod = Pod.from_raw(raw)
        results = []
        for path in ("batch", "reference"):
            sched.next_start_node_index = start
            state = CycleState()
            _, status, _ = fw.run_pre_filter(state, pod, subset)
            if status is not None:
                break
            if path == "batch":
                feasible, diagnosis = sched._find_batch(fw, state, pod, Diagnosis(), rows)
            else:
                feasible, diagnosis = sched._find_per_node(fw, state, pod, subset, Diagnosis())
            results.append(diagnosed(feasible, diagnosis, pod, sched))
        if len(results) == 2:
            assert results[0] == results[1]


def test_batch_path_packs_a_fixed_cluster_exactly() -> None:
    # End to end through schedule_one (batch path): 5 nodes of 2 cpu take exactly two 700m pods each.
    rng = random.Random(3)
    nodes = [
        {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": {}},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }
        for i in range(5)
    ]
    sched = load(nodes, [])
    sched.rng = rng
    informers = Informers(sched)
    for i in range(12):
        informers.on_pod(
            "ADDED",
            {
                "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"p{i}"},
                "spec": {
                    "schedulerName": NAME,
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "700m"}}}],
                },
            },
        )

    async def drain() -> None:
        while (info := sched.queue.pop_nowait()) is not None:
            sched.schedule_one(info)
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(drain())
    client = sched.client
    assert isinstance(client, FakeApiClient)
    assert len(client.bindings) == 10  # 5 nodes x 2 pods of 700m in 2 cpu
    per_node = np.bincount([int(n[1:]) for n in client.bindings.values()])
    assert per_node.tolist() == [2, 2, 2, 2, 2]


# ---- InterPodAffinity: kept counts + batch Filter vs the per-node reference -------------------

AFFINITY_NAMESPACES = ["default", "ns1", "ns2", "ns3"]
HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


@st.composite
def affinity_term(draw: Any, labels: dict[str, str]) -> dict[str, Any]:
    """A PodAffinityTerm covering every namespace shape: own namespace, a list, namespaceSelector {}
    (all), one selecting by label, list and selector together; matchLabelKeys / mismatchLabelKeys
    written as kube-apiserver stores them (merged into the labelSelector as In / NotIn)."""
    term: dict[str, Any] = {"topologyKey": draw(st.sampled_from([HOSTNAME, ZONE]))}
    selector: dict[str, Any] = {}
    if draw(st.booleans()):
        selector["matchLabels"] = {"color": draw(st.sampled_from(["red", "blue"]))}
    expressions = []
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        if draw(st.integers(0, 3)) == 0:
            term[field] = ["app"]
            expressions.append({"key": "app", "operator": operator, "values": [labels["app"]]})
    if expressions:
        selector["matchExpressions"] = expressions
    term["labelSelector"] = selector
    scope = draw(st.sampled_from(["own", "list", "all", "team", "list+team"]))
    if "list" in scope:
        term["namespaces"] = draw(st.lists(st.sampled_from(AFFINITY_NAMESPACES), min_size=1, max_size=2, unique=True))
    if scope == "all":
        term["namespaceSelector"] = {}
    if "team" in scope:
        term["namespaceSelector"] = {"matchLabels": {"team": draw(st.sampled_from(["a", "b"]))}}
    return term


@st.composite
def affinity_pod(draw: Any, name: str, node_name: str = "") -> dict[str, Any]:
    labels = {"color": draw(st.sampled_from(["red", "blue"])), "app": draw(st.sampled_from(["x", "y"]))}
    labels["signature"] = name  # as upstream's benchmark pods: a label no term selects on
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        required = draw(st.lists(affinity_term(labels), max_size=2 if kind == "podAntiAffinity" else 1))
        preferred = [
            {"weight": draw(st.integers(1, 100)), "podAffinityTerm": term}
            for term in draw(st.lists(affinity_term(labels), max_size=1))
        ]
        section = {}
        if required:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if section:
            affinity[kind] = section
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "schedulerName": NAME}
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    metadata = {"name": name, "namespace": draw(st.sampled_from(AFFINITY_NAMESPACES)), "uid": name}
    return {"metadata": {**metadata, "resourceVersion": "1", "labels": labels}, "spec": spec, "status": {}}


@st.composite
def affinity_steps(draw: Any, nodes: int) -> list[tuple[str, Any]]:
    """Between pending pods the cluster changes: pods bound or deleted, namespaces relabelled."""
    steps: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(1, 8))):
        for _ in range(draw(st.integers(0, 3))):
            change = draw(st.sampled_from(["bind", "bind", "delete", "relabel"]))
            if change == "bind":
                steps.append(("bind", draw(affinity_pod(f"b{len(steps)}", f"n{draw(st.integers(0, nodes - 1))}"))))
            elif change == "delete":
                steps.append(("delete", draw(st.integers(0, 30))))
            else:
                team = draw(st.sampled_from([None, "a", "b"]))
                steps.append(("relabel", (draw(st.sampled_from(AFFINITY_NAMESPACES)), team)))
        steps.append(("schedule", draw(affinity_pod(f"p{i}"))))
    return steps


class _WithoutTable:
    """The snapshot seen without its node table: InterPodAffinity then counts every node afresh
    in every cycle and filters node by node (its reference path)."""

    def __init__(self, snapshot: Any) -> None:
        self._snapshot = snapshot

    def list(self) -> Any:
        return self._snapshot.list()

    def have_pods_with_affinity(self) -> Any:
        return self._snapshot.have_pods_with_affinity()

    def have_pods_with_required_anti_affinity(self) -> Any:
        return self._snapshot.have_pods_with_required_anti_affinity()

    def any_pods_with_affinity(self) -> bool:
        return bool(self._snapshot.any_pods_with_affinity())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), affinity_steps(n))), st.sampled_from([None, 10, 50]))
def test_inter_pod_affinity_fast_path_agrees_with_reference(
    data: tuple[int, list[tuple[str, Any]]], percentage: int | None
) -> None:
    """One long-lived scheduler (counts kept across cycles, the batch Filter) against a plugin
    counting afresh node by node: same verdicts, reasons and scores for every pending pod, and the
    same feasible nodes through the scheduler's batch and per-node filtering paths."""
    from plugins.interpodaffinity import InterPodAffinity, parse_args
    from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces
    from scheduler.framework.types import NodeScore

    count, steps = data
    namespaces: dict[str, Any] = {"default": {}, "ns1": {"team": "a"}, "ns2": {"team": "b"}, "ns3": {}}
    sched = build_scheduler(default_config(NAME), full_registry(), FakeApiClient(), namespaces)
    informers = Informers(sched, namespaces)
    rng = random.Random(count)
    for i in range(count):
        labels = {HOSTNAME: f"n{i}", ZONE: rng.choice(ZONES)}
        allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        meta = {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": labels}
        informers.on_node("ADDED", {"metadata": meta, "status": {"allocatable": allocatable}})
    fw = sched.frameworks[NAME]
    fw.percentage_of_nodes_to_score = percentage
    (fast,) = [p for p in fw.filter_plugins if p.name == "InterPodAffinity"]
    assert isinstance(fast, InterPodAffinity)
    without_table: Any = _WithoutTable(sched.snapshot)
    reference = InterPodAffinity(
        parse_args({}), FrameworkHandle(FakeApiClient(), without_table, StaticNamespaces(namespaces))
    )
    bound: list[dict[str, Any]] = []
    for change, value in steps:
        if change == "bind":
            informers.on_pod("ADDED", value)
            bound.append(value)
        elif change == "delete" and bound:
            informers.on_pod("DELETED", bound.pop(value % len(bound)))
        elif change == "relabel":
            name, team = value
            informers.on_namespace("MODIFIED", {"metadata": {"name": name, "labels": {"team": team} if team else {}}})
        if change != "schedule":
            continue
        sched.cache.update_snapshot(sched.snapshot)
        pod = Pod.from_raw(value)
        infos = sched.snapshot.list()
        table = sched.snapshot.table
        got, want = CycleState(), CycleState()
        _, status = fast.pre_filter(got, pod, infos)
        _, ref_status = reference.pre_filter(want, pod, infos)
        assert (status and (status.code, status.reasons)) == (ref_status and (ref_status.code, ref_status.reasons))
        if status is None:
            verdicts = [fast.filter(got, pod, info) for info in infos]
            expected = [reference.filter(want, pod, info) for info in infos]
            assert [v and (v.code, v.reasons) for v in verdicts] == [v and (v.code, v.reasons) for v in expected]
            batch = fast.filter_batch(got, pod, table)
            assert batch is not None
            assert agrees(batch, expected, fast.name)
        status = fast.pre_score(got, pod, infos)
        ref_status = reference.pre_score(want, pod, infos)
        assert (status and status.code) == (ref_status and ref_status.code)
        if status is None:
            scores = [NodeScore(info.name, fast.score(got, pod, info)[0]) for info in infos]
            ref_scores = [NodeScore(info.name, reference.score(want, pod, info)[0]) for info in infos]
            assert [s.score for s in scores] == [s.score for s in ref_scores]
            fast.normalize_score(got, pod, scores)
            reference.normalize_score(want, pod, ref_scores)
            assert [s.score for s in scores] == [s.score for s in ref_scores]
        results = []
        for path in ("batch", "reference"):
            sched.next_start_node_index = 3
            state = CycleState()
            _, status, _ = fw.run_pre_filter(state, pod, infos)
            if status is not None:
                break
            if path == "batch":
                feasible, diagnosis = sched._find_batch(fw, state, pod, Diagnosis())
            else:
                feasible, diagnosis = sched._find_per_node(fw, state, pod, infos, Diagnosis())
            results.append(diagnosed(feasible, diagnosis, pod, sched))
        if len(results) == 2:
            assert results[0] == results[1]


def test_batch_path_records_each_nodes_first_rejecting_plugin_without_per_node_filters() -> None:
    """Nodes rejected by several plugins get the first one's status in profile order, with all of
    its reasons, straight from the batch verdicts: the migrated plugins' per-node Filter never runs."""

    def make(i: int, cpu: str, pods: str = "110", **spec: Any) -> dict[str, Any]:
        zone = "b" if i == 3 else "a"
        labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": zone}
        return {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": labels},
            "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": pods}},
        }

    taint = [TAINTS[0]]
    nodes = [
        make(0, "500m", unschedulable=True, taints=taint),  # NodeUnschedulable, TaintToleration, NodeResourcesFit
        make(1, "500m", taints=taint),  # TaintToleration, NodeResourcesFit
        make(2, "500m", pods="0"),  # NodeResourcesFit: three reasons, unresolvable
        make(3, "500m"),  # NodeAffinity, NodeResourcesFit
        make(4, "2"),  # NodeResourcesFit: the existing pod leaves too little cpu
        make(5, "4"),
    ]
    existing = {
        "metadata": {"name": "e0", "namespace": "default", "uid": "e0"},
        "spec": {"nodeName": "n4", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]},
    }
    sched = load(nodes, [existing])
    fw = sched.frameworks[NAME]
    raw = {
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {
            "schedulerName": NAME,
            "nodeSelector": {"topology.kubernetes.io/zone": "a"},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
        },
    }
    pod = Pod.from_raw(raw)
    results = []
    for path in ("reference", "batch"):
        if path == "batch":
            for plugin in fw.filter_plugins:
                if plugin.name in MIGRATED:
                    plugin.filter = _not_called  # type: ignore[method-assign,assignment]
        sched.next_start_node_index = 0
        state = CycleState()
        _, status, _ = fw.run_pre_filter(state, pod, sched.snapshot.list())
        assert status is None
        if path == "batch":
            feasible, diagnosis = sched._find_batch(fw, state, pod, Diagnosis())
        else:
            feasible, diagnosis = sched._find_per_node(fw, state, pod, sched.snapshot.list(), Diagnosis())
        results.append(diagnosed(feasible, diagnosis, pod, sched))
    assert results[0] == results[1]
    recorded = {name: (plugin, reasons) for name, _, reasons, plugin in results[1][1]}
    assert recorded == {
        "n0": ("NodeUnschedulable", ("node(s) were unschedulable",)),
        "n1": ("TaintToleration", ("node(s) had untolerated taint(s)",)),
        "n2": ("NodeResourcesFit", ("Too many pods", "Insufficient cpu", "Insufficient memory")),
        "n3": ("NodeAffinity", ("node(s) didn't match Pod's node affinity/selector",)),
        "n4": ("NodeResourcesFit", ("Insufficient cpu", "Insufficient memory")),
        "n5": ("NodeResourcesFit", ("Insufficient memory",)),
    }


MIGRATED = {"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "InterPodAffinity"}


def _not_called(*args: Any) -> None:
    raise AssertionError("a per-node Filter ran for a node its batch verdicts already explained")


def test_batch_path_works_out_reasons_only_for_the_rejected_rows_it_reaches() -> None:
    """The common cycle, every node feasible, pays for the masks alone: no batch form is asked
    why a row failed. With rejections, each plugin is asked once, about the rows it is first to
    reject among those the round-robin order reached."""
    nodes = [
        {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": {}},
            "spec": {"taints": [TAINTS[0]] if i in (1, 2) else []},
            "status": {"allocatable": {"cpu": "1" if i in (2, 3) else "4", "memory": "4Gi", "pods": "110"}},
        }
        for i in range(6)
    ]
    sched = load(nodes, [])
    fw = sched.frameworks[NAME]
    asked: list[tuple[str, list[int]]] = []
    for plugin in fw.filter_plugins:
        batch = getattr(plugin, "filter_batch", None)
        if batch is None:
            continue

        def recording(state: CycleState, pod: Pod, table: Any, batch: Any = batch, name: str = plugin.name) -> Any:
            result = batch(state, pod, table)
            if isinstance(result, FilterVerdicts) and result.keys_of is not None:
                keys_of = result.keys_of

                def keys(rows: Any) -> Any:
                    asked.append((name, rows.tolist()))
                    return keys_of(rows)

                result.keys_of = keys
            return result

        plugin.filter_batch = recording  # type: ignore[attr-defined]

    def find(cpu: str) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        raw = {
            "metadata": {"name": f"p{cpu}", "namespace": "default", "uid": f"p{cpu}"},
            "spec": {"schedulerName": NAME, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }
        pod = Pod.from_raw(raw)
        sched.next_start_node_index = 0
        state = CycleState()
        assert fw.run_pre_filter(state, Pod.from_raw(raw), sched.snapshot.list())[1] is None
        _, diagnosis = sched._find_batch(fw, state, pod, Diagnosis())
        return {k: (v.plugin, v.reasons) for k, v in diagnosis.node_to_status.items()}

    # n1 and n2 carry a taint no pod tolerates: TaintToleration's one reason needs no keys.
    assert find("100m") == {n: ("TaintToleration", ("node(s) had untolerated taint(s)",)) for n in ("n1", "n2")}
    assert asked == []
    sched.cache.update_snapshot(sched.snapshot)
    rejected = find("2")
    assert rejected["n3"] == ("NodeResourcesFit", ("Insufficient cpu",))
    # n2 lacks cpu too, but TaintToleration rejects it first: NodeResourcesFit is asked about n3 only.
    assert asked == [("NodeResourcesFit", [3])]


def test_spread_batch_filter_names_each_nodes_first_failing_constraint() -> None:
    """Two hard constraints: a node whose zone is too full and that lacks the second constraint's
    key fails the first (its skew), not the second (the missing label)."""

    def make(i: int, zone: str, disk: str | None) -> dict[str, Any]:
        labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": zone}
        if disk:
            labels["disk"] = disk
        return {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"}},
        }

    def web(name: str, node_name: str = "", constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulerName": NAME, "nodeName": node_name, "containers": [{"name": "c"}]}
        if constraints:
            spec["topologySpreadConstraints"] = constraints
        return {"metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": "web"}}, "spec": spec}

    nodes = [make(0, "a", None), make(1, "a", "ssd"), make(2, "b", "hdd")]
    sched = load(nodes, [web("e0", "n1"), web("e1", "n1")])
    fw = sched.frameworks[NAME]
    selector = {"matchLabels": {"app": "web"}}
    pod = Pod.from_raw(
        web(
            "p",
            constraints=[
                {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
                for key in ("topology.kubernetes.io/zone", "disk")
            ],
        )
    )
    spread = next(p for p in fw.filter_plugins if p.name == "PodTopologySpread")
    state = CycleState()
    _, status, _ = fw.run_pre_filter(state, pod, sched.snapshot.list())
    assert status is None
    verdicts = spread.filter_batch(state, pod, sched.snapshot.table)  # type: ignore[attr-defined]
    assert isinstance(verdicts, FilterVerdicts)
    expected = [spread.filter(state, pod, info) for info in sched.snapshot.list()]
    skewed = (Code.UNSCHEDULABLE, ("node(s) didn't match pod topology spread constraints",), "PodTopologySpread")
    assert [described(s, "") for s in expected] == [skewed, skewed, None]
    assert agrees(verdicts, expected, "PodTopologySpread")


def test_extended_resource_columns_follow_the_cache() -> None:
    """The table's requested column of an extended resource, made when a pod first asks about it,
    is kept row by row as the cache assumes, confirms and forgets pods, and equals a fresh count."""
    rng = random.Random(11)
    nodes = [
        {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1"},
            "status": {"allocatable": {"cpu": "64", "pods": "110", "example.com/gpu": str(rng.randint(0, 8))}},
        }
        for i in range(6)
    ]
    sched = load(nodes, [])
    table = sched.snapshot.table
    assert table.req_scalar("example.com/gpu").tolist() == [0] * 6
    pods: list[Pod] = []
    for step in range(60):
        if pods and rng.random() < 0.3:
            sched.cache.forget_pod(pods.pop(rng.randrange(len(pods))))
        else:
            raw = {
                "metadata": {"name": f"p{step}", "namespace": "ns", "uid": f"p{step}"},
                "spec": {
                    "nodeName": f"n{rng.randrange(6)}",
                    "containers": [
                        {"name": "c", "resources": {"requests": {"example.com/gpu": str(rng.randint(0, 2))}}}
                    ],
                },
            }
            pod = Pod.from_raw(raw)
            sched.cache.assume_pod(pod)
            pods.append(pod)
        sched.cache.update_snapshot(sched.snapshot)
        fresh = [info.requested.scalar.get("example.com/gpu", 0) for info in sched.snapshot.list()]
        assert table.req_scalar("example.com/gpu").tolist() == fresh
    assert any(fresh)


def test_extended_resource_dra_would_allocate_passes_where_no_node_offers_it() -> None:
    """With a DeviceClass behind example.com/gpu (kube's shouldDelegateResourceToDRA), a node that
    offers none of it passes NodeResourcesFit; one offering some is judged by its amount, as the
    per-node form does."""
    from plugins.noderesourcesfit import filtering

    rng = random.Random(5)
    nodes = [
        {
            "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1"},
            "status": {"allocatable": {"cpu": "4", "pods": "110", "example.com/gpu": str(rng.choice([0, 0, 1, 2]))}},
        }
        for i in range(8)
    ]
    existing = [
        {
            "metadata": {"name": f"e{i}", "namespace": "ns", "uid": f"e{i}"},
            "spec": {
                "nodeName": f"n{rng.randrange(8)}",
                "containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1", "cpu": "1"}}}],
            },
        }
        for i in range(6)
    ]
    sched = load(nodes, existing)
    infos, table = sched.snapshot.list(), sched.snapshot.table
    seen: set[Described] = set()
    for gpus in ("1", "2", "3"):
        pod = Pod.from_raw(
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "p"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": gpus, "cpu": "2"}}}]
                },
            }
        )
        for delegate in (filtering.never_delegate, lambda name: name == "example.com/gpu"):
            state = CycleState()
            filtering.pre_filter(state, pod)
            verdicts = filtering.filter_batch(state, pod, table, delegate=delegate)
            assert verdicts is not None
            expected = [filtering.filter_node(state, pod, info, frozenset(), frozenset(), delegate) for info in infos]
            assert agrees(verdicts, expected, "NodeResourcesFit")
            seen.update(described(status, "NodeResourcesFit") for status in expected)
    assert None in seen and len(seen) >= 3
