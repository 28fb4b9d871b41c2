"""A node's allocation outcome reused from an earlier cycle (Allocator.allocate) is the outcome a
search would give: checked against the search itself over the differential scenarios with what is
taken changing between cycles, and counted on the shapes where it pays."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.dynamicresources.cel import compile_expression
from plugins.dynamicresources.structured import (
    AllocatedState,
    Allocator,
    AllocatorError,
    DeviceID,
    Features,
    NodeDevicesCache,
    SharedDeviceID,
)
from scheduler.model.objects import Node
from scheduler.model.quantity import parse
from tests.unit.plugins.dra_scenarios import DRIVERS, scenario
from tests.unit.plugins.test_dra_allocator_upstream import SCENARIOS, _normalized

NAMES = sorted(SCENARIOS)


def _device_ids(slices: list[dict[str, Any]]) -> list[DeviceID]:
    ids = []
    for slice_ in slices:
        spec = slice_["spec"]
        for device in spec.get("devices") or ():
            ids.append(DeviceID(spec["driver"], spec["pool"]["name"], device["name"]))
    return sorted(set(ids))


def _state(scenario_: dict[str, Any], taken: set[DeviceID], with_shares: bool) -> AllocatedState:
    """These devices taken, and the scenario's shares held if `with_shares`."""
    state = AllocatedState(devices=set(taken))
    if with_shares:
        for driver, pool, device, share_id, consumed in scenario_["allocated_shares"]:
            state.shared_device_ids.add(SharedDeviceID(driver, pool, device, share_id))
            state.add_consumed_capacity(
                DeviceID(driver, pool, device), {key: parse(value).exact for key, value in consumed.items()}
            )
    return state


def _outcome(allocator: Allocator, node: Node, claims: list[Any]) -> Any:
    try:
        return _normalized(allocator.allocate(node, claims))
    except AllocatorError as exc:
        return ("error", type(exc).__name__, str(exc))


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    cycles=st.lists(
        st.tuples(
            st.lists(st.integers(0, 63), max_size=2),
            st.booleans(),
            st.sampled_from(["same", "same", "copy", "changed"]),
        ),
        min_size=2,
        max_size=5,
    ),
)
def test_a_reused_outcome_is_the_searchs(name: str, cycles: list[tuple[list[int], bool, str]]) -> None:
    """Cycle after cycle a device or two is taken or given back (the scenario's shares kept or
    not), the claims are new objects (as a new pod's are) and a class may be replaced by an equal
    copy or by one that leaves out one of the drivers; every node's outcome with reuse equals a
    search's from nothing."""
    scenario_ = SCENARIOS[name]
    features = Features.from_gate_names(set(scenario_["features"]))
    nodes = [Node.from_raw({"metadata": {"name": n["name"], "labels": n["labels"]}}) for n in scenario_["nodes"]]
    ids = _device_ids(scenario_["slices"])
    original = classes = {c["metadata"]["name"]: c for c in scenario_["classes"]}
    cache = NodeDevicesCache()
    taken = {DeviceID(*ids_) for ids_ in scenario_["allocated_devices"]}
    for index, (toggles, with_shares, class_change) in enumerate(cycles):
        if ids:
            taken ^= {ids[i % len(ids)] for i in toggles}
        state = _state(scenario_, taken, with_shares)
        if class_change != "same":
            classes = {name: copy.deepcopy(device_class) for name, device_class in original.items()}
            if class_change == "changed":
                excluded = DRIVERS[index % 2]
                for device_class in classes.values():
                    selectors = device_class.setdefault("spec", {}).setdefault("selectors", [])
                    selectors.append({"cel": {"expression": f"device.driver != '{excluded}'"}})
        claims = json.loads(json.dumps(scenario_["claims"]))
        reusing = Allocator(features, state, classes, scenario_["slices"], compile_expression, cache=cache)
        searching = Allocator(features, state, classes, scenario_["slices"], compile_expression)
        searching.reuse_outcomes = False
        for node in nodes:
            assert _outcome(reusing, node, claims) == _outcome(searching, node, claims), node.name


def _sweep_cycles(scenario_: dict[str, Any]) -> list[tuple[set[DeviceID], bool, dict[str, Any], list[Any]]]:
    """Taken devices, whether the scenario's shares are held, classes and claims for six cycles:
    the scenario as it is, the same again, a device of the first slice taken or given back, the
    shares gone, the classes leaving out driver-a, the claims in reverse order."""
    taken = {DeviceID(*ids) for ids in scenario_["allocated_devices"]}
    ids = _device_ids(scenario_["slices"][:1])
    toggled = taken ^ set(ids[:1])
    classes = {c["metadata"]["name"]: c for c in scenario_["classes"]}
    narrowed = copy.deepcopy(classes)
    for device_class in narrowed.values():
        selectors = device_class.setdefault("spec", {}).setdefault("selectors", [])
        selectors.append({"cel": {"expression": "device.driver != 'driver-a'"}})
    claims = scenario_["claims"]
    more = copy.deepcopy(claims)
    for claim in more:
        for request in claim["spec"]["devices"].get("requests") or ():
            for spec in [request.get("exactly") or {}, *(request.get("firstAvailable") or ())]:
                if spec.get("allocationMode") == "ExactCount":
                    spec["count"] = spec.get("count", 1) + 1
    return [
        (taken, True, classes, claims),
        (taken, True, classes, json.loads(json.dumps(claims))),
        (toggled, True, classes, claims),
        (toggled, False, classes, claims),
        (toggled, False, narrowed, claims),
        (toggled, False, narrowed, more),
    ]


@pytest.mark.parametrize("name", NAMES[::5])
def test_every_change_of_input_is_seen(name: str) -> None:
    """Deterministic companion of the property above over a fifth of the corpus: each cycle
    changes one input the outcome depends on; reuse must never hide the change."""
    scenario_ = SCENARIOS[name]
    features = Features.from_gate_names(set(scenario_["features"]))
    nodes = [Node.from_raw({"metadata": {"name": n["name"], "labels": n["labels"]}}) for n in scenario_["nodes"]]
    cache = NodeDevicesCache()
    for taken, with_shares, classes, claims in _sweep_cycles(scenario_):
        state = _state(scenario_, taken, with_shares)
        reusing = Allocator(features, state, classes, scenario_["slices"], compile_expression, cache=cache)
        searching = Allocator(features, state, classes, scenario_["slices"], compile_expression)
        searching.reuse_outcomes = False
        for node in nodes:
            assert _outcome(reusing, node, claims) == _outcome(searching, node, claims), node.name


DRIVER = "test-driver.cdi.k8s.io"
CLASS: dict[str, Any] = {
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}


def _partitionable_slices(nodes: int, *, shared: bool = False) -> list[dict[str, Any]]:
    """Upstream's Partitionable shape: per node a counter set of four and two devices of two each."""
    slices: list[dict[str, Any]] = []
    for i in range(nodes):
        pool = {"name": f"pool-{i}", "generation": 1, "resourceSliceCount": 2}
        common = {"driver": DRIVER, "pool": pool, "nodeName": f"node-{i}"}
        counters = {f"c{k}": {"value": "1"} for k in range(1, 5)}
        devices = [
            {
                "name": f"device-{d}",
                "consumesCounters": [
                    {"counterSet": "set", "counters": {f"c{2 * d - 1}": {"value": "1"}, f"c{2 * d}": {"value": "1"}}}
                ],
                **({"allowMultipleAllocations": True} if shared else {}),
            }
            for d in (1, 2)
        ]
        slices.append(
            {
                "metadata": {"name": f"counters-{i}"},
                "spec": {**common, "sharedCounters": [{"name": "set", "counters": counters}]},
            }
        )
        slices.append({"metadata": {"name": f"devices-{i}"}, "spec": {**common, "devices": devices}})
    return slices


def _claim(count: int = 2) -> list[dict[str, Any]]:
    request = {"name": "req-0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}
    return [{"metadata": {"name": "claim", "namespace": "test"}, "spec": {"devices": {"requests": [request]}}}]


def _cycle(
    slices: list[dict[str, Any]], nodes: list[Node], cache: NodeDevicesCache, taken: set[DeviceID], **kwargs: Any
) -> tuple[Allocator, int]:
    allocator = Allocator(
        Features(),
        AllocatedState(devices=set(taken)),
        kwargs.get("classes", {"gpu": CLASS}),
        slices,
        compile_expression,
        cache=cache,
    )
    fits = sum(allocator.allocate(node, kwargs.get("claims") or _claim()) is not None for node in nodes)
    return allocator, fits


def test_only_the_nodes_that_changed_are_searched_again() -> None:
    slices = _partitionable_slices(50)
    nodes = [Node.from_raw({"metadata": {"name": f"node-{i}"}}) for i in range(50)]
    cache = NodeDevicesCache()
    taken = {DeviceID(DRIVER, f"pool-{i}", "device-1") for i in range(25)}
    first, fits = _cycle(slices, nodes, cache, taken)
    assert (first.stats.outcomes_reused, fits) == (0, 25)
    searched_once = first.stats.allocate_one_invocations

    again, fits = _cycle(slices, nodes, cache, taken)
    assert (again.stats.outcomes_reused, again.stats.allocate_one_invocations, fits) == (50, 0, 25)

    # One pod bound on node-30 (both devices) and node-3 freed: those two are searched again.
    taken = (taken | {DeviceID(DRIVER, "pool-30", "device-1"), DeviceID(DRIVER, "pool-30", "device-2")}) - {
        DeviceID(DRIVER, "pool-3", "device-1")
    }
    changed, fits = _cycle(slices, nodes, cache, taken)
    assert changed.stats.outcomes_reused == 48 and fits == 25
    assert 0 < changed.stats.allocate_one_invocations < searched_once

    # A changed class, another claim shape or a node's update: searched again where they apply.
    narrower = copy.deepcopy(CLASS)
    narrower["spec"]["selectors"].append({"cel": {"expression": 'device.driver == "another"'}})
    other_class, fits = _cycle(slices, nodes, cache, taken, classes={"gpu": narrower})
    assert (other_class.stats.outcomes_reused, fits) == (0, 0)
    other_claim, fits = _cycle(slices, nodes, cache, taken, claims=_claim(1))
    assert (other_claim.stats.outcomes_reused, fits) == (0, 49)
    updated = [Node.from_raw({"metadata": {"name": "node-40", "labels": {"new": "label"}}})]
    node_update, _ = _cycle(slices, updated, cache, taken)
    assert node_update.stats.outcomes_reused == 0
    # A new slices list (a slice changed): everything is gathered and searched again.
    fresh, _ = _cycle(list(slices), nodes, cache, taken)
    assert fresh.stats.outcomes_reused == 0


def test_counters_taken_on_another_node_are_seen() -> None:
    """A pool whose counter set is shared by devices on two nodes: a device taken on node-2
    leaves node-1's device without counters, so node-1's outcome changes with it."""
    pool = {"name": "shared", "generation": 1, "resourceSliceCount": 3}
    counters = {
        "metadata": {"name": "counters"},
        "spec": {
            "driver": DRIVER,
            "pool": pool,
            "allNodes": True,
            "sharedCounters": [{"name": "set", "counters": {"c": {"value": "1"}}}],
        },
    }

    def on(node: str, device: str) -> dict[str, Any]:
        consumes = [{"counterSet": "set", "counters": {"c": {"value": "1"}}}]
        spec = {
            "driver": DRIVER,
            "pool": pool,
            "nodeName": node,
            "devices": [{"name": device, "consumesCounters": consumes}],
        }
        return {"metadata": {"name": f"devices-{node}"}, "spec": spec}

    slices = [counters, on("node-1", "a"), on("node-2", "b")]
    node_1 = [Node.from_raw({"metadata": {"name": "node-1"}})]
    cache = NodeDevicesCache()
    assert _cycle(slices, node_1, cache, set(), claims=_claim(1))[1] == 1
    allocator, fits = _cycle(slices, node_1, cache, {DeviceID(DRIVER, "shared", "b")}, claims=_claim(1))
    assert (allocator.stats.outcomes_reused, fits) == (0, 0)
    allocator, fits = _cycle(slices, node_1, cache, {DeviceID(DRIVER, "shared", "b")}, claims=_claim(1))
    assert (allocator.stats.outcomes_reused, fits) == (1, 0)


def test_capacity_consumed_by_shares_is_seen() -> None:
    """Capacity that shares hold on a device (left over from when its slice allowed them) counts
    against a request for capacity; the outcome follows it."""
    device = {"name": "gpu", "capacity": {"memory": {"value": "10Gi"}}}
    spec = {"driver": DRIVER, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "nodeName": "node-1"}
    slices = [{"metadata": {"name": "s"}, "spec": {**spec, "devices": [device]}}]
    claims = _claim(1)
    claims[0]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": "8Gi"}}
    nodes = [Node.from_raw({"metadata": {"name": "node-1"}})]
    cache = NodeDevicesCache()
    fits = []
    for held in ({}, {"memory": Decimal(5 * 2**30)}, {"memory": Decimal(5 * 2**30)}):
        state = AllocatedState(aggregated_capacity={DeviceID(DRIVER, "p", "gpu"): dict(held)} if held else {})
        allocator = Allocator(Features(), state, {"gpu": CLASS}, slices, compile_expression, cache=cache)
        fits.append((allocator.allocate(nodes[0], claims) is not None, allocator.stats.outcomes_reused))
    assert fits == [(True, 0), (False, 0), (False, 1)]


def test_a_reused_shared_device_gets_a_fresh_share_id() -> None:
    """A shared device's result carries a random share id: a reused outcome draws new ones, as a
    search would; the rest of the result is the search's."""
    slices = _partitionable_slices(5, shared=True)
    nodes = [Node.from_raw({"metadata": {"name": f"node-{i}"}}) for i in range(5)]
    cache = NodeDevicesCache()
    first, fits = _cycle(slices, nodes, cache, set())
    assert (first.stats.outcomes_reused, fits) == (0, 5)
    results = [first.allocate(node, _claim()) for node in nodes]
    again, fits = _cycle(slices, nodes, cache, set())
    assert (again.stats.outcomes_reused, fits) == (5, 5)
    reused = [again.allocate(node, _claim()) for node in nodes]
    searching = Allocator(Features(), AllocatedState(), {"gpu": CLASS}, slices, compile_expression)
    searching.reuse_outcomes = False
    for node, result in zip(nodes, reused, strict=True):
        assert _normalized(result) == _normalized(searching.allocate(node, _claim()))
    share_ids = [r["shareID"] for rs in (*results, *reused) for r in rs[0]["devices"]["results"]]  # type: ignore[index]
    assert len(set(share_ids)) == len(share_ids) == 2 * 2 * 5


def test_the_scenarios_reuse_where_they_can() -> None:
    """The property above is not vacuous: across the corpus, a second cycle with nothing changed
    reuses the outcome of every node whose first search ended (an error is not kept)."""
    reused = expected = 0
    for seed in range(0, 700, 7):
        scenario_ = scenario(seed)
        if scenario_["name"] not in SCENARIOS:
            continue
        features = Features.from_gate_names(set(scenario_["features"]))
        classes = {c["metadata"]["name"]: c for c in scenario_["classes"]}
        cache = NodeDevicesCache()
        nodes = [Node.from_raw({"metadata": {"name": n["name"], "labels": n["labels"]}}) for n in scenario_["nodes"]]
        for cycle in range(2):
            allocator = Allocator(
                features, AllocatedState(), classes, scenario_["slices"], compile_expression, cache=cache
            )
            for node in nodes:
                try:
                    allocator.allocate(node, scenario_["claims"])
                except AllocatorError:
                    continue
                if cycle == 0:
                    expected += 1
        reused += allocator.stats.outcomes_reused
    assert reused == expected and expected > 50
