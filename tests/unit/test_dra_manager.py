"""DraManager and its claim tracker (kube's dra_manager.go, allocateddevices.go, the assume cache):
the assumed version wins until the informer catches up, in-flight allocations are shared and
counted, the allocated state follows every change of the claims' view, DeviceClasses resolve
extended resources (newest class first, then by name).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.dra import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DraManager,
)


def claim(name: str, rv: int, *results: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv)},
        "spec": {},
        "status": {},
    }
    if results:
        obj["status"]["allocation"] = {"devices": {"results": list(results)}}
    return obj


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": "d", "pool": "p", "device": device, **extra}


def test_assumed_claim_wins_until_the_informer_catches_up() -> None:
    manager = DraManager()
    seen: list[tuple[Any, Any]] = []
    manager.claims.listeners.append(lambda old, new: seen.append((old, new)))
    manager.upsert(RESOURCE_CLAIM, claim("c", 1))
    written = claim("c", 2, result("gpu-0"))
    manager.claims.assume(written)
    assert manager.claims.get("ns", "c") is written
    assert manager.claims.allocated_state().devices == {("d", "p", "gpu-0")}
    manager.upsert(RESOURCE_CLAIM, claim("c", 1))  # a stale relist does not undo our write
    assert manager.claims.get("ns", "c") is written
    newer = claim("c", 3, result("gpu-0"))
    manager.upsert(RESOURCE_CLAIM, newer)
    assert manager.claims.get("ns", "c") is newer
    with pytest.raises(ValueError, match="out of sync"):
        manager.claims.assume(claim("c", 2))
    # Every change of the view is an event (the stale relist changed nothing the plugins see).
    assert [new["metadata"]["resourceVersion"] for _, new in seen] == ["1", "2", "3"]


def test_restore_drops_the_assumption_and_its_devices() -> None:
    manager = DraManager()
    manager.upsert(RESOURCE_CLAIM, claim("c", 1))
    manager.claims.assume(claim("c", 2, result("gpu-0")))
    manager.claims.restore("ns", "c")
    assert manager.claims.get("ns", "c")["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    assert manager.claims.allocated_state().devices == set()


def test_in_flight_allocations_are_shared_and_counted() -> None:
    manager = DraManager()
    manager.upsert(RESOURCE_CLAIM, claim("c", 1))
    allocated = claim("c", 1, result("gpu-1"))
    manager.claims.signal_pending_allocation("uid-c", allocated)
    manager.claims.signal_pending_allocation("uid-c", allocated)  # a second pod shares it
    assert manager.claims.pending_allocation("uid-c") == allocated["status"]["allocation"]
    assert manager.claims.allocated_state().devices == {("d", "p", "gpu-1")}
    assert manager.claims.maybe_remove_pending_allocation("uid-c", False) is False
    assert manager.claims.maybe_remove_pending_allocation("uid-c", False) is True
    assert manager.claims.pending_allocation("uid-c") is None
    assert manager.claims.maybe_remove_pending_allocation("uid-c", True) is False


def test_allocated_state_counts_dedicated_shared_and_consumed_but_not_admin_access() -> None:
    manager = DraManager()
    manager.upsert(
        RESOURCE_CLAIM,
        claim(
            "a",
            1,
            result("gpu-0"),
            result("gpu-1", adminAccess=True),
            result("nic-0", shareID="s1", consumedCapacity={"bandwidth": "1Gi"}),
        ),
    )
    manager.upsert(RESOURCE_CLAIM, claim("b", 1, result("nic-0", shareID="s2", consumedCapacity={"bandwidth": "2Gi"})))
    state = manager.claims.allocated_state()
    assert state.devices == {("d", "p", "gpu-0")}
    assert state.shared == {(("d", "p", "nic-0"), "s1"), (("d", "p", "nic-0"), "s2")}
    assert sorted(c["bandwidth"] for c in state.consumed[("d", "p", "nic-0")]) == ["1Gi", "2Gi"]
    manager.upsert(RESOURCE_CLAIM, claim("a", 2))  # deallocated
    manager.delete(RESOURCE_CLAIM, claim("b", 2))
    state = manager.claims.allocated_state()
    assert (state.devices, state.shared, state.consumed) == (set(), set(), {})


def test_pending_allocation_of_a_claim_already_allocated_is_not_in_flight() -> None:
    manager = DraManager()
    manager.upsert(RESOURCE_CLAIM, claim("c", 1, result("gpu-0")))
    manager.claims.signal_pending_allocation("uid-c", claim("c", 1, result("gpu-0")))
    assert manager.claims.pending_allocation("uid-c") is None


def device_class(name: str, created: str, extended: str | None = None) -> dict[str, Any]:
    spec = {"extendedResourceName": extended} if extended else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def test_device_class_for_resource() -> None:
    manager = DraManager()
    manager.upsert(DEVICE_CLASS, device_class("old", "2026-01-01T00:00:00Z", "example.com/gpu"))
    manager.upsert(DEVICE_CLASS, device_class("new-b", "2026-02-01T00:00:00Z", "example.com/gpu"))
    manager.upsert(DEVICE_CLASS, device_class("new-a", "2026-02-01T00:00:00Z", "example.com/gpu"))
    assert manager.device_class_for_resource("example.com/gpu")["metadata"]["name"] == "new-a"  # type: ignore[index]
    assert manager.device_class_for_resource("deviceclass.resource.kubernetes.io/old") is not None
    assert manager.device_class_for_resource("example.com/other") is None
    manager.delete(DEVICE_CLASS, device_class("new-a", ""))
    assert manager.device_class_for_resource("example.com/gpu")["metadata"]["name"] == "new-b"  # type: ignore[index]


def test_slices_generation_moves_with_slices_and_rules_only() -> None:
    manager = DraManager()
    start = manager.slices_generation
    manager.upsert(DEVICE_CLASS, device_class("c", ""))
    assert manager.slices_generation == start
    manager.upsert(RESOURCE_SLICE, {"metadata": {"name": "s"}, "spec": {}})
    manager.upsert(DEVICE_TAINT_RULE, {"metadata": {"name": "r"}, "spec": {}})
    assert manager.slices_generation == start + 2
    assert [s["metadata"]["name"] for s in manager.resource_slices()] == ["s"]


def test_allocated_devices_follow_any_sequence_of_claim_changes() -> None:
    import random

    rng = random.Random(7)
    manager = DraManager()
    current: dict[str, list[str]] = {}  # claim -> devices its latest version holds
    for rv in range(1, 400):
        name = rng.choice("abcdef")
        if rng.random() < 0.2:
            manager.delete(RESOURCE_CLAIM, claim(name, rv))
            current.pop(name, None)
            continue
        devices = rng.sample(["g0", "g1", "g2", "g3"], rng.randint(0, 2))
        manager.upsert(RESOURCE_CLAIM, claim(name, rv, *(result(d) for d in devices)))
        current[name] = devices
        want = {("d", "p", d) for held in current.values() for d in held}
        assert manager.claims.allocated_state().devices == want, (rv, current)
