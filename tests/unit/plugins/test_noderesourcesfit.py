"""NodeResourcesFit, ported from kube-scheduler v1.37.2 plugins/noderesources.

fit_test.go (TestEnoughRequests, TestNotEnoughRequests, TestStorageRequests,
TestRestartableInitContainers, TestFitScore, TestIsFit, Test_isSchedulableAfterNodeChange),
least_allocated_test.go, most_allocated_test.go and requested_to_capacity_ratio_test.go.
The DRA-backed extended resource cases of TestEnoughRequests are at the end (their DRA score
cases are left out: kube's DRA pre-score is not ported). Left out: the
in-place-resize preemption cases (InPlacePodVerticalScalingSchedulerPreemption is alpha, off),
placement scoring (GenericWorkload, off), and the "Resources not set" / zero-weight cases, which
the v1 config defaulting this scheduler reads its args through turns into the default resources
and weight 1. Every scoring case also runs the batch form where the plugin has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plugins.noderesourcesfit as fit
from plugins.helper.resource_allocation import allocatable_and_requested
from plugins.helper.shape_score import broken_linear
from plugins.noderesourcesfit.resource_allocation import ResourceSpec, most_allocated, placement_score
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupStates
from scheduler.framework.types import Code, CycleState, NodeInfo, Placement, QueueingHint, Status
from scheduler.model.objects import Node, Pod
from scheduler.model.podgroups import PodGroup
from scheduler.model.quantity import go_add, go_div, go_mul
from scheduler.testing.builders import PodBuilder, make_handle, make_node, make_pod, node_info, snapshot

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
EXTENDED_RES = "abc.com/xyz"

DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
EXTENDED_RESOURCE_SET = [*DEFAULT_RESOURCES, {"name": EXTENDED_RES, "weight": 1}]


def r(milli_cpu: int = 0, memory: int = 0, ephemeral: int = 0, **scalars: int) -> dict[str, str]:
    """framework.Resource as newResourcePod writes it into one container's requests."""
    out = {"cpu": f"{milli_cpu}m", "memory": str(memory), "pods": "0", "ephemeral-storage": str(ephemeral)}
    out.update({name.replace("__", "/").replace("_", "."): str(v) for name, v in scalars.items()})
    return out


def s(**scalars: int) -> dict[str, int]:
    return scalars


def resource_pod(*usages: Mapping[str, str], init: Sequence[Mapping[str, str]] = (), name: str = "p") -> PodBuilder:
    pod = make_pod(name)
    for usage in usages:
        pod.container(requests=usage)
    for usage in init:
        pod.init_container(requests=usage)
    return pod


def with_scalars(usage: dict[str, str], scalars: Mapping[str, int]) -> dict[str, str]:
    return {**usage, **{k: str(v) for k, v in scalars.items()}}


def fit_node(allocatable: Mapping[str, Any] | None = None) -> Node:
    """makeAllocatableResources(10, 20, 32, 5, 20, 5)."""
    return (
        make_node("node")
        .capacity(
            allocatable
            or {"cpu": "10m", "memory": "20", "pods": "32", EXT_A: "5", "ephemeral-storage": "20", HUGE_A: "5"}
        )
        .obj()
    )


def run_filter(plugin: fit.NodeResourcesFit, pod: Pod, info: NodeInfo) -> Status | None:
    state = CycleState()
    result, status = plugin.pre_filter(state, pod, [info])
    assert result is None and status is None
    verdict = plugin.filter(state, pod, info)
    table = snapshot(info).table
    batch = plugin.filter_batch(state, pod, table)
    if batch is not None:
        assert (None if batch.passes[0] else batch.statuses(np.zeros(1, np.int64))[0]) == verdict
    return verdict


U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

# (name, pod, the usage of the pod already on the node, args, want (code, reasons) or None)
ENOUGH_REQUESTS: list[tuple[str, PodBuilder, dict[str, str], dict[str, Any], tuple[Code, tuple[str, ...]] | None]] = [
    ("no resources requested always fits", make_pod("p"), r(10, 20), {}, None),
    (
        "too many resources fails",
        resource_pod(r(1, 1)),
        r(10, 20),
        {},
        (U, ("Insufficient cpu", "Insufficient memory")),
    ),
    (
        "too many resources fails due to init container cpu",
        resource_pod(r(1, 1), init=[r(3, 1)]),
        r(8, 19),
        {},
        (U, ("Insufficient cpu",)),
    ),
    (
        "too many resources fails due to highest init container cpu",
        resource_pod(r(1, 1), init=[r(3, 1), r(2, 1)]),
        r(8, 19),
        {},
        (U, ("Insufficient cpu",)),
    ),
    (
        "too many resources fails due to init container memory",
        resource_pod(r(1, 1), init=[r(1, 3)]),
        r(9, 19),
        {},
        (U, ("Insufficient memory",)),
    ),
    (
        "too many resources fails due to highest init container memory",
        resource_pod(r(1, 1), init=[r(1, 3), r(1, 2)]),
        r(9, 19),
        {},
        (U, ("Insufficient memory",)),
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        resource_pod(r(1, 1), init=[r(1, 1)]),
        r(9, 19),
        {},
        None,
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init containers",
        resource_pod(r(1, 1), init=[r(1, 1), r(1, 1)]),
        r(9, 19),
        {},
        None,
    ),
    ("both resources fit", resource_pod(r(1, 1)), r(5, 5), {}, None),
    ("one resource memory fits", resource_pod(r(2, 1)), r(9, 5), {}, (U, ("Insufficient cpu",))),
    ("one resource cpu fits", resource_pod(r(1, 2)), r(5, 19), {}, (U, ("Insufficient memory",))),
    ("equal edge case", resource_pod(r(5, 1)), r(5, 19), {}, None),
    ("equal edge case for init container", resource_pod(r(4, 1), init=[r(5, 1)]), r(5, 19), {}, None),
    ("extended resource fits", resource_pod(with_scalars(r(), {EXT_A: 1})), r(), {}, None),
    (
        "extended resource fits for init container",
        resource_pod(r(), init=[with_scalars(r(), {EXT_A: 1})]),
        r(),
        {},
        None,
    ),
    (
        "extended resource capacity enforced",
        resource_pod(with_scalars(r(1, 1), {EXT_A: 10})),
        with_scalars(r(), {EXT_A: 0}),
        {},
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource capacity enforced for init container",
        resource_pod(r(), init=[with_scalars(r(1, 1), {EXT_A: 10})]),
        with_scalars(r(), {EXT_A: 0}),
        {},
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced",
        resource_pod(with_scalars(r(1, 1), {EXT_A: 1})),
        with_scalars(r(), {EXT_A: 5}),
        {},
        (U, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for init container",
        resource_pod(r(), init=[with_scalars(r(1, 1), {EXT_A: 1})]),
        with_scalars(r(), {EXT_A: 5}),
        {},
        (U, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        resource_pod(with_scalars(r(1, 1), {EXT_A: 3}), with_scalars(r(1, 1), {EXT_A: 3})),
        with_scalars(r(), {EXT_A: 2}),
        {},
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable admits multiple init containers",
        resource_pod(r(), init=[with_scalars(r(1, 1), {EXT_A: 3}), with_scalars(r(1, 1), {EXT_A: 3})]),
        with_scalars(r(), {EXT_A: 2}),
        {},
        None,
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        resource_pod(r(), init=[with_scalars(r(1, 1), {EXT_A: 6}), with_scalars(r(1, 1), {EXT_A: 3})]),
        with_scalars(r(), {EXT_A: 2}),
        {},
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        resource_pod(with_scalars(r(1, 1), {EXT_B: 1})),
        r(),
        {},
        (UU, (f"Insufficient {EXT_B}",)),
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        resource_pod(r(), init=[with_scalars(r(1, 1), {EXT_B: 1})]),
        r(),
        {},
        (UU, (f"Insufficient {EXT_B}",)),
    ),
    (
        "kubernetes.io resource capacity enforced",
        resource_pod(with_scalars(r(1, 1), {K8S_A: 10})),
        r(),
        {},
        (UU, (f"Insufficient {K8S_A}",)),
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        resource_pod(r(), init=[with_scalars(r(1, 1), {K8S_B: 10})]),
        r(),
        {},
        (UU, (f"Insufficient {K8S_B}",)),
    ),
    (
        "hugepages resource capacity enforced",
        resource_pod(with_scalars(r(1, 1), {HUGE_A: 10})),
        with_scalars(r(), {HUGE_A: 0}),
        {},
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "hugepages resource capacity enforced for init container",
        resource_pod(r(), init=[with_scalars(r(1, 1), {HUGE_A: 10})]),
        with_scalars(r(), {HUGE_A: 0}),
        {},
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        resource_pod(with_scalars(r(1, 1), {HUGE_A: 3}), with_scalars(r(1, 1), {HUGE_A: 3})),
        with_scalars(r(), {HUGE_A: 2}),
        {},
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "skip checking ignored extended resource",
        resource_pod(with_scalars(r(1, 1), {EXT_B: 1})),
        r(),
        {"ignoredResources": [EXT_B]},
        None,
    ),
    (
        "resources + pod overhead fits",
        resource_pod(r(1, 1)).overhead(cpu="3m", memory="13"),
        r(5, 5),
        {},
        None,
    ),
    (
        "requests + overhead does not fit for memory",
        resource_pod(r(1, 1)).overhead(cpu="1m", memory="15"),
        r(5, 5),
        {},
        (U, ("Insufficient memory",)),
    ),
    (
        "skip checking ignored extended resource via resource groups",
        resource_pod(with_scalars(r(1, 1), {EXT_B: 1, K8S_A: 1})),
        r(),
        {"ignoredResourceGroups": ["example.com"]},
        (UU, (f"Insufficient {K8S_A}",)),
    ),
    (
        "a *kubernetes.io/ resource is never ignored through its group",
        resource_pod(with_scalars(r(1, 1), {K8S_B: 1})),
        r(),
        {"ignoredResourceGroups": ["subdomain.kubernetes.io"], "ignoredResources": [K8S_B]},
        (UU, (f"Insufficient {K8S_B}",)),
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        resource_pod(with_scalars(r(1, 1), {EXT_A: 0})),
        with_scalars(r(), {EXT_A: 6}),
        {},
        None,
    ),
    (
        "skip checking resource request with quantity zero",
        make_pod("p").container(requests={EXT_A: "1"}),
        with_scalars(r(20, 30), {EXT_A: 1}),
        {},
        None,
    ),
    (
        "both pod-level and container-level resources fit",
        resource_pod(r(1, 1)).spec(resources={"requests": {"cpu": "1m", "memory": "2"}}),
        r(5, 5),
        {},
        None,
    ),
    (
        "pod-level cpu resource not fit",
        resource_pod(r(1, 1)).spec(resources={"requests": {"cpu": "7m", "memory": "2"}}),
        r(5, 5),
        {},
        (U, ("Insufficient cpu",)),
    ),
    (
        "pod-level memory resource not fit",
        resource_pod(r(1, 1)).spec(resources={"requests": {"cpu": "3m", "memory": "2"}}),
        r(5, 19),
        {},
        (U, ("Insufficient memory",)),
    ),
    (
        "pod-level hugepages resource fit",
        make_pod("p").spec(resources={"requests": {"cpu": "3m", "memory": "2", HUGE_A: "5"}}),
        {},
        {},
        None,
    ),
    (
        "both pod-level and container-level hugepages resource fit",
        resource_pod(with_scalars(r(1, 1), {HUGE_A: 3})).spec(
            resources={"requests": {"cpu": "3m", "memory": "2", HUGE_A: "5"}}
        ),
        {},
        {},
        None,
    ),
    (
        "pod-level hugepages resource not fit",
        make_pod("p").spec(resources={"requests": {"cpu": "3m", "memory": "2", HUGE_A: "10"}}),
        {},
        {},
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        resource_pod(r(1, 1), init=[r(1, 1)]).spec(resources={"requests": {"cpu": "3m", "memory": "2"}}),
        r(5, 19),
        {},
        (U, ("Insufficient memory",)),
    ),
    (
        "extended resource backed by device plugin",
        resource_pod(with_scalars(r(), {EXT_A: 1})),
        r(),
        {},
        None,
    ),
    # testStorageRequests
    ("empty storage requested, and pod fits", resource_pod(r(1, 1)), r(2, 10), {}, None),
    (
        "storage ephemeral local storage request exceeds allocatable",
        resource_pod(r(ephemeral=25)),
        r(2, 2),
        {},
        (UU, ("Insufficient ephemeral-storage",)),
    ),
    ("ephemeral local storage is sufficient", resource_pod(r(ephemeral=5)), r(2, 2, ephemeral=10), {}, None),
    ("pod fits", resource_pod(r(ephemeral=10)), r(2, 2), {}, None),
]


@pytest.mark.parametrize(
    ("pod", "existing", "args", "want"), [c[1:] for c in ENOUGH_REQUESTS], ids=[c[0] for c in ENOUGH_REQUESTS]
)
def test_enough_requests(
    pod: PodBuilder,
    existing: dict[str, str],
    args: dict[str, Any],
    want: tuple[Code, tuple[str, ...]] | None,
) -> None:
    plugin = fit.new(args, make_handle())
    info = node_info(fit_node(), make_pod("existing").node("node").container(requests=existing))
    status = run_filter(plugin, pod.obj(), info)
    if want is None:
        assert status is None
    else:
        assert status is not None
        assert (status.code, status.reasons) == want


@pytest.mark.parametrize(
    ("pod", "existing"),
    [
        (make_pod("p"), r(10, 20)),
        (resource_pod(r(1, 1)), r(5, 5)),
        (resource_pod(r(5, 1)), r(5, 19)),
        (resource_pod(r(5, 1), init=[r(5, 1)]), r(5, 19)),
    ],
    ids=[
        "even without specified resources, predicate fails when there's no space for additional pod",
        "even if both resources fit, predicate fails when there's no space for additional pod",
        "even for equal edge case, predicate fails when there's no space for additional pod",
        "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
    ],
)
def test_not_enough_requests(pod: PodBuilder, existing: dict[str, str]) -> None:
    node = fit_node({"cpu": "10m", "memory": "20", "pods": "1"})
    info = node_info(node, make_pod("existing").node("node").container(requests=existing))
    status = run_filter(fit.new({}, make_handle()), pod.obj(), info)
    assert status == Status(Code.UNSCHEDULABLE, ("Too many pods",), plugin=fit.NAME)


@pytest.mark.parametrize(
    ("request_", "sidecar", "want"),
    [
        (None, None, None),
        ({"cpu": "1m"}, {"cpu": "1m"}, None),
        ({"cpu": "1m"}, {"cpu": "2m"}, (UU, ("Insufficient cpu",))),
    ],
    ids=[
        "allow pod with restartable init containers",
        "allow pod if the total requested resources do not exceed the node's allocatable resources",
        "not allow pod if the total requested resources do exceed the node's allocatable resources",
    ],
)
def test_restartable_init_containers(
    request_: dict[str, str] | None, sidecar: dict[str, str] | None, want: tuple[Code, tuple[str, ...]] | None
) -> None:
    pod = make_pod("p").container(requests=request_).init_container(requests=sidecar, sidecar=True).obj()
    info = node_info(make_node("node").capacity(cpu="2m", memory="0", pods="1"))
    status = run_filter(fit.new({}, make_handle()), pod, info)
    assert (status.code, status.reasons) == want if status is not None else want is None


def test_allow_pod_without_restartable_init_containers() -> None:
    pod = make_pod("p").container().obj()
    info = node_info(make_node("node").capacity(cpu="2m", memory="0", pods="1"))
    assert run_filter(fit.new({}, make_handle()), pod, info) is None


def test_pod_level_request_of_100_cpus_does_not_fit_a_node_without_cpu() -> None:
    # The probe that found pod-level resources ignored: 100 CPUs asked at pod level, containers silent.
    pod = make_pod("p").container().spec(resources={"requests": {"cpu": "100"}}).obj()
    info = node_info(make_node("node").capacity(cpu="0", memory="1Gi", pods="110"))
    status = run_filter(fit.new({}, make_handle()), pod, info)
    assert status == Status(UU, ("Insufficient cpu",), plugin=fit.NAME)


# ---- scoring ---------------------------------------------------------------------------------


def score_nodes(
    args: dict[str, Any], pod: PodBuilder, nodes: Sequence[Node], existing: Sequence[PodBuilder] = ()
) -> list[int]:
    pods = [p.obj() for p in existing]
    infos = [node_info(n, *[p for p in pods if p.node_name == n.name]) for n in nodes]
    handle = make_handle(*infos)
    plugin = fit.new(args, handle)
    target = pod.obj()
    state = CycleState()
    assert plugin.pre_score(state, target, infos) is None
    scores = [plugin.score(state, target, info)[0] for info in infos]
    unprepared = [plugin.score(CycleState(), target, info)[0] for info in infos]  # PreScore not called
    assert unprepared == scores
    table = handle.snapshot.table  # type: ignore[attr-defined]
    batch = plugin.score_batch(state, target, table, table.arange)
    if batch is not None:
        assert batch.tolist() == scores
    return scores


def nodes_with(*capacities: Mapping[str, str]) -> list[Node]:
    return [make_node(f"node{i + 1}").capacity({"pods": "32", **c}).obj() for i, c in enumerate(capacities)]


def req(*containers: Mapping[str, str], node: str = "", name: str = "p") -> PodBuilder:
    pod = make_pod(name)
    if node:
        pod.node(node)
    for c in containers:
        pod.container(requests=c)
    return pod


def least(resources: list[dict[str, Any]] = DEFAULT_RESOURCES) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "LeastAllocated", "resources": resources}}


def most(resources: list[dict[str, Any]] = DEFAULT_RESOURCES) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "MostAllocated", "resources": resources}}


def ratio(shape: list[tuple[int, int]], resources: list[dict[str, Any]] = DEFAULT_RESOURCES) -> dict[str, Any]:
    points = [{"utilization": u, "score": sc} for u, sc in shape]
    return {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": resources,
            "requestedToCapacityRatio": {"shape": points},
        }
    }


CM = {"cpu": "4000", "memory": "10000"}
BIG = {"cpu": "10000", "memory": "20000"}
TWO_CONTAINERS = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
EXT_NODES = nodes_with({"cpu": "6000", "memory": "10000"}, {"cpu": "6000", "memory": "10000", EXTENDED_RES: "4"})
EXT_NODES_BOTH = nodes_with(
    {"cpu": "6000", "memory": "10000", EXTENDED_RES: "4"}, {"cpu": "6000", "memory": "10000", EXTENDED_RES: "10"}
)
EXT_WEIGHTED = [{"name": EXTENDED_RES, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
FIXED = [
    req({"cpu": "3000", "memory": "0"}, node="node1", name="e1"),
    req({"cpu": "3000", "memory": "0"}, node="node1", name="e2"),
    req({"cpu": "3000", "memory": "0"}, node="node2", name="e3"),
    req({"cpu": "3000", "memory": "5000"}, node="node2", name="e4"),
]
ONE_EACH = [
    req({"cpu": "3000", "memory": "0"}, node="node1", name="e1"),
    req({"cpu": "3000", "memory": "5000"}, node="node2", name="e2"),
]
EMPTY_PODS = [make_pod("e1").node("node1"), make_pod("e2").node("node1"), make_pod("e3").node("node2")]

SCORE_CASES: list[tuple[str, dict[str, Any], PodBuilder, list[Node], list[PodBuilder], list[int]]] = [
    # least_allocated_test.go
    ("least: nothing scheduled, nothing requested", least(), make_pod("p"), nodes_with(CM, CM), [], [100, 100]),
    (
        "least: nothing scheduled, resources requested, differently sized nodes",
        least(),
        req(*TWO_CONTAINERS),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [],
        [37, 50],
    ),
    (
        "least: no resources requested, pods scheduled",
        least(),
        make_pod("p"),
        nodes_with(CM, CM),
        EMPTY_PODS,
        [100, 100],
    ),
    (
        "least: no resources requested, pods scheduled with resources",
        least(),
        make_pod("p"),
        nodes_with(BIG, BIG),
        FIXED,
        [70, 57],
    ),
    (
        "least: resources requested, pods scheduled with resources",
        least(),
        req(*TWO_CONTAINERS),
        nodes_with(BIG, BIG),
        ONE_EACH,
        [57, 45],
    ),
    (
        "least: resources requested, pods scheduled with resources, differently sized nodes",
        least(),
        req(*TWO_CONTAINERS),
        nodes_with(BIG, {"cpu": "10000", "memory": "50000"}),
        ONE_EACH,
        [57, 60],
    ),
    (
        "least: requested resources exceed node capacity",
        least(),
        req({"cpu": "3000", "memory": "0"}),
        nodes_with(CM, CM),
        ONE_EACH,
        [50, 25],
    ),
    (
        "least: zero node resources, pods scheduled with resources",
        least(),
        make_pod("p"),
        [make_node("node1").obj(), make_node("node2").obj()],
        ONE_EACH,
        [0, 0],
    ),
    (
        "least: different weight on CPU and memory, differently sized nodes",
        least([{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]),
        req(*TWO_CONTAINERS, node="node1"),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [],
        [41, 50],
    ),
    (
        "least: bypass extended resource if the pod does not request",
        least(EXTENDED_RESOURCE_SET),
        req(*TWO_CONTAINERS, node="node1"),
        EXT_NODES,
        [],
        [50, 50],
    ),
    (
        "least: honor extended resource if the pod requests",
        least(EXTENDED_RESOURCE_SET),
        req({"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}, node="node1"),
        EXT_NODES_BOTH,
        [],
        [50, 60],
    ),
    (
        "least: if the node doesn't have a resource",
        least(EXT_WEIGHTED),
        req({"cpu": "3000", "memory": "4000"}, node="node1"),
        EXT_NODES,
        [],
        [55, 55],
    ),
    # most_allocated_test.go
    ("most: nothing scheduled, nothing requested", most(), make_pod("p"), nodes_with(CM, CM), [], [0, 0]),
    (
        "most: nothing scheduled, resources requested, differently sized nodes",
        most(),
        req(*TWO_CONTAINERS),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [],
        [62, 50],
    ),
    (
        "most: no resources requested, pods scheduled with resources",
        most(),
        make_pod("p"),
        nodes_with(BIG, BIG),
        FIXED,
        [30, 42],
    ),
    (
        "most: resources requested, pods scheduled with resources",
        most(),
        req(*TWO_CONTAINERS),
        nodes_with(BIG, BIG),
        ONE_EACH,
        [42, 55],
    ),
    (
        "most: resources requested equal node capacity",
        most(),
        req({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
        nodes_with({"cpu": "5000", "memory": "10000"}, {"cpu": "10000", "memory": "9000"}),
        [],
        [95, 75],
    ),
    (
        "most: different weight on CPU and memory, differently sized nodes",
        most([{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]),
        req(*TWO_CONTAINERS),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [],
        [58, 50],
    ),
    (
        "most: no resources requested, pods scheduled, nonzero request for resource",
        most(),
        make_pod("p").container("container"),
        nodes_with({"cpu": "250m", "memory": "1000Mi"}, {"cpu": "250m", "memory": "1000Mi"}),
        [make_pod("e1").node("node1").container("container"), make_pod("e2").node("node1").container("container")],
        [80, 30],
    ),
    (
        "most: bypass extended resource if the pod does not request",
        most(EXTENDED_RESOURCE_SET),
        req(*TWO_CONTAINERS),
        EXT_NODES,
        [],
        [50, 50],
    ),
    (
        "most: honor extended resource if the pod request",
        most(EXTENDED_RESOURCE_SET),
        req({"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}, node="node1"),
        EXT_NODES_BOTH,
        [],
        [50, 40],
    ),
    (
        "most: if the node doesn't have a resource",
        most(EXT_WEIGHTED),
        req({"cpu": "3000", "memory": "4000"}, node="node1"),
        EXT_NODES,
        [],
        [45, 45],
    ),
    # requested_to_capacity_ratio_test.go: TestRequestedToCapacityRatioScoringStrategy
    (
        "ratio: nothing scheduled, nothing requested (least requested nodes have priority)",
        ratio([(0, 10), (100, 0)]),
        make_pod("p"),
        nodes_with(CM, CM),
        [make_pod("e1").node("node1"), make_pod("e2").node("node1")],
        [100, 100],
    ),
    (
        "ratio: nothing scheduled, resources requested, differently sized nodes",
        ratio([(0, 10), (100, 0)]),
        req(*TWO_CONTAINERS),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [make_pod("e1").node("node1"), make_pod("e2").node("node1")],
        [38, 50],
    ),
    (
        "ratio: no resources requested, pods scheduled with resources",
        ratio([(0, 10), (100, 0)]),
        make_pod("p"),
        nodes_with(CM, {"cpu": "6000", "memory": "10000"}),
        [
            req({"cpu": "3000", "memory": "5000"}, node="node1", name="e1"),
            req({"cpu": "3000", "memory": "5000"}, node="node2", name="e2"),
        ],
        [38, 50],
    ),
]

# fit_test.go TestFitScore: case1 is the regression test for leaving 0-scored resources out of the
# RequestedToCapacityRatio average (node1's cpu overflows and scores 0: 10, not (0 + 10) / 2 = 5).
FIT_SCORE_PODS = [
    req({"cpu": "2000", "memory": "4000"}, node="node1", name="e1"),
    req({"cpu": "1000", "memory": "2000"}, node="node2", name="e2"),
]
FIT_SCORE_NODES = nodes_with(CM, {"cpu": "6000", "memory": "10000"})
SIDECAR_PODS = [
    req({"cpu": "1000", "memory": "2000"}, node="node1", name="e1").init_container(
        requests={"cpu": "1000", "memory": "2000"}, sidecar=True
    ),
    req({"cpu": "1000", "memory": "2000"}, node="node2", name="e2"),
]
SCORE_CASES += [
    (
        "fit: RequestedToCapacityRatio case1",
        ratio([(0, 10), (100, 0)]),
        req({"cpu": "3000", "memory": "5000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_PODS,
        [10, 32],
    ),
    (
        "fit: RequestedToCapacityRatio case2",
        ratio([(0, 0), (100, 10)]),
        req({"cpu": "3000", "memory": "5000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_PODS,
        [95, 68],
    ),
    ("fit: MostAllocated", most(), req({"cpu": "1000", "memory": "2000"}), FIT_SCORE_NODES, FIT_SCORE_PODS, [67, 36]),
    ("fit: LeastAllocated", least(), req({"cpu": "1000", "memory": "2000"}), FIT_SCORE_NODES, FIT_SCORE_PODS, [32, 63]),
    (
        "fit: MostAllocated with sidecar container",
        most(),
        req({"cpu": "1000", "memory": "2000"}),
        nodes_with(CM, CM),
        SIDECAR_PODS,
        [67, 45],
    ),
    (
        "fit: LeastAllocated with sidecar container",
        least(),
        req({"cpu": "1000", "memory": "2000"}),
        nodes_with(CM, CM),
        SIDECAR_PODS,
        [32, 55],
    ),
]

FOO, BAR = "intel.com/foo", "intel.com/bar"


def bin_nodes(first: Mapping[str, int], second: Mapping[str, int]) -> list[Node]:
    mib = 1024 * 1024
    return [
        make_node(name)
        .capacity({"cpu": "4000m", "memory": str(10000 * mib), **{k: str(v) for k, v in ext.items()}})
        .obj()
        for name, ext in (("node1", first), ("node2", second))
    ]


SINGLE = ratio([(0, 0), (100, 1)], [{"name": FOO, "weight": 1}])
MULTIPLE = ratio([(0, 0), (100, 1)], [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}])
SCORE_CASES += [
    # TestResourceBinPackingSingleExtended
    ("single: nothing scheduled, nothing requested", SINGLE, make_pod("p"), bin_nodes({FOO: 8}, {FOO: 4}), [], [0, 0]),
    (
        "single: resources requested, pods scheduled with less resources",
        SINGLE,
        req({FOO: "2"}),
        bin_nodes({FOO: 8}, {FOO: 4}),
        [make_pod("e1")],
        [2, 5],
    ),
    (
        "single: resources requested, pods scheduled with resources, on node with existing pod running",
        SINGLE,
        req({FOO: "2"}),
        bin_nodes({FOO: 8}, {FOO: 4}),
        [req({FOO: "2"}, node="node2", name="e1")],
        [2, 10],
    ),
    (
        "single: resources requested, pods scheduled with more resources",
        SINGLE,
        req({FOO: "4"}),
        bin_nodes({FOO: 8}, {FOO: 4}),
        [make_pod("e1")],
        [5, 10],
    ),
    # TestResourceBinPackingMultipleExtended
    (
        "multiple: nothing scheduled, nothing requested",
        MULTIPLE,
        make_pod("p"),
        bin_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}),
        [],
        [0, 0],
    ),
    (
        "multiple: resources requested, pods scheduled with less resources",
        MULTIPLE,
        req({FOO: "2", BAR: "2"}),
        bin_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}),
        [make_pod("e1")],
        [4, 3],
    ),
    (
        "multiple: resources requested, pods scheduled with resources, on node with existing pod running",
        MULTIPLE,
        req({FOO: "2", BAR: "2"}),
        bin_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}),
        [req({FOO: "4", BAR: "2"}, node="node2", name="e1")],
        [4, 7],
    ),
    (
        "multiple: resources requested, pods scheduled with more resources",
        MULTIPLE,
        req({FOO: "4", BAR: "2"}),
        bin_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}),
        [make_pod("e1")],
        [5, 5],
    ),
]

# Beyond upstream's tables: falling shape segments truncate toward zero like Go's division.
SCORE_CASES += [
    (
        "ratio: a falling segment truncates toward zero (1% on 100->0 over 30%: 97, not 96)",
        ratio([(0, 10), (30, 0)], [{"name": "cpu", "weight": 1}]),
        req({"cpu": "1"}),
        nodes_with({"cpu": "100", "memory": "1"}),
        [],
        [97],
    ),
    (
        "ratio: a resource scoring 0 is left out of the average on the batch path too",
        ratio([(0, 0), (100, 10)]),
        req({"cpu": "0", "memory": "5000"}),
        nodes_with(CM),
        [],
        [50],
    ),
    (
        # Upstream's Fit builds its scorer without the PodLevelResources flag: the incoming pod is
        # scored by its containers (here the 100m/200Mi defaults), not by spec.resources.
        "least: pod-level requests do not count in the incoming pod's score",
        least(),
        make_pod("p").container().spec(resources={"requests": {"cpu": "2000", "memory": "5000"}}),
        nodes_with(CM),
        [],
        [49],
    ),
    (
        "least: an assigned pod's pod-level requests do count on its node",
        least(),
        req({"cpu": "1000", "memory": "1000"}),
        nodes_with(CM, CM),
        [make_pod("e1").node("node1").container().spec(resources={"requests": {"cpu": "2000", "memory": "5000"}})],
        [32, 82],  # node1: cpu 25, memory 40 (the e1 container's defaults alone would give 37)
    ),
    (
        "least: a configured resource the node has no scalar of (pods) is not scored",
        least([{"name": "pods", "weight": 1}, {"name": "cpu", "weight": 1}]),
        req({"cpu": "1000"}),
        nodes_with(CM),
        [],
        [75],
    ),
]


@pytest.mark.parametrize(
    ("args", "pod", "nodes", "existing", "want"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES]
)
def test_scoring_strategies(
    args: dict[str, Any], pod: PodBuilder, nodes: list[Node], existing: list[PodBuilder], want: list[int]
) -> None:
    assert score_nodes(args, pod, nodes, existing) == want


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ([{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], "scoringStrategy.resources[0].weight"),
        ([{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}], "scoringStrategy.resources[1].weight"),
        ([{"name": "memory", "weight": 101}], "scoringStrategy.resources[0].weight"),
    ],
    ids=["resource with negative weight", "resource weight larger than MaxNodeScore", "memory weight 101"],
)
@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_invalid_weights(resources: list[dict[str, Any]], field: str, strategy: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(field) + ": Invalid value"):
        fit.parse_args({"scoringStrategy": {"type": strategy, "resources": resources}})


def test_zero_weight_defaults_to_one_as_v1_config_does() -> None:
    args = fit.parse_args({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}})
    assert args.resources == (fit.ResourceSpec("cpu", 1),)


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        (
            [(10, 1), (90, 9)],
            [
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        ),
        (
            [(0, 2), (40, 10), (100, 0)],
            [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
        ),
        (
            [(0, 2), (40, 2), (100, 2)],
            [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)],
        ),
        # Falling segment between points: Go truncates -2.5 to -2, Python's // would give -3.
        ([(0, 10), (4, 0)], [(1, 8), (3, 3)]),
    ],
)
def test_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    function = broken_linear(points)
    assert [function(p) for p, _ in assertions] == [want for _, want in assertions]


# ---- fits() and the node queueing hint ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "capacity", "expected"),
    [
        (req({"cpu": "2"}), {"cpu": "1"}, False),
        (req({"cpu": "1"}), {"cpu": "2"}, True),
        (make_pod("p").spec(resources={"requests": {"cpu": "2"}}), {"cpu": "1"}, False),
        (make_pod("p").spec(resources={"requests": {"cpu": "2"}}), {"cpu": "2"}, True),
        (make_pod("p").spec(resources={"requests": {HUGE_A: "2Mi"}}), {HUGE_A: "2Mi"}, True),
        (make_pod("p").spec(resources={"requests": {HUGE_A: "4Mi"}}), {HUGE_A: "2Mi"}, False),
    ],
    ids=[
        "insufficient resource",
        "sufficient resource",
        "insufficient pod-level resource",
        "sufficient pod-level resource",
        "sufficient pod-level resource hugepages",
        "insufficient pod-level resource hugepages",
    ],
)
def test_is_fit(pod: PodBuilder, capacity: dict[str, str], expected: bool) -> None:
    node = make_node("n").capacity({"pods": "32", **capacity}).obj()
    assert fit.fits(pod.obj(), node) is expected


def cap(**resources: str) -> Node:
    return (
        make_node("n")
        .capacity({"pods": "32", **{k.replace("__", "/").replace("_", "."): v for k, v in resources.items()}})
        .obj()
    )


MEM2_A1 = req(with_scalars(r(memory=2), {EXT_A: 1}))


@pytest.mark.parametrize(
    ("pod", "old", "new", "expected"),
    [
        (req(r(memory=2)), None, cap(memory="1"), QueueingHint.SKIP),
        (req(with_scalars(r(), {EXT_A: 1})), None, cap(example_com__bbb="1"), QueueingHint.SKIP),
        (MEM2_A1, None, cap(memory="4", example_com__aaa="2"), QueueingHint.QUEUE),
        (
            MEM2_A1,
            cap(memory="2", example_com__aaa="2"),
            cap(memory="2", example_com__aaa="1", example_com__bbb="2"),
            QueueingHint.SKIP,
        ),
        (MEM2_A1, cap(memory="2", example_com__aaa="1"), cap(memory="2", example_com__aaa="2"), QueueingHint.QUEUE),
        (MEM2_A1, cap(memory="4", example_com__aaa="2"), cap(memory="1", example_com__aaa="2"), QueueingHint.SKIP),
        (MEM2_A1, cap(memory="1", example_com__aaa="2"), cap(memory="4", example_com__aaa="2"), QueueingHint.QUEUE),
    ],
    ids=[
        "skip-queue-on-node-add-without-sufficient-resources",
        "skip-queue-on-node-add-without-required-resource-type",
        "queue-on-node-add-with-sufficient-resources",
        "skip-queue-on-node-unrelated-changes",
        "queue-on-pod-requested-resources-increase",
        "skip-queue-on-node-changes-from-suitable-to-unsuitable",
        "queue-on-node-changes-from-unsuitable-to-suitable",
    ],
)
def test_is_schedulable_after_node_change(pod: PodBuilder, old: Node | None, new: Node, expected: QueueingHint) -> None:
    assert fit._node_grew(pod.obj(), old, new) == expected


def test_batch_filter_matches_on_pod_level_and_resized_pods() -> None:
    # A resized pod on the node is accounted at the larger of spec and allocated resources.
    resized = make_pod("resized").node("n1").container(cpu="1")
    resized.raw["spec"]["containers"][0]["name"] = "c0"
    resized.raw["status"]["containerStatuses"] = [{"name": "c0", "allocatedResources": {"cpu": "3"}}]
    info = node_info(make_node("n1").capacity(cpu="4", memory="1Gi", pods="10"), resized)
    assert info.requested.milli_cpu == 3000
    plugin = fit.new({}, make_handle(info))
    pod = make_pod("p").container().spec(resources={"requests": {"cpu": "2"}}).obj()
    status = run_filter(plugin, pod, info)
    assert status == Status(U, ("Insufficient cpu",), plugin=fit.NAME)
    assert np.array_equal(snapshot(info).table.req_cpu, np.array([3000]))


CPU1 = {"cpu": "1"}


@pytest.mark.parametrize(
    ("pod", "old", "expected"),
    [
        (req(CPU1, name="pod1"), "not-a-pod", QueueingHint.QUEUE),
        (req(CPU1, name="pod1"), req(CPU1, node="fake", name="pod2"), QueueingHint.QUEUE),
        (make_pod("pod1"), make_pod("pod2"), QueueingHint.SKIP),
        (req(CPU1, name="pod1"), req({"cpu": "2"}, name="pod2").nominated_node("fake"), QueueingHint.QUEUE),
    ],
    ids=[
        "backoff-wrong-old-object",
        "queue-on-other-pod-deleted",
        "skip-queue-on-unscheduled-pod-deleted",
        "queue-on-nominated-pod-deleted",
    ],
)
def test_is_schedulable_after_assigned_pod_delete(pod: PodBuilder, old: Any, expected: QueueingHint) -> None:
    old_obj = old.obj() if isinstance(old, PodBuilder) else old
    assert fit._pod_freed(pod.obj(), old_obj, None) == expected


def plr(requests: dict[str, str], name: str, node: str = "") -> PodBuilder:
    """A pod with pod-level requests only (PodLevelResourceRequests)."""
    pod = make_pod(name).container().spec(resources={"requests": requests})
    return pod.node(node) if node else pod


@pytest.mark.parametrize(
    ("pod", "old", "new", "expected"),
    [
        (make_pod("pod1"), "not-a-pod", make_pod("pod2"), QueueingHint.QUEUE),
        (make_pod("pod1"), make_pod("pod2"), "not-a-pod", QueueingHint.QUEUE),
        (req(CPU1, name="pod1"), req({"cpu": "2"}, name="pod2"), req(CPU1, name="pod2"), QueueingHint.SKIP),
        (
            req(CPU1, name="pod1"),
            req({"memory": "2"}, node="fake", name="pod2"),
            req({"memory": "1"}, node="fake", name="pod2"),
            QueueingHint.SKIP,
        ),
        (
            plr(CPU1, "pod1"),
            plr({"memory": "2"}, "pod2", "fake"),
            plr({"memory": "1"}, "pod2", "fake"),
            QueueingHint.SKIP,
        ),
        (
            req(CPU1, name="pod1"),
            req({"cpu": "2"}, node="fake", name="pod2"),
            req(CPU1, node="fake", name="pod2"),
            QueueingHint.QUEUE,
        ),
        (plr(CPU1, "pod1"), plr({"cpu": "2"}, "pod2", "fake"), plr(CPU1, "pod2", "fake"), QueueingHint.QUEUE),
    ],
    ids=[
        "backoff-wrong-old-object",
        "backoff-wrong-new-object",
        "skip-queue-on-other-unscheduled-pod",
        "skip-queue-on-other-pod-unrelated-resource-scaled-down",
        "skip-queue-on-other-pod-unrelated-pod-level-resource-scaled-down",
        "queue-on-other-pod-some-resource-scale-down",
        "queue-on-other-pod-some-pod-level-resource-scale-down",
    ],
)
def test_is_schedulable_after_assigned_pod_scale_down(
    pod: PodBuilder, old: Any, new: Any, expected: QueueingHint
) -> None:
    old_obj = old.obj() if isinstance(old, PodBuilder) else old
    new_obj = new.obj() if isinstance(new, PodBuilder) else new
    assert fit._pod_freed(pod.obj(), old_obj, new_obj) == expected


def test_assigned_pod_finishing_requeues() -> None:
    assigned = req(CPU1, node="fake", name="pod2")
    assert fit._pod_freed(req(CPU1).obj(), assigned.obj(), assigned.phase("Succeeded").obj()) == QueueingHint.QUEUE


# ---- quantities at int64's edge (issue 18) ---------------------------------------------------
# kube's numbers below come from its own formulas run in Go (int64 products wrap, divisions
# truncate) for a 100m / 100Mi pod on an empty node: least_allocated.go's per-resource score and
# the weighted average.


@pytest.mark.parametrize(
    ("capacity", "least", "most"),
    [
        # cpu 1e14 cores: (capacity - requested) * 100 wraps to a negative number; kube's cpu score
        # is -84 (Go truncates; numpy's floor division gave -85), the average (-84 + 99) / 2 = 7.
        ({"cpu": "100e12", "memory": "32Gi"}, 7, 0),
        # cpu 2e14: the wrap lands at +7 for cpu; (7 + 99) / 2 = 53.
        ({"cpu": "200e12", "memory": "32Gi"}, 53, 0),
        # memory 100P: memory's score is -84, (97 - 84) / 2 = 6; MostAllocated (2 + 0) / 2 = 1.
        ({"cpu": "4", "memory": "100P"}, 6, 1),
        # Both: kube's average is -84, outside [0, 100], and kube fails the cycle of every pod that
        # scores this node. Clamped here: the node only ranks itself last.
        ({"cpu": "100e12", "memory": "100P"}, 0, 0),
    ],
)
def test_scores_with_huge_capacities_follow_kubes_int64_arithmetic(
    capacity: dict[str, str], least: int, most: int
) -> None:
    pod = make_pod("p").container(requests={"cpu": "100m", "memory": "100Mi"})
    nodes = nodes_with(capacity)
    assert score_nodes({}, pod, nodes) == [least]
    most_args = {"scoringStrategy": {"type": "MostAllocated", "resources": DEFAULT_RESOURCES}}
    assert score_nodes(most_args, pod, nodes) == [most]


def test_scores_on_a_node_whose_requested_memory_wrapped_stay_in_range() -> None:
    # Two bound 5E-memory pods: the node's requested memory wraps to -8446744073709551616, as in kube.
    existing = [make_pod(f"e{i}").node("node1").container(requests={"memory": "5E"}) for i in range(2)]
    pod = make_pod("p").container(requests={"cpu": "100m", "memory": "100Mi"})
    for strategy in ("LeastAllocated", "MostAllocated"):
        args = {"scoringStrategy": {"type": strategy, "resources": DEFAULT_RESOURCES}}
        (score,) = score_nodes(args, pod, nodes_with({"cpu": "4", "memory": "32Gi"}), existing)
        assert 0 <= score <= 100
    ratio = {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": DEFAULT_RESOURCES,
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]},
        }
    }
    (score,) = score_nodes(ratio, pod, nodes_with({"cpu": "4", "memory": "32Gi"}), existing)
    assert 0 <= score <= 100


def test_a_pod_whose_request_is_beyond_int64_is_rejected_at_prefilter_naming_the_field() -> None:
    # kube counts 1e16 cpu as 0 millicores (MilliValue of int64Amount{1, 16} overflows) and would
    # place the pod anywhere; here it stays pending with the field named.
    pod = make_pod("huge").container(requests={"cpu": "10e15"}).obj()
    plugin = fit.new({}, make_handle())
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert status == Status(
        UU,
        ("pod default/huge: spec.containers[0].resources.requests.cpu: 10e15 is beyond int64 millicores",),
        plugin=fit.NAME,
    )


def test_no_cluster_event_requeues_a_pod_whose_request_is_beyond_int64() -> None:
    pod = make_pod("huge").container(requests={"cpu": "10e15"}).obj()
    bigger = make_node("n").capacity(cpu="64", memory="1Ti", pods="110").obj()
    bound = make_pod("b").node("n").container(requests={"cpu": "1"}).obj()
    assert fit._node_grew(pod, None, bigger) == QueueingHint.SKIP
    assert fit._pod_freed(pod, bound, None) == QueueingHint.SKIP


# ---- PlacementScore (kube's TestScorePlacement_Resources, and the zones kube-scheduler logged) ----

KEY = GroupKey(POD_GROUP_API, "ns", "pg")
CPU_MEM = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
CPU4_MEM = [{"name": "cpu", "weight": 4}, {"name": "memory", "weight": 1}]
CPU_MEM_GPU = [*CPU_MEM, {"name": "nvidia.com/gpu", "weight": 1}]


def _gpu(cpu: str, memory: str, gpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpu}


@pytest.mark.parametrize(
    ("name", "resources", "nodes", "placement", "members", "existing", "want"),
    [
        (
            "computes score based on total requests",
            CPU_MEM,
            nodes_with(r(5000, 5000), r(5000, 5000)),
            ("node1", "node2"),
            [req(r(1000, 0), node="node1"), req(r(2000, 2000), node="node2")],
            [],
            25,
        ),
        (
            "computes score using weights",
            CPU4_MEM,
            nodes_with(r(5000, 5000), r(5000, 5000)),
            ("node1", "node2"),
            [req(r(1000, 0), node="node1"), req(r(2000, 2000), node="node2")],
            [],
            28,
        ),
        (
            "handles multiple pods per node",
            CPU4_MEM,
            nodes_with(r(5000, 5000), r(5000, 5000)),
            ("node1", "node2"),
            [req(r(1000, 0), node="node1"), req(r(2000, 2000), node="node1")],
            [],
            28,
        ),
        (
            "does not include nodes from outside of placement",
            CPU_MEM,
            nodes_with(r(5000, 5000), r(5000, 5000), r(5000, 5000)),
            ("node1", "node2"),
            [req(r(1000, 0), node="node1"), req(r(2000, 2000), node="node2")],
            [],
            25,
        ),
        (
            "includes pre-existing pods from outside of pod group",
            CPU_MEM,
            nodes_with(r(5000, 5000), r(5000, 5000)),
            ("node1", "node2"),
            [req(r(1000, 0), node="node1"), req(r(2000, 2000), node="node2")],
            [req(r(1000, 0), node="node1", name="baz")],
            30,
        ),
        (
            "includes scalar resources if any pod in pod group has nonzero requests",
            CPU_MEM_GPU,
            nodes_with(_gpu("5000m", "5000", "5"), _gpu("5000m", "5000", "5")),
            ("node1", "node2"),
            [req(_gpu("1000m", "0", "0"), node="node1"), req(_gpu("1000m", "2000", "1"), node="node2")],
            [req(_gpu("1000m", "0", "0"), node="node1", name="baz")],
            20,
        ),
        (
            "does not include scalar resources if all pods in pod group have zero requests",
            CPU_MEM_GPU,
            nodes_with(_gpu("5000m", "5000", "5"), _gpu("5000m", "5000", "5")),
            ("node1", "node2"),
            [req(_gpu("1000m", "0", "0"), node="node1"), req(_gpu("1000m", "2000", "0"), node="node2")],
            [req(_gpu("1000m", "0", "1"), node="node1", name="baz")],
            25,
        ),
        # kube-scheduler v1.37.2's log on gang-topology-min-count-below-size's 3-CPU version
        # (2026-12-02), gang-topology-fuller-zone's shape: two 3-CPU members without memory requests
        # (200Mi each by default) on three or two 4-CPU 16Gi nodes.
        (
            "zone of three nodes",
            CPU_MEM,
            nodes_with(*[{"cpu": "4", "memory": "16Gi"}] * 3),
            ("node1", "node2", "node3"),
            [req({"cpu": "3"}, node="node1"), req({"cpu": "3"}, node="node2")],
            [],
            25,
        ),
        (
            "zone of two nodes",
            CPU_MEM,
            nodes_with(*[{"cpu": "4", "memory": "16Gi"}] * 2),
            ("node1", "node2"),
            [req({"cpu": "3"}, node="node1"), req({"cpu": "3"}, node="node2")],
            [],
            38,
        ),
    ],
)
def test_score_placement(
    name: str,
    resources: list[dict[str, Any]],
    nodes: list[Node],
    placement: tuple[str, ...],
    members: list[PodBuilder],
    existing: list[PodBuilder],
    want: int,
) -> None:
    """MostAllocated over the placement's nodes as one, whatever the configured strategy."""
    pods = [p.obj() for p in existing]
    infos = {n.name: node_info(n, *[p for p in pods if p.node_name == n.name]) for n in nodes}
    plugin = fit.new(least(resources), make_handle(*infos.values()))
    states = PodGroupStates()
    states.set_group(KEY, PodGroup.from_raw({"metadata": {"name": "pg", "namespace": "ns", "uid": "pg"}}))
    state = states.get(KEY) or pytest.fail("no pod-group state")
    assigned = [(m.obj(), m.obj().node_name) for m in members]
    chosen = Placement("zone", tuple(infos[n] for n in placement))
    assert plugin.score_placement(state, chosen, assigned) == (want, None)
    assert plugin.normalize_placement_scores(state, [want]) is None


def _placement_score_node_by_node(
    resources: Sequence[ResourceSpec], nodes: Sequence[NodeInfo], pods: Sequence[Pod]
) -> int:
    """The reference: every node's amounts added one at a time with Go's int64 wrap, as kube's loop."""
    requested = [0] * len(resources)
    for pod in pods:
        for i, spec in enumerate(resources):
            requested[i] = go_add(requested[i], pod.fit_scoring_request(spec.name))
    allocatable = [0] * len(resources)
    for info in nodes:
        for i, spec in enumerate(resources):
            capacity, used = allocatable_and_requested(info, spec.name, requested[i], non_zero=True)
            if capacity:
                allocatable[i] = go_add(allocatable[i], capacity)
                requested[i] = go_add(requested[i], used)
    total = weight_sum = 0
    for spec, amount, capacity in zip(resources, requested, allocatable, strict=True):
        if capacity:
            total = go_add(total, go_mul(most_allocated(amount, capacity), spec.weight))
            weight_sum += spec.weight
    return go_div(total, weight_sum) if weight_sum else 0


_AMOUNTS = st.sampled_from(["0", "1", "250m", "3", "4Gi", "9223372036854775807", "9000000000000000000", "8Ei", "100P"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_AMOUNTS, _AMOUNTS, st.sampled_from(["0", "2"])), min_size=0, max_size=6),
    st.lists(st.tuples(_AMOUNTS, _AMOUNTS, st.integers(0, 5)), max_size=8),
    st.lists(st.tuples(_AMOUNTS, _AMOUNTS), max_size=4),
    st.booleans(),
)
def test_placement_score_sums_cpu_and_memory_as_the_node_by_node_reference(
    capacities: list[tuple[str, str, str]],
    existing: list[tuple[str, str, int]],
    members: list[tuple[str, str]],
    gpu: bool,
) -> None:
    """cpu and memory summed in one pass and wrapped once give the int64 that a wrap after every
    node gives (huge allocatable and requested amounts included); nodes that offer none left out."""
    nodes = nodes_with(*[_gpu(cpu, memory, g) for cpu, memory, g in capacities])
    infos = [
        node_info(
            n,
            *[
                req({"cpu": cpu, "memory": memory}, node=n.name, name=f"e{k}").obj()
                for k, (cpu, memory, at) in enumerate(existing)
                if at == i
            ],
        )
        for i, n in enumerate(nodes)
    ]
    pods = [req({"cpu": cpu, "memory": memory}, name=f"m{k}").obj() for k, (cpu, memory) in enumerate(members)]
    specs = [ResourceSpec(str(x["name"]), int(str(x["weight"]))) for x in (CPU4_MEM if not gpu else CPU_MEM_GPU)]
    assert placement_score(specs, infos, pods) == _placement_score_node_by_node(specs, infos, pods)


# ---- DRAExtendedResource: resources a DeviceClass backs are DynamicResources' (fit_test.go) -------

DRA_RESOURCE = "extended.resource.dra.io/something"


@pytest.mark.parametrize(
    ("name", "requests", "allocatable", "want"),
    [
        ("extended resource backed by device plugin", {"example.com/aaa": "1"}, {"example.com/aaa": "5"}, ()),
        ("extended resource backed by DRA", {"cpu": "1m", DRA_RESOURCE: "1"}, {}, ()),
        (
            "extended resource NOT backed by DRA",
            {"cpu": "1m", "example.com/bbb": "1"},
            {},
            ("Insufficient example.com/bbb",),
        ),
        (
            "extended resource was backed by Device Plugin (Allocatable: 0)",
            {DRA_RESOURCE: "1"},
            {DRA_RESOURCE: "0"},
            (),
        ),
        (
            "backed by DRA, but the node offers too few through a device plugin",
            {DRA_RESOURCE: "2"},
            {DRA_RESOURCE: "1"},
            (f"Insufficient {DRA_RESOURCE}",),
        ),
    ],
)
def test_dra_extended_resources_are_delegated(
    name: str, requests: dict[str, str], allocatable: dict[str, str], want: tuple[str, ...]
) -> None:
    from scheduler.framework.dra import DEVICE_CLASS, DraManager

    dra = DraManager([(DEVICE_CLASS, {"metadata": {"name": "c"}, "spec": {"extendedResourceName": DRA_RESOURCE}})])
    plugin = fit.NodeResourcesFit(fit.parse_args({}), dra)
    pod = make_pod("p").container(requests=requests).obj()
    info = node_info(make_node("n").capacity({"cpu": "10", "memory": "20", "pods": "32", **allocatable}))
    state = CycleState()
    plugin.pre_filter(state, pod, [info])
    status = plugin.filter(state, pod, info)
    assert (status.reasons if status is not None else ()) == want, name
