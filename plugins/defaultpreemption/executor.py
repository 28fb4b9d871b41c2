"""Acting on the chosen candidate, off the scheduling loop (1.37's asynchronous preemption).

For one preemptor at a time per task: clear the nominations of lower-priority pods nominated to
the node, then remove every victim that is not already terminating, in the way `victimRemoval`
says. While a preemptor's task runs, PreEnqueue keeps it out of activeQ; it is activated once
the informers have seen its removed-outright victims go, at once otherwise (victims taking their
grace period, an error, a victim rejected at Permit). Writes only through the ApiClient; never
touches the snapshot or the queue except through the handle.

Evictions a PodDisruptionBudget refuses are retried until one budget per preemption,
`evictionTimeoutSeconds`, is spent — never sleeping past it, whatever Retry-After asks — and
only in this task, so the scheduling loop and other pods' binds never wait for them. Each
blocked victim is logged and reported to the preemptor once, and every eviction's outcome is
counted in scheduler_preemption_evictions_total.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from plugins.defaultpreemption.candidates import Candidate
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.framework.interface import Handle
from scheduler.model.objects import Pod
from scheduler.model.podgroups import PodGroup

log = structlog.get_logger("preemption")

EVICT = "evict"
EVICT_THEN_DELETE = "evict-then-delete"
DELETE = "delete"
VICTIM_REMOVAL_MODES = (EVICT, EVICT_THEN_DELETE, DELETE)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# How long a victim whose eviction was refused (429) counts as PDB-protected whatever the
# informer says: the eviction API asks clients to come back after 10 s at most.
REFUSAL_MEMORY_SECONDS = 10.0
# How long refused evictions are retried before evict-then-delete deletes (evict gives up).
# kube-scheduler deletes at once, and a victim's graceful termination (30 s by default) follows
# either way; 5 s gives a budget that is briefly at zero (a replacement pod turning Ready, the
# disruption controller catching up) a few retries, at a small cost to the preemptor.
DEFAULT_EVICTION_TIMEOUT_SECONDS = 5
# Beyond this the preemptor waits longer than kube's own flush of unschedulable pods (5 min);
# more likely milliseconds were meant.
MAX_EVICTION_TIMEOUT_SECONDS = 300
# The pause between attempts when the refusal names no Retry-After (the budget's status says no
# disruption is allowed now); each attempt is one cheap POST.
EVICTION_RETRY_SECONDS = 1.0
# After victims were removed outright, how long their preemptor waits for the informers to see
# them go before it is activated anyway, and how often it looks (a deletion is acted on at most
# one look late).
VICTIM_WAIT_SECONDS = 10.0
VICTIM_POLL_FIRST_SECONDS = 0.005
VICTIM_POLL_MAX_SECONDS = 0.02
# Event on the preemptor when a victim's eviction is refused by a PodDisruptionBudget.
EVICTION_BLOCKED = "EvictionBlocked"
# scheduler_preemption_evictions_total{result}
EVICTED = "evicted"
BLOCKED_BY_PDB = "blocked_by_pdb"
DELETED_AFTER_BUDGET = "deleted_after_budget"
EVICTION_ERROR = "error"
# The apiserver's DisruptionBudget causes all start "The disruption budget <name> ...".
_PDB_NAME = re.compile(r"disruption budget (\S+)")


# kube's EntityKeyType, as the preemptor label of the preemption metrics and in messages.
POD = "pod"
POD_GROUP = "podgroup"


@dataclass(frozen=True, slots=True)
class Preemptor:
    """Who makes room (kube's ExecutorPreemptor): a pod, or a PodGroup for its queued members."""

    uid: str
    key: str
    kind: str
    scheduler_name: str
    priority: int
    obj: Pod | PodGroup
    # The pods activated once the preemption ends.
    members: tuple[str, ...]

    @classmethod
    def of_pod(cls, pod: Pod) -> Preemptor:
        return cls(pod.uid, pod.key, POD, pod.scheduler_name, pod.priority, pod, (pod.uid,))

    @classmethod
    def of_pod_group(cls, group: PodGroup, members: list[Pod]) -> Preemptor:
        scheduler_name = members[0].scheduler_name if members else ""
        uids = tuple(p.uid for p in members)
        return cls(group.uid, group.key, POD_GROUP, scheduler_name, group.priority, group, uids)


class EvictionRefused(Exception):
    """A PodDisruptionBudget still refused the eviction when the eviction budget ran out."""


def terminating_by_preemption(pod: Pod) -> bool:
    """Deleting, with DisruptionTarget=True for reason PreemptionByScheduler (upstream's rule)."""
    if not pod.deleting:
        return False
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return bool(condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False


def removed_outright(pod: Pod) -> bool:
    """Whether an eviction or deletion removes the pod outright: no grace period and no finalizer
    to wait for. Nothing is then left to mark as preempted (a DisruptionTarget patch could only
    answer 404), and the pod's deletion event follows at once."""
    return pod.spec.get("terminationGracePeriodSeconds") == 0 and not (pod.raw.get("metadata") or {}).get("finalizers")


def blocking_pdb(namespace: str, cause: str) -> str:
    """`namespace/name` of the PDB a DisruptionBudget cause names (a PDB covers pods of its own
    namespace); the whole cause if it names none."""
    found = _PDB_NAME.search(cause)
    return f"{namespace}/{found.group(1).rstrip('.')}" if found else cause


class Executor:
    def __init__(
        self,
        handle: Handle,
        plugin_name: str,
        victim_removal: str,
        eviction_timeout: float = DEFAULT_EVICTION_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.handle = handle
        self.plugin_name = plugin_name
        self.victim_removal = victim_removal
        self.eviction_timeout = eviction_timeout
        self.clock = clock
        self.sleep = sleep
        self.preempting: set[str] = set()
        self._refused: dict[str, float] = {}

    def is_running(self, uid: str) -> bool:
        return uid in self.preempting

    def refused(self) -> set[str]:
        """Victims whose eviction was refused lately (kept REFUSAL_MEMORY_SECONDS)."""
        now = self.clock()
        for uid in [u for u, until in self._refused.items() if until <= now]:
            del self._refused[uid]
        return set(self._refused)

    def prepare_async(self, candidate: Candidate, preemptor: Preemptor) -> None:
        """Start the API calls for this candidate in the background."""
        _observe_victims(candidate, preemptor)
        victims = [v for v in candidate.victims.pods if not v.deleting]
        if not victims:
            return
        self.preempting.add(preemptor.uid)
        self.handle.spawn(self._run(candidate, preemptor, victims))

    async def _run(self, candidate: Candidate, preemptor: Preemptor, victims: list[Pod]) -> None:
        started = time.perf_counter()
        deadline = self.clock() + self.eviction_timeout
        result = "success"
        in_memory = False
        try:
            lower = [p for p in self.handle.nominator.pods_for_node(candidate.node) if p.priority < preemptor.priority]
            for outcome in await asyncio.gather(*(self._clear_nomination(p) for p in lower), return_exceptions=True):
                if isinstance(outcome, BaseException):
                    log.warning("clearing a lower-priority nomination failed", node=candidate.node, error=str(outcome))
                    result = "error"
            outcomes = await asyncio.gather(
                *(self._preempt(candidate, preemptor, v, deadline) for v in victims), return_exceptions=True
            )
            for victim, victim_outcome in zip(victims, outcomes, strict=True):
                if victim_outcome is True:  # rejected at Permit, in memory
                    in_memory = True
                if isinstance(victim_outcome, BaseException):
                    result = "error"
                    log.warning(
                        "preempting a victim failed",
                        preemptor=preemptor.key,
                        victim=victim.key,
                        node=candidate.node,
                        victim_removal=self.victim_removal,
                        error=str(victim_outcome),
                    )
        finally:
            self.preempting.discard(preemptor.uid)
            elapsed = time.perf_counter() - started
            metrics.preemption_goroutines_duration.labels(result).observe(elapsed)
            metrics.preemption_goroutines_execution.labels(result).inc()
            log.info(
                "preemption finished",
                preemptor=preemptor.key,
                node=candidate.node,
                victims=len(victims),
                result=result,
            )
            going = [v for v in victims if removed_outright(v)]
            if result != "success" or in_memory or self._victims_gone(going):
                # Nothing to wait for: an error left victims in place, a victim waiting at Permit
                # was rejected in memory, the informers saw every victim go already, or the
                # victims take their grace period (their deletions move the preemptor later).
                self.handle.activate(list(preemptor.members))
            else:
                self.handle.spawn(self._activate_once_gone(preemptor, going))

    def _victims_gone(self, victims: list[Pod]) -> bool:
        return not any(self.handle.pod_exists(v) for v in victims)

    async def _activate_once_gone(self, preemptor: Preemptor, victims: list[Pod]) -> None:
        """Activate the preemptor once the informers have seen its removed-outright victims go
        (kube waits for their deletions too), so it is not tried against a cache that still holds
        them and rejected again; past VICTIM_WAIT_SECONDS (a watch that lags) it is activated anyway."""
        deadline = self.clock() + VICTIM_WAIT_SECONDS
        pause = VICTIM_POLL_FIRST_SECONDS
        try:
            while not self._victims_gone(victims) and self.clock() < deadline:
                await self.sleep(pause)
                pause = min(pause * 2, VICTIM_POLL_MAX_SECONDS)
        finally:
            self.handle.activate(list(preemptor.members))

    async def _clear_nomination(self, pod: Pod) -> None:
        try:
            await self.handle.client.patch_pod_status(pod, None, "")
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _preempt(self, candidate: Candidate, preemptor: Preemptor, victim: Pod, deadline: float) -> bool:
        """Remove one victim; True when it was a pod waiting at Permit, rejected in memory (no
        deletion follows)."""
        message = f"Preempted by {preemptor.kind} {preemptor.uid} on node {candidate.node}"
        in_memory = self.handle.reject_waiting_pod(victim.uid, self.plugin_name, "preempted")
        if in_memory:
            message += " (in kube-scheduler memory)."
        elif self.victim_removal == DELETE:
            if not await self._delete(victim, preemptor):
                return False
        elif not await self._evict(candidate, victim, preemptor, deadline):
            return False
        self.handle.event_recorder(preemptor.scheduler_name).eventf(
            victim, preemptor.obj, "Normal", "Preempted", "Preempting", message
        )
        return in_memory

    async def _delete(self, victim: Pod, preemptor: Preemptor) -> bool:
        """Upstream's way: DisruptionTarget first, then delete. False when the victim is gone."""
        client = self.handle.client
        try:
            await client.patch_pod_status(victim, _disruption_target(preemptor), None)
            await client.delete_pod(victim)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    async def _evict(self, candidate: Candidate, victim: Pod, preemptor: Preemptor, deadline: float) -> bool:
        """Through the Eviction subresource, so PodDisruptionBudgets hold. False when gone.

        Refused evictions are retried until `deadline`. In evict-then-delete mode a victim still
        refused then is deleted after all if the dry run already counted it as a violation:
        kube-scheduler would have deleted it knowing that. Otherwise EvictionRefused.
        """
        try:
            refusal = await self._evict_until(candidate, victim, preemptor, deadline)
        except ApiError as exc:
            if exc.not_found:
                return False
            metrics.preemption_evictions.labels(EVICTION_ERROR).inc()
            raise
        if refusal is None:
            metrics.preemption_evictions.labels(EVICTED).inc()
            if removed_outright(victim):
                return True
            try:
                # The eviction wrote DisruptionTarget with its own reason; say it was preemption.
                await self.handle.client.patch_pod_status(victim, _disruption_target(preemptor), None)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning("marking an evicted victim failed", victim=victim.key, error=str(exc))
            return True
        if self.victim_removal == EVICT_THEN_DELETE and victim.uid in candidate.victims.violating:
            log.warning(
                "eviction budget spent; deleting the victim",
                preemptor=preemptor.key,
                victim=victim.key,
                pdb=blocking_pdb(victim.namespace, refusal),
                eviction_timeout_seconds=self.eviction_timeout,
            )
            try:
                deleted = await self._delete(victim, preemptor)
            except ApiError:
                metrics.preemption_evictions.labels(EVICTION_ERROR).inc()
                raise
            if deleted:
                metrics.preemption_evictions.labels(DELETED_AFTER_BUDGET).inc()
            return deleted
        metrics.preemption_evictions.labels(BLOCKED_BY_PDB).inc()
        self._refused[victim.uid] = self.clock() + REFUSAL_MEMORY_SECONDS
        raise EvictionRefused(f"eviction of {victim.key} refused: {refusal}")

    async def _evict_until(
        self, candidate: Candidate, victim: Pod, preemptor: Preemptor, deadline: float
    ) -> str | None:
        """Evict, retrying refusals until `deadline`: None once evicted, else the last PDB refusal.

        A refusal's Retry-After is honoured only as far as the deadline; a wait the server asks for
        without a PDB behind it (overload) is retried the same way, and raised if it outlasts it.
        """
        reported = False
        while True:
            try:
                await self.handle.client.evict_pod(victim)
                return None
            except ApiError as exc:
                cause = exc.disruption_budget
                if cause is None and exc.retry_after is None:
                    raise
                if cause is not None and not reported:
                    reported = True
                    self._report_blocked(candidate, victim, preemptor, cause)
                left = deadline - self.clock()
                if left <= 0:
                    if cause is None:
                        raise
                    return cause
                pause = exc.retry_after if exc.retry_after else EVICTION_RETRY_SECONDS
                await self.sleep(min(pause, left))

    def _report_blocked(self, candidate: Candidate, victim: Pod, preemptor: Preemptor, cause: str) -> None:
        """Once per victim and preemption: a log line and an event on the preemptor naming the PDB."""
        pdb = blocking_pdb(victim.namespace, cause)
        deletes = self.victim_removal == EVICT_THEN_DELETE and victim.uid in candidate.victims.violating
        then = "deleting it" if deletes else f"giving up on node {candidate.node}"
        log.warning(
            "eviction of a preemption victim blocked by a PodDisruptionBudget",
            preemptor=preemptor.key,
            victim=victim.key,
            pdb=pdb,
            node=candidate.node,
            cause=cause,
            eviction_timeout_seconds=self.eviction_timeout,
            then=then,
        )
        note = (
            f"Eviction of victim {victim.key} blocked by PodDisruptionBudget {pdb}: {cause.rstrip('.')}; "
            f"retrying for up to {self.eviction_timeout:g}s (evictionTimeoutSeconds), then {then}"
        )
        self.handle.event_recorder(preemptor.scheduler_name).eventf(
            preemptor.obj, victim, "Warning", EVICTION_BLOCKED, "Preempting", note
        )


def _observe_victims(candidate: Candidate, preemptor: Preemptor) -> None:
    """kube's observeVictims: victims per preemption (pods and groups apart), group disruptions and
    PDB violations by preemptor kind."""
    victims = len(candidate.victims.pods)
    if preemptor.kind == POD_GROUP:
        metrics.workload_preemption_victims.observe(victims)
    else:
        metrics.preemption_victims.observe(victims)
    if candidate.num_pod_group_disruptions > 0:
        metrics.preemption_workload_disruptions.labels(preemptor.kind).observe(candidate.num_pod_group_disruptions)
    if candidate.victims.num_pdb_violations > 0:
        metrics.preemption_pdb_violations.labels(preemptor.kind).inc(candidate.victims.num_pdb_violations)


def _disruption_target(preemptor: Preemptor) -> dict[str, Any]:
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority {preemptor.kind}",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
