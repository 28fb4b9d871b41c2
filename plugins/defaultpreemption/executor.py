"""Acting on the chosen candidate, off the scheduling loop (1.37's asynchronous preemption).

For one preemptor at a time per task: clear the nominations of lower-priority pods nominated to
the node, then remove every victim that is not already terminating, in the way `victimRemoval`
says. While a preemptor's task runs, PreEnqueue keeps it out of activeQ; when the task ends it
is activated again. Writes only through the ApiClient; never touches the snapshot or the queue
except through the handle.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import structlog

from plugins.defaultpreemption.candidates import Candidate
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.framework.interface import Handle
from scheduler.model.objects import Pod

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


class EvictionRefused(Exception):
    """The apiserver refused an eviction (429): a PodDisruptionBudget does not allow it now."""


def terminating_by_preemption(pod: Pod) -> bool:
    """Deleting, with DisruptionTarget=True for reason PreemptionByScheduler (upstream's rule)."""
    if not pod.deleting:
        return False
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return bool(condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False


class Executor:
    def __init__(self, handle: Handle, plugin_name: str, victim_removal: str) -> None:
        self.handle = handle
        self.plugin_name = plugin_name
        self.victim_removal = victim_removal
        self.preempting: set[str] = set()
        self._refused: dict[str, float] = {}

    def is_running(self, uid: str) -> bool:
        return uid in self.preempting

    def refused(self) -> set[str]:
        """Victims whose eviction was refused lately (kept REFUSAL_MEMORY_SECONDS)."""
        now = time.monotonic()
        for uid in [u for u, until in self._refused.items() if until <= now]:
            del self._refused[uid]
        return set(self._refused)

    def prepare_async(self, candidate: Candidate, preemptor: Pod) -> None:
        """Start the API calls for this candidate in the background."""
        metrics.preemption_victims.observe(len(candidate.victims.pods))
        victims = [v for v in candidate.victims.pods if not v.deleting]
        if not victims:
            return
        self.preempting.add(preemptor.uid)
        self.handle.spawn(self._run(candidate, preemptor, victims))

    async def _run(self, candidate: Candidate, preemptor: Pod, victims: list[Pod]) -> None:
        started = time.perf_counter()
        result = "success"
        try:
            lower = [p for p in self.handle.nominator.pods_for_node(candidate.node) if p.priority < preemptor.priority]
            for outcome in await asyncio.gather(*(self._clear_nomination(p) for p in lower), return_exceptions=True):
                if isinstance(outcome, BaseException):
                    log.warning("clearing a lower-priority nomination failed", node=candidate.node, error=str(outcome))
                    result = "error"
            outcomes = await asyncio.gather(
                *(self._preempt(candidate, preemptor, v) for v in victims), return_exceptions=True
            )
            for victim, outcome in zip(victims, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    result = "error"
                    log.warning(
                        "preempting a victim failed",
                        preemptor=preemptor.key,
                        victim=victim.key,
                        node=candidate.node,
                        victim_removal=self.victim_removal,
                        error=str(outcome),
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
            # Victims' deletions may have arrived while PreEnqueue still held the preemptor back.
            self.handle.activate([preemptor.uid])

    async def _clear_nomination(self, pod: Pod) -> None:
        try:
            await self.handle.client.patch_pod_status(pod, None, "")
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _preempt(self, candidate: Candidate, preemptor: Pod, victim: Pod) -> None:
        message = f"Preempted by pod {preemptor.uid} on node {candidate.node}"
        if self.handle.reject_waiting_pod(victim.uid, self.plugin_name, "preempted"):
            message += " (in kube-scheduler memory)."
        elif self.victim_removal == DELETE:
            if not await self._delete(victim, preemptor):
                return
        elif not await self._evict(candidate, victim, preemptor):
            return
        self.handle.event_recorder(preemptor.scheduler_name).eventf(
            victim, preemptor, "Normal", "Preempted", "Preempting", message
        )

    async def _delete(self, victim: Pod, preemptor: Pod) -> bool:
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

    async def _evict(self, candidate: Candidate, victim: Pod, preemptor: Pod) -> bool:
        """Through the Eviction subresource, so PodDisruptionBudgets hold. False when gone.

        In evict-then-delete mode a refused victim is deleted after all if the dry run already
        counted it as a violation: kube-scheduler would have deleted it knowing that.
        """
        client = self.handle.client
        try:
            await client.evict_pod(victim)
        except ApiError as exc:
            if exc.not_found:
                return False
            if not exc.too_many_requests:
                raise
            if self.victim_removal == EVICT_THEN_DELETE and victim.uid in candidate.victims.violating:
                return await self._delete(victim, preemptor)
            self._refused[victim.uid] = time.monotonic() + REFUSAL_MEMORY_SECONDS
            raise EvictionRefused(f"eviction of {victim.key} refused: {exc.message}") from exc
        try:
            # The eviction wrote DisruptionTarget with its own reason; say it was preemption.
            await client.patch_pod_status(victim, _disruption_target(preemptor), None)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("marking an evicted victim failed", victim=victim.key, error=str(exc))
        return True


def _disruption_target(preemptor: Pod) -> dict[str, Any]:
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
