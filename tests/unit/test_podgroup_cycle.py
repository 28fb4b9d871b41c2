"""The pod-group cycle end to end against the in-memory fake ApiClient: informers feed a scheduler
built with --feature-gates=GenericWorkload=true; entities are popped and scheduled as the loop does."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

import pytest
import structlog

from harness.workload import registry_value
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.features import parse_feature_gates
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey
from scheduler.informers import Informers
from scheduler.schedule_one import Scheduler

NAME = "secondary-scheduler"
GANG_UNSCHEDULABLE = (
    "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
    "pod group preemption: No preemption victims found for incoming preemptor"
)
POD_MESSAGE = f"pod group is unschedulable, {GANG_UNSCHEDULABLE}"


def raw_node(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def raw_member(name: str, group: str | None = "gang", cpu: str = "800m", priority: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": NAME,
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def raw_pod_group(name: str = "gang", min_count: int | None = 3, generation: int = 1) -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-pg-{name}",
            "resourceVersion": "1",
            "generation": generation,
        },
        "spec": {"schedulingPolicy": policy},
    }


def setup(gates: str = "GenericWorkload=true") -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    config = dataclasses.replace(default_config(), feature_gates=parse_feature_gates(gates))
    sched = build_scheduler(config, full_registry(), client, {})
    sched.rng = random.Random(7)
    return sched, Informers(sched), client


async def schedule_next(sched: Scheduler) -> bool:
    """One entity (a pod or a whole group), then its binding cycles to the end."""
    info = sched.queue.pop_nowait()
    if info is None:
        return False
    sched.schedule_entity(info)
    await asyncio.sleep(0)
    await sched.drain()
    return True


def pod_group_condition(client: FakeApiClient, name: str = "gang") -> dict[str, Any]:
    return client.pod_group_conditions[f"ns/{name}"]["PodGroupInitiallyScheduled"]


async def test_gang_that_does_not_fit_binds_no_member_then_binds_whole() -> None:
    """The FIELD_NOTES gang: 3 x 800m on two 1-CPU nodes waits whole; a third node binds it whole."""
    sched, informers, client = setup()
    for node in ("n1", "n2"):
        informers.on_node("ADDED", raw_node(node))
    informers.on_pod_group("ADDED", raw_pod_group())
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))

    assert await schedule_next(sched)
    assert client.bindings == {}
    assert pod_group_condition(client) == {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": GANG_UNSCHEDULABLE,
        "observedGeneration": 1,
        "lastTransitionTime": pod_group_condition(client)["lastTransitionTime"],
    }
    messages = sorted(c["message"] for c in client.conditions.values())
    # Checked against kube-scheduler v1.37.2 with GenericWorkload on the same cluster (2026-12-02).
    assert messages == ["0/2 nodes are available: 2 Insufficient cpu.", POD_MESSAGE, POD_MESSAGE]
    assert {c["reason"] for c in client.conditions.values()} == {"Unschedulable"}
    # Every simulated assume was reverted: nothing assumed, no cpu counted on any node.
    assert sched.cache.sizes()["assumed_pods"] == 0
    assert all(info.requested.milli_cpu == 0 for info in (sched.cache.get_node_info(n) for n in ("n1", "n2")) if info)
    state = sched.cache.pod_groups.get(GroupKey(POD_GROUP_API, "ns", "gang"))
    assert state is not None and state.scheduled_pods_count() == 0 and state.all_pods_count() == 3
    # The members wait their backoff out together (none lost, none retried early by an idle queue).
    assert sorted(sched.queue.pending().items()) == [("active", 0), ("backoff", 3), ("gated", 0), ("unschedulable", 0)]
    assert sched.queue.pop_nowait() is None

    informers.on_node("ADDED", raw_node("n3"))
    await asyncio.sleep(sched.queue.backoff_duration(sched.queue.get("uid-g1") or pytest.fail("queued")))
    assert sched.queue.flush_backoff_completed() == 3
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2", "ns/g3"]
    assert len(set(client.bindings.values())) == 3
    assert pod_group_condition(client)["status"] == "True"
    assert pod_group_condition(client)["reason"] == "Scheduled"
    assert state.scheduled_pods_count() == 3


async def test_gang_members_wait_gated_until_min_count_exist() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group())
    informers.on_pod("ADDED", raw_member("g1"))
    informers.on_pod("ADDED", raw_member("g2"))
    assert sched.queue.pending()["gated"] == 2
    assert not await schedule_next(sched)
    # The third member completes the gang: GangScheduling's hint moves the gated ones.
    informers.on_pod("ADDED", raw_member("g3"))
    assert sched.queue.pending()["active"] == 3
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2", "ns/g3"]


async def test_members_wait_for_their_pod_group_object() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    assert sched.queue.pending()["gated"] == 3
    info = sched.queue.get("uid-g1")
    assert info is not None and info.gating_plugin == "GangScheduling"
    informers.on_pod_group("ADDED", raw_pod_group())
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2", "ns/g3"]


async def test_basic_policy_group_places_what_fits() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=None))
    for name in ("g1", "g2"):
        informers.on_pod("ADDED", raw_member(name))
    assert await schedule_next(sched)
    assert len(client.bindings) == 1
    assert pod_group_condition(client)["status"] == "True"


async def test_priority_mismatch_is_a_scheduler_error_for_the_group() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=2))
    informers.on_pod("ADDED", raw_member("g1"))
    informers.on_pod("ADDED", raw_member("g2", priority=5))
    assert await schedule_next(sched)
    assert client.bindings == {}
    message = "all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0"
    assert pod_group_condition(client)["reason"] == "SchedulerError"
    assert pod_group_condition(client)["message"] == message
    assert {c["reason"] for c in client.conditions.values()} == {"SchedulerError"}


async def test_gate_off_schedules_members_one_by_one_as_before() -> None:
    sched, informers, client = setup(gates="")
    for node in ("n1", "n2"):
        informers.on_node("ADDED", raw_node(node))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    while await schedule_next(sched):
        if len(client.conditions) + len(client.bindings) >= 3:
            break
    assert len(client.bindings) == 2
    assert client.pod_group_conditions == {}


async def test_member_deleted_while_waiting_in_queue_leaves_group_consistent() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group())
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    informers.on_pod("DELETED", raw_member("g2"))
    state = sched.cache.pod_groups.get(GroupKey(POD_GROUP_API, "ns", "gang"))
    assert state is not None and state.all_pods_count() == 2
    assert await schedule_next(sched)
    # Two members cannot make a gang of three: nothing bound, nothing left assumed.
    assert client.bindings == {}
    assert sched.cache.sizes()["assumed_pods"] == 0
    assert pod_group_condition(client)["message"] == (
        "pod group is unschedulable, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )


def _never(raw: dict[str, Any]) -> dict[str, Any]:
    raw["spec"]["preemptionPolicy"] = "Never"
    return raw


async def test_pod_group_post_filter_reports_why_it_cannot_preempt() -> None:
    # A member with preemptionPolicy Never makes the group ineligible (PodGroupPreemptionPolicy off).
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1"))
    informers.on_pod_group("ADDED", raw_pod_group(min_count=2))
    informers.on_pod("ADDED", _never(raw_member("g1")))
    informers.on_pod("ADDED", _never(raw_member("g2")))
    assert await schedule_next(sched)
    assert pod_group_condition(client)["message"] == (
        "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, "
        "pod group preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_pod_group_post_filter_preempts_and_nominates_the_members() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1"))
    low = raw_member("low", group=None, cpu="500m")
    low["spec"]["nodeName"] = "n1"
    informers.on_pod("ADDED", low)
    group = raw_pod_group(min_count=2)
    group["spec"]["priority"] = 10
    informers.on_pod_group("ADDED", group)
    informers.on_pod("ADDED", raw_member("g1", priority=10, cpu="400m"))
    informers.on_pod("ADDED", raw_member("g2", priority=10, cpu="400m"))
    waiting = registry_value(
        metrics.REGISTRY, "scheduler_podgroup_schedule_attempts_total", result="waiting_on_preemption"
    )
    assert await schedule_next(sched)
    assert client.bindings == {}
    assert pod_group_condition(client)["message"] == (
        "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, "
        "pod group preemption: found a placement for podgroup, preempting 1 victims"
    )
    # kube's PodGroupWaitingOnPreemption result, not "unschedulable".
    result = "waiting_on_preemption"
    assert registry_value(metrics.REGISTRY, "scheduler_podgroup_schedule_attempts_total", result=result) == waiting + 1
    assert client.evicted == ["ns/low"]
    # Both members wait for the victim with their nominated node (kube's waitingOnPreemption).
    assert {uid: sched.nominator.nominated_node(uid) for uid in ("uid-g1", "uid-g2")} == {
        "uid-g1": "n1",
        "uid-g2": "n1",
    }


async def test_pod_group_that_cannot_be_read_is_reported_once_and_affects_only_its_members() -> None:
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    bad = raw_pod_group("bad")
    bad["spec"]["schedulingPolicy"]["gang"]["minCount"] = "three"
    with structlog.testing.capture_logs() as logs:
        informers.on_pod_group("ADDED", bad)
        informers.on_pod_group("MODIFIED", bad)
    assert [entry["error"] for entry in logs if entry["log_level"] == "error"] == [
        "podgroup ns/bad: spec.schedulingPolicy.gang.minCount: 'three' is not a positive integer"
    ]
    informers.on_pod_group("ADDED", raw_pod_group("good", min_count=2))
    for name, group in (("b1", "bad"), ("b2", "bad"), ("o1", "good"), ("o2", "good")):
        informers.on_pod("ADDED", raw_member(name, group=group))
    while await schedule_next(sched):
        pass
    # The good gang is placed; the bad group's members wait for a PodGroup they can use.
    assert sorted(client.bindings) == ["ns/o1", "ns/o2"]
    assert sched.queue.pending()["gated"] == 2


TAS = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"


def zone_node(name: str, zone: str, cpu: str = "1") -> dict[str, Any]:
    raw = raw_node(name, cpu)
    raw["metadata"]["labels"] = {"zone": zone}
    return raw


def zoned_group(name: str, min_count: int) -> dict[str, Any]:
    raw = raw_pod_group(name, min_count)
    raw["spec"]["schedulingConstraints"] = {"topology": [{"key": "zone"}]}
    return raw


async def test_topology_constrained_gang_lands_in_one_domain_that_fits_it() -> None:
    sched, informers, client = setup(TAS)
    for name, zone, cpu in (("a1", "a", "1"), ("a2", "a", "1"), ("b1", "b", "2"), ("b2", "b", "2")):
        informers.on_node("ADDED", zone_node(name, zone, cpu))
    informers.on_pod_group("ADDED", zoned_group("gang", 3))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    generated = _metric("scheduler_generated_placements_total", profile=NAME)
    evaluated = {r: _metric("scheduler_placement_evaluations_total", result=r) for r in ("feasible", "infeasible")}
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2", "ns/g3"]
    assert set(client.bindings.values()) <= {"b1", "b2"}
    # kube's placement families: two zones generated, zone a infeasible, zone b feasible.
    assert _metric("scheduler_generated_placements_total", profile=NAME) - generated == 2
    for result in ("feasible", "infeasible"):
        assert _metric("scheduler_placement_evaluations_total", result=result) - evaluated[result] == 1


async def test_topology_constrained_gang_that_fits_no_domain_reports_the_first_placement() -> None:
    """As kube-scheduler v1.37.2 reports it on the same cluster (checked 2026-12-02)."""
    sched, informers, client = setup(TAS)
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        informers.on_node("ADDED", zone_node(name, zone))
    informers.on_pod_group("ADDED", zoned_group("gang", 3))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    assert await schedule_next(sched)
    assert client.bindings == {}
    group_message = (
        "pod group is unschedulable, 0/2 placements are available, first placement status: "
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )
    assert pod_group_condition(client)["message"] == group_message
    messages = sorted(c["message"] for c in client.conditions.values())
    assert messages == [
        "0/2 nodes are available: 2 Insufficient cpu.",
        f"pod group is unschedulable, {group_message}",
        f"pod group is unschedulable, {group_message}",
    ]


async def test_topology_constrained_pair_shares_a_domain() -> None:
    sched, informers, client = setup(TAS)
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        informers.on_node("ADDED", zone_node(name, zone))
    informers.on_pod_group("ADDED", zoned_group("pair", 2))
    for name in ("p1", "p2"):
        informers.on_pod("ADDED", raw_member(name, group="pair"))
    assert await schedule_next(sched)
    assert len(client.bindings) == 2
    assert {node[0] for node in client.bindings.values()} in ({"a"}, {"b"})


async def test_retried_gang_tries_its_members_in_the_order_of_the_failed_attempt() -> None:
    """gang-mixed-sizes-does-not-fit: each member keeps the timestamp of its own hand-back, as kube's
    do, so a retry tries the small members first again and the big one still finds no room (one
    timestamp for the whole group made the retry go by name, big first, and bind the gang)."""
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("big", cpu="4"))
    for node in ("s1", "s2"):
        informers.on_node("ADDED", raw_node(node))
    informers.on_pod_group("ADDED", raw_pod_group("g", min_count=4))
    for name in ("g-small-0", "g-small-1", "g-small-2"):
        informers.on_pod("ADDED", raw_member(name, group="g", cpu="900m"))
    informers.on_pod("ADDED", raw_member("g-big", group="g", cpu="3"))
    for _ in range(2):
        assert await schedule_next(sched)
        assert client.bindings == {}
        waiting = sched.queue.get("uid-g-big") or pytest.fail("queued")
        await asyncio.sleep(sched.queue.backoff_duration(waiting))
        assert sched.queue.flush_backoff_completed() == 4
    assert await schedule_next(sched)
    assert client.bindings == {}
    assert pod_group_condition(client, "g")["reason"] == "Unschedulable"


@pytest.mark.parametrize("seed", range(4))
async def test_topology_constrained_gang_prefers_the_fuller_domain(seed: int) -> None:
    """gang-topology-fuller-zone: both zones hold both members, so PodGroupPodsCount ties;
    NodeResourcesFit's PlacementScore (MostAllocated over the zone) gives zone b 38 and zone a 25, as
    kube-scheduler v1.37.2 logged on the same cluster, so the gang lands in b whatever the tie-break."""
    sched, informers, client = setup(TAS)
    sched.rng = random.Random(seed)
    for name, zone in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")):
        informers.on_node("ADDED", zone_node(name, zone, cpu="4"))
    informers.on_pod_group("ADDED", zoned_group("gang", 2))
    for name in ("g1", "g2"):
        informers.on_pod("ADDED", raw_member(name, cpu="3"))
    assert await schedule_next(sched)
    assert sorted(client.bindings.values()) == ["b1", "b2"]


async def test_pod_group_condition_is_written_before_the_members_bind() -> None:
    """gang-min-count-lowered, gang-taint-removed, gang-member-deleted-while-waiting: the PodGroup's
    Scheduled condition went out after the members' binds, so whoever saw the gang bound (the
    agreement harness, a user's kubectl) could still read no condition or the last failure's."""
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="8"))
    informers.on_pod_group("ADDED", raw_pod_group("g", 2))
    for name in ("g1", "g2"):
        informers.on_pod("ADDED", raw_member(name, group="g", cpu="100m"))
    assert await schedule_next(sched)
    group_writes = [write for write in client.writes if write[0] in ("bind", "podgroup-status")]
    assert group_writes == [("podgroup-status", "ns/g"), ("bind", "ns/g1"), ("bind", "ns/g2")]
    assert pod_group_condition(client, "g")["status"] == "True"


async def test_scheduled_pod_group_does_not_regress_before_the_informer_shows_it() -> None:
    """gang-topology-min-count-below-size (its 3-CPU version): the member left over was retried 16 ms after its group
    bound, before the watch brought back the True condition, and its failure wrote False over it.
    kube writes the condition synchronously, so its informer has it by then; here the cycle keeps
    what it wrote (the fake never echoes it, as a slow watch would not yet)."""
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="2"))
    informers.on_pod_group("ADDED", raw_pod_group("g", 2))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name, group="g", cpu="800m"))
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2"]
    assert pod_group_condition(client, "g")["status"] == "True"
    assert await schedule_next(sched)  # g3 alone, straight back to activeQ after its group's success
    assert sorted(client.bindings) == ["ns/g1", "ns/g2"]
    assert pod_group_condition(client, "g")["status"] == "True"


async def test_scheduled_condition_that_was_not_written_does_not_hold_back_a_later_failure() -> None:
    """The True the apiserver refused was never there: the next failure is reported, as in kube."""
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="2"))
    informers.on_pod_group("ADDED", raw_pod_group("g", 2))
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name, group="g", cpu="800m"))
    client.pod_group_errors["ns/g"] = ApiError(500, "etcdserver: request timed out")
    assert await schedule_next(sched)
    assert sorted(client.bindings) == ["ns/g1", "ns/g2"]
    assert "ns/g" not in client.pod_group_conditions
    assert await schedule_next(sched)
    assert pod_group_condition(client, "g")["status"] == "False"


def _metric(name: str, **labels: str) -> float:
    return registry_value(metrics.REGISTRY, name, **labels)


async def test_pod_group_attempts_are_kubes_podgroup_families() -> None:
    """kube's scheduler_podgroup_* families count group cycles by result and time the algorithm;
    the pod families' algorithm histogram is the pod cycle's alone (as upstream)."""
    sched, informers, _ = setup()
    for node in ("n1", "n2"):
        informers.on_node("ADDED", raw_node(node))
    informers.on_pod_group("ADDED", raw_pod_group())
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    profile = {"profile": NAME}
    before = {
        result: _metric("scheduler_podgroup_schedule_attempts_total", result=result, **profile)
        for result in ("scheduled", "unschedulable")
    }
    algorithm = _metric("scheduler_podgroup_scheduling_algorithm_duration_seconds_count")
    pod_algorithm = _metric("scheduler_scheduling_algorithm_duration_seconds_count")

    assert await schedule_next(sched)
    informers.on_node("ADDED", raw_node("n3"))
    await asyncio.sleep(sched.queue.backoff_duration(sched.queue.get("uid-g1") or pytest.fail("queued")))
    sched.queue.flush_backoff_completed()
    assert await schedule_next(sched)

    for result in ("scheduled", "unschedulable"):
        counted = _metric("scheduler_podgroup_schedule_attempts_total", result=result, **profile)
        assert counted - before[result] == 1, result
    assert _metric("scheduler_podgroup_scheduling_attempt_duration_seconds_count", result="scheduled", **profile) >= 1
    assert _metric("scheduler_podgroup_scheduling_algorithm_duration_seconds_count") - algorithm == 2
    assert _metric("scheduler_scheduling_algorithm_duration_seconds_count") == pod_algorithm


async def test_a_gang_arriving_member_by_member_asks_preenqueue_linearly_not_quadratically() -> None:
    """Each arriving member used to wake every gated member of its gang (kube's hint), each of them
    gated again: n^2/2 PreEnqueue calls for a gang of n. Now a member wakes its gang once it has
    minCount members: each arrival asks for itself, the last one for the others too."""
    sched, informers, _ = setup()
    informers.on_node("ADDED", raw_node("n1", cpu="64"))
    members = 60
    informers.on_pod_group("ADDED", raw_pod_group(min_count=members))
    gang = next(p for p in sched.frameworks[NAME].pre_enqueue_plugins if p.name == "GangScheduling")
    asked: list[str] = []
    real = gang.pre_enqueue

    def counting(pod: Any) -> Any:
        asked.append(pod.name)
        return real(pod)

    gang.pre_enqueue = counting  # type: ignore[method-assign]
    for i in range(members):
        informers.on_pod("ADDED", raw_member(f"g{i}", cpu="100m"))
        if i < members - 1:
            assert sched.queue.pending()["gated"] == i + 1
    assert len(asked) == 2 * members - 1
    assert sorted(sched.queue.pending().items()) == [
        ("active", members),
        ("backoff", 0),
        ("gated", 0),
        ("unschedulable", 0),
    ]
