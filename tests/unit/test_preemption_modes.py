"""victimRemoval modes against upstream's choice, over random small clusters (fake client).

- `delete` is upstream: the reference choice of node and victims.
- `evict-then-delete` chooses exactly as upstream, and deletes only victims the dry run counted
  as PodDisruptionBudget violations.
- `evict` never picks victims whose eviction would exceed a budget; where upstream has a candidate
  without violations it makes the same choice, otherwise the pod stays pending.
"""

from __future__ import annotations

import random
from typing import Any

from plugins.defaultpreemption.executor import Preemptor
from scheduler.api.fake import FakeApiClient
from scheduler.model.selectors import label_selector
from tests.unit.test_preemption import TOO_MANY, fake_time, pdb, plugin, running, with_removal
from tests.unit.test_schedule_one import raw_node, raw_pod, run_queue

APPS = ("a", "b", "c")


def random_cluster(rng: random.Random) -> dict[str, Any]:
    nodes = [f"n{i}" for i in range(rng.randint(1, 4))]
    pods = []
    for node in nodes:
        for j in range(rng.randint(1, 3)):
            labels = {"app": rng.choice(APPS)} if rng.random() < 0.8 else {}
            pods.append(
                running(f"{node}-p{j}", node, f"{rng.choice((500, 1000, 1500))}m", rng.choice((1, 5, 10, 50)), labels)
            )
    budgets = [pdb(f"pdb-{app}", rng.choice((0, 0, 1, 2)), {"app": app}) for app in APPS if rng.random() < 0.6]
    return {"nodes": nodes, "pods": pods, "pdbs": budgets, "preemptor_cpu": f"{rng.choice((1000, 2000, 3000))}m"}


async def run_mode(mode: str, cluster: dict[str, Any], seed: int) -> tuple[FakeApiClient, Any]:
    sched, inf, client = with_removal(mode)
    for node in cluster["nodes"]:
        inf.on_node("ADDED", raw_node(node, cpu="3"))
    for raw in cluster["pods"]:
        inf.on_pod("ADDED", raw)
    for raw in cluster["pdbs"]:
        inf.on_pdb("ADDED", raw)
        if raw["status"]["disruptionsAllowed"] == 0:
            # The apiserver refuses evicting any pod such a budget covers.
            selector = label_selector(raw["spec"]["selector"])
            for pod in cluster["pods"]:
                if selector.matches(pod["metadata"]["labels"]):
                    client.evict_refusals[f"ns/{pod['metadata']['name']}"] = TOO_MANY
    fake_time(sched)
    preemption = plugin(sched)
    preemption.rng = random.Random(seed)
    chosen: list[Any] = []
    original = preemption.executor.prepare_async

    def record(candidate: Any, preemptor: Preemptor) -> None:
        chosen.append(candidate)
        original(candidate, preemptor)

    preemption.executor.prepare_async = record  # type: ignore[method-assign]
    inf.on_pod("ADDED", raw_pod("vip", cpu=cluster["preemptor_cpu"], priority=100))
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_one(info)
    await run_queue(sched)
    return client, chosen[0] if chosen else None


def within_budgets(victims: list[str], cluster: dict[str, Any]) -> bool:
    labels = {p["metadata"]["name"]: p["metadata"]["labels"] for p in cluster["pods"]}
    for raw in cluster["pdbs"]:
        selector = label_selector(raw["spec"]["selector"])
        hit = sum(1 for name in victims if selector.matches(labels[name]))
        if hit > raw["status"]["disruptionsAllowed"]:
            return False
    return True


async def test_modes_against_upstream_on_random_clusters() -> None:
    preempted = evict_preempted = deleted = evict_pending = 0
    for seed in range(150):
        cluster = random_cluster(random.Random(seed))
        _, upstream = await run_mode("delete", cluster, seed)
        client, mixed = await run_mode("evict-then-delete", cluster, seed)
        if upstream is None:
            assert mixed is None, seed
        else:
            preempted += 1
            assert mixed is not None, seed
            assert (mixed.node, [p.name for p in mixed.victims.pods]) == (
                upstream.node,
                [p.name for p in upstream.victims.pods],
            ), seed
            deleted += bool(client.deleted)
            assert {k.split("/")[1] for k in client.deleted} <= {
                p.name for p in mixed.victims.pods if p.uid in mixed.victims.violating
            }, seed
        client, strict = await run_mode("evict", cluster, seed)
        assert client.deleted == [], seed
        if strict is not None:
            evict_preempted += 1
            assert within_budgets([p.name for p in strict.victims.pods], cluster), seed
            if upstream is not None and upstream.victims.num_pdb_violations == 0:
                assert (strict.node, strict.victims.pods) == (upstream.node, upstream.victims.pods), seed
        else:
            evict_pending += upstream is not None
    # The generator reaches the interesting cases: preemption with and without budgets, deletions
    # after refused evictions, evict mode leaving pending a pod upstream would preempt for.
    counts = (preempted, evict_preempted, deleted, evict_pending)
    assert preempted > 40 and evict_preempted > 20 and deleted > 5 and evict_pending > 5, counts
