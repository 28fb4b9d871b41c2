"""The allocator beyond upstream's shared table: DeviceTaintRules (the tracker's cases), the
deadline (the table's "interrupt" cases), feature sets no variant supports, and search cost on
the common shapes (many identical devices, many nodes)."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.dynamicresources.cel import compile_expression
from plugins.dynamicresources.structured import (
    AllocatedState,
    AllocationTimeoutError,
    Allocator,
    AllocatorError,
    DeviceID,
    FailedAllocationOnNodeError,
    Features,
    apply_device_taint_rules,
    taint_prevents_allocation,
)
from scheduler.model.objects import Node

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
TAINT = {"key": "example.com/taint", "value": "tainted", "effect": "NoSchedule"}
EXISTING_TAINT = {"key": "example.com/other", "value": "x", "effect": "NoExecute"}


def node(name: str = "node-1", **labels: str) -> Node:
    return Node.from_raw({"metadata": {"name": name, "labels": labels}})


def device(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def slice_with_devices(
    name: str, node_name: str, pool: str, driver: str, *devices: dict[str, Any], count: int = 1
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "devices": list(devices),
        },
    }


def device_class(name: str, driver: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def request(name: str, class_name: str, count: int = 1, **fields: Any) -> dict[str, Any]:
    exactly = {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": count, **fields}
    return {"name": name, "exactly": exactly}


def rule(name: str, taint: dict[str, Any], **selector: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taint": taint, "deviceSelector": selector}}


def taints(slices: list[Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        f"{s['spec']['pool']['name']}/{d['name']}": d.get("taints", []) for s in slices for d in s["spec"]["devices"]
    }


SLICE_1 = slice_with_devices("slice-1", "node-1", "pool-1", DRIVER_A, device("device-1"))
SLICE_2 = slice_with_devices("slice-2", "node-1", "pool-2", DRIVER_B, device("device-2"))
SLICE_1_ALREADY_TAINTED = slice_with_devices(
    "slice-1", "node-1", "pool-1", DRIVER_A, device("device-1", taints=[EXISTING_TAINT])
)


@pytest.mark.parametrize(
    ("slices", "rules", "expected"),
    [
        pytest.param([SLICE_1], [rule("rule", TAINT)], {"pool-1/device-1": [TAINT]}, id="patch-all-slices"),
        pytest.param(
            [SLICE_1_ALREADY_TAINTED],
            [rule("rule", TAINT)],
            {"pool-1/device-1": [EXISTING_TAINT, TAINT]},
            id="merge-taints",
        ),
        pytest.param(
            [SLICE_1, SLICE_2],
            [rule("rule", TAINT, driver=DRIVER_A)],
            {"pool-1/device-1": [TAINT], "pool-2/device-2": []},
            id="add-taint-for-driver",
        ),
        pytest.param(
            [SLICE_1, SLICE_2],
            [rule("rule", TAINT, pool="pool-1")],
            {"pool-1/device-1": [TAINT], "pool-2/device-2": []},
            id="add-taint-for-pool",
        ),
        pytest.param(
            [SLICE_1, SLICE_2],
            [rule("rule", TAINT, device="device-1")],
            {"pool-1/device-1": [TAINT], "pool-2/device-2": []},
            id="add-taint-for-device",
        ),
        pytest.param(
            [SLICE_1, SLICE_2],
            [rule("rule", TAINT, driver=DRIVER_A, pool="pool-1", device="device-1")],
            {"pool-1/device-1": [TAINT], "pool-2/device-2": []},
            id="filter-all-criteria",
        ),
        pytest.param(
            [SLICE_1, SLICE_2],
            [{"metadata": {"name": "rule-no-selector"}, "spec": {"taint": TAINT}}],
            {"pool-1/device-1": [], "pool-2/device-2": []},
            id="nil-selector-matches-none",
        ),
    ],
)
def test_device_taint_rules(slices: list[Any], rules: list[Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(slices)
    assert taints(apply_device_taint_rules(slices, rules)) == expected
    assert slices == before  # the informer's objects are never patched in place


def _allocate(slices: list[Any], claims: list[Any], **kwargs: Any) -> list[dict[str, Any]] | None:
    classes = {"class-a": device_class("class-a", DRIVER_A)}
    allocator = Allocator(Features(), AllocatedState(), classes, slices, compile_expression)
    return allocator.allocate(node(), claims, **kwargs)


def test_a_rules_taint_keeps_the_device_unless_tolerated() -> None:
    slices = apply_device_taint_rules([SLICE_1], [rule("rule", TAINT, device="device-1")])
    assert _allocate(slices, [claim("claim-0", request("req-0", "class-a"))]) is None
    toleration = {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    results = _allocate(slices, [claim("claim-0", request("req-0", "class-a", tolerations=[toleration]))])
    assert results is not None
    assert results[0]["devices"]["results"] == [
        {
            "request": "req-0",
            "driver": DRIVER_A,
            "pool": "pool-1",
            "device": "device-1",
            "tolerations": [toleration],
        }
    ]


FIVE_DEVICES = slice_with_devices("slice-1", "node-1", "pool-1", DRIVER_A, *(device(f"device-{i}") for i in range(5)))


def test_no_deadline_searches_to_the_end() -> None:
    """Upstream's "interrupt/off": six devices from five is no solution, and no error."""
    assert _allocate([FIVE_DEVICES], [claim("claim-0", request("req-0", "class-a", 6))]) is None


def test_a_passed_deadline_stops_the_search() -> None:
    """Upstream's "interrupt/deadline": the search stops with kube's timeout message."""
    with pytest.raises(AllocationTimeoutError, match="filter operation aborted: context deadline exceeded"):
        _allocate([FIVE_DEVICES], [claim("claim-0", request("req-0", "class-a", 6))], deadline=time.monotonic() - 1)


def test_features_of_the_experimental_variant_are_refused() -> None:
    with pytest.raises(AllocatorError, match=r"no allocator available for feature set.*DRADeviceCompatibilityGroups"):
        Allocator(Features(compatibility_groups=True), AllocatedState(), {}, [], compile_expression)


def _gpus(node_name: str, count: int) -> dict[str, Any]:
    devices = [
        device(f"gpu-{i}", attributes={"model": {"string": "a100"}, "numa": {"int": i % 2}}) for i in range(count)
    ]
    return slice_with_devices(f"{node_name}-gpus", node_name, node_name, DRIVER_A, *devices)


def test_the_common_shapes_search_linearly() -> None:
    """8 GPUs per node, 7 of them allocated: one more GPU, then four on the same NUMA node, take
    a handful of search steps per node, not a combinatorial number."""
    nodes = [f"node-{i}" for i in range(100)]
    slices = [_gpus(name, 8) for name in nodes]
    state = AllocatedState(devices={DeviceID(DRIVER_A, name, f"gpu-{i}") for name in nodes for i in range(7)})
    classes = {"class-a": device_class("class-a", DRIVER_A)}
    allocator = Allocator(Features(), state, classes, slices, compile_expression)
    one_gpu = [claim("claim-0", request("req-0", "class-a"))]
    for name in nodes:
        results = allocator.allocate(node(name), one_gpu)
        assert results is not None
        assert results[0]["devices"]["results"][0]["device"] == "gpu-7"
    # Per node: the device, the end of the request, of the claim, of the claims.
    assert allocator.stats.allocate_one_invocations == 100 * 4

    allocator = Allocator(Features(), AllocatedState(), classes, slices, compile_expression)
    same_numa = [
        claim(
            "claim-0",
            request("req-0", "class-a", 4),
            constraints=[{"matchAttribute": f"{DRIVER_A}/numa", "requests": ["req-0"]}],
        )
    ]
    for name in nodes:
        results = allocator.allocate(node(name), same_numa)
        assert results is not None
        assert [r["device"] for r in results[0]["devices"]["results"]] == ["gpu-0", "gpu-2", "gpu-4", "gpu-6"]
    assert allocator.stats.allocate_one_invocations <= 100 * 8


NO_SCHEDULE = {"key": "k", "value": "v", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "k", "value": "v", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("device_taints", "tolerations", "prevents"),
    [
        pytest.param([], [], False, id="untainted"),
        pytest.param([NO_SCHEDULE], [], True, id="NoSchedule not tolerated"),
        pytest.param([NO_EXECUTE], [], True, id="NoExecute not tolerated"),
        pytest.param([{**NO_SCHEDULE, "effect": "None"}], [], False, id="effect None never prevents"),
        pytest.param([{**NO_SCHEDULE, "effect": "Future"}], [], False, id="unknown effect never prevents"),
        pytest.param([NO_SCHEDULE], [{"operator": "Exists"}], False, id="exists without key tolerates all"),
        pytest.param([NO_SCHEDULE], [{"key": "other", "operator": "Exists"}], True, id="other key"),
        pytest.param(
            [NO_EXECUTE], [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], True, id="other effect"
        ),
        pytest.param(
            [NO_EXECUTE], [{"key": "k", "operator": "Exists", "effect": "NoExecute"}], False, id="same effect"
        ),
        pytest.param([NO_SCHEDULE], [{"key": "k", "operator": "Equal", "value": "v"}], False, id="equal value"),
        pytest.param([NO_SCHEDULE], [{"key": "k", "operator": "Equal", "value": "w"}], True, id="other value"),
        pytest.param([NO_SCHEDULE], [{"key": "k", "value": "v"}], False, id="no operator means Equal"),
        pytest.param([NO_SCHEDULE], [{"key": "k", "operator": "Lt", "value": "v"}], True, id="unknown operator"),
        pytest.param(
            [NO_SCHEDULE, NO_EXECUTE],
            [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            True,
            id="every taint needs a toleration",
        ),
    ],
)
def test_taint_prevents_allocation(
    device_taints: list[dict[str, str]], tolerations: list[dict[str, str]], prevents: bool
) -> None:
    """resourceclaim.ToleratesTaint as the allocator applies it (only NoSchedule/NoExecute count)."""
    assert taint_prevents_allocation({"name": "d", "taints": device_taints}, tolerations) is prevents


COUNTERS = {
    "metadata": {"name": "slice-1-counters"},
    "spec": {
        "driver": DRIVER_A,
        "nodeName": "node-1",
        "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [{"name": "set", "counters": {"mem": {"value": "80Gi"}}}],
    },
}


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(
            [
                slice_with_devices(
                    "slice-1", "node-1", "pool-1", DRIVER_A, device("gpu-1", capacity={"memory": {"value": "80 GiB"}})
                )
            ],
            id="capacity",
        ),
        pytest.param(
            [
                slice_with_devices(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    DRIVER_A,
                    device("gpu-1", capacity={"memory": {"value": "1Gi", "requestPolicy": {"validValues": ["x"]}}}),
                )
            ],
            id="policy",
        ),
        pytest.param(
            [
                COUNTERS,
                slice_with_devices(
                    "slice-1",
                    "node-1",
                    "pool-1",
                    DRIVER_A,
                    device("gpu-1", consumesCounters=[{"counterSet": "set", "counters": {"mem": {"value": "lots"}}}]),
                    count=2,
                ),
            ],
            id="counter",
        ),
    ],
)
def test_an_unparseable_quantity_spoils_its_pool_only(broken: list[dict[str, Any]]) -> None:
    """One object affects only itself: the broken pool is this node's problem; the claim still
    gets a device from a sound pool, and with none left the node reports invalid pools."""
    sound = slice_with_devices("slice-2", "node-1", "pool-2", DRIVER_A, device("gpu-2"))
    results = _allocate([*broken, sound], [claim("claim-0", request("req-0", "class-a"))])
    assert results is not None
    assert results[0]["devices"]["results"][0]["pool"] == "pool-2"
    with pytest.raises(FailedAllocationOnNodeError, match=r"^invalid resource pools were encountered$"):
        _allocate(broken, [claim("claim-0", request("req-0", "class-a"))])


def test_a_missing_key_error_carries_kubes_hint() -> None:
    """cel.EnhanceRuntimeError: the allocator adds kube's optional-chaining hint to "no such key"."""
    slices = [
        slice_with_devices(
            "slice-1", "node-1", "pool-1", DRIVER_A, device("device-1", attributes={"model": {"string": "a100"}})
        )
    ]
    selector = {"cel": {"expression": f'device.attributes["{DRIVER_A}"].missing == "x"'}}
    with pytest.raises(AllocatorError) as raised:
        _allocate(slices, [claim("claim-0", request("req-0", "class-a", selectors=[selector]))])
    assert str(raised.value) == (
        f"claim default/claim-0: selector #0 on device {DRIVER_A}/pool-1/device-1: CEL runtime error: "
        "no such key: missing. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields"
    )


def _partitions(node_name: str, mem: list[str], available: str = "70Gi", pool: str | None = None) -> list[Any]:
    """A pool of partitions sharing counters: each device takes its own cpu counter and some of
    the pool's memory (upstream's PartitionableBacktracking slices, generalised)."""
    pool = pool or node_name
    counters = {
        "metadata": {"name": f"{pool}-counters"},
        "spec": {
            "driver": DRIVER_A,
            "nodeName": node_name,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [
                {"name": "cpu", "counters": {f"cpu{i}": {"value": "1"} for i in range(len(mem))}},
                {"name": "mem", "counters": {"mem": {"value": available}}},
            ],
        },
    }
    devices = [
        device(
            f"device-{i}",
            consumesCounters=[
                {"counterSet": "cpu", "counters": {f"cpu{i}": {"value": "1"}}},
                {"counterSet": "mem", "counters": {"mem": {"value": value}}},
            ],
        )
        for i, value in enumerate(mem)
    ]
    return [counters, slice_with_devices(f"{pool}-devices", node_name, pool, DRIVER_A, *devices, count=2)]


def _partition_allocator(slices: list[Any], prune: bool, state: AllocatedState | None = None) -> Allocator:
    classes = {"class-a": device_class("class-a", DRIVER_A)}
    features = Features(partitionable_devices=True)
    allocator = Allocator(features, state or AllocatedState(), classes, slices, compile_expression)
    allocator.prune_by_counters = prune
    return allocator


def test_partitions_too_big_together_are_given_up_early() -> None:
    """Upstream's PartitionableBacktracking: 7 of 8 partitions, the first one too big to go with
    six others. The search used to try every combination holding it (130 steps per node, kube's
    too); once the shared memory cannot cover the rest it backs off (36), same answer."""
    slices = _partitions("node-1", ["20Gi"] + ["10Gi"] * 7)
    seven = [claim("claim-0", request("req-0", "class-a", 7))]
    steps = {}
    for prune in (False, True):
        allocator = _partition_allocator(slices, prune)
        results = allocator.allocate(node(), seven)
        assert results is not None
        assert [r["device"] for r in results[0]["devices"]["results"]] == [f"device-{i}" for i in range(1, 8)]
        steps[prune] = allocator.stats.allocate_one_invocations
    assert steps == {False: 130, True: 36}


memories = st.lists(st.sampled_from(["0", "5Gi", "10Gi", "20Gi", "30Gi"]), min_size=1, max_size=7)


@settings(max_examples=300, deadline=None)
@given(
    pools=st.lists(st.tuples(memories, st.sampled_from(["10Gi", "30Gi", "45Gi", "70Gi"])), min_size=1, max_size=2),
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    allocated=st.sets(st.integers(0, 6), max_size=3),
    two_claims=st.booleans(),
)
def test_giving_up_early_finds_what_the_whole_search_finds(
    pools: list[tuple[list[str], str]], counts: list[int], allocated: set[int], two_claims: bool
) -> None:
    """Any partition sizes, pool sizes, requests and allocated partitions: the same allocation
    (or none) with and without backing off early, never more steps."""
    slices = [s for i, (mem, available) in enumerate(pools) for s in _partitions("node-1", mem, available, f"pool-{i}")]
    state = AllocatedState(devices={DeviceID(DRIVER_A, "pool-0", f"device-{i}") for i in allocated})
    requests = [request(f"req-{i}", "class-a", count) for i, count in enumerate(counts)]
    claims = (
        [claim("claim-0", *requests[:1]), claim("claim-1", *requests[1:])]
        if two_claims and len(requests) > 1
        else [claim("claim-0", *requests)]
    )
    outcome = {}
    steps = {}
    for prune in (False, True):
        allocator = _partition_allocator(slices, prune, state)
        outcome[prune] = allocator.allocate(node(), claims)
        steps[prune] = allocator.stats.allocate_one_invocations
    assert outcome[True] == outcome[False]
    assert steps[True] <= steps[False]
