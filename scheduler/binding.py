"""The binding cycle: WaitOnPermit → PreBind → Bind → PostBind, as an asyncio task per pod.

Every failure path up to the Bind undoes the scheduling cycle: Unreserve (reverse order), forget
the assumed pod, wake pods that the freed room may help, and requeue through the failure handler.
Once the apiserver accepted the Binding nothing undoes it: PostBind and the Scheduled event run
outside the undo path and cannot fail it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog

from scheduler import metrics
from scheduler.api.events import NORMAL
from scheduler.framework.events import ASSIGNED_POD_DELETE
from scheduler.framework.runtime import Framework
from scheduler.framework.types import CycleState, FitError, QueuedPodInfo, Status
from scheduler.model.objects import Pod

if TYPE_CHECKING:
    from scheduler.schedule_one import Scheduler

log = structlog.get_logger("scheduler")


async def binding_cycle(
    sched: Scheduler,
    fw: Framework,
    state: CycleState,
    info: QueuedPodInfo,
    assumed: Pod,
    host: str,
    started: float,
) -> None:
    metrics.child(metrics.goroutines, metrics.BINDING).inc()
    try:
        if not await _bind(sched, fw, state, info, assumed, host, started):
            return
        # The apiserver accepted the Binding: final. Nothing below can undo it (as upstream, PostBind
        # has no failure path and the Scheduled event is fire-and-forget).
        sched.cache.finish_binding(assumed)
        metrics.child(metrics.schedule_attempts, "scheduled", fw.profile_name).inc()
        metrics.child(metrics.scheduling_attempt_duration, "scheduled", fw.profile_name).observe(
            time.perf_counter() - started
        )
        metrics.pod_scheduling_attempts.observe(info.attempts)
        if info.was_flushed_from_unschedulable:
            metrics.pod_scheduled_after_flush.inc()
        if info.initial_attempt_timestamp is not None:
            metrics.child(
                metrics.pod_scheduling_sli_duration, "15+" if info.attempts >= 15 else str(info.attempts)
            ).observe(time.monotonic() - info.initial_attempt_timestamp)
        try:
            fw.run_post_bind(state, assumed, host)
        except Exception as exc:
            log.error("PostBind plugin failed", pod=assumed.key, node=host, error=str(exc))
        log.debug("bound", pod=assumed.key, node=host)
        sched.recorders[fw.profile_name].eventf(
            assumed, None, NORMAL, "Scheduled", "Binding", f"Successfully assigned {assumed.key} to {host}"
        )
    finally:
        metrics.child(metrics.goroutines, metrics.BINDING).dec()
        sched.queue.done(assumed.uid)


async def _bind(
    sched: Scheduler,
    fw: Framework,
    state: CycleState,
    info: QueuedPodInfo,
    assumed: Pod,
    host: str,
    started: float,
) -> bool:
    """WaitOnPermit → PreBind → Bind; True once the apiserver accepted the Binding, else undone."""
    try:
        # A failure report of an earlier cycle must not land after this bind.
        await sched.settle_status_report(assumed.uid)
        status = await fw.wait_on_permit(assumed)
        point = "WaitOnPermit"
        if status is None:
            point = "PreBind"
            status = await fw.run_pre_bind(state, assumed, host)
        if status is None and not sched.may_write():
            _abandon(sched, fw, state, assumed, host)
            return False
        if status is None:
            point = "Bind"
            status = await fw.run_bind(state, assumed, host)
    except Exception as exc:  # the task must never die silently
        log.error("binding cycle crashed", pod=assumed.key, node=host, error=str(exc), exc_info=True)
        if sched.cache.is_assumed(assumed.uid):
            _undo(sched, fw, state, info, assumed, host, Status.as_error(exc))
        return False
    if status is None:
        return True
    metrics.child(metrics.binding_cycle_failures, point).inc()
    _undo(sched, fw, state, info, assumed, host, status, waiting_rejected=point == "WaitOnPermit")
    result = "unschedulable" if status.is_rejection else "error"
    metrics.child(metrics.schedule_attempts, result, fw.profile_name).inc()
    metrics.child(metrics.scheduling_attempt_duration, result, fw.profile_name).observe(time.perf_counter() - started)
    return False


def _abandon(sched: Scheduler, fw: Framework, state: CycleState, assumed: Pod, host: str) -> None:
    """A deposed leader drops the pod without a write: no Bind, no requeue, no failure report."""
    fw.run_unreserve(state, assumed, host)
    if sched.cache.is_assumed(assumed.uid):
        sched.cache.forget_pod(assumed)
    log.info("not binding: no longer the leader", pod=assumed.key, node=host)


def _undo(
    sched: Scheduler,
    fw: Framework,
    state: CycleState,
    info: QueuedPodInfo,
    assumed: Pod,
    host: str,
    status: Status,
    waiting_rejected: bool = False,
) -> None:
    fw.run_unreserve(state, assumed, host)
    if not sched.cache.is_assumed(assumed.uid):
        # The informer saw the pod bound (by someone else, or our Bind landed despite the error):
        # the cache holds the real pod; nothing to forget, requeue or report.
        log.info("binding failed; pod is bound meanwhile", pod=assumed.key, node=host, error=status.message)
        return
    sched.cache.forget_pod(assumed)
    log.info("binding failed", pod=assumed.key, node=host, error=status.message, code=status.code.name)
    # Only a rejection at WaitOnPermit is a FitError (kube: Permit is the last point that may call a pod
    # unschedulable); a rejecting PreBind/Bind status is reported as it is, with no rejecting plugin.
    fit_error = FitError.single_node(assumed, host, status) if waiting_rejected and status.is_rejection else None
    if not status.is_rejection:
        sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, assumed, None)
        sched.handle_failure(fw, info, status, fit_error, None)
        return
    # As kube: the freed room wakes others only after the rejected pod is back in the queue, so the
    # event is not replayed against the pod itself (it would skip the unschedulable pool).
    sched.handle_failure(fw, info, status, fit_error, None)
    sched.queue.move_all_to_active_or_backoff(
        ASSIGNED_POD_DELETE, assumed, None, pre_check=lambda pod: pod.uid != assumed.uid
    )
