"""Property test: pod-group preemption's node-local reprieve (only the members on a victim's nodes
re-checked) chooses what the full reprieve (every member re-checked, kube's way) chooses.

Random clusters go through the whole scheduler; at its PodGroupPostFilter, select_victims runs twice
on the same view: as the cycle runs it, and with the simulation refusing node-locality. Victims, PDB
violations, nominations and statuses must match. The generator mixes plain members (node-local) with
members that bring pod (anti-)affinity, hard spread constraints or a nomination elsewhere (fallback),
host ports and pod affinity by hostname (node-local beyond resources, unless a victim's anti-affinity
reaches across nodes or two nodes share a hostname label), victim PodGroups spanning nodes, PDBs and
priorities above the preemptor's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from plugins.defaultpreemption import podgroups
from plugins.defaultpreemption.podgroups import Selection
from plugins.interpodaffinity import InterPodAffinity
from plugins.podtopologyspread import PodTopologySpread
from scheduler.framework.interface import PodGroupSimulation
from scheduler.framework.types import CycleState, NodeInfo, ProposedAssignment, Status
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.testing.builders import affinity_term, informer_pod, label_selector
from tests.unit.test_podgroup_preemption import HIGH, LOW, MID, NAME, raw_pdb, raw_pod_group, schedule_next, setup

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CASES = 150


class Recording:
    """The cycle's simulation, counting Filter calls; `full` makes every reprieve check every member."""

    def __init__(self, inner: PodGroupSimulation, full: bool) -> None:
        self.inner = inner
        self.full = full
        self.fits_calls = 0
        self.local: bool | None = None
        self.affinity = False  # some member's InterPodAffinity runs

    def schedule(self) -> tuple[list[ProposedAssignment], Status | None]:
        return self.inner.schedule()

    def remove_pod(self, pod: Pod) -> None:
        self.inner.remove_pod(pod)

    def add_pod(self, pod: Pod) -> None:
        self.inner.add_pod(pod)

    def node_info(self, node_name: str) -> NodeInfo | None:
        return self.inner.node_info(node_name)

    def fits(self, assignment: ProposedAssignment) -> Status | None:
        self.fits_calls += 1
        return self.inner.fits(assignment)

    def assume(self, assignment: ProposedAssignment) -> Callable[[], None]:
        return self.inner.assume(assignment)

    def pre_filter_add_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        return self.inner.pre_filter_add_pod(assignment, pod)

    def pre_filter_remove_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        return self.inner.pre_filter_remove_pod(assignment, pod)

    def extends_pre_filter(self, assignment: ProposedAssignment) -> bool:
        return self.inner.extends_pre_filter(assignment)

    def node_local(self, placed: Sequence[ProposedAssignment]) -> bool:
        self.local = not self.full and self.inner.node_local(placed)
        self.affinity = any("InterPodAffinity" not in a.state.skip_filter_plugins for a in placed)
        return self.local


def outcome(result: tuple[Selection | None, Status | None]) -> tuple[Any, ...]:
    selection, status = result
    verdict = (status.code, status.message) if status is not None else None
    if selection is None:
        return (None, verdict)
    victims = [tuple(p.uid for p in v.pods) for v in selection.victims]
    return (victims, selection.num_pdb_violations, sorted(selection.violating), dict(selection.nominations), verdict)


@dataclass
class Tally:
    case: int = 0
    rng: random.Random = field(default_factory=random.Random)  # the scheduler's, for its tie-breaks
    mismatches: list[str] = field(default_factory=list)
    compared: int = 0
    local: int = 0  # node-local: the shortcut ran
    local_mixed: int = 0  # ... and some victims were reprieved while others were chosen
    local_affinity: int = 0  # ... with InterPodAffinity running (terms whose domains are nodes)
    fewer_filters: int = 0  # ... and it filtered less than the full reprieve
    fallback: int = 0  # not node-local: the full reprieve ran


def raw_node(name: str, cpu: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {HOSTNAME: name, ZONE: zone},
        },
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def random_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, PodGroups and pods (running victims and the preemptor's members), PDBs come separately."""
    nodes = [
        raw_node(f"n{i}", rng.choice(["1", "2", "2", "3"]), rng.choice(["z0", "z1"])) for i in range(rng.randint(2, 7))
    ]
    if rng.random() < 0.15:
        # A hostname label two nodes share (legal): its domain is no longer one node.
        nodes[-1]["metadata"]["labels"][HOSTNAME] = nodes[0]["metadata"]["name"]
    groups = [
        raw_pod_group(f"vg{i}", rng.choice([LOW, MID]), rng.choice(["single", "all", None]))
        for i in range(rng.randint(0, 2))
    ]
    pods: list[dict[str, Any]] = []
    for node in nodes:
        # Mostly full nodes: the group has to preempt.
        room = int(node["status"]["allocatable"]["cpu"]) * 1000 - rng.choice([0, 0, 250, 500])
        while room >= 250:
            milli = rng.choice([m for m in (250, 500, 1000) if m <= room])
            room -= milli
            name = f"v{len(pods)}"
            pod = informer_pod(name, NAME, f"{milli}m", labels={"app": rng.choice("ab")})
            pod.priority(rng.choice([LOW, LOW, MID, HIGH + 1])).node(node["metadata"]["name"]).phase("Running")
            pod.start_time(rng.randint(0, 50))
            if groups and rng.random() < 0.3:
                pod.pod_group(rng.choice(groups)["metadata"]["name"])
            if rng.random() < 0.15:
                pod.host_port(8080)
            if rng.random() < 0.1:
                pod.pod_anti_affinity(affinity_term(rng.choice([HOSTNAME, ZONE]), label_selector({"role": "gang"})))
            pods.append(pod.raw)
    size = rng.randint(1, 5)
    # Half the groups are node-local throughout (the shortcut), half have members that are not.
    shapes = ["plain"] * 3 + ["port", "nominated"] + ["host-affinity"] * 2
    shapes += ["anti", "affinity", "spread"] if rng.random() < 0.5 else []
    min_count = rng.choice([None, size, rng.randint(1, size)])
    groups.append(raw_pod_group("preemptor-pg", HIGH, min_count=min_count))
    for i in range(size):
        member = informer_pod(f"m{i}", NAME, rng.choice(["500m", "1", "2"]), labels={"role": "gang"})
        member.priority(HIGH).pod_group("preemptor-pg")
        shape = rng.choice(shapes)
        if shape == "anti":
            selector = label_selector({rng.choice(["role", "app"]): rng.choice(["gang", "a"])})
            member.pod_anti_affinity(affinity_term(rng.choice([HOSTNAME, ZONE]), selector))
        elif shape == "affinity":
            member.pod_affinity(affinity_term(ZONE, label_selector({"app": "b"})))
        elif shape == "host-affinity":
            # Beside a pod labelled app=b on the same node (GangPreemptionAffinity's anchors).
            member.pod_affinity(affinity_term(HOSTNAME, label_selector({"app": "b"})))
        elif shape == "spread":
            member.spread_constraint(1, rng.choice([HOSTNAME, ZONE]), "DoNotSchedule", label_selector({"role": "gang"}))
        elif shape == "port":
            member.host_port(8080)
        elif shape == "nominated":
            member.nominated_node(rng.choice(nodes)["metadata"]["name"])
        pods.append(member.raw)
    return nodes, groups, pods


async def run_cases(monkeypatch: pytest.MonkeyPatch, cases: int, until_mismatch: bool = False) -> Tally:
    tally = Tally()
    select_victims = podgroups.select_victims

    def both(
        simulation: PodGroupSimulation,
        priority: int,
        candidates: Sequence[podgroups.Victim],
        pdbs: Sequence[PodDisruptionBudget],
        refused: Collection[str] = (),
    ) -> tuple[Selection | None, Status | None]:
        shortcut, full = Recording(simulation, full=False), Recording(simulation, full=True)
        # Both runs schedule the group again: the same tie-breaks for both.
        rng = tally.rng.getstate()
        result = select_victims(shortcut, priority, candidates, pdbs, refused)
        tally.rng.setstate(rng)
        expected = select_victims(full, priority, candidates, pdbs, refused)
        tally.compared += 1
        if outcome(result) != outcome(expected):
            tally.mismatches.append(f"case {tally.case}: {outcome(result)} != {outcome(expected)}")
        if shortcut.local:
            tally.local += 1
            chosen = len(result[0].victims) if result[0] is not None else 0
            tally.local_mixed += 0 < chosen < sum(1 for v in candidates if v.priority < priority)
            tally.fewer_filters += shortcut.fits_calls < full.fits_calls
            tally.local_affinity += shortcut.affinity
        elif shortcut.local is False:
            tally.fallback += 1
        return result

    monkeypatch.setattr(podgroups, "select_victims", both)
    for case in range(cases):
        if until_mismatch and tally.mismatches:
            break
        tally.case = case
        rng = random.Random(case)
        nodes, groups, pods = random_cluster(rng)
        sched, informers, client = setup()
        tally.rng = sched.rng
        for node in nodes:
            informers.on_node("ADDED", node)
        for group in groups:
            informers.on_pod_group("ADDED", group)
        for pod in pods:
            informers.on_pod("ADDED", pod)
        if rng.random() < 0.4:
            informers.on_pdb("ADDED", raw_pdb({"app": "a"}, rng.choice([0, 1])))
        assert await schedule_next(sched)
        # Every what-if was undone: only members bound for real stay assumed.
        assert sched.cache.sizes()["assumed_pods"] == len(client.bindings)
    return tally


async def test_node_local_reprieve_chooses_as_the_full_reprieve(monkeypatch: pytest.MonkeyPatch) -> None:
    tally = await run_cases(monkeypatch, CASES)
    assert tally.mismatches == []
    # The generator reaches both paths, and the shortcut decides real mixes with fewer Filter calls.
    assert tally.compared >= 120
    assert tally.local >= 30
    assert tally.local_mixed >= 25
    assert tally.fewer_filters >= 25
    assert tally.local_affinity >= 10
    assert tally.fallback >= 30


async def test_property_catches_cross_node_plugins_taken_as_node_local(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property has teeth: with spreading and pod (anti-)affinity wrongly node-local, it finds
    cases where checking only the victim's nodes chooses differently."""

    def everywhere(self: object, state: CycleState) -> bool:
        return True

    monkeypatch.setattr(PodTopologySpread, "node_local", everywhere, raising=False)
    monkeypatch.setattr(InterPodAffinity, "node_local", everywhere, raising=False)
    tally = await run_cases(monkeypatch, CASES, until_mismatch=True)
    assert tally.mismatches != []


async def test_member_nominated_elsewhere_keeps_the_full_reprieve() -> None:
    """m0 still carries a nomination to x but must run on y; assuming it (as the full reprieve does
    before checking m1 on x) takes its nomination off x. Checking m1 alone would count m0's 1.5 CPU
    nominated on x and keep v from being reprieved."""
    sched, informers, client = setup()
    informers.on_node("ADDED", raw_node("x", "3", "z0"))
    informers.on_node("ADDED", raw_node("y", "3", "z0"))
    for name, node, cpu in (("v", "x", "1500m"), ("w", "y", "2")):
        informers.on_pod("ADDED", informer_pod(name, NAME, cpu).priority(LOW).node(node).phase("Running").raw)
    informers.on_pod_group("ADDED", raw_pod_group("preemptor-pg", HIGH, min_count=2))
    m0 = informer_pod("m0", NAME, "1500m").priority(HIGH).pod_group("preemptor-pg").node_selector({HOSTNAME: "y"})
    m1 = informer_pod("m1", NAME, "1").priority(HIGH).pod_group("preemptor-pg").node_selector({HOSTNAME: "x"})
    informers.on_pod("ADDED", m0.nominated_node("x").raw)
    informers.on_pod("ADDED", m1.raw)
    assert sched.nominator.nominated_node("uid-m0") == "x"
    assert await schedule_next(sched)
    assert client.evicted + client.deleted == ["ns/w"]


def test_node_local_per_cycle_state() -> None:
    """A plain pod's PreFilter skips every plugin whose effects span nodes: node-local. Any one of
    them running (a PVC, a claim, spreading, pod affinity, a ReadWriteOncePod volume) makes it not."""
    sched, informers, _client = setup()
    informers.on_node("ADDED", raw_node("x", "3", "z0"))
    sched.cache.update_snapshot(sched.snapshot)
    fw = sched.frameworks[NAME]
    state = CycleState()
    pod = informer_pod("plain", NAME, "1").priority(HIGH).obj()
    _result, status, _narrowing = fw.run_pre_filter(state, pod, sched.snapshot.list())
    assert status is None
    spanning = {"VolumeRestrictions", "VolumeBinding", "PodTopologySpread", "InterPodAffinity", "DynamicResources"}
    assert spanning <= state.skip_filter_plugins
    assert fw.node_local(state)
    assert not fw.has_pre_filter_extensions(state)
    for name in sorted(spanning):
        active = state.clone()
        active.skip_filter_plugins.discard(name)
        assert not fw.node_local(active), name
    # NodeVolumeLimits counts volumes on the node alone: running, it stays node-local.
    counting = state.clone()
    counting.skip_filter_plugins.discard("NodeVolumeLimits")
    assert fw.node_local(counting)
