"""Pod-group preemption (DefaultPreemption's PodGroupPostFilter) through the whole scheduler against the
in-memory fake ApiClient: the behaviour cases of v1.37.2's podgrouppreemption_test.go
(TestPodGroupEvaluator_SelectVictimsOnDomain, _Preempt), with upstream's "size" capacity played by
whole CPUs on the nodes and pods."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.workload import registry_value
from scheduler import metrics
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.features import parse_feature_gates
from scheduler.informers import Informers
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import informer_pod

NAME = "secondary-scheduler"
LOW, MID, HIGH = 0, 100, 1000


@dataclass(frozen=True)
class V:
    """A running pod: name, node, priority, size in CPUs, its PodGroup, start second, labels."""

    name: str
    node: str
    priority: int = LOW
    size: int = 1
    group: str | None = None
    start: int | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class G:
    """A victim PodGroup: name, priority, disruption mode ("single" / "all" / None)."""

    name: str
    priority: int = LOW
    mode: str | None = "single"


@dataclass(frozen=True)
class Case:
    name: str
    nodes: dict[str, int]
    victims: list[V]
    groups: list[G] = field(default_factory=list)
    preemptor: list[int] = field(default_factory=lambda: [1])  # member sizes
    min_count: int | None = None
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    want: set[str] = field(default_factory=set)
    want_disruptions: int = 0
    want_pdb_violations: int = 0
    want_message: str | None = None


def raw_node(name: str, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}},
    }


def raw_pod(
    name: str, size: int, priority: int, group: str | None, node: str = "", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    pod = informer_pod(name, NAME, str(size), labels=labels).priority(priority)
    if node:
        pod.node(node).phase("Running")
    if group is not None:
        pod.pod_group(group)
    raw: dict[str, Any] = pod.raw
    return raw


def raw_pod_group(name: str, priority: int, mode: str | None = None, min_count: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}},
        "priority": priority,
    }
    if mode is not None:
        spec["disruptionMode"] = {mode: {}}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-pg-{name}", "resourceVersion": "1", "generation": 1},
        "spec": spec,
    }


def raw_pdb(labels: dict[str, str], allowed: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "pdb", "namespace": "ns", "uid": "uid-pdb", "resourceVersion": "1"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def setup(gates: str = "GenericWorkload=true") -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    config = dataclasses.replace(default_config(), feature_gates=parse_feature_gates(gates))
    sched = build_scheduler(config, full_registry(), client, {})
    sched.rng = random.Random(7)
    return sched, Informers(sched), client


def load(informers: Informers, case: Case, preemptor_policy: str | None = None) -> None:
    for node, cpu in case.nodes.items():
        informers.on_node("ADDED", raw_node(node, cpu))
    for group in case.groups:
        informers.on_pod_group("ADDED", raw_pod_group(group.name, group.priority, group.mode))
    for v in case.victims:
        raw = raw_pod(v.name, v.size, v.priority, v.group, v.node, v.labels)
        if v.start is not None:
            raw["status"]["startTime"] = f"2026-01-01T00:00:{v.start:02d}Z"
        informers.on_pod("ADDED", raw)
    for pdb in case.pdbs:
        informers.on_pdb("ADDED", pdb)
    informers.on_pod_group("ADDED", raw_pod_group("preemptor-pg", HIGH, min_count=case.min_count))
    for i, size in enumerate(case.preemptor):
        raw = raw_pod(f"p-{i + 1}", size, HIGH, "preemptor-pg")
        if preemptor_policy is not None:
            raw["spec"]["preemptionPolicy"] = preemptor_policy
        informers.on_pod("ADDED", raw)


async def schedule_next(sched: Scheduler) -> bool:
    info = sched.queue.pop_nowait()
    if info is None:
        return False
    sched.schedule_entity(info)
    await asyncio.sleep(0)
    await sched.drain()
    return True


def sample(name: str, **labels: str) -> float:
    return registry_value(metrics.REGISTRY, name, **labels)


CASES = [
    Case(
        "Priority: mix of no groups and pod groups",
        nodes={"node1": 2},
        victims=[V("p1", "node1"), V("p2", "node1", group="pg1")],
        groups=[G("pg1")],
        want={"p1"},  # a pod outside any group is less important than a group member
    ),
    Case(
        "Priority: StartTime of pods from same group with disruption mode single",
        nodes={"node1": 2},
        victims=[V("p1", "node1", group="pg1", start=1), V("p2", "node1", group="pg1", start=0)],
        groups=[G("pg1")],
        want={"p1"},  # the later start is less important
        want_disruptions=1,
    ),
    Case(
        "Pod group with disruption mode all not reprieved",
        nodes={"node1": 1, "node2": 1},
        victims=[V("p1", "node1", group="pg1"), V("p2", "node2", group="pg1")],
        groups=[G("pg1", mode="all")],
        want={"p1", "p2"},
        want_disruptions=1,
    ),
    Case(
        "PDB: Mixed groups",
        nodes={"node1": 2},
        victims=[
            V("victim-pdb", "node1", group="pg1", labels={"app": "foo"}),
            V("victim-no-pdb", "node1", group="pg1"),
        ],
        groups=[G("pg1")],
        pdbs=[raw_pdb({"app": "foo"}, 0)],
        want={"victim-no-pdb"},
        want_disruptions=1,
    ),
    Case(
        "Preempt single lower priority pod",
        nodes={"node1": 1},
        victims=[V("p1", "node1")],
        want={"p1"},
    ),
    Case(
        "Priority: Prefer lower priority victim",
        # Upstream's stand-in scheduler fills node1 first; here node1 is the roomier one, so it scores best.
        nodes={"node1": 2, "node2": 1},
        victims=[V("p1", "node1", priority=LOW, size=2), V("p2", "node2", priority=MID)],
        want={"p1"},
    ),
    Case(
        "Efficiency: Preempt minimum number of victims",
        nodes={"node1": 2, "node2": 2},
        victims=[V("p1", "node1"), V("p2", "node1"), V("p3", "node2", size=2)],
        preemptor=[2],
        want={
            "p3"
        },  # one victim of size 2 rather than two of size 1 (the bigger is less important: fewer pods tie, later start)
    ),
    Case(
        "PDB: Prefer non-violating victim",
        nodes={"node1": 1, "node2": 1},
        victims=[V("p1", "node1", labels={"app": "foo"}), V("p2", "node2")],
        pdbs=[raw_pdb({"app": "foo"}, 0)],
        want={"p2"},
    ),
    Case(
        "PodGroup: Preempt group as a whole",
        nodes={"node1": 1, "node2": 1},
        victims=[V("v1", "node1", group="pg1"), V("v2", "node2", group="pg1")],
        groups=[G("pg1", mode="all")],
        want={"v1", "v2"},
        want_disruptions=1,
    ),
    Case(
        "PodGroup: Prefer single pod over podGroup for preemption candidate",
        nodes={"node1": 3},  # fits the preemptor with pg1 or with p1
        victims=[V("p1", "node1"), V("g1-1", "node1", group="pg1"), V("g1-2", "node1", group="pg1")],
        groups=[G("pg1", mode="all")],
        want={"p1"},
    ),
    Case(
        "PodGroup: Preempt group as a whole on single node",
        nodes={"node1": 3},
        victims=[V("g1-1", "node1", group="pg1"), V("g1-2", "node1", group="pg1"), V("p1", "node1", priority=MID)],
        groups=[G("pg1", mode="all")],
        want={"g1-1", "g1-2"},
        want_disruptions=1,
    ),
    Case(
        "PDB: Unit violation if any member violates",
        nodes={"node1": 3},
        victims=[
            V("g1-1", "node1", group="pg1", labels={"app": "foo"}),
            V("g1-2", "node1", group="pg1"),
            V("p1", "node1"),
        ],
        groups=[G("pg1", mode="all")],
        pdbs=[raw_pdb({"app": "foo"}, 0)],
        want={"p1"},
    ),
    Case(
        "Failure: Cannot preempt the victim with higher priority",
        nodes={"node1": 1},
        victims=[V("p1", "node1", priority=HIGH + 1)],
        want_message="pod group preemption: No preemption victims found for incoming preemptor",
    ),
    Case(
        "Failure: Cannot preempt the victim with equal priority",
        nodes={"node1": 1},
        victims=[V("p1", "node1", priority=HIGH)],
        want_message="pod group preemption: No preemption victims found for incoming preemptor",
    ),
    Case(
        "Priority divergence: candidate victim PodGroup has lower priority than the Pods from that group",
        nodes={"node1": 1, "node2": 1},
        victims=[V("p1", "node1", priority=HIGH + 1, group="pg1"), V("p2", "node2", priority=LOW)],
        groups=[G("pg1", priority=LOW, mode="all")],
        want={"p2"},  # the group ranks above the lone pod at equal (group) priority
    ),
    Case(
        "Priority divergence: candidate victim PodGroup has higher priority than the Pods from that group",
        nodes={"node1": 1},
        victims=[V("p1", "node1", priority=LOW, group="pg1")],
        groups=[G("pg1", priority=HIGH, mode="all")],
        want_message="pod group preemption: No preemption victims found for incoming preemptor",
    ),
    Case(
        "Gang scheduling: do not reprieve victim pod group of lower priority",
        nodes={"node1": 1, "node2": 1, "node3": 1},
        victims=[V("v1", "node1", group="pg1"), V("v2", "node2", group="pg1"), V("v3", "node3", priority=MID)],
        groups=[G("pg1", mode="all")],
        preemptor=[1, 1],
        min_count=2,
        want={"v1", "v2"},
        want_disruptions=1,
    ),
    Case(
        "Gang scheduling: schedule as many pods as possible without preempting higher priority pods",
        nodes={"node1": 1, "node2": 1, "node3": 1},
        victims=[V("v1", "node1"), V("v2", "node2"), V("v3", "node3", priority=HIGH + 1)],
        preemptor=[1, 1, 1],
        min_count=2,
        want={"v1", "v2"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_select_victims_on_domain(case: Case) -> None:
    sched, informers, client = setup()
    load(informers, case)
    disruptions = sample("scheduler_preemption_workload_disruptions_sum", preemptor="podgroup")
    violations = sample("scheduler_preemption_pdb_violations_total", preemptor="podgroup")
    assert await schedule_next(sched)
    assert client.bindings == {}
    message = client.pod_group_conditions["ns/preemptor-pg"]["PodGroupInitiallyScheduled"]["message"]
    removed = {key.split("/", 1)[1] for key in client.evicted + client.deleted}
    if case.want_message is not None:
        assert message.endswith(case.want_message)
        assert removed == set()
        return
    assert message.endswith(
        f"pod group preemption: found a placement for podgroup, preempting {len(case.want)} victims"
    )
    assert removed == case.want
    assert sample("scheduler_preemption_workload_disruptions_sum", preemptor="podgroup") - disruptions == (
        case.want_disruptions
    )
    assert sample("scheduler_preemption_pdb_violations_total", preemptor="podgroup") - violations == (
        case.want_pdb_violations
    )
    # Every what-if was undone: nothing assumed, every victim still counted on its node.
    assert sched.cache.sizes()["assumed_pods"] == 0
    for node in case.nodes:
        info = sched.cache.get_node_info(node)
        assert info is not None
        assert info.requested.milli_cpu == sum(v.size * 1000 for v in case.victims if v.node == node)
