"""The queue's index of waiting pods (EventScope) moves exactly the pods the full walk moves.

Two queues take the same random history — pods naming ResourceClaims directly or through a
template's status, held by DynamicResources and/or other plugins (scoped, unscoped, unregistered),
gated by SchedulingGates or by DynamicResources' PreEnqueue, pods updated while they wait, claims
added, updated, allocated, deallocated and deleted in several namespaces, node and wildcard events,
pods in flight while events pass — one with the index and one walking the whole pool (the
reference). After every step each pod must be in the same sub-queue of both, and both must pop the
same pods in the same order.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Hashable
from typing import Any

import pytest

from plugins.dynamicresources.claims import ClaimProblem, pod_resource_claims
from plugins.dynamicresources.queueing import claim_keys_of_pod, events_to_register
from plugins.schedulinggates import NAME as GATES
from plugins.schedulinggates import SchedulingGates
from scheduler.framework.dra import DraManager, allocation_of
from scheduler.framework.events import FORCE_ACTIVATE, NODE_ADD, UNSCHEDULABLE_TIMEOUT
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventObject,
    EventResource,
    EventScope,
    QueuedPodInfo,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Node, Pod
from scheduler.queue.scheduling_queue import GATED_Q, PriorityQueue, QueueProfile
from scheduler.queue.waiting_index import WaitingIndex
from scheduler.testing.builders import make_pod

DRA = "DynamicResources"
# Registers claim adds/updates scoped by namespace and claim deletes unscoped, both pod-dependent.
OTHER = "OtherClaimReader"
NODE_ONLY = "NodeOnly"  # registers a node event only
UNREGISTERED = "Unregistered"  # registers nothing: every event may wake its pods
NAMESPACES = ("a", "b")
CLAIMS = tuple(f"c{i}" for i in range(6))
CLAIM = ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ALL)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


def _meta(obj: EventObject | None) -> dict[str, Any]:
    if obj is None or isinstance(obj, Pod | Node):
        return {}
    return dict(obj.get("metadata") or {})


def _wakes(pod: Pod) -> bool:
    return pod.labels.get("wake") == "yes"


def other_events() -> list[ClusterEventWithHint]:
    def same_namespace(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        same = _meta(new).get("namespace") == pod.namespace
        return QueueingHint.QUEUE if same and _wakes(pod) else QueueingHint.SKIP

    def on_delete(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
        return QueueingHint.QUEUE if _wakes(pod) else QueueingHint.SKIP

    def pod_namespace(pod: Pod) -> list[Hashable]:
        return [pod.namespace]

    def claim_namespace(old: EventObject | None, new: EventObject | None) -> list[Hashable]:
        return [_meta(new).get("namespace")]

    return [
        ClusterEventWithHint(
            ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
            same_namespace,
            EventScope(pod_namespace, claim_namespace),
        ),
        ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.DELETE), on_delete),
    ]


def profile(dra: DraManager) -> QueueProfile:
    gates = SchedulingGates()

    def pre_enqueue(pod: Pod) -> Status | None:
        gated = gates.pre_enqueue(pod)
        if gated is not None or not pod.spec.get("resourceClaims"):
            return gated
        try:
            pod_resource_claims(pod, dra.claims)
        except ClaimProblem as exc:
            return Status.unresolvable(str(exc), plugin=DRA)
        return None

    return QueueProfile(
        less=lambda x, y: x.pod.priority > y.pod.priority,
        pre_enqueue=pre_enqueue,
        events={
            DRA: events_to_register(dra),
            OTHER: other_events(),
            NODE_ONLY: [ClusterEventWithHint(NODE_ADD)],
            GATES: gates.events_to_register(),
        },
    )


class History:
    """One random history played on an indexed queue and on the reference queue alike."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = FakeClock()
        self.dra = DraManager()
        self.indexed = PriorityQueue({"s": profile(self.dra)}, clock=self.clock)
        self.reference = PriorityQueue({"s": profile(self.dra)}, clock=self.clock, indexed=False)
        self.queues = (self.indexed, self.reference)
        self.pods: dict[str, Pod] = {}
        # Pods being scheduled, oldest first: uid and each queue's QueuedPodInfo.
        self.in_flight: list[tuple[str, tuple[QueuedPodInfo, QueuedPodInfo]]] = []
        self.versions = 0
        # Pods the claim events moved, by the kind of change (each of the hint's QUEUE answers).
        self.claim_moves: Counter[str] = Counter()
        # Where the two queues disagreed, first first.
        self.differences: list[str] = []
        self.dra.claims.listeners.append(self.on_claim_change)

    def note(self, same: bool, what: str) -> None:
        if not same:
            self.differences.append(what)

    # ---- what both queues are told -------------------------------------------------------------

    def on_claim_change(self, old: Any, new: Any) -> None:
        action = ActionType.DELETE if new is None else ActionType.ADD if old is None else ActionType.UPDATE
        event = ClusterEvent(EventResource.RESOURCE_CLAIM, action)
        moved = [queue.move_all_to_active_or_backoff(event, old, new) for queue in self.queues]
        self.note(moved[0] == moved[1], f"{event.label} {old} -> {new} moved {moved}")
        if new is None:
            kind = "delete allocated" if allocation_of(old) is not None else "delete"
        elif old is None:
            kind = "add"
        elif allocation_of(old) is not None and allocation_of(new) is None:
            kind = "deallocate"
        else:
            kind = "update"
        self.claim_moves[kind] += moved[0]

    def both(self, method: str, *args: Any) -> None:
        for queue in self.queues:
            getattr(queue, method)(*args)

    # ---- random objects --------------------------------------------------------------------------

    def new_pod(self, index: int) -> Pod:
        rng = self.rng
        builder = make_pod(f"p{index}", rng.choice(NAMESPACES)).spec(schedulerName="s", priority=rng.randint(0, 2))
        if rng.random() < 0.5:
            builder.label("wake", "yes")
        entries = []
        statuses = []
        for entry in range(rng.choice((0, 1, 1, 2, 3))):
            if rng.random() < 0.5:
                entries.append({"name": f"e{entry}", "resourceClaimName": rng.choice(CLAIMS)})
                continue
            entries.append({"name": f"e{entry}", "resourceClaimTemplateName": "t"})
            if rng.random() < 0.5:
                statuses.append({"name": f"e{entry}", "resourceClaimName": rng.choice(CLAIMS)})
        if entries:
            builder.spec(resourceClaims=entries)
        if statuses:
            builder.status(resourceClaimStatuses=statuses)
        if rng.random() < 0.15:
            builder.spec(schedulingGates=[{"name": "g"}])
        return builder.obj()

    def updated(self, pod: Pod) -> Pod:
        """The pod with a template claim newly named in its status, or its gates removed."""
        raw = copy.deepcopy(dict(pod.raw))
        templates = [e for e in raw["spec"].get("resourceClaims") or () if "resourceClaimTemplateName" in e]
        if templates and self.rng.random() < 0.8:
            statuses = raw["status"].setdefault("resourceClaimStatuses", [])
            entry = self.rng.choice(templates)
            statuses[:] = [s for s in statuses if s["name"] != entry["name"]]
            statuses.append({"name": entry["name"], "resourceClaimName": self.rng.choice(CLAIMS)})
        else:
            raw["spec"].pop("schedulingGates", None)
        self.versions += 1
        raw["metadata"]["resourceVersion"] = str(self.versions)
        return Pod.from_raw(raw)

    def claim_change(self) -> None:
        rng = self.rng
        namespace, name = rng.choice(NAMESPACES), rng.choice(CLAIMS)
        current = self.dra.claims.get(namespace, name)
        if current is not None and rng.random() < 0.25:
            self.dra.claims.on_delete(current)
            return
        self.versions += 1
        claim: dict[str, Any] = copy.deepcopy(dict(current)) if current is not None else {}
        claim["metadata"] = {
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}-{name}-{rng.randint(0, 1)}",
            "resourceVersion": str(self.versions),
        }
        owners = [uid for uid, pod in self.pods.items() if pod.namespace == namespace]
        if owners and rng.random() < 0.5:
            claim["metadata"]["ownerReferences"] = [{"uid": rng.choice(owners), "controller": True}]
        claim.setdefault("spec", {"devices": {"requests": []}})
        roll = rng.random()
        if roll < 0.35:
            device = {"driver": "d", "pool": "p", "device": f"dev{rng.randint(0, 3)}", "request": "r"}
            claim["status"] = {"allocation": {"devices": {"results": [device]}}}
        elif roll < 0.6:
            claim["status"] = {}
        elif roll < 0.8:
            claim["metadata"]["finalizers"] = ["f"]  # a change outside the status
        self.dra.claims.on_upsert(claim)

    # ---- steps -----------------------------------------------------------------------------------

    def pop_both(self) -> tuple[QueuedPodInfo, QueuedPodInfo] | None:
        popped = [queue.pop_nowait() for queue in self.queues]
        uids = [info.pod.uid if info is not None else None for info in popped]
        self.note(uids[0] == uids[1], f"popped {uids}")
        if popped[0] is None or popped[1] is None or uids[0] != uids[1]:
            return None
        return popped[0], popped[1]

    def pop(self) -> None:
        popped = self.pop_both()
        if popped is not None:
            self.in_flight.append((popped[0].pod.uid, popped))

    def fail_oldest(self) -> None:
        """The oldest pod in flight comes back rejected by random plugins (or by none: an error)."""
        uid, infos = self.in_flight.pop(0)
        rng = self.rng
        rejectors = rng.choice(
            (
                {DRA},
                {DRA},
                {DRA, OTHER},
                {DRA, NODE_ONLY},
                {OTHER},
                {NODE_ONLY},
                {DRA, UNREGISTERED},
                {UNREGISTERED},
                set(),
            )
        )
        pending = {plugin for plugin in rejectors if rng.random() < 0.2}
        for queue, info in zip(self.queues, infos, strict=True):
            info.pod = self.pods[uid]  # the informer's latest version, as the failure handler passes
            info.unschedulable_plugins = rejectors - pending
            info.pending_plugins = set(pending)
            queue.add_unschedulable_if_not_present(info)

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.2:
            pod = self.new_pod(len(self.pods))
            self.pods[pod.uid] = pod
            self.both("add", pod)
        elif roll < 0.3:
            self.pop()
        elif roll < 0.4 and self.in_flight:
            self.fail_oldest()
        elif roll < 0.7:
            self.claim_change()
        elif roll < 0.8 and self.pods:
            uid = rng.choice(sorted(self.pods))
            old, self.pods[uid] = self.pods[uid], self.updated(self.pods[uid])
            self.both("update", self.pods[uid], old)
        elif roll < 0.85:
            event = rng.choice((NODE_ADD, UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE, CLAIM))
            moved = [queue.move_all_to_active_or_backoff(event) for queue in self.queues]
            self.note(moved[0] == moved[1], f"{event.label} moved {moved}")
        elif roll < 0.9:
            self.clock.t += rng.choice((0.5, 2.0, 20.0))
            self.both("flush_backoff_completed")
        elif roll < 0.95 and self.pods:
            uid = rng.choice(sorted(self.pods))
            del self.pods[uid]
            self.in_flight = [entry for entry in self.in_flight if entry[0] != uid]
            self.both("delete", uid)
        else:
            self.clock.t += 1.0

    def compare(self) -> None:
        for uid in self.pods:
            where = self.indexed.where(uid), self.reference.where(uid)
            self.note(where[0] == where[1], f"{uid} in {where}")
        self.note(self.indexed.pending() == self.reference.pending(), "pending()")
        for queue in self.queues:
            # The gauge's gated count is kept as pods come and go: it must equal a recount.
            gated = sum(1 for info in queue._unschedulable.values() if info.gated)
            self.note(queue.pending()[GATED_Q] == gated, f"gated {queue.pending()[GATED_Q]}, recount {gated}")

    def run(self, steps: int) -> str | None:
        """Play the history; the first difference between the two queues, if any."""
        for _ in range(steps):
            self.step()
            self.compare()
            if self.differences:
                return self.differences[0]
        return None

    def drain(self) -> list[str]:
        """Wake everything and pop both queues dry, in order."""
        while self.in_flight:
            self.fail_oldest()
        self.clock.t += 1000.0
        order: list[str] = []
        for queue in self.queues:
            queue.move_all_to_active_or_backoff(FORCE_ACTIVATE)
            queue.flush_backoff_completed()
        while (popped := self.pop_both()) is not None:
            order.append(popped[0].pod.uid)
            self.both("done", popped[0].pod.uid)
        return order


@pytest.mark.parametrize("seed", range(60))
def test_indexed_walk_moves_the_same_pods_as_the_full_walk(seed: int) -> None:
    history = History(seed)
    assert history.run(400) is None
    assert history.drain()
    assert history.differences == []


def test_histories_reach_the_cases_they_are_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator is worth its salt: every kind of claim change the hint queues for moves pods,
    and the index leaves most waiting pods unvisited."""
    visits = Counter[str]()
    candidates = WaitingIndex.candidates

    def counting(self: WaitingIndex, covering: Any, old: Any, new: Any) -> set[str]:
        chosen = candidates(self, covering, old, new)
        visits["visited"] += len(chosen)
        visits["waiting"] += len(self)
        return chosen

    monkeypatch.setattr(WaitingIndex, "candidates", counting)
    moves = Counter[str]()
    for seed in range(20):
        history = History(seed)
        history.run(400)
        moves += history.claim_moves
    assert min(moves[kind] for kind in ("delete allocated", "add", "deallocate", "update")) >= 10, moves
    assert visits["visited"] * 3 < visits["waiting"], visits


def test_dropping_the_update_reindex_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: an index that keeps a waiting pod under the claims it named before its
    update (its template's claim newly in its status) misses the claim's events."""
    original = WaitingIndex.add

    def add_only_new(self: WaitingIndex, info: Any) -> None:
        if info.pod.uid not in self._entries:
            original(self, info)

    monkeypatch.setattr(WaitingIndex, "add", add_only_new)
    differences = [History(seed).run(400) for seed in range(60)]
    missed = [difference for difference in differences if difference is not None]
    assert missed
    assert all(difference.startswith("resource.k8s.io/ResourceClaim") for difference in missed), missed


def test_claim_keys_of_pod() -> None:
    pod = (
        make_pod("p", "a")
        .spec(
            resourceClaims=[{"name": "x", "resourceClaimName": "c1"}, {"name": "y", "resourceClaimTemplateName": "t"}]
        )
        .status(resourceClaimStatuses=[{"name": "y", "resourceClaimName": "p-y-1"}])
        .obj()
    )
    assert claim_keys_of_pod(pod) == {("a", "c1"), ("a", "p-y-1")}
    # The status alone names nothing the hint would accept: a pod without entries asks for no claim.
    bare = make_pod("q", "a").status(resourceClaimStatuses=[{"name": "y", "resourceClaimName": "c1"}]).obj()
    assert claim_keys_of_pod(bare) == frozenset()
