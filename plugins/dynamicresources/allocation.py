"""How DynamicResources sets up the structured allocator for one scheduling cycle: the features
(v1.37.2's default gates), the devices already taken in the allocator's types (kept between
cycles, patched from the claim tracker's journal), the CEL cache, and the Filter timeout as the
allocator's deadline. No allocation logic of its own (that is
structured/), no API.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

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
from plugins.dynamicresources.structured.taintrules import apply_device_taint_rules
from plugins.dynamicresources.structured.types import add_capacity
from scheduler import features
from scheduler.features import FeatureGates
from scheduler.framework import dra
from scheduler.model.objects import Node
from scheduler.model.quantity import QuantityError, parse


def allocator_features(gates: FeatureGates) -> Features:
    """kube's AllocatorFeatures: the allocator's options from the feature gates in force."""
    return Features(
        admin_access=gates.enabled(features.DRA_ADMIN_ACCESS),
        compatibility_groups=gates.enabled("DRADeviceCompatibilityGroups"),
        consumable_capacity=gates.enabled(features.DRA_CONSUMABLE_CAPACITY),
        derived_attributes=gates.enabled("DRADerivedAttributes"),
        device_binding_and_status=gates.enabled(features.DRA_DEVICE_BINDING_CONDITIONS)
        and gates.enabled(features.DRA_RESOURCE_CLAIM_DEVICE_STATUS),
        device_taints=gates.enabled(features.DRA_DEVICE_TAINTS),
        fractional_capacity_range=gates.enabled(features.DRA_FRACTIONAL_CAPACITY_RANGE),
        list_type_attributes=gates.enabled("DRAListTypeAttributes"),
        optional_node_operations=gates.enabled("DRAOptionalNodeOperations"),
        partitionable_devices=gates.enabled(features.DRA_PARTITIONABLE_DEVICES),
        prioritized_list=gates.enabled(features.DRA_PRIORITIZED_LIST),
    )


@dataclass
class AllocationSetup:
    features: Features = field(default_factory=Features)
    # The slices with DeviceTaintRules applied, for the DraManager's slices generation.
    _patched: tuple[int, list[Mapping[str, Any]]] | None = None
    # Each node's pools and devices, kept while `slices` returns the same list.
    devices: NodeDevicesCache = field(default_factory=NodeDevicesCache)

    def slices(self, manager: dra.DraManager) -> list[Mapping[str, Any]]:
        """kube's ListWithDeviceTaintRules, redone only when slices or rules changed."""
        generation = manager.slices_generation
        if self._patched is None or self._patched[0] != generation:
            self._patched = (generation, apply_device_taint_rules(manager.resource_slices(), manager.taint_rules()))
        return self._patched[1]


def allocated_state(taken: dra.AllocatedState) -> AllocatedState:
    """The tracker's view of taken devices in the allocator's types (capacity as exact Decimals)."""
    state = AllocatedState(
        {DeviceID(*device) for device in taken.devices},
        {SharedDeviceID(*device, share) for device, share in taken.shared},
    )
    for device, consumed_list in taken.consumed.items():
        for consumed in consumed_list:
            state.add_consumed_capacity(DeviceID(*device), _parsed(DeviceID(*device), consumed))
    return state


_Held = TypeVar("_Held", DeviceID, SharedDeviceID)


def _parsed(device: DeviceID, consumed: Mapping[str, Any]) -> dict[str, Decimal]:
    amounts = {}
    for name, value in consumed.items():
        try:
            amounts[name] = parse(str(value)).exact
        except QuantityError as exc:
            raise AllocatorError(f"device {'/'.join(device)}: consumed capacity {name}: {exc}") from exc
    return amounts


def _tally(counts: Counter[_Held], members: set[_Held], held: _Held, sign: int) -> None:
    """Count one more or one fewer holder of `held`; it is a member while someone holds it."""
    count = counts[held] + sign
    if count > 0:
        counts[held] = count
        members.add(held)
    else:
        counts.pop(held, None)
        members.discard(held)


class TakenDevices:
    """The allocator's AllocatedState kept between cycles, patched from the claim tracker's journal
    of holdings changes instead of rebuilt from every claim for every pod.

    A state handed to an allocator is never changed afterwards (copied before the next patch), so a
    cycle sees exactly what a fresh rebuild at its PreFilter would have given it.
    """

    def __init__(self) -> None:
        self._version: int | None = None
        self._reset()

    def _reset(self) -> None:
        self._devices: Counter[DeviceID] = Counter()
        self._shares: Counter[SharedDeviceID] = Counter()
        self._consumed: dict[DeviceID, list[Mapping[str, Any]]] = {}
        self._unparsable: set[DeviceID] = set()
        self._state = AllocatedState()
        self._lent = False

    def state(self, tracker: dra.ClaimTracker) -> AllocatedState:
        """What is taken now; raises AllocatorError (a consumed capacity that does not parse) as
        `allocated_state` does."""
        version, changes = tracker.holdings_since(self._version)
        if changes is None:
            self._reset()
            changes = tuple((1, held) for held in tracker.holdings())
        for sign, held in changes:
            self._apply(sign, held)
        self._version = version
        if self._unparsable:
            return allocated_state(tracker.allocated_state())  # raises, with a rebuild's message
        self._lent = True
        return self._state

    def _apply(self, sign: int, held: dra.Holdings) -> None:
        if self._lent:
            state = self._state
            self._state = AllocatedState(
                set(state.devices), set(state.shared_device_ids), dict(state.aggregated_capacity)
            )
            self._lent = False
        state = self._state
        for raw in held.devices:
            _tally(self._devices, state.devices, DeviceID(*raw), sign)
        for raw, share_id in held.shared:
            _tally(self._shares, state.shared_device_ids, SharedDeviceID(*raw, share_id), sign)
        for raw, consumed in held.consumed:
            device = DeviceID(*raw)
            entries = self._consumed.setdefault(device, [])
            if sign > 0:
                entries.append(consumed)
            elif consumed in entries:
                entries.remove(consumed)
            self._sum_consumed(device, entries)

    def _sum_consumed(self, device: DeviceID, entries: list[Mapping[str, Any]]) -> None:
        aggregated = self._state.aggregated_capacity
        self._unparsable.discard(device)
        if not entries:
            del self._consumed[device]
            aggregated.pop(device, None)
            return
        total: dict[str, Decimal] = {}
        try:
            for consumed in entries:
                add_capacity(total, _parsed(device, consumed))
        except AllocatorError:
            self._unparsable.add(device)
        aggregated[device] = total


class NodeAllocator:
    """One cycle's allocator with its Filter timeout (0: none)."""

    def __init__(self, allocator: Allocator, timeout: float) -> None:
        self.allocator = allocator
        self.timeout = timeout

    def allocate(self, node: Node, claims: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
        deadline = time.monotonic() + self.timeout if self.timeout > 0 else None
        return self.allocator.allocate(node, claims, deadline=deadline)


def new_allocator(
    setup: AllocationSetup,
    state: AllocatedState,
    classes: Mapping[str, Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    timeout: float,
) -> NodeAllocator:
    """Raises AllocatorError (a feature set no allocator supports)."""
    return NodeAllocator(
        Allocator(setup.features, state, classes, slices, compile_expression, cache=setup.devices), timeout
    )
