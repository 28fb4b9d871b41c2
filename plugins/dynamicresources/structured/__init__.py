"""Structured parameters: which devices a pod's ResourceClaims get on a node.

Pure Python over raw resource.k8s.io/v1 dicts, no API, no framework — kube-scheduler v1.37.2's
`k8s.io/dynamic-resource-allocation/structured` in the variant its default gates select
(`incubating`). The DynamicResources plugin adapts it to the framework.

API (mirrors upstream's NewAllocator / Allocate):

    allocator = Allocator(features, allocated_state, classes, slices, cel)
    results = allocator.allocate(node, claims, deadline=None)

- `features`: `Features()` is v1.37.2's default gates; a parameter so a profile can turn any off.
- `allocated_state`: `AllocatedState(devices, shared_device_ids, aggregated_capacity)` — what
  allocated and in-flight claims hold (`DeviceID(driver, pool, device)`, `SharedDeviceID(...,
  share_id)`, consumed capacity per device as exact Decimals).
- `classes`: DeviceClass name -> DeviceClass dict. `slices`: every ResourceSlice dict, device
  taints from DeviceTaintRules already applied (`apply_device_taint_rules`).
- `cel`: `compile_expression` from `plugins.dynamicresources.cel` (its cache of compiled
  selectors; a test may pass any function giving a `CompilationResult`).
- `node`: the project's `Node` (name and labels are what is read).
- `claims`: the claims still to allocate, in order. Returns one v1 `AllocationResult` dict per
  claim (`devices.results[]` with request/driver/pool/device, adminAccess, tolerations, shareID,
  consumedCapacity, bindingConditions/bindingFailureConditions; `devices.config[]`;
  `nodeSelector`), or None when they do not fit on this node. Like kube's, a result shares
  nested objects (tolerations, opaque configs, selector requirements) with the inputs: read-only.
- Errors: `AllocatorError` — a claim-level problem with kube's message (unknown class, CEL
  compile/runtime error, invalid request): abort the pod's attempt. Its subclass
  `FailedAllocationOnNodeError` ("invalid resource pools were encountered") concerns this node
  only. `AllocationTimeoutError` when `time.monotonic()` passes `deadline` (kube's
  DRASchedulerFilterTimeout, 10 s by default: the search is exhaustive, so a pathological claim
  must be cut off).
- `node_matches(node, node_name, all_nodes, node_selector)` is kube's NodeMatches (for the node
  selectors of claims that are already allocated). `allocator.stats` counts search steps.

One Allocator serves every node of a scheduling cycle and caches the counters left per pool. A
`NodeDevicesCache` passed as `cache=` carries each node's pools and devices (with their CEL
conversions and selector verdicts) from one cycle to the next while the slices list (the same
object), the features and the Node stay the same, and each node's last outcome: the next cycle
gets it again, without a search, for claims of the same spec with the same class objects while
nothing taken on that node's devices (nor in its pools' counters) changed; a shared device in it
gets a fresh share id each time. `reuse_outcomes = False` searches every time, as kube's
allocator does.
"""

from .allocator import Allocator, CELCompiler, NodeDevicesCache, Stats, taint_prevents_allocation
from .pools import Pool, PoolID, gather_pools, node_matches
from .taintrules import apply_device_taint_rules
from .types import (
    ALLOCATION_RESULTS_MAX_SIZE,
    SUPPORTED_FEATURES,
    AllocatedState,
    AllocationTimeoutError,
    AllocatorError,
    ConsumedCapacity,
    DeviceID,
    FailedAllocationOnNodeError,
    Features,
    SharedDeviceID,
)

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "SUPPORTED_FEATURES",
    "AllocatedState",
    "AllocationTimeoutError",
    "Allocator",
    "AllocatorError",
    "CELCompiler",
    "ConsumedCapacity",
    "DeviceID",
    "FailedAllocationOnNodeError",
    "Features",
    "NodeDevicesCache",
    "Pool",
    "PoolID",
    "SharedDeviceID",
    "Stats",
    "apply_device_taint_rules",
    "gather_pools",
    "node_matches",
    "taint_prevents_allocation",
]
