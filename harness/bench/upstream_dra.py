"""scheduler_perf's allocResourceClaims (dra.go) as pure code: claims allocated up front, as a
driver or controller would, before the measured pods arrive.

Owns: choosing, for each claim not yet allocated, in list order, the first node of a fresh random
order where the project's structured allocator (plugins/dynamicresources/structured, the same
code the DynamicResources plugin uses) fits it, against the devices every claim allocated so far
(earlier ones and those allocated here) holds, on slices with DeviceTaintRules applied, with
v1.37.2's default allocator features (a workload setting other DRA gates is skipped before it
gets here: ours refuses them).

Must never: talk to the API (the executor lists the objects and writes each claim's status), or
leave a claim unallocated silently: one that fits no node is an error naming it, as upstream's op
fails the workload.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from harness.bench.upstream import UpstreamError
from plugins.dynamicresources.cel import compile_expression
from plugins.dynamicresources.structured import (
    AllocatedState,
    Allocator,
    AllocatorError,
    DeviceID,
    Features,
    SharedDeviceID,
    apply_device_taint_rules,
)
from scheduler.model.objects import Node
from scheduler.model.quantity import QuantityError, parse_quantity

Raw = dict[str, Any]


def _name(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def hold(state: AllocatedState, claim_name: str, allocation: Mapping[str, Any]) -> None:
    """Add what one allocation holds to `state`, as dra.go gathers it: every result's device as
    taken outright — upstream's loop inserts the device before it looks at shareID, so a shared
    device is taken too — plus the share and its consumed capacity when it has a shareID."""
    for result in (allocation.get("devices") or {}).get("results") or ():
        device = DeviceID(result["driver"], result["pool"], result["device"])
        state.devices.add(device)
        share = result.get("shareID")
        if share is None:
            continue
        state.shared_device_ids.add(SharedDeviceID(*device, share))
        consumed = result.get("consumedCapacity")
        if consumed:
            try:
                amounts = {name: parse_quantity(str(value)) for name, value in consumed.items()}
            except QuantityError as err:
                raise UpstreamError(f"ResourceClaim {claim_name}: consumedCapacity: {err}") from err
            state.add_consumed_capacity(device, amounts)


def allocate_claims(
    claims: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    slices: Sequence[Raw],
    classes: Sequence[Raw],
    taint_rules: Sequence[Raw],
    rng: random.Random,
) -> list[tuple[Raw, Raw]]:
    """(claim, its status.allocation) for each claim of `claims` without an allocation."""
    state = AllocatedState()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            hold(state, _name(claim), allocation)
    by_class = {c["metadata"]["name"]: c for c in classes}
    tainted = apply_device_taint_rules(slices, taint_rules)
    order = [Node.from_raw(dict(node)) for node in nodes]
    allocated: list[tuple[Raw, Raw]] = []
    for index, claim in enumerate(claims):
        if (claim.get("status") or {}).get("allocation"):
            continue
        # Upstream builds the allocator anew per claim: it reads the taken devices once.
        allocator = Allocator(Features(), state, by_class, tainted, compile_expression)
        rng.shuffle(order)
        for node in order:
            try:
                results = allocator.allocate(node, [dict(claim)])
            except AllocatorError as err:
                raise UpstreamError(f"allocating ResourceClaim {_name(claim)}: {err}") from err
            if results is not None:
                hold(state, _name(claim), results[0])
                allocated.append((dict(claim), results[0]))
                break
        else:
            raise UpstreamError(f"Could not allocate claim {index} out of {len(claims)} ({_name(claim)})")
    return allocated
