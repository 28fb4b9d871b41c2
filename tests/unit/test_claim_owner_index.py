"""ClaimTracker.owned_by (how DynamicResources finds a pod's extended-resource claim without walking
every claim) gives what a walk over every claim's latest version gives, after any sequence of
informer adds, updates and deletes, assumes and restores — owners changing on the way included."""

from __future__ import annotations

import random
from typing import Any

from scheduler.framework.dra import ClaimTracker

OWNERS = ("pod-a", "pod-b", "pod-c")


def claim(name: str, version: int, owner: str | None, controller: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(version)}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": controller}
        ]
    return {"metadata": meta, "spec": {}}


def walked(tracker: ClaimTracker, uid: str) -> list[str]:
    return sorted(
        c["metadata"]["name"]
        for c in tracker.list()
        if any(r.get("controller") and r.get("uid") == uid for r in c["metadata"].get("ownerReferences") or ())
    )


def test_owned_by_matches_a_walk_over_every_claim() -> None:
    rng = random.Random(3)
    tracker = ClaimTracker()
    seen_owned = 0
    for version in range(1, 3001):
        name = f"c{rng.randint(0, 9)}"
        owner = rng.choice((*OWNERS, None))
        current = tracker.get("ns", name)
        roll = rng.random()
        if roll < 0.5:
            tracker.on_upsert(claim(name, version, owner, controller=rng.random() < 0.9))
        elif roll < 0.65:
            if current is not None:
                tracker.on_delete(current)
        elif roll < 0.85:
            if current is not None:
                tracker.assume(claim(name, version, owner))
        else:
            tracker.restore("ns", name)
        for uid in (f"uid-{o}" for o in OWNERS):
            got = sorted(c["metadata"]["name"] for c in tracker.owned_by(uid))
            assert got == walked(tracker, uid)
            seen_owned += bool(got)
    assert seen_owned > 1000
