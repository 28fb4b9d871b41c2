"""The dry run on one node: which lower-priority pods must go so the preemptor fits.

Every lower-priority pod is removed from a copy of the node (PreFilter state follows through
PreFilterExtensions.RemovePod); if the preemptor then fits, victims are reprieved one at a time,
most important first, those whose removal would violate a PodDisruptionBudget before the others.
Works on clones only: never mutates the snapshot's NodeInfo or the cycle state it was given.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from scheduler.framework.interface import PreemptionFramework
from scheduler.framework.types import CycleState, NodeInfo, Status
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.model.selectors import LabelSelector, SelectorError, label_selector

NO_VICTIMS = "No preemption victims found for incoming pod"


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The pods to preempt on one node, most important first."""

    pods: tuple[Pod, ...]
    num_pdb_violations: int
    # Victims whose removal the dry run counted as a PodDisruptionBudget violation.
    violating: frozenset[str] = field(default=frozenset())


def start_time(pod: Pod) -> float:
    """status.startTime; a pod that has not started yet counts as starting now (as upstream)."""
    started = pod.started
    return time.time() if started is None else started


def importance(pod: Pod) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then the one that started earlier."""
    return (-pod.priority, start_time(pod))


def split_by_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget], refused: Collection[str] = ()
) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating), each in the given order, as upstream's FilterVictimsWithPDBViolation.

    Each matching budget's disruptionsAllowed is spent pod by pod; a pod already in the budget's
    status.disruptedPods is not counted again. `refused` names pods whose eviction the apiserver
    just refused (429): they count as violating whatever the informer's budgets say.
    """
    selectors: list[LabelSelector | None] = []
    for pdb in pdbs:
        try:
            selectors.append(label_selector(pdb.selector))
        except SelectorError:
            selectors.append(None)  # an invalid selector matches nothing
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        if pod.uid in refused:
            violating.append(pod)
            continue
        violates = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                selector = selectors[i]
                if pdb.namespace != pod.namespace or selector is None or selector.empty:
                    continue
                if not selector.matches(pod.labels) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violates = True
                    break
        (violating if violates else non_violating).append(pod)
    return violating, non_violating


def has_lower_priority_pod(node_info: NodeInfo, preemptor: Pod) -> bool:
    priority = preemptor.priority
    return any(p.priority < priority for p in node_info.pods.values())


def select_victims_on_node(
    fw: PreemptionFramework,
    state: CycleState,
    preemptor: Pod,
    node_info: NodeInfo,
    pdbs: Sequence[PodDisruptionBudget],
    refused: Collection[str] = (),
) -> tuple[NodeVictims | None, Status | None]:
    """The fewest, least important victims on this node; `state` and `node_info` must be clones."""
    potential = [p for p in node_info.pods.values() if p.priority < preemptor.priority]
    if not potential:
        return None, Status.unresolvable(NO_VICTIMS)

    # Without a PreFilter extension in this cycle (no inter-pod affinity or spread constraints to
    # follow) a victim's removal or return changes the node alone.
    extended = fw.has_pre_filter_extensions(state)

    def remove(pod: Pod) -> Status | None:
        node_info.remove_pod(pod)
        return fw.run_pre_filter_remove_pod(state, preemptor, pod, node_info) if extended else None

    def add(pod: Pod) -> Status | None:
        node_info.add_pod(pod)
        return fw.run_pre_filter_add_pod(state, preemptor, pod, node_info) if extended else None

    for pod in potential:
        if (status := remove(pod)) is not None:
            return None, _as_error(status)
    # If the preemptor does not fit even with every lower-priority pod gone, this node cannot help
    # (affinity to a victim is deliberately not considered, as upstream).
    if (status := fw.run_filter_with_nominated(state, preemptor, node_info)) is not None:
        return None, status
    potential.sort(key=importance)
    violating, non_violating = split_by_pdb_violation(potential, pdbs, refused)
    victims: list[Pod] = []
    # The plugin that rejected the last returned victim is asked first for the next one: it is
    # usually the same (NodeResourcesFit), and only whether any plugin rejects matters here.
    rejecting = ""

    def reprieve(pod: Pod) -> bool:
        nonlocal rejecting
        if (status := add(pod)) is not None:
            raise _DryRunError(status)
        if (rejected := fw.run_filter_with_nominated(state, preemptor, node_info, rejecting)) is None:
            return True
        rejecting = rejected.plugin or ""
        if (status := remove(pod)) is not None:
            raise _DryRunError(status)
        victims.append(pod)
        return False

    violations = 0
    try:
        for pod in violating:
            if not reprieve(pod):
                violations += 1
        for pod in non_violating:
            reprieve(pod)
    except _DryRunError as exc:
        return None, _as_error(exc.status)
    if violating and non_violating:
        victims.sort(key=importance)
    violating_uids = frozenset(p.uid for p in violating) & {p.uid for p in victims}
    return NodeVictims(tuple(victims), violations, violating_uids), None


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def _as_error(status: Status) -> Status:
    return status if status.error is not None else Status.as_error(RuntimeError(status.message), status.plugin)
