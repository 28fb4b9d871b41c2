"""Preemption candidates: which nodes to dry-run, how many, and the dry run over them.

Only nodes whose filter status is Unschedulable are tried (UnschedulableAndUnresolvable ones
cannot be helped by removing pods), starting at a random offset and stopping once enough
candidates are found: at least minCandidateNodesPercentage of them, never fewer than
minCandidateNodesAbsolute. Candidates without PodDisruptionBudget violations come first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from plugins.defaultpreemption.victims import NO_VICTIMS, NodeVictims, has_lower_priority_pod, select_victims_on_node
from scheduler.framework.interface import PreemptionFramework
from scheduler.framework.types import Code, CycleState, NodeInfo, Status
from scheduler.model.objects import Pod, PodDisruptionBudget


@dataclass(frozen=True, slots=True)
class Candidate:
    # The node the preemptor is nominated to; "cluster" for a pod group (its domain).
    node: str
    victims: NodeVictims
    # Victims that are pod groups or their members (kube's NumPodGroupDisruptions).
    num_pod_group_disruptions: int = 0


def num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """How many candidates the dry run must produce (never more than there are nodes)."""
    return min(max(num_nodes * percentage // 100, absolute), num_nodes)


def dry_run(
    fw: PreemptionFramework,
    state: CycleState,
    preemptor: Pod,
    potential_nodes: Sequence[NodeInfo],
    pdbs: Sequence[PodDisruptionBudget],
    offset: int,
    wanted: int,
    refused: Collection[str] = (),
) -> tuple[list[Candidate], dict[str, Status]]:
    """Candidates (non-violating first, each group in the order found) and the status of every
    node tried that is not one."""
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    count = len(potential_nodes)
    for i in range(count):
        node_info = potential_nodes[(offset + i) % count]
        if not has_lower_priority_pod(node_info, preemptor):
            # The common case in a full cluster of peers: answer before cloning anything.
            statuses[node_info.name] = Status.unresolvable(NO_VICTIMS)
            continue
        victims, status = select_victims_on_node(fw, state.clone(), preemptor, node_info.clone(), pdbs, refused)
        if status is None and victims is not None and victims.pods:
            found = Candidate(node_info.name, victims)
            (violating if victims.num_pdb_violations else non_violating).append(found)
            if non_violating and len(non_violating) + len(violating) >= wanted:
                break
            continue
        if status is None:
            status = Status.as_error(RuntimeError(f'expected at least one victim pod on node "{node_info.name}"'))
        statuses[node_info.name] = status
    return non_violating[:wanted] + violating[:wanted], statuses


def first_error(statuses: dict[str, Status]) -> Status | None:
    return next((s for s in statuses.values() if s.code == Code.ERROR), None)
