"""TakenDevices: the allocator's AllocatedState kept between cycles equals a fresh rebuild from the
claim tracker after any sequence of claim changes (informer adds, updates and deletes, assumes and
restores, allocations in flight signalled and removed), and a state once handed out never changes.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from plugins.dynamicresources.allocation import TakenDevices, allocated_state
from plugins.dynamicresources.structured import AllocatedState, AllocatorError
from scheduler.framework.dra import ClaimTracker

NAMES = tuple("abcdef")


def result(device: str, share: str | None = None, consumed: str | None = None, admin: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {"request": "r", "driver": "d", "pool": "p", "device": device}
    if share is not None:
        found["shareID"] = share
    if consumed is not None:
        found["consumedCapacity"] = {"bandwidth": consumed}
    if admin:
        found["adminAccess"] = True
    return found


def claim(name: str, version: int, uid: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(version)},
        "spec": {},
        "status": {},
    }
    if results:
        obj["status"]["allocation"] = {"devices": {"results": results}}
    return obj


def random_results(rng: random.Random, bad: bool) -> list[dict[str, Any]]:
    results = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        device = f"g{rng.randint(0, 4)}"
        roll = rng.random()
        if roll < 0.5:
            results.append(result(device))
        elif roll < 0.85:
            amount = "x" if bad and rng.random() < 0.3 else rng.choice(("1Gi", "500Mi", "1", "0"))
            results.append(result(device, share=f"s{rng.randint(0, 2)}", consumed=amount))
        elif roll < 0.95:
            results.append(result(device, share=f"s{rng.randint(0, 2)}"))
        else:
            results.append(result(device, admin=True))
    return results


def same(kept: AllocatedState, fresh: AllocatedState) -> bool:
    return (
        kept.devices == fresh.devices
        and kept.shared_device_ids == fresh.shared_device_ids
        and kept.aggregated_capacity == fresh.aggregated_capacity
    )


def frozen(state: AllocatedState) -> tuple[Any, ...]:
    return (set(state.devices), set(state.shared_device_ids), copy.deepcopy(state.aggregated_capacity))


class Changes:
    """Random changes of a claim tracker's view, as the informers and the plugin make them."""

    def __init__(self, seed: int, tracker: ClaimTracker, bad: bool) -> None:
        self.rng = random.Random(seed)
        self.tracker = tracker
        self.bad = bad
        self.version = 0
        self.in_flight: list[str] = []

    def step(self) -> None:
        rng, tracker = self.rng, self.tracker
        self.version += 1
        name = rng.choice(NAMES)
        current = tracker.get("ns", name)
        roll = rng.random()
        if roll < 0.45 or current is None:
            uid = f"uid-{name}-{rng.randint(0, 1)}"
            tracker.on_upsert(claim(name, self.version, uid, random_results(rng, self.bad)))
        elif roll < 0.55:
            tracker.on_delete(current)
        elif roll < 0.7:
            uid = str(current["metadata"]["uid"])
            tracker.assume(claim(name, self.version, uid, random_results(rng, self.bad)))
        elif roll < 0.75:
            tracker.restore("ns", name)
        elif roll < 0.9:
            uid = str(current["metadata"]["uid"]) if rng.random() < 0.5 else f"flight-{self.version}"
            tracker.signal_pending_allocation(uid, claim(name, self.version, uid, random_results(rng, self.bad)))
            self.in_flight.append(uid)
        elif self.in_flight:
            uid = rng.choice(self.in_flight)
            if tracker.maybe_remove_pending_allocation(uid, force=rng.random() < 0.3):
                self.in_flight = [other for other in self.in_flight if other != uid]


@pytest.mark.parametrize("journal_length", [4096, 3])
@pytest.mark.parametrize("seed", range(25))
def test_kept_state_equals_a_rebuild_after_any_claim_changes(seed: int, journal_length: int) -> None:
    tracker = ClaimTracker(journal_length=journal_length)
    changes = Changes(seed, tracker, bad=False)
    taken = TakenDevices()
    lent: list[tuple[AllocatedState, tuple[Any, ...]]] = []
    for _ in range(300):
        for _ in range(changes.rng.choice((1, 1, 2, 5))):
            changes.step()
        kept = taken.state(tracker)
        assert same(kept, allocated_state(tracker.allocated_state()))
        lent.append((kept, frozen(kept)))
    # Every state handed out is still what it was then (a cycle's allocator reads it throughout).
    assert all(frozen(state) == then for state, then in lent)
    assert any(state.aggregated_capacity for state, _ in lent)
    assert any(state.shared_device_ids for state, _ in lent)


@pytest.mark.parametrize("seed", range(10))
def test_unparsable_consumed_capacity_raises_as_a_rebuild_does(seed: int) -> None:
    tracker = ClaimTracker()
    changes = Changes(seed, tracker, bad=True)
    taken = TakenDevices()
    raised = 0
    for _ in range(200):
        changes.step()
        try:
            want: AllocatedState | str = allocated_state(tracker.allocated_state())
        except AllocatorError as exc:
            want = str(exc)
        try:
            got: AllocatedState | str = taken.state(tracker)
        except AllocatorError as exc:
            got = str(exc)
        if isinstance(want, str):
            raised += 1
            assert got == want
        else:
            assert isinstance(got, AllocatedState)
            assert same(got, want)
            # The kept state, not a rebuild: once the bad capacity is gone, patching resumes.
            assert taken.state(tracker) is got
    assert raised


def test_unchanged_tracker_hands_out_the_same_state() -> None:
    tracker = ClaimTracker()
    tracker.on_upsert(claim("a", 1, "uid-a", [result("g0")]))
    taken = TakenDevices()
    first = taken.state(tracker)
    assert taken.state(tracker) is first
    tracker.on_upsert(claim("b", 2, "uid-b", [result("g1")]))
    second = taken.state(tracker)
    assert second is not first
    assert {str(device) for device in first.devices} == {"d/p/g0"}
    assert {str(device) for device in second.devices} == {"d/p/g0", "d/p/g1"}
