"""The allocator's vocabulary: features, device ids, the already-allocated state, its errors.

Owns the shapes kube's `structured` package shares with the scheduler plugin (schedulerapi's
DeviceID, SharedDeviceID, AllocatedState, consumed-capacity collections, internal.Features).
Pure data: must never read the API or know about the framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

# resourceapi.AllocationResultsMaxSize: the most devices one claim's allocation may hold.
ALLOCATION_RESULTS_MAX_SIZE = 32


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class SharedDeviceID(NamedTuple):
    """One share of a device allocated with `allowMultipleAllocations` (share id from the result)."""

    driver: str
    pool: str
    device: str
    share_id: str

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)

    def __str__(self) -> str:
        base = f"{self.driver}/{self.pool}/{self.device}"
        return f"{base}/{self.share_id}" if self.share_id else base


# Consumed capacity of one device: capacity name -> exact amount in base units.
ConsumedCapacity = dict[str, Decimal]


@dataclass(frozen=True, slots=True)
class Features:
    """internal.Features: which optional allocator behaviour is on.

    The defaults turn on every option the incubating variant implements, as upstream's allocator
    tests run it: DRAAdminAccess, DRAConsumableCapacity, DRADeviceBindingConditions with
    DRAResourceClaimDeviceStatus, DRADeviceTaints, DRAFractionalCapacityRange, DRAPartitionableDevices
    and DRAPrioritizedList. The scheduler does not use these defaults: the plugin derives its options
    from the feature gates in force (plugins/dynamicresources/allocation.py allocator_features), where
    DRAFractionalCapacityRange is off in v1.37.2 (beta, on only from min-compatibility 1.37). The
    alpha DRADeviceCompatibilityGroups, DRADerivedAttributes, DRAListTypeAttributes and
    DRAOptionalNodeOperations need upstream's experimental variant, which this package does not
    implement: asking for them is an AllocatorError, as kube's NewAllocator refuses a feature set no
    variant supports.
    """

    admin_access: bool = True
    compatibility_groups: bool = False
    consumable_capacity: bool = True
    derived_attributes: bool = False
    device_binding_and_status: bool = True
    device_taints: bool = True
    fractional_capacity_range: bool = True
    list_type_attributes: bool = False
    optional_node_operations: bool = False
    partitionable_devices: bool = True
    prioritized_list: bool = True

    def gate_names(self) -> frozenset[str]:
        """Features.Set(): the names (kube's feature gates where there is one) of what is on."""
        names = {
            "DRAAdminAccess": self.admin_access,
            "DRADeviceCompatibilityGroups": self.compatibility_groups,
            "DRAConsumableCapacity": self.consumable_capacity,
            "DRADerivedAttributes": self.derived_attributes,
            "DRADeviceTaints": self.device_taints,
            "DRAFractionalCapacityRange": self.fractional_capacity_range,
            "DRAListTypeAttributes": self.list_type_attributes,
            "DRAOptionalNodeOperations": self.optional_node_operations,
            "DRAPartitionableDevices": self.partitionable_devices,
            "DRAPrioritizedList": self.prioritized_list,
            "DRADeviceBindingConditions+DRAResourceClaimDeviceStatus": self.device_binding_and_status,
        }
        return frozenset(name for name, on in names.items() if on)

    @classmethod
    def from_gate_names(cls, names: frozenset[str] | set[str]) -> Features:
        """The features whose gate names are given, everything else off (as a Go literal)."""
        return cls(
            admin_access="DRAAdminAccess" in names,
            compatibility_groups="DRADeviceCompatibilityGroups" in names,
            consumable_capacity="DRAConsumableCapacity" in names,
            derived_attributes="DRADerivedAttributes" in names,
            device_binding_and_status="DRADeviceBindingConditions+DRAResourceClaimDeviceStatus" in names,
            device_taints="DRADeviceTaints" in names,
            fractional_capacity_range="DRAFractionalCapacityRange" in names,
            list_type_attributes="DRAListTypeAttributes" in names,
            optional_node_operations="DRAOptionalNodeOperations" in names,
            partitionable_devices="DRAPartitionableDevices" in names,
            prioritized_list="DRAPrioritizedList" in names,
        )


# What the incubating variant (the one v1.37.2 runs with its default gates) supports.
SUPPORTED_FEATURES = Features()


@dataclass(slots=True)
class AllocatedState:
    """schedulerapi.AllocatedState: what allocated (and in-flight) claims already hold.

    `devices` are devices allocated exclusively; `shared_device_ids` the shares of devices
    allocated with allowMultipleAllocations; `aggregated_capacity` the capacity those shares
    consume, summed per device.
    """

    devices: set[DeviceID] = field(default_factory=set)
    shared_device_ids: set[SharedDeviceID] = field(default_factory=set)
    aggregated_capacity: dict[DeviceID, ConsumedCapacity] = field(default_factory=dict)

    def is_device_allocated(self, device_id: DeviceID) -> bool:
        """internal.IsDeviceAllocated: held exclusively, by a share, or with consumed capacity."""
        if device_id in self.devices:
            return True
        if any(shared.device_id == device_id for shared in self.shared_device_ids):
            return True
        return device_id in self.aggregated_capacity

    def add_consumed_capacity(self, device_id: DeviceID, consumed: Mapping[str, Decimal]) -> None:
        """ConsumedCapacityCollection.Insert."""
        add_capacity(self.aggregated_capacity.setdefault(device_id, {}), consumed)


def add_capacity(into: ConsumedCapacity, added: Mapping[str, Decimal]) -> None:
    for name, amount in added.items():
        into[name] = into.get(name, Decimal(0)) + amount


class AllocatorError(Exception):
    """A claim-level problem (unknown class, CEL error, invalid request): str() is kube's message.

    The scheduler aborts the pod's attempt on it rather than trying other nodes.
    """


class FailedAllocationOnNodeError(AllocatorError):
    """ErrFailedAllocationOnNode: a problem of this node only (e.g. invalid resource pools).

    The plugin reports it as the node's Unschedulable reason; other nodes may still fit.
    """


class AllocationTimeoutError(AllocatorError):
    """The search ran past its deadline (kube's DRASchedulerFilterTimeout, 10 s by default)."""
