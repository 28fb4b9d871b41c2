"""DefaultPreemption: PostFilter that makes room for a pod by preempting lower-priority pods.

The adapter: args, PodEligibleToPreemptOthers, PostFilter (evaluate, then act asynchronously),
PreEnqueue (hold a preemptor back while its preemption is in flight). The domain core is split
like upstream's: `candidates` (which nodes, the dry run over them), `victims` (the dry run on
one node and PDB violations), `selection` (SelectCandidate), `executor` (the API calls).
Reads the cluster only through the handle's snapshot, nominator and PDB lister.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.defaultpreemption import podgroups
from plugins.defaultpreemption.candidates import Candidate, dry_run, first_error, num_candidates
from plugins.defaultpreemption.executor import (
    DEFAULT_EVICTION_TIMEOUT_SECONDS,
    EVICT,
    EVICT_THEN_DELETE,
    MAX_EVICTION_TIMEOUT_SECONDS,
    VICTIM_REMOVAL_MODES,
    Executor,
    Preemptor,
    terminating_by_preemption,
)
from plugins.defaultpreemption.selection import select_candidate
from plugins.defaultpreemption.victims import NO_VICTIMS, split_by_pdb_violation
from scheduler import metrics
from scheduler.features import GENERIC_WORKLOAD
from scheduler.framework.interface import Handle, PodGroupSimulation
from scheduler.framework.podgroups import PodGroupState, scheduling_group_key
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    EventObject,
    EventResource,
    FitError,
    NodeToStatus,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Pod
from scheduler.model.podgroups import PodGroup

NAME = "DefaultPreemption"

NOT_HELPFUL = "Preemption is not helpful for scheduling"
PDB_PROTECTED = "Preemption victims are protected by a PodDisruptionBudget (victimRemoval: evict)"
WAITING = "waiting for the preemption for this pod to be finished"


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    victim_removal: str = EVICT_THEN_DELETE
    eviction_timeout_seconds: int = DEFAULT_EVICTION_TIMEOUT_SECONDS


def parse_args(args: Mapping[str, Any]) -> PreemptionArgs:
    """DefaultPreemptionArgs plus victimRemoval and evictionTimeoutSeconds; errors name the field as
    kube's validation does."""
    known = {
        "apiVersion",
        "kind",
        "minCandidateNodesPercentage",
        "minCandidateNodesAbsolute",
        "victimRemoval",
        "evictionTimeoutSeconds",
    }
    unknown = set(args) - known
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    percentage = args.get("minCandidateNodesPercentage", 10)
    absolute = args.get("minCandidateNodesAbsolute", 100)
    removal = args.get("victimRemoval", EVICT_THEN_DELETE)
    eviction_timeout = args.get("evictionTimeoutSeconds", DEFAULT_EVICTION_TIMEOUT_SECONDS)
    integers = (
        ("minCandidateNodesPercentage", percentage),
        ("minCandidateNodesAbsolute", absolute),
        ("evictionTimeoutSeconds", eviction_timeout),
    )
    for field, value in integers:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{field}: Invalid value: {value!r}: must be an integer")
    if not 0 <= percentage <= 100:
        raise ValueError(f"minCandidateNodesPercentage: Invalid value: {percentage}: not in valid range [0, 100]")
    if absolute < 0:
        raise ValueError(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if percentage == 0 and absolute == 0:
        raise ValueError(
            "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute"
        )
    if removal not in VICTIM_REMOVAL_MODES:
        supported = ", ".join(f'"{m}"' for m in VICTIM_REMOVAL_MODES)
        raise ValueError(f"victimRemoval: Unsupported value: {removal!r}: supported values: {supported}")
    if not 0 <= eviction_timeout <= MAX_EVICTION_TIMEOUT_SECONDS:
        raise ValueError(
            f"evictionTimeoutSeconds: Invalid value: {eviction_timeout}: "
            f"not in valid range [0, {MAX_EVICTION_TIMEOUT_SECONDS}]"
        )
    return PreemptionArgs(percentage, absolute, removal, eviction_timeout)


def _skip_on_assigned_pod_delete(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    # The plugins whose failure preemption resolves decide about requeueing, not this one.
    return QueueingHint.SKIP


class DefaultPreemption:
    name = NAME

    def __init__(self, args: PreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.executor = Executor(handle, NAME, args.victim_removal, args.eviction_timeout_seconds)
        self.rng = random.Random()

    # ---- PreEnqueue ----------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if scheduling_group_key(pod) is not None and self.handle.feature_gates.enabled(GENERIC_WORKLOAD):
            # A member waits for its group's preemption; a group the scheduler does not know is not
            # this plugin's to hold back.
            group = podgroups.pod_group_of(self.handle, pod)
            if group is not None and self.executor.is_running(group.uid):
                return Status.unresolvable(podgroups.WAITING, plugin=NAME)
            return None
        if self.executor.is_running(pod.uid):
            return Status.unresolvable(WAITING, plugin=NAME)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        event = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")
        return [ClusterEventWithHint(event, _skip_on_assigned_pod_delete)]

    # ---- PodGroupPostFilter (GenericWorkload) ---------------------------------------------

    def pod_group_post_filter(
        self, group: PodGroupState, members: Sequence[Pod], simulation: PodGroupSimulation
    ) -> tuple[Mapping[str, str], Status | None]:
        status: Status | None = None
        try:
            nominations, status = self._preempt_group(group, members, simulation)
        finally:
            metrics.workload_preemption_attempts.labels(metrics.code_label(status)).inc()
        if status is not None and status.message:
            status = Status(status.code, (podgroups.PREFIX + status.message,), status.error, status.plugin)
        return nominations, status

    def _preempt_group(
        self, group: PodGroupState, members: Sequence[Pod], simulation: PodGroupSimulation
    ) -> tuple[Mapping[str, str], Status | None]:
        """kube's PodGroupEvaluator.Preempt: choose the victims, then remove them off the cycle."""
        pod_group = group.group
        if not isinstance(pod_group, PodGroup):
            return {}, Status.unschedulable(f"pod group {group.key} is not known")
        nominations, selection, status = podgroups.preempt(
            self.handle,
            pod_group,
            members,
            simulation,
            self.executor.refused(),
            pdb_violations_allowed=self.args.victim_removal != EVICT,
        )
        if selection is not None:
            self.executor.prepare_async(selection.candidate(), Preemptor.of_pod_group(pod_group, list(members)))
        return nominations, status

    # ---- PostFilter ----------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        try:
            nominated, status = self.preempt(state, pod, node_to_status)
        finally:
            metrics.preemption_attempts.inc()
        if status is not None and status.message:
            status = Status(status.code, (f"preemption: {status.message}",), status.error, status.plugin)
        return nominated, status

    def preempt(self, state: CycleState, pod: Pod, node_to_status: NodeToStatus) -> tuple[str | None, Status | None]:
        """Upstream's Evaluator.Preempt: (nominated node or None/"" as for PostFilter, status)."""
        nominated_node = (pod.raw.get("status") or {}).get("nominatedNodeName") or ""
        eligible, why = self.pod_eligible_to_preempt_others(pod, node_to_status.get(nominated_node))
        if not eligible:
            return None, Status.unschedulable(why)
        all_nodes = self.handle.snapshot.list()
        if not all_nodes:
            return None, Status.as_error(RuntimeError("no nodes available"))
        potential = node_to_status.nodes_for_code(all_nodes, Code.UNSCHEDULABLE)
        candidates: list[Candidate] = []
        statuses: dict[str, Status] = {}
        if potential and not self.handle.snapshot.may_hold_pod_below(pod.priority):
            # No node holds a pod of lower priority (a cluster of peers): the dry run would answer
            # "no victims" for every node, one pod at a time.
            statuses = dict.fromkeys((info.name for info in potential), Status.unresolvable(NO_VICTIMS))
        elif potential:
            refused = self.executor.refused()
            candidates, statuses = dry_run(
                self.handle.framework(pod.scheduler_name),
                state,
                pod,
                potential,
                self.handle.pdbs.list(),
                self.rng.randrange(len(potential)),
                num_candidates(
                    len(potential), self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute
                ),
                refused,
            )
            if not candidates and (error := first_error(statuses)) is not None:
                return None, error
            if self.args.victim_removal == EVICT:
                candidates = self._without_pdb_violations(candidates, statuses, refused)
        if not candidates:
            diagnosis = Diagnosis(node_to_status=statuses, absent_status=Status.unresolvable(NOT_HELPFUL))
            # "" clears a nomination the pod may still carry.
            return "", Status.unschedulable(str(FitError(pod, len(all_nodes), diagnosis)))
        best = select_candidate(candidates)
        if best is None:
            return None, Status.unschedulable("no candidate node for preemption")
        self.executor.prepare_async(best, Preemptor.of_pod(pod))
        placement = f"found a potential placement for pod on node {best.node}, preempting {len(best.victims.pods)}"
        return best.node, Status(Code.SUCCESS, (f"{placement} victims",))

    def _without_pdb_violations(
        self, candidates: list[Candidate], statuses: dict[str, Status], refused: set[str]
    ) -> list[Candidate]:
        """evict mode: only candidates whose chosen victims can all be evicted within their budgets."""
        pdbs = self.handle.pdbs.list()
        kept = []
        for candidate in candidates:
            violating, _ = split_by_pdb_violation(candidate.victims.pods, pdbs, refused)
            if violating:
                statuses[candidate.node] = Status.unschedulable(PDB_PROTECTED)
            else:
                kept.append(candidate)
        return kept

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_status: Status) -> tuple[bool, str]:
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominated_node = (pod.raw.get("status") or {}).get("nominatedNodeName") or ""
        if not nominated_node or nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        node_info = self.handle.snapshot.get(nominated_node)
        if node_info is not None:
            for other in node_info.pods.values():
                if other.priority < pod.priority and terminating_by_preemption(other):
                    return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""


def new(args: Mapping[str, Any], handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(parse_args(args), handle)
