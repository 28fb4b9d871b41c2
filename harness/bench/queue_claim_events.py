"""`python -m harness.bench.queue_claim_events [--pods 2500] [--events 1000] [--full-walk]`: the
queue's cost of ResourceClaim events while many pods wait for their claims, in process.

Owns: a PriorityQueue with DynamicResources' registrations over a DraManager, `--pods` waiting pods
each with a template claim — half gated by PreEnqueue (the claim is not named yet), half rejected by
DynamicResources (claim named in the status, unallocated) — and `--events` claim events that wake
nobody: adds of claims no pod names yet and finalizer-only updates of named claims, as the claim
controller and the scheduler's own writes send them. `--full-walk` runs the queue without its index
of waiting pods (every event visits every pod). Prints one JSON object (seconds, µs per event).

Must never: run in the scheduler's image or in `make test`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import Any

from plugins.dynamicresources.claims import ClaimProblem, pod_resource_claims
from plugins.dynamicresources.queueing import events_to_register
from scheduler.framework.dra import DraManager
from scheduler.framework.types import ActionType, ClusterEvent, EventResource, Status
from scheduler.model.objects import Pod
from scheduler.queue.scheduling_queue import PriorityQueue, QueueProfile

DRA = "DynamicResources"


def _pod(index: int, claim: str | None) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"name": f"p{index}", "namespace": "bench", "uid": f"uid-p{index}"},
        "spec": {
            "schedulerName": "s",
            "containers": [],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
        },
        "status": {},
    }
    if claim is not None:
        raw["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return Pod.from_raw(raw)


def _claim(name: str, owner: str, version: int, finalizers: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "bench",
        "uid": f"uid-{name}",
        "resourceVersion": str(version),
        "ownerReferences": [{"uid": owner, "controller": True}],
    }
    if finalizers:
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return {"metadata": meta, "spec": {"devices": {"requests": []}}, "status": {}}


def run(pods: int, events: int, indexed: bool) -> dict[str, Any]:
    dra = DraManager()

    def pre_enqueue(pod: Pod) -> Status | None:
        try:
            pod_resource_claims(pod, dra.claims)
        except ClaimProblem as exc:
            return Status.unresolvable(str(exc), plugin=DRA)
        return None

    profile = QueueProfile(lambda a, b: False, pre_enqueue, {DRA: events_to_register(dra)})
    queue = PriorityQueue({"s": profile}, indexed=indexed)

    def on_claim_change(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        action = ActionType.ADD if old is None else ActionType.UPDATE
        queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.RESOURCE_CLAIM, action), old, new)

    dra.claims.listeners.append(on_claim_change)
    version = 0
    for index in range(pods):
        if index % 2:
            queue.add(_pod(index, None))  # gated: its claim is not named yet
            continue
        version += 1
        dra.claims.on_upsert(_claim(f"p{index}-gpu", f"uid-p{index}", version))
        pod = _pod(index, f"p{index}-gpu")
        queue.add(pod)
        info = queue.pop_nowait()
        assert info is not None
        info.unschedulable_plugins = {DRA}
        queue.add_unschedulable_if_not_present(info)
        queue.done(pod.uid)
    waiting = queue.pending()
    started = time.perf_counter()
    for event in range(events):
        version += 1
        if event % 2:
            index = (event % pods) | 1  # a gated pod's claim, created before the pod names it
            dra.claims.on_upsert(_claim(f"new-{event}", f"uid-p{index}", version))
        else:
            index = event % pods & ~1
            dra.claims.on_upsert(_claim(f"p{index}-gpu", f"uid-p{index}", version, finalizers=True))
    elapsed = time.perf_counter() - started
    assert queue.pending() == waiting, (waiting, queue.pending())
    return {
        "indexed": indexed,
        "waiting": waiting,
        "events": events,
        "seconds": round(elapsed, 4),
        "us_per_event": round(elapsed / events * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=2500)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--full-walk", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.pods, args.events, not args.full_walk)))


if __name__ == "__main__":
    main()
