"""How DynamicResources sets up the structured allocator for one scheduling cycle: the features
(v1.37.2's default gates), the devices already taken in the allocator's types, the CEL cache,
and the Filter timeout as the allocator's deadline. No allocation logic of its own (that is
structured/), no API.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
            amounts = {}
            for name, value in consumed.items():
                try:
                    amounts[name] = parse(str(value)).exact
                except QuantityError as exc:
                    raise AllocatorError(f"device {'/'.join(device)}: consumed capacity {name}: {exc}") from exc
            state.add_consumed_capacity(DeviceID(*device), amounts)
    return state


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
