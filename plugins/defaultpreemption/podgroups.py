"""Pod-group preemption (DefaultPreemption's PodGroupPostFilter, kube 1.37's podgrouppreemption.go).

Owns the choice of victims for a group that did not fit: the whole cluster is the domain; every
lower-priority unit is a potential victim — a pod, or, when its PodGroup has `disruptionMode.all`,
all the group's scheduled pods together; a member of a PodGroup counts with its group's priority.
All potential victims leave the cycle's view, the group's own scheduling algorithm runs once, and
victims are then reprieved one unit at a time (PDB-violating ones first, most important first) as
long as every placed member still passes Filter. The rest are removed through the executor (the
same eviction path as pod preemption) and the members are nominated to their nodes.

Works on the cycle's view only through the PodGroupSimulation it is handed and undoes every
change before returning; never calls the API itself (the executor does, off the cycle).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from plugins.defaultpreemption.candidates import Candidate
from plugins.defaultpreemption.executor import POD, POD_GROUP, terminating_by_preemption
from plugins.defaultpreemption.victims import NodeVictims, split_by_pdb_violation, start_time
from scheduler import metrics
from scheduler.features import POD_GROUP_PREEMPTION_POLICY
from scheduler.framework.interface import Handle, PodGroupSimulation
from scheduler.framework.podgroups import scheduling_group_key
from scheduler.framework.types import Code, ProposedAssignment, Status
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.model.podgroups import PodGroup

PREFIX = "pod group preemption: "
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
PDB_PROTECTED = "Preemption victims are protected by a PodDisruptionBudget (victimRemoval: evict)"
WAITING = "waiting for the preemption for this pod group to be finished"
# kube's candidate name for pod-group preemption: the domain is the whole cluster.
CLUSTER = "cluster"
PREEMPT_NEVER = "Never"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class Victim:
    """A unit preemption takes whole (kube's Victim): one pod, or a disruptionMode-all group's pods."""

    pods: tuple[Pod, ...]
    priority: int
    # POD, or POD_GROUP for a group and for a pod that belongs to a PodGroup (kube's keyType).
    kind: str

    @property
    def is_group(self) -> bool:
        return self.kind == POD_GROUP

    def importance(self) -> tuple[int, int, int, float]:
        """Sort key, most important first (kube's MoreImportantVictim): higher priority, a group before a
        pod, more pods, then the earliest start."""
        rank = 2 if self.is_group else 1
        return (-self.priority, -rank, -len(self.pods), min(start_time(p) for p in self.pods))


@dataclass(frozen=True, slots=True)
class Selection:
    """The victims chosen for a group and where its members go (kube's selectVictimsResult)."""

    victims: tuple[Victim, ...]
    num_pdb_violations: int
    violating: frozenset[str]
    nominations: Mapping[str, str]

    @property
    def pods(self) -> tuple[Pod, ...]:
        return tuple(p for v in self.victims for p in v.pods)

    def candidate(self) -> Candidate:
        victims = NodeVictims(self.pods, self.num_pdb_violations, self.violating)
        return Candidate(CLUSTER, victims, sum(1 for v in self.victims if v.is_group))


def pod_group_of(handle: Handle, pod: Pod) -> PodGroup | None:
    """The PodGroup a pod names in spec.schedulingGroup, if the scheduler knows it."""
    key = scheduling_group_key(pod)
    state = handle.pod_groups.get(key) if key is not None else None
    return state.group if state is not None and isinstance(state.group, PodGroup) else None


def victim_priority(handle: Handle, pod: Pod) -> int:
    """kube's GetPodPriority: a member of a known PodGroup has its group's priority."""
    group = pod_group_of(handle, pod)
    return group.priority if group is not None else pod.priority


def preemption_policy(handle: Handle, group: PodGroup, members: Sequence[Pod]) -> str:
    """The group's policy (PodGroupPreemptionPolicy on), else Never if any queued member says so."""
    if handle.feature_gates.enabled(POD_GROUP_PREEMPTION_POLICY):
        return group.preemption_policy or PREEMPT_LOWER_PRIORITY
    if any(pod.spec.get("preemptionPolicy") == PREEMPT_NEVER for pod in members):
        return PREEMPT_NEVER
    return PREEMPT_LOWER_PRIORITY


def cluster_victims(handle: Handle) -> list[Victim]:
    """Every unit on the cluster's nodes, in node order (kube's getCrossNodesVictims): a pod of a
    disruptionMode-all PodGroup brings every scheduled pod of its group, once."""
    seen: set[str] = set()
    victims: list[Victim] = []
    for node_info in handle.snapshot.list():
        for pod in node_info.pods.values():
            key = scheduling_group_key(pod)
            state = handle.pod_groups.get(key) if key is not None else None
            group = state.group if state is not None and isinstance(state.group, PodGroup) else None
            if state is None or group is None or not group.disruption_all:
                if pod.uid not in seen:
                    seen.add(pod.uid)
                    # A member of any PodGroup ranks as one (kube's NewPodVictim), found or not.
                    kind = POD_GROUP if key is not None else POD
                    victims.append(Victim((pod,), group.priority if group is not None else pod.priority, kind))
                continue
            if str(key) in seen:
                continue
            seen.add(str(key))
            victims.append(Victim(tuple(state.scheduled_pods()) or (pod,), group.priority, POD_GROUP))
    return victims


def is_ongoing_preemption(handle: Handle, priority: int, members: Sequence[Pod]) -> bool:
    """A member's nominated node still holds a lower-priority pod terminating by preemption."""
    nominated = {(p.raw.get("status") or {}).get("nominatedNodeName") for p in members} - {None, ""}
    for node in nominated:
        node_info = handle.snapshot.get(str(node))
        if node_info is None:
            continue
        for pod in node_info.pods.values():
            if victim_priority(handle, pod) < priority and terminating_by_preemption(pod):
                return True
    return False


def current_nominations(members: Sequence[Pod]) -> dict[str, str]:
    return {p.uid: (p.raw.get("status") or {}).get("nominatedNodeName") or "" for p in members}


def select_victims(
    simulation: PodGroupSimulation,
    priority: int,
    candidates: Sequence[Victim],
    pdbs: Sequence[PodDisruptionBudget],
    refused: Collection[str] = (),
) -> tuple[Selection | None, Status | None]:
    """kube's selectVictimsOnDomain over the simulation; every change to the view is undone.

    A reprieve re-checks every placed member in kube. When the members' plugins are node-local and
    all members fit before the first reprieve, only the members on the victim's nodes can stop
    fitting (the others' nodes and cycle states are as they were when they last fitted), so only
    those are checked: the same victims, checked with a fraction of the Filter calls."""
    potential = [v for v in candidates if v.priority < priority]
    if not potential:
        return None, Status.unresolvable(NO_VICTIMS)
    removed: dict[str, Pod] = {}
    try:
        for victim in potential:
            for pod in victim.pods:
                simulation.remove_pod(pod)
                removed[pod.uid] = pod
        assignments, status = simulation.schedule()
        if status is not None and status.code != Code.SUCCESS:
            return None, status
        potential.sort(key=Victim.importance)
        violating, non_violating = _split_by_pdb_violation(potential, pdbs, refused)
        placed = [a for a in assignments if a.node_name]
        extended = [a for a in placed if simulation.extends_pre_filter(a)]
        local = _MembersByNode(placed) if simulation.node_local(placed) and _all_fit(simulation, placed) else None
        chosen: list[Victim] = []
        violations = 0
        for victim, count in violating:
            if not _reprieve(simulation, victim, placed, extended, removed, local):
                chosen.append(victim)
                violations += count
        for victim in non_violating:
            if not _reprieve(simulation, victim, placed, extended, removed, local):
                chosen.append(victim)
    finally:
        for pod in removed.values():
            simulation.add_pod(pod)
    chosen.sort(key=Victim.importance)
    violating_uids = frozenset(p.uid for v, _ in violating for p in v.pods) & {p.uid for v in chosen for p in v.pods}
    nominations = {a.pod.uid: a.node_name for a in placed}
    return Selection(tuple(chosen), violations, violating_uids, nominations), None


class _MembersByNode:
    """The placed members by node, each list in placement order."""

    def __init__(self, placed: Sequence[ProposedAssignment]) -> None:
        self.by_node: dict[str, list[tuple[int, ProposedAssignment]]] = {}
        for position, assignment in enumerate(placed):
            self.by_node.setdefault(assignment.node_name, []).append((position, assignment))

    def on_nodes_of(self, pods: Sequence[Pod]) -> list[ProposedAssignment]:
        """The members on the pods' nodes, in placement order."""
        nodes = {pod.node_name for pod in pods}
        found = [entry for node in nodes for entry in self.by_node.get(node, ())]
        if len(nodes) > 1:
            found.sort(key=lambda entry: entry[0])
        return [assignment for _, assignment in found]


def _split_by_pdb_violation(
    victims: Sequence[Victim], pdbs: Sequence[PodDisruptionBudget], refused: Collection[str]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """kube's FilterVictimsWithPDBViolation on units: the budgets are spent pod by pod in victim order,
    and a unit with any violating pod is violating as a whole (with how many of its pods violate)."""
    violating_pods, _ = split_by_pdb_violation([p for v in victims for p in v.pods], pdbs, refused)
    bad = {p.uid for p in violating_pods}
    violating: list[tuple[Victim, int]] = []
    non_violating: list[Victim] = []
    for victim in victims:
        count = sum(1 for p in victim.pods if p.uid in bad)
        if count:
            violating.append((victim, count))
        else:
            non_violating.append(victim)
    return violating, non_violating


def _reprieve(
    simulation: PodGroupSimulation,
    victim: Victim,
    placed: Sequence[ProposedAssignment],
    extended: Sequence[ProposedAssignment],
    removed: dict[str, Pod],
    local: _MembersByNode | None,
) -> bool:
    """Put the unit back; keep it if every placed member (with `local`, every member on its nodes)
    still passes Filter with the earlier ones assumed, else take it off again."""
    _move(simulation, victim, extended, removed, back=True)
    members = placed if local is None else local.on_nodes_of(victim.pods)
    return _all_fit(simulation, members, lambda: _move(simulation, victim, extended, removed, back=False))


def _all_fit(
    simulation: PodGroupSimulation, members: Sequence[ProposedAssignment], on_misfit: Callable[[], None] = lambda: None
) -> bool:
    """Whether each member passes Filter on its node with the earlier ones assumed; `on_misfit` runs
    at the first that does not, while the assumes still stand. The assumes are undone either way."""
    undo: list[Callable[[], None]] = []
    try:
        for assignment in members:
            if simulation.fits(assignment) is not None:
                on_misfit()
                return False
            undo.append(simulation.assume(assignment))
        return True
    finally:
        for revert in reversed(undo):
            revert()


def _move(
    simulation: PodGroupSimulation,
    victim: Victim,
    extended: Sequence[ProposedAssignment],
    removed: dict[str, Pod],
    back: bool,
) -> None:
    """Put the unit's pods back on (or take them off) their nodes, with AddPod (RemovePod) for the
    members whose PreFilter extensions ran: for the others those are no-ops."""
    for pod in victim.pods:
        if back:
            simulation.add_pod(pod)
            del removed[pod.uid]
        else:
            simulation.remove_pod(pod)
            removed[pod.uid] = pod
        for assignment in extended:
            change = simulation.pre_filter_add_pod if back else simulation.pre_filter_remove_pod
            status = change(assignment, pod)
            if status is not None:
                raise PreemptionError(status.message)


class PreemptionError(Exception):
    """A PreFilter extension failed while a victim moved in the what-if."""


def preempt(
    handle: Handle,
    group: PodGroup,
    members: Sequence[Pod],
    simulation: PodGroupSimulation,
    refused: Collection[str],
    pdb_violations_allowed: bool,
) -> tuple[Mapping[str, str], Selection | None, Status | None]:
    """kube's PodGroupEvaluator.Preempt without the actuation: (nominations, selection, status);
    a selection comes with a success status."""
    if preemption_policy(handle, group, members) == PREEMPT_NEVER:
        return {}, None, Status.unschedulable(NOT_ELIGIBLE)
    if is_ongoing_preemption(handle, group.priority, members):
        return current_nominations(members), None, Status(Code.SUCCESS, (ONGOING,))
    started = time.perf_counter()
    try:
        selection, status = select_victims(
            simulation, group.priority, cluster_victims(handle), handle.pdbs.list(), refused
        )
    except PreemptionError as exc:
        selection, status = None, Status.as_error(exc)
    elapsed = time.perf_counter() - started
    metrics.preemption_evaluation_duration.labels(POD_GROUP, metrics.code_label(status)).observe(elapsed)
    if selection is None:
        return {}, None, status
    if not pdb_violations_allowed and selection.num_pdb_violations:
        return {}, None, Status.unschedulable(PDB_PROTECTED)
    message = f"found a placement for podgroup, preempting {len(selection.pods)} victims"
    return selection.nominations, selection, Status(Code.SUCCESS, (message,))
