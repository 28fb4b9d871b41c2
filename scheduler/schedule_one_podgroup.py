"""The pod-group scheduling cycle (kube-scheduler v1.37.2's schedule_one_podgroup.go, GenericWorkload).

A group popped as one entity is checked (its PodGroup still known; members agree on scheduler
name, priority and preemption policy), then simulated: members in kube's order go through the
ordinary Filter/Score of the pod cycle, each placed member is assumed and reserved so the next
ones see it, and GangScheduling's PlacementFeasible says after each member whether minCount can
still be met. With TopologyAwareWorkloadScheduling the simulation runs once per placement (the
nodes of one topology domain, TopologyPlacementGenerator) and PodGroupPodsCount picks among the
feasible ones. An Unschedulable group then meets PodGroupPostFilter (DefaultPreemption), whose
answer joins the group's reasons. Every simulated assume is reverted (Unreserve, forget,
nomination restored) before anything is submitted.

Submission is all or nothing: on success each placed member takes the pod cycle's own path
(assume, Reserve, Permit, binding cycle) and GangScheduling's Permit lets the members bind once
the quorum is assumed; otherwise every member is reported unschedulable with the group's reason.
The PodGroup gets kube's `PodGroupInitiallyScheduled` condition through the api layer. The
members return to the queue together (`add_attempted_group`).

The cycle is written as steps (generators that yield after each member) so one driver runs it
through (tests, explain, PodGroupPostFilter's what-ifs) and the scheduling loop's driver hands the
event loop back every CYCLE_SLICE seconds: a 1000-member gang over 50 placements takes ~45 s of
CPU, and neither the lease, the probes, the binds of the gang before it nor the watches may wait
that long. Informer events land in the cache between steps, as kube's informers change its cache
while its cycle runs; each member's cycle reads the cache's latest, with the earlier members'
simulated assumes in it (a deleted node drops out of the placement's rows, PlacementNodes). The
post-filter's what-ifs run through without yielding. Writes only through the api client and the
pod cycle's failure handler; never binds itself.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import structlog

from scheduler import metrics
from scheduler.api.client import ApiClient
from scheduler.api.events import WARNING, EventRecorder
from scheduler.cache import Cache, PlacementNodes, Snapshot
from scheduler.features import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupState
from scheduler.framework.runtime import Framework
from scheduler.framework.signing import Signature
from scheduler.framework.types import (
    Code,
    CycleState,
    FitError,
    NodeInfo,
    NoNodesAvailable,
    Placement,
    PlacementProgress,
    ProposedAssignment,
    QueuedPodGroupInfo,
    QueuedPodInfo,
    Status,
)
from scheduler.model.objects import Pod
from scheduler.model.podgroups import (
    POD_GROUP_INITIALLY_SCHEDULED,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    PodGroup,
    set_status_condition,
)
from scheduler.nominator import Nominator
from scheduler.pacing import Pacer
from scheduler.queue import PriorityQueue

log = structlog.get_logger("scheduler")

POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"

# How long a pod-group cycle runs before it lets the event loop run (a lease renewal, a probe, a
# bind's answer wait at most about this long).
CYCLE_SLICE = 0.05

T = TypeVar("T")
# A part of the cycle: yields after each member's simulation, returns its result.
Steps = Generator[None, None, T]


def run_through(steps: Steps[T]) -> T:
    """The steps' result, computed without letting anything else run."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        result: T = done.value
        return result


async def run_cooperatively(steps: Steps[T], slice_seconds: float = CYCLE_SLICE) -> T:
    """The steps' result, the event loop let run whenever `slice_seconds` passed since it last ran.
    Cancelled at a yield, the steps are closed: their `finally` reverts what they assumed."""
    pacer = Pacer(slice_seconds)
    try:
        while True:
            next(steps)
            await pacer.pace()
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        steps.close()


class HostResult(Protocol):
    @property
    def suggested_host(self) -> str: ...


class PodCycle(Protocol):
    """What the group cycle uses of the pod cycle (scheduler.schedule_one.Scheduler)."""

    frameworks: dict[str, Framework]
    queue: PriorityQueue
    cache: Cache
    snapshot: Snapshot
    client: ApiClient
    nominator: Nominator
    recorders: dict[str, EventRecorder]
    placement: PlacementNodes | None
    rng: random.Random

    def schedule_pod(
        self, fw: Framework, state: CycleState, pod: Pod, signature: Signature | None = None
    ) -> HostResult: ...
    def skip_pod_schedule(self, pod: Pod) -> bool: ...
    def observe_attempt(self, fw: Framework, result: str, started: float) -> None: ...
    def prepare_for_binding_cycle(
        self, fw: Framework, state: CycleState, info: QueuedPodInfo, host: str, started: float
    ) -> bool: ...
    def handle_failure(
        self,
        fw: Framework,
        info: QueuedPodInfo,
        status: Status,
        fit_error: FitError | None,
        nominated_node: str | None,
        keep_nomination: bool = False,
    ) -> None: ...
    def spawn(self, coro: Coroutine[Any, Any, None]) -> object: ...


@dataclasses.dataclass(slots=True)
class MemberResult:
    """One member's outcome in the simulation (kube's algorithmResult)."""

    info: QueuedPodInfo
    state: CycleState
    status: Status | None = None
    host: str = ""
    fit_error: FitError | None = None


class GroupUnschedulable(Exception):
    """kube's errPodGroupUnschedulable: a member rejected because its group is."""


def _preemption_policy(pod: Pod) -> str:
    return str(pod.spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)


def validate_pod_group(members: list[QueuedPodInfo], group: PodGroup, state: PodGroupState) -> str | None:
    """kube's validatePodGroup (PodGroupPreemptionPolicy off): one scheduler name, the group's
    priority, one preemption policy, for the queued members and those already scheduled."""
    scheduler_name = members[0].pod.scheduler_name
    policy = ""
    for pod in [m.pod for m in members] + state.scheduled_pods():
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f'got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
        if pod.priority != group.priority:
            return (
                "all pods in a single pod group should have the same priority as the pod group's priority, "
                f"got {pod.priority} and {group.priority}"
            )
        pod_policy = _preemption_policy(pod)
        if not policy:
            policy = pod_policy
        elif pod_policy != policy:
            return (
                f"all pods in a single pod group should have the same preemption policy, got {pod_policy} and {policy}"
            )
    return None


class PodGroupCycle:
    def __init__(self, sched: PodCycle) -> None:
        self.sched = sched
        # run() lets the event loop run once this much of the cycle passed since it last did.
        self.slice_seconds = CYCLE_SLICE

    # ---- the cycle -------------------------------------------------------------------------

    def schedule_one_pod_group(self, group: QueuedPodGroupInfo) -> None:
        """The whole cycle, nothing else running meanwhile."""
        run_through(self._schedule_one_pod_group(group))

    async def run(self, group: QueuedPodGroupInfo) -> None:
        """The whole cycle, the event loop let run every `slice_seconds` (the scheduling loop's way)."""
        await run_cooperatively(self._schedule_one_pod_group(group), self.slice_seconds)

    def _schedule_one_pod_group(self, group: QueuedPodGroupInfo) -> Steps[None]:
        sched = self.sched
        started = time.perf_counter()
        state = sched.cache.pod_groups.get(group.key)
        pod_group = state.group if state is not None else None
        if state is None or not isinstance(pod_group, PodGroup):
            # Popped before the queue saw the PodGroup go: back to the queue, no condition to write.
            missing = LookupError(f'podgroup.scheduling.k8s.io "{group.key.name}" not found')
            self._fail_before_scheduling(group, None, missing, started)
            return
        members = group.members
        fw = sched.frameworks.get(members[0].pod.scheduler_name)
        problem = validate_pod_group(members, pod_group, state)
        if fw is None or problem is not None:
            error = ValueError(problem or f'profile not found for scheduler name "{members[0].pod.scheduler_name}"')
            self._fail_before_scheduling(group, pod_group, error, started)
            return
        kept = []
        for info in members:
            if sched.skip_pod_schedule(info.pod):
                if info.pod.deleting:
                    sched.recorders[fw.profile_name].eventf(
                        info.pod,
                        None,
                        WARNING,
                        "FailedScheduling",
                        "Scheduling",
                        f"skip schedule deleting pod: {info.pod.key}",
                    )
                sched.queue.done(info.pod.uid)
            else:
                kept.append(info)
        if not kept:
            sched.queue.add_attempted_group(group, succeeded=True)
            return
        log.debug("Attempting to schedule pod group", podGroup=str(group.key), members=len(kept))
        results, status, nominations = yield from self._simulate_group(fw, state, kept, started)
        self._submit(fw, group, pod_group, kept, results, status, started, nominations)

    def simulate(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo], started: float | None = None
    ) -> tuple[list[MemberResult], Status | None, Mapping[str, str] | None]:
        """The group's verdict and each member's outcome as the cycle decides them, PodGroupPostFilter
        included (with the members' nominated nodes when the group waits on preemption); nothing
        submitted and every simulated assume reverted (explain runs this dry)."""
        return run_through(self._simulate_group(fw, state, members, started))

    def _simulate_group(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo], started: float | None
    ) -> Steps[tuple[list[MemberResult], Status | None, Mapping[str, str] | None]]:
        results, status = yield from self._simulate_members(fw, state, members)
        if started is not None:
            metrics.podgroup_scheduling_algorithm_duration.observe(time.perf_counter() - started)
        nominations: Mapping[str, str] | None = None
        if status is not None and status.code == Code.UNSCHEDULABLE and fw.pod_group_post_filter_plugins:
            status, nominations = self._post_filter(fw, state, members, status)
        return results, status, nominations

    def _fail_before_scheduling(
        self, group: QueuedPodGroupInfo, pod_group: PodGroup | None, error: Exception, started: float
    ) -> None:
        sched = self.sched
        for info in group.members:
            fw = sched.frameworks.get(info.pod.scheduler_name)
            if fw is None:
                sched.queue.done(info.pod.uid)
                continue
            sched.observe_attempt(fw, "error", started)
            sched.handle_failure(fw, info, Status.as_error(error), None, "")
        if pod_group is not None:
            self._set_condition(pod_group, "False", REASON_SCHEDULER_ERROR, str(error))
        sched.queue.add_attempted_group(group, succeeded=False)

    # ---- the simulation (kube's podGroupSchedulingDefaultAlgorithm) ---------------------------

    def _simulate_members(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo]
    ) -> Steps[tuple[list[MemberResult], Status | None]]:
        if fw.handle.feature_gates.enabled(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING):
            return (yield from self._simulate_placements(fw, state, members))
        return (yield from self._simulate(fw, state, members))

    def _simulate(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo]
    ) -> Steps[tuple[list[MemberResult], Status | None]]:
        """Each member through Filter/Score with the earlier ones assumed; every assume undone after."""
        reverts: list[Callable[[], None]] = []
        results: list[MemberResult] = []
        progress = PlacementProgress(remaining=len(members), scheduled=state.scheduled_pods_count())
        try:
            status = fw.run_placement_feasible(state, progress)
            if status is not None and status.code == Code.ERROR:
                return results, _error(f"failed to evaluate placement feasibility: {status.message}")
            if status is not None and status.code == Code.UNSCHEDULABLE:
                return results, _group_unschedulable(*status.reasons)
            any_scheduled = False
            for info in members:
                result = self._simulate_member(fw, info, reverts)
                results.append(result)
                yield
                placed = result.status is None
                if not placed and result.status is not None and not result.status.is_rejection:
                    status = _error(f"failed to schedule other pod from a pod group: {result.status.message}")
                    break
                progress = PlacementProgress(progress.remaining - 1, progress.scheduled + (1 if placed else 0))
                feasible = fw.run_placement_feasible(state, progress)
                if feasible is not None and feasible.code == Code.ERROR:
                    status = _error(f"failed to evaluate placement feasibility: {feasible.message}")
                    break
                status = feasible
                if status is not None and status.code == Code.UNSCHEDULABLE:
                    break
                any_scheduled = any_scheduled or placed
            if status is not None and status.code == Code.WAIT:
                status = _group_unschedulable(*status.reasons)
            if status is None and not any_scheduled:
                # The framework wants at least one member placed to call the group a success.
                status = _group_unschedulable()
            return results, status
        finally:
            for revert in reversed(reverts):
                revert()

    def _simulate_placements(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo]
    ) -> Steps[tuple[list[MemberResult], Status | None]]:
        """kube's podGroupSchedulingPlacementAlgorithm: the simulation once per generated placement,
        the members seeing only its nodes; the feasible placements scored, the best one kept."""
        sched = self.sched
        sched.cache.update_snapshot(sched.snapshot)
        placements, status = fw.run_placement_generate(state, sched.snapshot.list())
        if status is not None:
            return [], status
        metrics.child(metrics.generated_placements, fw.profile_name).inc(len(placements))
        first: tuple[list[MemberResult], Status | None] | None = None
        feasible: list[tuple[Placement, list[MemberResult]]] = []
        for placement in placements:
            evaluation_started = time.perf_counter()
            sched.placement = PlacementNodes(frozenset(info.name for info in placement.nodes))
            try:
                results, status = yield from self._simulate(fw, state, members)
            finally:
                sched.placement = None
            if status is not None and status.code == Code.ERROR:
                return results, status
            metrics.observe_placement_evaluation(status is None, fw.profile_name, evaluation_started)
            first = first or (results, status)
            if status is None:
                feasible.append((placement, results))
        if not feasible:
            results, first_status = first or ([], None)
            # kube prints the first placement's status as an error: errPodGroupUnschedulable's text
            # when it carries that error, else its message.
            if first_status is not None and isinstance(first_status.error, GroupUnschedulable):
                text = POD_GROUP_UNSCHEDULABLE
            else:
                text = first_status.message if first_status is not None else ""
            return results, _group_unschedulable(
                f"0/{len(placements)} placements are available, first placement status: {text}"
            )
        if len(feasible) == 1:
            return feasible[0][1], None
        candidates = [
            (placement, [(r.info.pod, r.host) for r in results if r.status is None and r.host])
            for placement, results in feasible
        ]
        totals, status = fw.run_placement_score(state, candidates)
        if status is not None:
            return [], status
        best = max(totals)
        ties = [i for i, total in enumerate(totals) if total == best]
        return feasible[ties[sched.rng.randrange(len(ties))] if len(ties) > 1 else ties[0]][1], None

    def _simulate_member(self, fw: Framework, info: QueuedPodInfo, reverts: list[Callable[[], None]]) -> MemberResult:
        sched = self.sched
        pod = info.pod
        state = CycleState()
        state.record_plugin_metrics = metrics.should_record_plugin_metrics()
        result = MemberResult(info, state)
        try:
            host = sched.schedule_pod(fw, state, pod, info.signature).suggested_host
        except FitError as fit_error:
            # No PostFilter for a member: preemption for groups is the group's (PodGroupPostFilter).
            result.status, result.fit_error = Status(Code.UNSCHEDULABLE, (str(fit_error),), fit_error), fit_error
            return result
        except NoNodesAvailable as exc:
            result.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(exc),), exc)
            return result
        except Exception as exc:
            result.status = Status.as_error(exc)
            return result
        assumed = pod.on_node(host)
        try:
            sched.cache.assume_pod(assumed)
        except Exception as exc:
            result.status = Status.as_error(exc)
            return result
        nominated = sched.nominator.nominated_node(pod.uid)
        sched.nominator.delete(pod.uid)

        def revert() -> None:
            fw.run_unreserve(state, assumed, host)
            if sched.cache.is_assumed(pod.uid):
                sched.cache.forget_pod(assumed)
            if nominated:
                sched.nominator.add(pod, nominated)

        reserved = fw.run_reserve(state, assumed, host)
        if reserved is not None:
            revert()
            result.status = reserved
            if reserved.is_rejection:
                result.fit_error = FitError.single_node(pod, host, reserved)
            return result
        reverts.append(revert)
        result.host = host
        return result

    def _post_filter(
        self, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo], status: Status
    ) -> tuple[Status, Mapping[str, str] | None]:
        """kube's PodGroupPostFilter and applyPodGroupPostFilterResult: an error replaces the group's
        status, anything else adds its message to the group's reasons; a success (room is being made)
        also returns the members' nominated nodes: the group then waits on preemption."""
        simulation = _Simulation(self, fw, state, [info for info in members])
        nominations, post = fw.run_pod_group_post_filter(state, [info.pod for info in members], simulation)
        if post is not None and post.code == Code.ERROR:
            return post, None
        waiting = dict(nominations) if post is None or post.code == Code.SUCCESS else None
        if post is None or not post.message:
            return status, waiting
        return Status(status.code, (*status.reasons, post.message), status.error, status.plugin), waiting

    # ---- submission (kube's submitPodGroupAlgorithmResult) ------------------------------------

    def _submit(
        self,
        fw: Framework,
        group: QueuedPodGroupInfo,
        pod_group: PodGroup,
        members: list[QueuedPodInfo],
        results: list[MemberResult],
        status: Status | None,
        started: float,
        nominations: Mapping[str, str] | None = None,
    ) -> None:
        """`nominations` is set when the group waits on preemption: every member goes back to the
        queue with its nominated node (kube's waitingOnPreemption)."""
        sched = self.sched
        # The group's condition goes out before any member's bind: whoever sees the members bound
        # then sees the PodGroup's verdict too (kube patches it while the binding cycles start).
        if status is None:
            self._set_condition(pod_group, "True", REASON_SCHEDULED, "")
        elif status.is_rejection:
            self._set_condition(pod_group, "False", REASON_UNSCHEDULABLE, status.message)
        else:
            self._set_condition(pod_group, "False", REASON_SCHEDULER_ERROR, status.message)
        scheduled = unschedulable = 0
        for i, info in enumerate(members):
            result = results[i] if i < len(results) else MemberResult(info, CycleState(), status)
            if status is not None and status.code == Code.ERROR:
                own = result.status if result.status is not None and result.status.code == Code.ERROR else status
                sched.observe_attempt(fw, "error", started)
                sched.handle_failure(fw, info, own, None, "")
                continue
            if result.status is None and result.host:
                if status is None:
                    if sched.prepare_for_binding_cycle(fw, result.state, info, result.host, started):
                        scheduled += 1
                    else:
                        unschedulable += 1
                    continue
                sched.observe_attempt(fw, "unschedulable", started)
                if nominations is not None:
                    # Back to the queue as unschedulable until the victims are gone, nominated.
                    sched.handle_failure(fw, info, status, None, nominations.get(info.pod.uid), keep_nomination=True)
                else:
                    # Placed in the simulation, but the group is not: the member waits with its group.
                    sched.handle_failure(fw, info, _group_unschedulable(status.message), None, "")
            else:
                own = result.status or status or Status.unschedulable()
                sched.observe_attempt(fw, "unschedulable" if own.is_rejection else "error", started)
                # Unless preemption nominated it, the pod's nomination stays as it is (kube's nil NominatingInfo).
                nominated = nominations.get(info.pod.uid) if nominations is not None else None
                sched.handle_failure(fw, info, own, result.fit_error, nominated, keep_nomination=True)
            unschedulable += 1
        if status is None:
            log.info("Successfully scheduled a pod group", podGroup=str(group.key), scheduledPods=scheduled)
            metrics.observe_pod_group_attempt("scheduled", fw.profile_name, started)
        elif status.is_rejection:
            if nominations is not None:
                log.info("Pod group is waiting for preemption", podGroup=str(group.key), err=status.message)
                metrics.observe_pod_group_attempt("waiting_on_preemption", fw.profile_name, started)
            else:
                log.info("Unable to schedule a pod group", podGroup=str(group.key), err=status.message)
                metrics.observe_pod_group_attempt("unschedulable", fw.profile_name, started)
        else:
            log.error("Error scheduling pod group", podGroup=str(group.key), err=status.message)
            metrics.observe_pod_group_attempt("error", fw.profile_name, started)
        sched.queue.add_attempted_group(group, succeeded=status is None)

    # ---- the PodGroup's condition (kube's updatePodGroupCondition) ----------------------------

    def _set_condition(self, pod_group: PodGroup, status: str, reason: str, message: str) -> None:
        state = self.sched.cache.pod_groups.get(GroupKey(POD_GROUP_API, pod_group.namespace, pod_group.name))
        existing = pod_group.condition(POD_GROUP_INITIALLY_SCHEDULED)
        scheduled = existing is not None and existing.get("status") == "True"
        if status != "True" and (scheduled or (state is not None and state.scheduled_uid == pod_group.uid)):
            return  # a group scheduled once does not regress for members that come later
        if status == "True" and state is not None:
            state.scheduled_uid = pod_group.uid
        condition: Mapping[str, Any] = {
            "type": POD_GROUP_INITIALLY_SCHEDULED,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": pod_group.generation,
        }
        merged, changed = set_status_condition(pod_group.conditions, condition)
        if not changed:
            return
        written = next(c for c in merged if c.get("type") == POD_GROUP_INITIALLY_SCHEDULED)
        self.sched.spawn(self._patch_condition(pod_group, written))

    async def _patch_condition(self, pod_group: PodGroup, condition: Mapping[str, Any]) -> None:
        try:
            await self.sched.client.patch_pod_group_status(
                pod_group.namespace, pod_group.name, pod_group.uid, condition
            )
        except Exception as exc:
            log.error("Failed to update PodGroup status", podGroup=pod_group.key, error=str(exc))
            state = self.sched.cache.pod_groups.get(GroupKey(POD_GROUP_API, pod_group.namespace, pod_group.name))
            if condition.get("status") == "True" and state is not None and state.scheduled_uid == pod_group.uid:
                state.scheduled_uid = ""  # not written: a later failure may be reported, as in kube


class _Simulation:
    """The cycle's view for PodGroupPostFilter's what-ifs (kube's PodGroupSchedulingFunc and mutable
    snapshot): the cache the cycle assumes into, run through without yielding (hidden victims and
    simulated assumes are never seen by anything else)."""

    def __init__(self, cycle: PodGroupCycle, fw: Framework, state: PodGroupState, members: list[QueuedPodInfo]):
        self.cycle = cycle
        self.fw = fw
        self.state = state
        self.members = members
        # (member uid, node) -> (the member, its copy placed there): reprieves assume the same
        # members on the same nodes again and again.
        self._placed: dict[tuple[str, str], tuple[Pod, Pod]] = {}

    def schedule(self) -> tuple[list[ProposedAssignment], Status | None]:
        results, status = run_through(self.cycle._simulate_members(self.fw, self.state, self.members))
        placed = [ProposedAssignment(r.info.pod, r.host, r.state) for r in results if r.status is None and r.host]
        return placed, status

    def remove_pod(self, pod: Pod) -> None:
        self.cycle.sched.cache.hide_pod(pod.uid)

    def add_pod(self, pod: Pod) -> None:
        self.cycle.sched.cache.unhide_pod(pod.uid)

    def node_info(self, node_name: str) -> NodeInfo | None:
        sched = self.cycle.sched
        sched.cache.update_snapshot(sched.snapshot)
        return sched.snapshot.get(node_name)

    def fits(self, assignment: ProposedAssignment) -> Status | None:
        node_info = self.node_info(assignment.node_name)
        if node_info is None or node_info.node is None:
            return Status.unresolvable(f'node "{assignment.node_name}" not found')
        return self.fw.run_filter_with_nominated(assignment.state, assignment.pod, node_info)

    def assume(self, assignment: ProposedAssignment) -> Callable[[], None]:
        sched = self.cycle.sched
        pod, host, state = assignment.pod, assignment.node_name, assignment.state
        found = self._placed.get((pod.uid, host))
        if found is not None and found[0] is pod:
            assumed = found[1]
        else:
            assumed = pod.on_node(host)
            self._placed[(pod.uid, host)] = (pod, assumed)
        sched.cache.assume_pod(assumed)
        nominated = sched.nominator.nominated_node(pod.uid)
        sched.nominator.delete(pod.uid)
        self.fw.run_reserve(state, assumed, host)

        def revert() -> None:
            self.fw.run_unreserve(state, assumed, host)
            if sched.cache.is_assumed(pod.uid):
                sched.cache.forget_pod(assumed)
            if nominated:
                sched.nominator.add(pod, nominated)

        return revert

    def pre_filter_add_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        node_info = self.node_info(pod.node_name)
        if node_info is None:
            return None
        return self.fw.run_pre_filter_add_pod(assignment.state, assignment.pod, pod, node_info)

    def pre_filter_remove_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        node_info = self.node_info(pod.node_name)
        if node_info is None:
            return None
        return self.fw.run_pre_filter_remove_pod(assignment.state, assignment.pod, pod, node_info)

    def extends_pre_filter(self, assignment: ProposedAssignment) -> bool:
        return self.fw.has_pre_filter_extensions(assignment.state)

    def node_local(self, placed: Sequence[ProposedAssignment]) -> bool:
        nominator = self.cycle.sched.nominator
        for assignment in placed:
            # `assume` takes the member's nomination off the node it names: members there are
            # filtered with it before the member is assumed and without it after.
            if nominator.nominated_node(assignment.pod.uid) not in ("", assignment.node_name):
                return False
            if not self.fw.node_local(assignment.state):
                return False
        return True


def _group_unschedulable(*reasons: str) -> Status:
    """kube's NewStatus(Unschedulable, reasons...).WithError(errPodGroupUnschedulable): the error's
    text leads the message (kube's Status.Reasons puts it first)."""
    return Status(Code.UNSCHEDULABLE, (POD_GROUP_UNSCHEDULABLE, *reasons), GroupUnschedulable(POD_GROUP_UNSCHEDULABLE))


def _error(message: str) -> Status:
    return Status.as_error(RuntimeError(message))
