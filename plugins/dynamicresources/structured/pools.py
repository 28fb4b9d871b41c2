"""Resource pools as one node sees them, gathered from ResourceSlices (pools_incubating.go).

Owns node selection of slices and devices (`nodeName`, `allNodes`, `nodeSelector`,
`perDeviceNodeSelection`), pool generations (a newer generation replaces older slices),
`resourceSliceCount` (a pool missing slices is incomplete), invalid pools (duplicate device
names, unknown counter sets or counters) and the search order: pools sorted by driver then pool
name, pools whose devices have binding conditions last, slices sorted by name.
Must never change a slice: devices are read-only views of the raw dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

from scheduler.model.objects import Node
from scheduler.model.selectors import parse_node_selector

from .capacity import CapacityError, amount
from .types import AllocatorError, DeviceID, Features

Raw = Mapping[str, Any]


class PoolID(NamedTuple):
    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


def node_matches(node: Node | None, node_name: str, all_nodes: bool, node_selector: Raw | None) -> bool:
    """NodeMatches: the node a slice or device is available on. A broken selector is an error."""
    if node_name:
        return node is not None and node.name == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        selector = parse_node_selector(node_selector)
        if selector.errors:
            raise AllocatorError(f"failed to parse node selector: {'; '.join(selector.errors)}")
        return node is not None and selector.matches(node)
    return False


def _uses_compatibility_groups(slice_: Raw) -> bool:
    return any(
        consumption.get("compatibilityGroups")
        for device in _spec(slice_).get("devices") or ()
        for consumption in device.get("consumesCounters") or ()
    )


def _spec(slice_: Raw) -> Raw:
    spec: Raw = slice_.get("spec") or {}
    return spec


def _name(obj: Raw) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _pool_of(slice_: Raw) -> Raw:
    pool: Raw = _spec(slice_).get("pool") or {}
    return pool


def _generation(slice_: Raw) -> int:
    return int(_pool_of(slice_).get("generation") or 0)


def pool_id(slice_: Raw) -> PoolID:
    return PoolID(str(_spec(slice_).get("driver") or ""), str(_pool_of(slice_).get("name") or ""))


@dataclass(slots=True)
class Pool:
    id: PoolID
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    # Slices with devices that are relevant for the node, sorted by name.
    device_slices: list[Raw] = field(default_factory=list)
    # Further slices of the pool (needed for counters consumed by devices on other nodes).
    device_slices_not_targeting_node: list[Raw] = field(default_factory=list)
    # Counter set name -> counter name -> exact value.
    counter_sets: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    # Every device of the pool's slices (the node's and the others) that consumes its counters,
    # with what it consumes as (counter set, counter, exact value).
    consumers: tuple[tuple[DeviceID, tuple[tuple[str, str, Decimal], ...]], ...] = ()

    def has_binding_conditions(self) -> bool:
        return any(
            device.get("bindingConditions") is not None
            for slice_ in self.device_slices
            for device in _spec(slice_).get("devices") or ()
        )


def _slice_relevant(slice_: Raw, node: Node) -> bool | None:
    """Whether the slice offers something to the node; None for an unknown node selection."""
    spec = _spec(slice_)
    node_name = spec.get("nodeName") or ""
    all_nodes = bool(spec.get("allNodes"))
    selector = spec.get("nodeSelector")
    if node_name or all_nodes or selector is not None:
        try:
            return node_matches(node, node_name, all_nodes, selector)
        except AllocatorError as exc:
            raise AllocatorError(f"failed to perform node selection for slice {_name(slice_)}: {exc}") from exc
    if spec.get("perDeviceNodeSelection"):
        for device in spec.get("devices") or ():
            try:
                if node_matches(
                    node, device.get("nodeName") or "", bool(device.get("allNodes")), device.get("nodeSelector")
                ):
                    return True
            except AllocatorError as exc:
                raise AllocatorError(
                    f"failed to perform node selection for device {device.get('name', '')} "
                    f"in slice {_name(slice_)}: {exc}"
                ) from exc
        return False
    return None


def gather_pools(
    slices_for_node: Sequence[Raw], node: Node, features: Features, all_slices: Sequence[Raw]
) -> list[Pool]:
    """GatherPools: every pool with devices the node can reach, incomplete and invalid ones marked."""
    by_pool: dict[PoolID, list[Raw]] = {}
    for slice_ in slices_for_node:
        spec = _spec(slice_)
        if not features.partitionable_devices and (
            spec.get("perDeviceNodeSelection") is not None or spec.get("sharedCounters")
        ):
            continue
        if not features.compatibility_groups and _uses_compatibility_groups(slice_):
            continue
        if not _slice_relevant(slice_, node):
            continue
        pid = pool_id(slice_)
        current = by_pool.get(pid)
        if current is None or _generation(slice_) > _generation(current[0]):
            by_pool[pid] = [slice_]
        elif _generation(slice_) == _generation(current[0]):
            current.append(slice_)

    pools: list[Pool] = []
    with_binding_conditions: list[Pool] = []
    for pid, pool_slices in by_pool.items():
        expected = int(_pool_of(pool_slices[0]).get("resourceSliceCount") or 0)
        all_for_pool: list[Raw] | None = None
        if len(pool_slices) != expected:
            # Slices of the pool that do not target this node count towards completeness too.
            generation = _generation(pool_slices[0])
            same_pool = [s for s in all_slices if pool_id(s) == pid]
            if any(_generation(s) > generation for s in same_pool):
                continue  # The driver is replacing this generation: ignore it.
            all_for_pool = [s for s in same_pool if _generation(s) == generation]
            if not features.compatibility_groups:
                all_for_pool = [s for s in all_for_pool if not _uses_compatibility_groups(s)]
            if len(all_for_pool) != expected:
                pools.append(Pool(pid, incomplete=True))
                continue
        pool = _build_pool(pid, pool_slices, features, all_for_pool or [])
        (with_binding_conditions if pool.has_binding_conditions() else pools).append(pool)
    pools.sort(key=lambda p: p.id)
    with_binding_conditions.sort(key=lambda p: p.id)
    return pools + with_binding_conditions


def _build_pool(pid: PoolID, pool_slices: list[Raw], features: Features, all_for_pool: list[Raw]) -> Pool:
    pool_slices = sorted(pool_slices, key=_name)
    device_slices: list[Raw] = []
    counter_set_slices: list[Raw] = []
    for slice_ in pool_slices:
        if features.partitionable_devices and _spec(slice_).get("sharedCounters"):
            counter_set_slices.append(slice_)
        else:
            device_slices.append(slice_)
    others: list[Raw] = []
    if len(pool_slices) < len(all_for_pool):
        seen = {_name(s) for s in pool_slices}
        for slice_ in all_for_pool:
            if _name(slice_) in seen:
                continue
            if features.partitionable_devices and _spec(slice_).get("sharedCounters"):
                counter_set_slices.append(slice_)
            else:
                others.append(slice_)

    names: set[str] = set()
    for slice_ in device_slices:
        for device in _spec(slice_).get("devices") or ():
            name = str(device.get("name") or "")
            if name in names:
                return Pool(pid, invalid=True, invalid_reason=f"duplicate device name {name}")
            names.add(name)
            problem = _quantity_problem(device)
            if problem:
                # The apiserver validates these; should one slip through, it spoils its own
                # pool (this node's problem), never the claims that look at it.
                return Pool(pid, invalid=True, invalid_reason=f"slice {_name(slice_)}, device {name}: {problem}")
    if not features.partitionable_devices:
        return Pool(pid, device_slices=device_slices)

    counter_sets: dict[str, dict[str, Decimal]] = {}
    for slice_ in counter_set_slices:
        for counter_set in _spec(slice_).get("sharedCounters") or ():
            set_name = str(counter_set.get("name") or "")
            if set_name in counter_sets:
                return Pool(pid, invalid=True, invalid_reason=f"duplicate counter set name {set_name}")
            try:
                counter_sets[set_name] = {
                    name: amount((counter or {}).get("value", "0")).value
                    for name, counter in (counter_set.get("counters") or {}).items()
                }
            except CapacityError as exc:
                return Pool(pid, invalid=True, invalid_reason=f"counter set {set_name}: {exc}")
    for slices in (device_slices, others):
        reason = _counter_consumption_problem(counter_sets, slices)
        if reason:
            return Pool(pid, invalid=True, invalid_reason=reason)
    consumers: list[tuple[DeviceID, tuple[tuple[str, str, Decimal], ...]]] = []
    for slice_ in (*device_slices, *others):
        for device in _spec(slice_).get("devices") or ():
            name = str(device.get("name") or "")
            try:
                takes = counter_takes(device)
            except CapacityError as exc:
                return Pool(pid, invalid=True, invalid_reason=f"slice {_name(slice_)}, device {name}: {exc}")
            if takes:
                consumers.append((DeviceID(pid.driver, pid.pool, name), takes))
    return Pool(
        pid,
        device_slices=device_slices,
        device_slices_not_targeting_node=others,
        counter_sets=counter_sets,
        consumers=tuple(consumers),
    )


def _quantities(device: Raw) -> list[tuple[str, Any]]:
    """Every quantity of the device (capacity and its policy, counters) with its field path."""
    fields: list[tuple[str, Any]] = []
    for name, capacity in (device.get("capacity") or {}).items():
        fields.append((f"capacity[{name}].value", capacity.get("value", "0")))
        policy = capacity.get("requestPolicy") or {}
        fields.append((f"capacity[{name}].requestPolicy.default", policy.get("default")))
        for key, value in (policy.get("validRange") or {}).items():
            fields.append((f"capacity[{name}].requestPolicy.validRange.{key}", value))
        for i, value in enumerate(policy.get("validValues") or ()):
            fields.append((f"capacity[{name}].requestPolicy.validValues[{i}]", value))
    for i, consumption in enumerate(device.get("consumesCounters") or ()):
        for name, counter in (consumption.get("counters") or {}).items():
            fields.append((f"consumesCounters[{i}].counters[{name}].value", (counter or {}).get("value", "0")))
    return fields


@lru_cache(maxsize=4096)
def _parses(value: str | int) -> bool:
    try:
        amount(value)
    except CapacityError:
        return False
    return True


def _quantity_problem(device: Raw) -> str:
    """The first quantity of the device that does not parse, with its field path; "" if none."""
    capacity = device.get("capacity")
    if capacity and all(_parses(c.get("value", "0")) and not c.get("requestPolicy") for c in capacity.values()):
        capacity = None  # the common case, checked without naming every field
    if not capacity and not device.get("consumesCounters"):
        return ""
    for path, value in _quantities(device):
        if value is not None and not _parses(value):
            try:
                amount(value)
            except CapacityError as exc:
                return f"{path}: {exc}"
    return ""


def counter_takes(device: Mapping[str, Any]) -> tuple[tuple[str, str, Decimal], ...]:
    """What the device's consumesCounters take, as (counter set, counter, amount); raises
    CapacityError for an amount that does not parse (its pool is then invalid)."""
    return tuple(
        (str(consumption.get("counterSet") or ""), counter, amount((value or {}).get("value", "0")).value)
        for consumption in device.get("consumesCounters") or ()
        for counter, value in (consumption.get("counters") or {}).items()
    )


def _counter_consumption_problem(counter_sets: Mapping[str, Mapping[str, Decimal]], slices: Sequence[Raw]) -> str:
    for slice_ in slices:
        for device in _spec(slice_).get("devices") or ():
            for consumption in device.get("consumesCounters") or ():
                set_name = str(consumption.get("counterSet") or "")
                counter_set = counter_sets.get(set_name)
                if counter_set is None:
                    return f"counter set {set_name} not found"
                for counter_name in consumption.get("counters") or {}:
                    if counter_name not in counter_set:
                        return f"counter {counter_name} not found in counter set {set_name}"
    return ""
