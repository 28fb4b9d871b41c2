"""schedule_one: the pod's two cycles, as kube-scheduler's schedule_one.go runs them.

Scheduling cycle: pop → snapshot → PreFilter → Filter (adaptive node count, round-robin start,
nominated pods) → PostFilter on failure → PreScore/Score/NormalizeScore/weights → select_host →
assume → Reserve → Permit. Binding cycle (a task per pod): WaitOnPermit → PreBind → Bind →
PostBind. Failure handling for both: Unreserve, forget, requeue, and the failure report handed to
the status dispatcher (scheduler/api/dispatcher.py), which a bind settles first.

Reads the cluster only through the cache, its snapshot and the informer's pending pods; writes only
through the framework's Bind/PreBind plugins, the dispatcher and the event recorders. Must never let
a refused or slow Event hold back a condition or a bind, nor undo a Binding the apiserver accepted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import structlog

from scheduler import metrics
from scheduler.api.client import ApiClient
from scheduler.api.dispatcher import StatusDispatcher
from scheduler.api.events import NORMAL, WARNING, EventBroadcaster, EventRecorder
from scheduler.cache import Cache, PlacementNodes, Snapshot
from scheduler.framework.batch import OpportunisticBatch, SortedScoredNodes
from scheduler.framework.events import ASSIGNED_POD_DELETE
from scheduler.framework.runtime import Framework, Wiring
from scheduler.framework.signing import Signature
from scheduler.framework.table import IntArray
from scheduler.framework.types import (
    Code,
    CycleState,
    Diagnosis,
    FitError,
    NodeInfo,
    NoNodesAvailable,
    PluginError,
    QueuedPodInfo,
    Status,
    plugin_list,
)
from scheduler.model.objects import Pod
from scheduler.nominator import Nominator
from scheduler.queue import PriorityQueue
from scheduler.schedule_one_podgroup import PodGroupCycle

log = structlog.get_logger("scheduler")
T = TypeVar("T")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0

# Pods whose last scheduling error was logged (uid -> message); forgotten wholesale past this size.
_MAX_REMEMBERED_ERRORS = 10_000


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before scoring (kube-scheduler's adaptive rule)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE
    if pct >= 100:
        return num_all_nodes
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


def select_best(totals: IntArray, rng: random.Random) -> int:
    """Index of the highest total; ties broken uniformly at random (as select_host does)."""
    best = totals.max()
    ties = np.flatnonzero(totals == best)
    return int(ties[rng.randrange(len(ties))]) if len(ties) > 1 else int(ties[0])


@dataclasses.dataclass(slots=True)
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int


def _always() -> bool:
    return True


@dataclasses.dataclass(slots=True)
class _Placement:
    """One pod on its way from the scheduling cycle through the binding cycle."""

    fw: Framework
    state: CycleState
    info: QueuedPodInfo
    assumed: Pod
    host: str
    started: float


class Scheduler:
    """The scheduling loop over one shared queue and cache, with a framework per profile."""

    def __init__(
        self,
        frameworks: Mapping[str, Framework],
        queue: PriorityQueue,
        cache: Cache,
        client: ApiClient,
        nominator: Nominator | None = None,
        rng: random.Random | None = None,
        max_concurrent_writes: int = 64,
        event_broadcaster: EventBroadcaster | None = None,
    ) -> None:
        self.frameworks = dict(frameworks)
        self.queue = queue
        self.cache = cache
        self.client = client
        self.nominator = nominator or Nominator()
        self.snapshot = Snapshot()
        self.rng = rng or random.Random()
        self.next_start_node_index = 0
        self._feasible_rows: tuple[list[NodeInfo], IntArray] | None = None
        # The nodes of the placement a pod-group cycle is trying (TopologyAwareWorkloadScheduling):
        # Filter and the "0/N nodes" count see only these, as kube's snapshot.AssumePlacement.
        self.placement: PlacementNodes | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # Latest informer view of unscheduled pods we own, to tell whether a failed pod still exists.
        self.pending_pods: dict[str, Pod] = {}
        # False once this process may no longer write (a deposed leader): binding cycles stop before Bind.
        self.may_write: Callable[[], bool] = _always
        self._logged_errors: dict[str, str] = {}
        self.event_broadcaster = event_broadcaster or EventBroadcaster(client)
        # One recorder per profile, reporting as the profile's scheduler name (as kube-scheduler).
        self.recorders: dict[str, EventRecorder] = {
            name: self.event_broadcaster.new_recorder(name) for name in self.frameworks
        }
        wiring = Wiring(self.snapshot, self.queue.activate, self.spawn, self.pod_exists, self.nominator, self.recorders)
        for fw in self.frameworks.values():
            fw.handle.wire(wiring)
        self.status_writes = StatusDispatcher(
            client, self.pending_pods, self.recorders, self.spawn, max_in_flight=max_concurrent_writes
        )
        self.pod_group_cycle = PodGroupCycle(self)

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            info = await self.queue.pop()
            if info is None:
                return
            group = self.queue.take_group(info)
            if group is not None:
                # A big group's cycle is long: it lets the event loop run every CYCLE_SLICE.
                await self.pod_group_cycle.run(group)
            else:
                self.schedule_one(info)
            # Let informer events and binding tasks run between cycles.
            await asyncio.sleep(0)

    def schedule_entity(self, info: QueuedPodInfo) -> None:
        """kube's ScheduleOne, nothing else running meanwhile: a popped pod-group member brings its
        group to the pod-group cycle."""
        group = self.queue.take_group(info)
        if group is not None:
            self.pod_group_cycle.schedule_one_pod_group(group)
        else:
            self.schedule_one(info)

    def pod_exists(self, pod: Pod) -> bool:
        """Whether the informers still have the pod: unscheduled and ours, or bound (not by our assume)."""
        if pod.uid in self.pending_pods:
            return True
        return self.cache.get_pod(pod.uid) is not None and not self.cache.is_assumed(pod.uid)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run `coro` as a task that drain() waits for (binding cycles, status writes, plugins' own)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, grace: float | None = None) -> None:
        """Wait for in-flight binding cycles and API writes, Events included (tests and shutdown); past
        `grace` seconds, cancel whatever is left."""
        deadline = None if grace is None else time.monotonic() + grace
        while self._tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                pending = list(self._tasks)
                log.warning("shutdown: cancelling unfinished binding cycles and writes", count=len(pending))
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return
            await asyncio.wait(list(self._tasks), timeout=left)
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            await asyncio.wait_for(self.event_broadcaster.drain(), timeout=left)
        except TimeoutError:
            log.warning("shutdown: events left unwritten")

    # ---- one cycle -----------------------------------------------------------------------

    def schedule_one(self, info: QueuedPodInfo) -> None:
        pod = info.pod
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None or self.skip_pod_schedule(pod):
            if fw is not None and pod.deleting:
                self.recorders[fw.profile_name].eventf(
                    pod, None, WARNING, "FailedScheduling", "Scheduling", f"skip schedule deleting pod: {pod.key}"
                )
            self.queue.done(pod.uid)
            return
        started = time.perf_counter()
        state = CycleState()
        state.record_plugin_metrics = metrics.should_record_plugin_metrics()
        try:
            result = self.schedule_pod(fw, state, pod, info.signature)
        except FitError as fit_error:
            # Without PostFilter plugins a stale nomination is cleared, as kube-scheduler does.
            nominated: str | None = ""
            if fw.post_filter_plugins:
                nominated, post_status = fw.run_post_filter(state, pod, fit_error.diagnosis.node_statuses())
                if post_status is not None:
                    fit_error.diagnosis.post_filter_msg = post_status.message
                    if post_status.code == Code.ERROR:
                        log.error("postfilter failed", pod=pod.key, error=post_status.message)
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - started)
            self.observe_attempt(fw, "unschedulable", started)
            self.handle_failure(
                fw, info, Status.unschedulable(), fit_error, nominated, keep_nomination=bool(fw.post_filter_plugins)
            )
            return
        except NoNodesAvailable as exc:
            # kube: UnschedulableAndUnresolvable, reported as Unschedulable with no rejecting plugin.
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - started)
            self.observe_attempt(fw, "unschedulable", started)
            log.info("no nodes available to schedule pods", pod=pod.key)
            self.handle_failure(fw, info, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(exc),), exc), None, None)
            return
        except Exception as exc:
            metrics.scheduling_algorithm_duration.observe(time.perf_counter() - started)
            self.observe_attempt(fw, "error", started)
            self._log_cycle_error(pod, exc)
            self.handle_failure(fw, info, Status.as_error(exc), None, None)
            return

        metrics.scheduling_algorithm_duration.observe(time.perf_counter() - started)
        self.prepare_for_binding_cycle(fw, state, info, result.suggested_host, started)

    def prepare_for_binding_cycle(
        self, fw: Framework, state: CycleState, info: QueuedPodInfo, host: str, started: float
    ) -> bool:
        """assume → Reserve → Permit, then the binding cycle as a task (kube's prepareForBindingCycle
        and `go runBindingCycle`). A refusal is undone and reported here. True once binding started."""
        pod = info.pod
        assumed = pod.on_node(host)
        try:
            self.cache.assume_pod(assumed)
        except Exception as exc:
            self.observe_attempt(fw, "error", started)
            self.handle_failure(fw, info, Status.as_error(exc), None, None)
            return False
        # The assumed pod counts on its node now; as a nominated pod it would count twice.
        self.nominator.delete(pod.uid)
        status = fw.run_reserve(state, assumed, host)
        if status is None:
            status = fw.run_permit(state, assumed, host)
        if status is not None and status.code != Code.WAIT:
            # Reserve or Permit said no: undo both (Unreserve is idempotent) and the assume.
            fw.run_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            rejected = status.is_rejection
            self.observe_attempt(fw, "unschedulable" if rejected else "error", started)
            self.handle_failure(fw, info, status, FitError.single_node(pod, host, status) if rejected else None, None)
            return False
        # The pod keeps its in-flight status until the binding cycle ends (queue.done there).
        self.spawn(self.binding_cycle(_Placement(fw, state, info, assumed, host, started)))
        return True

    def _log_cycle_error(self, pod: Pod, exc: Exception) -> None:
        """Once per pod and message: a pod that keeps failing the same way does not flood the log."""
        message = str(exc)
        if self._logged_errors.get(pod.uid) == message:
            log.debug("scheduling cycle failed again", pod=pod.key, error=message)
            return
        if len(self._logged_errors) >= _MAX_REMEMBERED_ERRORS:
            self._logged_errors.clear()
        self._logged_errors[pod.uid] = message
        expected = isinstance(exc, NoNodesAvailable | PluginError)
        log.error("scheduling cycle failed", pod=pod.key, error=message, exc_info=not expected)

    def skip_pod_schedule(self, pod: Pod) -> bool:
        """A deleted pod, or one whose earlier cycle is still binding, is not scheduled again."""
        if pod.deleting:
            return True
        return self.cache.is_assumed(pod.uid)

    def observe_attempt(self, fw: Framework, result: str, started: float) -> None:
        metrics.child(metrics.schedule_attempts, result, fw.profile_name).inc()
        metrics.child(metrics.scheduling_attempt_duration, result, fw.profile_name).observe(
            time.perf_counter() - started
        )

    def schedule_pod(
        self, fw: Framework, state: CycleState, pod: Pod, signature: Signature | None = None
    ) -> ScheduleResult:
        """The pod's node. With OpportunisticBatching (`fw.batch`) a signed pod may be handed the
        node its predecessor's cycle ranked next (a hint, filtered like a nominated node), and every
        cycle's outcome is stored for the next pod."""
        self.cache.update_snapshot(self.snapshot)
        if len(self.snapshot) == 0:
            raise NoNodesAvailable()
        batch = fw.batch
        feasible, diagnosis, hint = self._find_nodes(fw, state, pod, batch, signature)
        if not feasible:
            num_nodes = len(self.snapshot) if self.placement is None else len(self.placement)
            raise FitError(pod, num_nodes, diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            if batch is not None:
                batch.store_schedule_results(signature, hint, feasible[0].name, None, self.queue.scheduling_cycle)
            return ScheduleResult(feasible[0].name, evaluated, 1)
        raw: dict[str, IntArray] | None = {} if batch is not None and signature is not None else None
        totals, rows = self._prioritize(fw, state, pod, feasible, raw)
        best = select_best(totals, self.rng)
        if batch is not None:
            others = SortedScoredNodes(feasible, raw or {}, totals, best, rows, self.snapshot.list())
            batch.store_schedule_results(signature, hint, feasible[best].name, others, self.queue.scheduling_cycle)
        return ScheduleResult(feasible[best].name, evaluated, len(feasible))

    def find_nodes_that_fit(self, fw: Framework, state: CycleState, pod: Pod) -> tuple[list[NodeInfo], Diagnosis]:
        """PreFilter and Filter, without the profile's batch (which it leaves as it is)."""
        feasible, diagnosis, _ = self._find_nodes(fw, state, pod, None, None)
        return feasible, diagnosis

    def _find_nodes(
        self, fw: Framework, state: CycleState, pod: Pod, batch: OpportunisticBatch | None, signature: Signature | None
    ) -> tuple[list[NodeInfo], Diagnosis, str]:
        """Feasible nodes, the diagnosis of the rejected ones, and the batch's hint ("" for none)."""
        diagnosis = Diagnosis()
        all_nodes: Sequence[NodeInfo] = self.snapshot.list()
        placement = self.placement
        if placement is not None:
            all_nodes = placement.infos(self.snapshot)
        pre_result, status, narrowing = fw.run_pre_filter(state, pod, all_nodes)
        diagnosis.unschedulable_plugins |= narrowing
        if status is not None:
            if not status.is_rejection:
                raise PluginError(status.message)
            diagnosis.absent_status = status
            diagnosis.pre_filter_msg = status.message
            diagnosis.add_plugin_status(status)
            return [], diagnosis, ""

        nominated = self.nominator.nominated_node(pod.uid) or (pod.raw.get("status") or {}).get("nominatedNodeName")
        hint = ""
        if batch is not None:
            hint = batch.get_node_hint(pod, signature, bool(nominated), state, self.queue.scheduling_cycle)
        # A nominated node (or else the batch's hint) is likely to fit: tried alone first.
        first_try = nominated or hint
        if first_try:
            node_info = self.snapshot.get(first_try)
            fits_nominated = (
                node_info is not None
                and node_info.node is not None
                and (placement is None or node_info.name in placement)
                and fw.run_filter_with_nominated(state, pod, node_info) is None
            )
            if fits_nominated and node_info is not None:
                return [node_info], diagnosis, hint
        if pre_result is not None and pre_result.node_names is not None:
            allowed = self.named_nodes(all_nodes, pre_result.node_names)
            diagnosis.absent_status = Status.unresolvable(f"node(s) didn't satisfy plugin(s) {plugin_list(narrowing)}")
            return (*self._find_per_node(fw, state, pod, allowed, diagnosis), hint)
        if not fw.filter_plugins:
            return (*self._find_per_node(fw, state, pod, all_nodes, diagnosis), hint)
        if placement is not None:
            # A pod-group placement's nodes: the batch forms over the table, read at their rows.
            return (*self._find_batch(fw, state, pod, diagnosis, placement.rows(self.snapshot)), hint)
        return (*self._find_batch(fw, state, pod, diagnosis), hint)

    def named_nodes(self, all_nodes: Sequence[NodeInfo], names: Collection[str]) -> list[NodeInfo]:
        """The nodes of `all_nodes` (the snapshot's, or the placement's: in the snapshot's order)
        that `names` names, in that order. A PreFilterResult usually names a node or a few (a
        DaemonSet pod's matchFields): looked up by name, not by a walk over every node."""
        if len(names) * 8 >= len(all_nodes):
            return [info for info in all_nodes if info.name in names]
        position = self.snapshot.position
        placement = self.placement
        rows = sorted(
            row
            for name in names
            if (row := position.get(name)) is not None and (placement is None or name in placement)
        )
        node_list = self.snapshot.node_info_list
        return [node_list[row] for row in rows]

    def _find_batch(
        self, fw: Framework, state: CycleState, pod: Pod, diagnosis: Diagnosis, rows: IntArray | None = None
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """Filter every node at once with the plugins' batch forms; per-node only where needed.

        Same result as _find_per_node over the table's nodes, or over the nodes at `rows` (in table
        order): the first `to_find` feasible nodes in round-robin order from the start index, and
        for every rejected node that order reached the status the per-node loop would record (the
        batch forms' own reasons where they give them).
        """
        table = self.snapshot.table
        infos = table.infos
        num_nodes = table.size
        count = num_nodes if rows is None else len(rows)
        if count == 0:
            return [], diagnosis
        to_find = self._num_to_find(fw, count)
        start = self.next_start_node_index % count
        started = time.perf_counter()
        batch = fw.run_filter_batch(state, pod, table)
        mask, per_node = batch.mask, batch.per_node
        # Nodes other pods are nominated to get the two-pass check with those pods (the reference
        # path's answer for them); the batch forms never saw nominations.
        nominated: dict[int, Status | None] = {}
        nominated_nodes = self.nominator.nodes()
        considered = None if rows is None or not nominated_nodes else set(rows.tolist())
        for name in nominated_nodes:
            row = self.snapshot.position.get(name)
            if (
                row is not None
                and row < num_nodes
                and infos[row].name == name
                and (considered is None or row in considered)
            ):
                nominated[row] = fw.run_filter_with_nominated(state, pod, infos[row])
        if nominated:
            mask = mask.copy()
            for row, verdict in nominated.items():
                mask[row] = verdict is None
        if rows is None:
            order = table.arange + start
            order[order >= num_nodes] -= num_nodes
        else:
            order = np.concatenate((rows[start:], rows[:start])) if start else rows
        feasible: list[NodeInfo] = []
        if not per_node:
            passes = mask[order]
            passing = np.flatnonzero(passes)
            processed = int(passing[to_find - 1]) + 1 if len(passing) >= to_find else count
            feasible_rows = order[passing[:to_find]]
            feasible = [infos[row] for row in feasible_rows.tolist()]
            # prioritize_nodes needs these rows of the table again: keep them with the list they index.
            self._feasible_rows = (feasible, feasible_rows)
            rejected = order[:processed][~passes[:processed]].tolist()
            if rejected:
                unexplained = [row for row in rejected if row not in nominated]
                explained = dict(zip(unexplained, batch.rejections(state, pod, infos, unexplained), strict=True))
                self._record_rejections(
                    pod,
                    [(infos[row], nominated[row] if row in nominated else explained[row]) for row in rejected],
                    diagnosis,
                )
        else:
            processed = 0
            batch_ok = mask.tolist()
            # Rows in the order reached, with their status; rows the batch forms rejected get theirs
            # afterwards, all at once (one numpy pass, not one per row), and are recorded in place.
            reached: list[tuple[int, Status | None]] = []
            batch_rejected: list[int] = []
            for row in order.tolist():
                processed += 1
                if row in nominated:
                    status = nominated[row]
                elif batch_ok[row]:
                    status = fw.run_filter_plugins(per_node, state, pod, infos[row])
                else:
                    batch_rejected.append(row)
                    reached.append((row, None))
                    continue
                if status is None:
                    feasible.append(infos[row])
                    if len(feasible) >= to_find:
                        break
                    continue
                reached.append((row, status))
                if status.code == Code.ERROR:
                    break
            explained = dict(zip(batch_rejected, batch.rejections(state, pod, infos, batch_rejected), strict=True))
            self._record_rejections(
                pod, [(infos[row], explained[row] if status is None else status) for row, status in reached], diagnosis
            )
        self._filtered(fw, state, started, len(feasible), diagnosis)
        # kube advances the start over all nodes, also when only some were looked at.
        self.next_start_node_index = (self.next_start_node_index + processed) % num_nodes
        return feasible, diagnosis

    @staticmethod
    def _num_to_find(fw: Framework, num_nodes: int) -> int:
        """Without Score plugins any feasible node will do: kube stops at the first one."""
        if not fw.score_plugins:
            return 1
        return num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, num_nodes)

    @staticmethod
    def _record_rejections(pod: Pod, rejected: Sequence[tuple[NodeInfo, Status | None]], diagnosis: Diagnosis) -> None:
        """Record each rejected node's status in order; a plugin's status shared by many nodes is
        looked at once (an error raises where the per-node loop would have stopped)."""
        node_to_status = diagnosis.node_to_status
        seen: set[int] = set()
        for info, status in rejected:
            if status is None:
                # A batch form rejected a node its per-node form accepts: a plugin bug. Fail loudly.
                raise RuntimeError(f"batch and per-node filters disagree on node {info.name} for pod {pod.key}")
            if id(status) not in seen:  # every status is alive in `rejected`: ids are not reused
                seen.add(id(status))
                if status.code == Code.ERROR:
                    raise PluginError(status.message)
                diagnosis.add_plugin_status(status)
            node_to_status[info.name] = status

    def _find_per_node(
        self, fw: Framework, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], diagnosis: Diagnosis
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """The reference path: one node at a time, nominated pods counted in two passes."""
        num_nodes = len(nodes)
        if num_nodes == 0:
            return [], diagnosis
        to_find = self._num_to_find(fw, num_nodes)
        start = self.next_start_node_index % num_nodes
        if not fw.filter_plugins:
            chosen = [nodes[(start + i) % num_nodes] for i in range(to_find)]
            self.next_start_node_index = (self.next_start_node_index + len(chosen)) % len(self.snapshot)
            return chosen, diagnosis
        feasible: list[NodeInfo] = []
        processed = 0
        started = time.perf_counter()
        for i in range(num_nodes):
            node_info = nodes[(start + i) % num_nodes]
            processed += 1
            node_status = fw.run_filter_with_nominated(state, pod, node_info)
            if node_status is None:
                feasible.append(node_info)
                if len(feasible) >= to_find:
                    break
            else:
                self._record_rejections(pod, [(node_info, node_status)], diagnosis)
        self._filtered(fw, state, started, len(feasible), diagnosis)
        # kube advances the start over all nodes, also when a PreFilter result narrowed the list.
        self.next_start_node_index = (self.next_start_node_index + processed) % len(self.snapshot)
        return feasible, diagnosis

    @staticmethod
    def _filtered(fw: Framework, state: CycleState, started: float, feasible: int, diagnosis: Diagnosis) -> None:
        """The Filter extension point's metrics, once per cycle as kube records them."""
        metrics.observe_extension_point(metrics.FILTER, None, fw.profile_name, started)
        fw.record_filter_evaluations(state, feasible, diagnosis.node_to_status)

    def prioritize_nodes(self, fw: Framework, state: CycleState, pod: Pod, nodes: list[NodeInfo]) -> IntArray:
        """Weighted total score per node (aligned with `nodes`)."""
        return self._prioritize(fw, state, pod, nodes, None)[0]

    def _prioritize(
        self, fw: Framework, state: CycleState, pod: Pod, nodes: list[NodeInfo], raw: dict[str, IntArray] | None
    ) -> tuple[IntArray, IntArray | None]:
        """The totals, and the nodes' rows in the snapshot's table when scoring used them; `raw`
        receives each plugin's scores before NormalizeScore."""
        if not fw.score_plugins:
            return np.ones(len(nodes), np.int64), None
        status = fw.run_pre_score(state, pod, nodes)
        if status is not None:
            raise PluginError(status.message)
        known, self._feasible_rows = self._feasible_rows, None
        if known is not None and known[0] is nodes:
            rows = known[1]
        else:
            position = self.snapshot.position
            rows = np.fromiter((position[n.name] for n in nodes), np.int64, len(nodes))
        totals, _, status = fw.score_nodes(state, pod, nodes, self.snapshot.table, rows, raw)
        if status is not None:
            raise PluginError(status.message)
        return totals, rows

    # ---- failures ------------------------------------------------------------------------

    def handle_failure(
        self,
        fw: Framework,
        info: QueuedPodInfo,
        status: Status,
        fit_error: FitError | None,
        nominated_node: str | None,
        keep_nomination: bool = False,
    ) -> None:
        """Requeue (unless the pod is gone or bound), then record the condition and event.

        The nomination follows kube's NominatingInfo: a failure clears the pod's nominated node
        unless PostFilter nominated one (`nominated_node`); PostFilter that ran and nominated nothing
        leaves it as the pod's status has it (`keep_nomination`, kube's ModeNoop).
        """
        pod = info.pod
        if fit_error is not None:
            info.unschedulable_plugins = set(fit_error.diagnosis.unschedulable_plugins)
            info.pending_plugins = set(fit_error.diagnosis.pending_plugins)
            reason, message = "Unschedulable", str(fit_error)
        else:
            # kube clears the rejector plugins; only a FitError names them again.
            info.unschedulable_plugins = set()
            info.pending_plugins = set()
            reason = "Unschedulable" if status.is_rejection else "SchedulerError"
            message = status.message
        current = self.pending_pods.get(pod.uid)
        if current is None or current.node_name:
            # Deleted, or bound by someone else meanwhile: nothing to requeue or report.
            self.queue.done(pod.uid)
            return
        info.pod = current
        self.queue.add_unschedulable_if_not_present(info, error=reason == "SchedulerError")
        keep = keep_nomination and nominated_node is None
        if keep:
            self.nominator.add(current, (current.raw.get("status") or {}).get("nominatedNodeName") or "")
        else:
            self.nominator.add(current, nominated_node or "")
        self.status_writes.report(current, reason, message, None if keep else nominated_node or "")

    # ---- the binding cycle ---------------------------------------------------------------

    async def binding_cycle(self, placed: _Placement) -> None:
        """WaitOnPermit → PreBind → Bind → PostBind, as an asyncio task per pod.

        Every failure up to the Bind undoes the scheduling cycle (Unreserve in reverse order, forget
        the assumed pod, wake pods the freed room may help, requeue through handle_failure). Once the
        apiserver accepted the Binding nothing undoes it: PostBind and the Scheduled event run
        outside the undo path and cannot fail it.
        """
        fw, assumed, host, info = placed.fw, placed.assumed, placed.host, placed.info
        metrics.child(metrics.goroutines, metrics.BINDING).inc()
        try:
            if not await self._bind(placed):
                return
            self.cache.finish_binding(assumed)
            self.observe_attempt(fw, "scheduled", placed.started)
            metrics.pod_scheduling_attempts.observe(info.attempts)
            if info.was_flushed_from_unschedulable:
                metrics.pod_scheduled_after_flush.inc()
            if info.initial_attempt_timestamp is not None:
                metrics.child(
                    metrics.pod_scheduling_sli_duration, "15+" if info.attempts >= 15 else str(info.attempts)
                ).observe(time.monotonic() - info.initial_attempt_timestamp)
            try:
                fw.run_post_bind(placed.state, assumed, host)
            except Exception as exc:
                log.error("PostBind plugin failed", pod=assumed.key, node=host, error=str(exc))
            log.debug("bound", pod=assumed.key, node=host)
            self.recorders[fw.profile_name].eventf(
                assumed, None, NORMAL, "Scheduled", "Binding", f"Successfully assigned {assumed.key} to {host}"
            )
        finally:
            metrics.child(metrics.goroutines, metrics.BINDING).dec()
            self.queue.done(assumed.uid)

    async def _bind(self, placed: _Placement) -> bool:
        """WaitOnPermit → PreBind → Bind; True once the apiserver accepted the Binding, else undone."""
        fw, state, assumed, host = placed.fw, placed.state, placed.assumed, placed.host
        try:
            # A failure report of an earlier cycle must not land after this bind.
            await self.status_writes.settle(assumed.uid)
            status = await fw.wait_on_permit(assumed)
            point = "WaitOnPermit"
            if status is None:
                point = "PreBind"
                status = await fw.run_pre_bind(state, assumed, host)
            if status is None and not self.may_write():
                self._abandon(placed)
                return False
            if status is None:
                point = "Bind"
                status = await fw.run_bind(state, assumed, host)
        except Exception as exc:  # the task must never die silently
            log.error("binding cycle crashed", pod=assumed.key, node=host, error=str(exc), exc_info=True)
            if self.cache.is_assumed(assumed.uid):
                self._undo(placed, Status.as_error(exc))
            return False
        if status is None:
            return True
        metrics.child(metrics.binding_cycle_failures, point).inc()
        self._undo(placed, status, waiting_rejected=point == "WaitOnPermit")
        self.observe_attempt(fw, "unschedulable" if status.is_rejection else "error", placed.started)
        return False

    def _abandon(self, placed: _Placement) -> None:
        """A deposed leader drops the pod without a write: no Bind, no requeue, no failure report."""
        placed.fw.run_unreserve(placed.state, placed.assumed, placed.host)
        if self.cache.is_assumed(placed.assumed.uid):
            self.cache.forget_pod(placed.assumed)
        log.info("not binding: no longer the leader", pod=placed.assumed.key, node=placed.host)

    def _undo(self, placed: _Placement, status: Status, waiting_rejected: bool = False) -> None:
        fw, assumed, host = placed.fw, placed.assumed, placed.host
        fw.run_unreserve(placed.state, assumed, host)
        if not self.cache.is_assumed(assumed.uid):
            # The informer saw the pod bound (by someone else, or our Bind landed despite the error):
            # the cache holds the real pod; nothing to forget, requeue or report.
            log.info("binding failed; pod is bound meanwhile", pod=assumed.key, node=host, error=status.message)
            return
        self.cache.forget_pod(assumed)
        log.info("binding failed", pod=assumed.key, node=host, error=status.message, code=status.code.name)
        # Only a rejection at WaitOnPermit is a FitError (kube: Permit is the last point that may call a
        # pod unschedulable); a rejecting PreBind/Bind status is reported as it is, with no rejecting plugin.
        fit_error = FitError.single_node(assumed, host, status) if waiting_rejected and status.is_rejection else None
        if not status.is_rejection:
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, assumed, None)
            self.handle_failure(fw, placed.info, status, fit_error, None)
            return
        # As kube: the freed room wakes others only after the rejected pod is back in the queue, so the
        # event is not replayed against the pod itself (it would skip the unschedulable pool).
        self.handle_failure(fw, placed.info, status, fit_error, None)
        self.queue.move_all_to_active_or_backoff(
            ASSIGNED_POD_DELETE, assumed, None, pre_check=lambda pod: pod.uid != assumed.uid
        )
