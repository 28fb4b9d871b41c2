"""NodeResourcesBalancedAllocation: the balance change a pod makes, real requests only.

Score cases ported from kube-scheduler v1.37.2 noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation; the DRA cases are left out: kube's scoring of DRA-backed
extended resources is not ported), plus pod-level resources and in-place resized pods.
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.noderesourcesbalancedallocation import NodeResourcesBalancedAllocation, balanced_score, parse_args
from scheduler.framework.types import Code, CycleState
from scheduler.testing.builders import PodBuilder, make_handle, make_node, make_pod, node_info, run_score

GPU = "nvidia.com/gpu"
DEFAULT = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
WITH_GPU = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}


def cpu_only(name: str, node: str = "") -> PodBuilder:
    return make_pod(name).node(node).req(cpu="1000m", memory="0").req(cpu="2000m", memory="0")


def cpu_and_memory(name: str, node: str = "") -> PodBuilder:
    return make_pod(name).node(node).req(cpu="1000m", memory="2000").req(cpu="2000m", memory="3000")


def cpu_memory_gpu(name: str, node: str = "") -> PodBuilder:
    return make_pod(name).node(node).req(cpu="1000m", memory="2000").req({GPU: "3"}, cpu="2000m", memory="3000")


def node(name: str, milli_cpu: int, memory: int, gpus: int = 0) -> Any:
    resources: dict[str, Any] = {"cpu": f"{milli_cpu}m", "memory": str(memory)}
    if gpus:
        resources[GPU] = str(gpus)
    return make_node(name).capacity(resources)


@pytest.mark.parametrize(
    ("pod", "nodes", "args", "want"),
    [
        (  # nothing scheduled, resources requested, differently sized nodes
            cpu_and_memory("p"),
            [(node("node1", 4000, 10000), []), (node("node2", 6000, 10000), [])],
            DEFAULT,
            [68, 75],
        ),
        (
            cpu_and_memory("p"),
            [
                (node("node1", 10000, 20000), [cpu_only("a")]),
                (node("node2", 10000, 20000), [cpu_and_memory("b")]),
            ],
            DEFAULT,
            [73, 74],
        ),
        (
            cpu_and_memory("p"),
            [
                (node("node1", 10000, 20000), [cpu_only("a")]),
                (node("node2", 10000, 50000), [cpu_and_memory("b")]),
            ],
            DEFAULT,
            [73, 70],
        ),
        (  # nodes to reach min/max score
            make_pod("p").req(memory="2000").req(memory="3000"),
            [(node("node1", 3000, 5000), [cpu_only("a")]), (node("node2", 3000, 5000), [])],
            DEFAULT,
            [100, 50],
        ),
        (  # requested resources at node capacity: fractions are capped at 1
            cpu_only("p"),
            [(node("node1", 6000, 10000), [cpu_only("a")]), (node("node2", 6000, 10000), [cpu_and_memory("b")])],
            DEFAULT,
            [62, 62],
        ),
        (  # scalar resource included when the pod requests it: population standard deviation
            make_pod("p").req({GPU: "1"}, cpu="0", memory="0"),
            [
                (node("node1", 3500, 40000, gpus=8), [cpu_memory_gpu("b")]),
                (node("node2", 3500, 40000, gpus=8), [cpu_and_memory("c")]),
            ],
            WITH_GPU,
            [75, 76],
        ),
        (  # scalar resource not included when the pod doesn't request it
            cpu_and_memory("p"),
            [(node("node1", 3500, 40000, gpus=8), []), (node("node2", 3500, 40000), [])],
            WITH_GPU,
            [56, 56],
        ),
        (  # containers without requests count as nothing (no 100m/200Mi defaults): 50 + (50 + 75 - 100) / 2
            make_pod("p").req(cpu="1"),
            [(node("node1", 2000, 1000), [make_pod("a").req()])],
            DEFAULT,
            [62],
        ),
        (  # pod-level requests replace the containers' (cpu 3000/4000, memory 2000/10000: balance 72)
            make_pod("p").req(cpu="100m", memory="100").spec(resources={"requests": {"cpu": "3", "memory": "2000"}}),
            [(node("node1", 4000, 10000), [])],
            DEFAULT,
            [61],
        ),
        (  # an assigned pod resized in place counts at the larger of spec and allocated (3 cpu, not 1)
            make_pod("p").req(cpu="0", memory="2000"),
            [
                (
                    node("node1", 4000, 10000),
                    [
                        make_pod("a")
                        .req(cpu="1", memory="0")
                        .spec(nodeName="node1")
                        .status(containerStatuses=[{"name": "c0", "allocatedResources": {"cpu": "3"}}])
                    ],
                )
            ],
            DEFAULT,
            [80],  # balance 62 without the pod, 72 with it
        ),
    ],
)
def test_score(
    pod: PodBuilder, nodes: list[tuple[Any, list[PodBuilder]]], args: dict[str, Any], want: list[int]
) -> None:
    infos = [node_info(n, *pods) for n, pods in nodes]
    plugin = NodeResourcesBalancedAllocation(parse_args(args))
    for run_pre_score in (True, False):  # Score works out the requests itself when PreScore did not run
        state = CycleState()
        if run_pre_score:
            assert plugin.pre_score(state, pod.obj(), infos) is None
        assert run_score(plugin, state, pod.obj(), infos) == want


@pytest.mark.parametrize(
    "pod",
    [make_pod("p"), make_pod("p").req(), make_pod("p").req(ephemeral_storage="1Gi")],
)
def test_pre_score_skips_pods_requesting_none_of_the_resources(pod: PodBuilder) -> None:
    status = NodeResourcesBalancedAllocation(parse_args({})).pre_score(CycleState(), pod.obj(), [])
    assert status is not None
    assert status.code == Code.SKIP


def test_balanced_score_with_no_resource_on_the_node() -> None:
    assert balanced_score([0, 0], [0, 0]) == 100


@pytest.mark.parametrize(
    ("args", "resources"),
    [
        ({}, ("cpu", "memory")),
        ({"resources": []}, ("cpu", "memory")),
        ({"resources": [{"name": "cpu"}, {"name": GPU, "weight": 0}]}, ("cpu", GPU)),  # weight defaults to 1
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesBalancedAllocationArgs"},
            ("cpu", "memory"),
        ),
    ],
)
def test_args(args: dict[str, Any], resources: tuple[str, ...]) -> None:
    assert parse_args(args) == resources


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight: Invalid value: 2: must be 1"),
        (
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            'resources[1].name: Duplicate value: "cpu"',
        ),
        (
            {"resources": [{"name": "cpu", "weight": 3}, {"name": "cpu"}]},
            '[resources[0].weight: Invalid value: 3: must be 1, resources[1].name: Duplicate value: "cpu"]',
        ),
        ({"resource": []}, "unknown field(s) ['resource']"),
        (
            {"kind": "NodeAffinityArgs"},
            'kind: Unsupported value: "NodeAffinityArgs": supported values: "NodeResourcesBalancedAllocationArgs"',
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_args(args)
    assert str(err.value) == message


def test_factory_builds_from_empty_args() -> None:
    from plugins import noderesourcesbalancedallocation

    plugin = noderesourcesbalancedallocation.new({}, make_handle())
    assert plugin.resources == ("cpu", "memory")


@pytest.mark.parametrize(
    ("capacity", "existing"),
    [
        # Two bound 5E-memory pods: the node's requested memory wraps to a negative number (as in kube).
        ({"cpu": "4", "memory": "32Gi"}, [{"memory": "5E"}, {"memory": "5E"}]),
        # cpu 9223372036854775807: kube's MilliValue wraps to -1000, a negative allocatable.
        ({"cpu": "9223372036854775807", "memory": "32Gi"}, []),
    ],
)
def test_negative_fractions_count_as_zero_in_both_forms(
    capacity: dict[str, str], existing: list[dict[str, str]]
) -> None:
    # kube's fraction would be hugely negative, its score far below 0, and its framework would fail
    # the cycle of every pod scoring this node; here the node gets a score in range, the same
    # through the per-node and the batch form.
    pods = [make_pod(f"e{i}").node("n").req(amounts) for i, amounts in enumerate(existing)]
    infos = [node_info(make_node("n").capacity(capacity), *pods)]
    handle = make_handle(*infos)
    plugin = NodeResourcesBalancedAllocation(parse_args({}))
    pod = cpu_and_memory("p").obj()
    state = CycleState()
    assert plugin.pre_score(state, pod, infos) is None
    (score,) = run_score(plugin, state, pod, infos)
    assert 50 <= score <= 100
    table = handle.snapshot.table  # type: ignore[attr-defined]
    batch = plugin.score_batch(state, pod, table, table.arange)
    assert batch is not None
    assert batch.tolist() == [score]
