"""The scheduling loop's pod-group cycle hands the event loop back between members: a 1000-member
gang over 50 placements is ~45 s of CPU, and the lease, the probes, the binds of the gang before it
and the watches cannot wait that long. Informer events that land meanwhile reach the members
simulated after them, and every simulated assume is still reverted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from scheduler.api.fake import FakeApiClient
from scheduler.schedule_one import Scheduler
from tests.unit.test_podgroup_cycle import pod_group_condition, raw_member, raw_node, raw_pod_group, setup

MEMBERS = 12


def foreign_pod(name: str, node: str, cpu: str) -> dict[str, Any]:
    """A pod another scheduler bound: the informers deliver it with its node."""
    return {
        "metadata": {"name": name, "namespace": "other", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


def simulating(sched: Scheduler, client: FakeApiClient, members: int) -> int | None:
    """How many members the cycle has assumed so far, while it is still simulating (no bind yet,
    not all of them: the submission assumes all at once, in one step); else None."""
    assumed = sched.cache.sizes()["assumed_pods"]
    return assumed if not client.bindings and 0 < assumed < members else None


async def run_loop_while(sched: Scheduler, watch: Callable[[], bool], seconds: float = 10.0) -> None:
    """The scheduling loop, as app.run starts it, with `watch` called on every turn of the event
    loop until it says stop."""
    sched.pod_group_cycle.slice_seconds = 0.0  # hand the loop back after every member
    loop_task = asyncio.ensure_future(sched.run())
    try:
        async with asyncio.timeout(seconds):
            while not watch():  # noqa: ASYNC110 - it looks at every turn of the loop, on purpose
                await asyncio.sleep(0)
        await sched.drain()
    finally:
        sched.queue.close()
        await loop_task


async def test_the_scheduling_loop_lets_other_tasks_run_in_the_middle_of_a_pod_group_cycle() -> None:
    sched, informers, client = setup()
    for node in ("n1", "n2", "n3", "n4"):
        informers.on_node("ADDED", raw_node(node, cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=MEMBERS))
    for i in range(MEMBERS):
        informers.on_pod("ADDED", raw_member(f"g{i}", cpu="100m"))
    seen: list[int] = []

    def watch() -> bool:
        during = simulating(sched, client, MEMBERS)
        if during is not None:
            seen.append(during)
        return len(client.bindings) == MEMBERS

    await run_loop_while(sched, watch)
    # This task ran between the members' simulations, each step one more member assumed.
    assert seen == sorted(seen) and set(seen) == set(range(1, MEMBERS))
    assert sorted(client.bindings) == sorted(f"ns/g{i}" for i in range(MEMBERS))
    assert pod_group_condition(client)["status"] == "True"


async def test_a_pod_bound_elsewhere_in_the_middle_of_the_cycle_is_seen_by_the_members_after_it() -> None:
    """Three 1-CPU nodes, a gang of three 600m members: after the first member is simulated another
    scheduler's 600m pod lands on a node the gang has not used. The members after it see it, so the
    gang does not fit and nothing is overcommitted; every simulated assume is reverted."""
    sched, informers, client = setup()
    nodes = ("n1", "n2", "n3")
    for node in nodes:
        informers.on_node("ADDED", raw_node(node, cpu="1"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=3))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name, cpu="600m"))
    landed: list[str] = []

    def watch() -> bool:
        if not landed and simulating(sched, client, 3) == 1:
            used = {pod.node_name for pod in (sched.cache.get_pod(f"uid-g{i}") for i in (1, 2, 3)) if pod}
            free = next(node for node in nodes if node not in used)
            informers.on_pod("ADDED", foreign_pod("other", free, "600m"))
            landed.append(free)
        return "ns/gang" in client.pod_group_conditions

    await run_loop_while(sched, watch)
    assert landed
    assert client.bindings == {}
    assert pod_group_condition(client)["status"] == "False"
    assert sched.cache.sizes()["assumed_pods"] == 0
    requested = {node: info.requested.milli_cpu for node in nodes if (info := sched.cache.get_node_info(node))}
    assert requested == {node: 600 if node == landed[0] else 0 for node in nodes}


async def test_a_loop_cancelled_in_the_middle_of_a_pod_group_cycle_leaves_nothing_assumed() -> None:
    """Shutdown cancels the scheduling loop wherever it is: at a yield of the cycle, the simulated
    assumes are reverted and nothing is bound."""
    sched, informers, client = setup()
    for node in ("n1", "n2"):
        informers.on_node("ADDED", raw_node(node, cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=MEMBERS))
    for i in range(MEMBERS):
        informers.on_pod("ADDED", raw_member(f"g{i}", cpu="100m"))
    sched.pod_group_cycle.slice_seconds = 0.0
    loop_task = asyncio.ensure_future(sched.run())
    async with asyncio.timeout(10):
        while simulating(sched, client, MEMBERS) != MEMBERS // 2:  # noqa: ASYNC110 - every turn, on purpose
            await asyncio.sleep(0)
    loop_task.cancel()
    await asyncio.gather(loop_task, return_exceptions=True)
    assert loop_task.cancelled()
    assert sched.cache.sizes()["assumed_pods"] == 0
    assert client.bindings == {}
    assert all(info.requested.milli_cpu == 0 for n in ("n1", "n2") if (info := sched.cache.get_node_info(n)))
