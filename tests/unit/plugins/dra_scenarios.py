"""Seeded random allocation scenarios for the differential check against upstream's allocator.

Shapes the shared table covers one at a time, mixed: several pools and slices (some incomplete,
some from an older generation), devices with attributes, capacity and taints, partitionable
devices on shared counters, devices allowing multiple allocations, already-allocated devices,
and claims with several requests (exact count, All, firstAvailable, admin access, tolerations,
capacity requests, CEL selectors) under matchAttribute/distinctAttribute constraints. The same
seed gives the same scenario; hack/dra-allocator-cases/gen.sh runs them through upstream
and stores its outcomes, test_dra_allocator_upstream.py through ours.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

DRIVERS = ("driver-a", "driver-b")
ALL_FEATURES = [
    "DRAAdminAccess",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions+DRAResourceClaimDeviceStatus",
    "DRADeviceTaints",
    "DRAFractionalCapacityRange",
    "DRAPartitionableDevices",
    "DRAPrioritizedList",
]
TAINTS = [
    {"key": "maintenance", "value": "soon", "effect": "NoSchedule"},
    {"key": "broken", "value": "yes", "effect": "NoExecute"},
    {"key": "info", "value": "x", "effect": "None"},
]
TOLERATIONS = [
    {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "broken", "operator": "Equal", "value": "yes"},
    {"operator": "Exists"},
]


NODE_PLACEMENTS: list[dict[str, Any]] = [
    {"nodeName": "node-1"},
    {"nodeName": "node-1"},
    {"nodeName": "node-2"},
    {"allNodes": True},
    {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    },
    {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
        }
    },
]


def device(rng: random.Random, name: str, driver: str, counters: list[str] | None) -> dict[str, Any]:
    dev: dict[str, Any] = {
        "name": name,
        "attributes": {
            "numa": {"int": rng.randrange(2)},
            "model": {"string": rng.choice(["a100", "h100"])},
            f"{driver}/healthy": {"bool": rng.random() < 0.9},
        },
        "capacity": {"memory": {"value": rng.choice(["40Gi", "80Gi"])}},
    }
    if rng.random() < 0.15:
        dev["taints"] = [rng.choice(TAINTS)]
    if rng.random() < 0.05:
        dev["bindingConditions"] = ["attached"]
        dev["bindingFailureConditions"] = ["failed"]
        dev["bindsToNode"] = rng.random() < 0.5
    if counters is not None:
        dev["consumesCounters"] = [
            {"counterSet": "gpu-0", "counters": {c: {"value": rng.choice(["1", "2"])} for c in counters}}
        ]
    elif rng.random() < 0.15:
        dev["allowMultipleAllocations"] = True
        dev["capacity"]["memory"]["requestPolicy"] = rng.choice(
            [
                {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}},
                {"default": "20Gi", "validValues": ["20Gi", "40Gi"]},
                {},
            ]
        )
        if not dev["capacity"]["memory"]["requestPolicy"]:
            del dev["capacity"]["memory"]["requestPolicy"]
    return dev


def pool_slices(rng: random.Random, driver: str, pool: str) -> list[dict[str, Any]]:
    count = rng.randint(1, 2)
    partitionable = rng.random() < 0.3
    generation = rng.randint(1, 2)
    slices = []
    placement: dict[str, Any] = rng.choice(NODE_PLACEMENTS)
    per_device = partitionable and rng.random() < 0.3
    for index in range(count):
        devices = [
            device(rng, f"dev-{index}-{i}", driver, ["mem", "sm"] if partitionable else None)
            for i in range(rng.randint(2, 5))
        ]
        device_placement = placement
        if per_device:
            # Each device says where it is (DRAPartitionableDevices' perDeviceNodeSelection).
            device_placement = {"perDeviceNodeSelection": True}
            for dev in devices:
                dev.update(rng.choice(NODE_PLACEMENTS))
        slices.append(
            {
                "metadata": {"name": f"{pool}-slice-{index}"},
                "spec": {
                    "driver": driver,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count + partitionable},
                    **device_placement,
                    "devices": devices,
                },
            }
        )
    if partitionable:
        slices.append(
            {
                "metadata": {"name": f"{pool}-counters"},
                "spec": {
                    "driver": driver,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count + 1},
                    **placement,
                    "sharedCounters": [
                        {"name": "gpu-0", "counters": {"mem": {"value": "4"}, "sm": {"value": str(rng.randint(2, 6))}}}
                    ],
                },
            }
        )
    if rng.random() < 0.1:
        slices.pop(rng.randrange(len(slices)))  # an incomplete pool
    if slices and rng.random() < 0.1:
        stale = json.loads(json.dumps(slices[0]))
        stale["metadata"]["name"] += "-old"
        stale["spec"]["pool"]["generation"] = 0
        slices.append(stale)
    return slices


def selectors(rng: random.Random, driver: str) -> list[dict[str, Any]]:
    choices = [
        [],
        [{"cel": {"expression": f'device.attributes["{driver}"].model == "a100"'}}],
        [{"cel": {"expression": f'device.capacity["{driver}"].memory.compareTo(quantity("60Gi")) >= 0'}}],
        [{"cel": {"expression": f'device.attributes["{driver}"].healthy'}}],
    ]
    return rng.choice(choices)


def exact(rng: random.Random, driver: str) -> dict[str, Any]:
    mode = "All" if rng.random() < 0.1 else "ExactCount"
    spec: dict[str, Any] = {"deviceClassName": f"class-{driver}", "allocationMode": mode}
    if mode == "ExactCount":
        spec["count"] = rng.choice([1, 1, 2, 3])
    if sel := selectors(rng, driver):
        spec["selectors"] = sel
    if rng.random() < 0.2:
        spec["tolerations"] = [rng.choice(TOLERATIONS)]
    if rng.random() < 0.15:
        spec["capacity"] = {"requests": {"memory": rng.choice(["5Gi", "10Gi", "30Gi"])}}
    return spec


def claim(rng: random.Random, index: int) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    # Mostly one driver per claim, so that constraints on its attributes can hold.
    claim_driver = rng.choice(DRIVERS)
    for r in range(rng.choice([1, 1, 2, 3])):
        driver = claim_driver if rng.random() < 0.8 else rng.choice(DRIVERS)
        if rng.random() < 0.25:
            subs: list[dict[str, Any]] = []
            for s in range(2):
                sub = exact(rng, rng.choice(DRIVERS))
                subs.append({"name": f"sub-{s}", **sub})
            requests.append({"name": f"req-{r}", "firstAvailable": subs})
        else:
            spec = exact(rng, driver)
            if rng.random() < 0.1:
                spec["adminAccess"] = True
            requests.append({"name": f"req-{r}", "exactly": spec})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        kind = rng.choice(["matchAttribute", "distinctAttribute"])
        attribute = rng.choice([f"{claim_driver}/numa", f"{claim_driver}/model", "driver-a/numa"])
        constraint: dict[str, Any] = {kind: attribute}
        if rng.random() < 0.5:
            constraint["requests"] = [requests[0]["name"]]
        devices["constraints"] = [constraint]
    return {"metadata": {"name": f"claim-{index}", "namespace": "default"}, "spec": {"devices": devices}}


def scenario(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    slices: list[dict[str, Any]] = []
    for p in range(rng.randint(2, 5)):
        slices.extend(pool_slices(rng, rng.choice(DRIVERS), f"pool-{p}"))
    rng.shuffle(slices)
    allocated: list[list[str]] = []
    shares: list[list[Any]] = []
    for s in slices:
        for d in s["spec"].get("devices", ()):
            if rng.random() < 0.15:
                ids = [s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]]
                if d.get("allowMultipleAllocations"):
                    # A share some other claim holds, with what it consumes.
                    shares.append([*ids, f"share-{len(shares)}", {"memory": rng.choice(["10Gi", "40Gi"])}])
                else:
                    allocated.append(ids)
    classes = [
        {
            "metadata": {"name": f"class-{d}"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
        }
        for d in DRIVERS
    ]
    features = ALL_FEATURES if rng.random() < 0.85 else sorted(rng.sample(ALL_FEATURES, 4))
    return {
        "name": f"seed-{seed}",
        "features": features,
        "claims": [claim(rng, i) for i in range(rng.choice([1, 1, 2, 3]))],
        "classes": classes,
        "slices": slices,
        "allocated_devices": allocated,
        "allocated_shares": shares,
        # Allocated on each in turn by one allocator, as within a scheduling cycle.
        "nodes": [{"name": "node-1", "labels": {"zone": "a"}}, {"name": "node-2", "labels": {"zone": "b"}}],
    }


def fingerprint(scenarios: list[dict[str, Any]]) -> str:
    """Changes when the generator does: stored outcomes must then be regenerated."""
    return hashlib.sha256(json.dumps(scenarios, sort_keys=True).encode()).hexdigest()


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps([scenario(seed) for seed in range(int(sys.argv[2]))]))
