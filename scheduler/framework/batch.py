"""OpportunisticBatching: one pod's Filter and Score results reused for the next pods like it.

kube-scheduler 1.37's runtime/batch.go. After a cycle that scored several nodes, the other feasible
nodes are kept with their raw and final scores. When the next cycle's pod has the same signature
(scheduling/signing.py) the best kept node becomes its hint, which the scheduler filters as it
filters a nominated node; if the pod fits there, that is its node, with no Filter or Score pass over
the cluster. This holds while pods go one per node in score order: the node the previous pod took
is filtered again for the new pod and, if the pod still fits there, scored again (PreScore over the
kept nodes, NormalizeScore across them) so that it competes with the kept nodes once more.

A batch is dropped (and counted in scheduler_batch_cache_flushed_total with upstream's reason) when
a cycle of another pod came between, the pod is nominated, its signature differs, the batch is older
than 500 ms, a kept node left the snapshot, or re-filtering or re-scoring fails.

Owns one profile's batch state. Runs Filter, PreScore and Score on the previously chosen node only,
and PreScore/NormalizeScore over the kept nodes on a copy of the cycle state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import structlog

from scheduler import metrics
from scheduler.framework.signing import Signature
from scheduler.framework.table import IntArray
from scheduler.framework.types import CycleState, NodeInfo, Status
from scheduler.model.objects import Pod

log = structlog.get_logger("batch")

MAX_BATCH_AGE = 0.5

# Ties between kept nodes are broken by random bits below the total score in one int64 key.
_RANDOM_BITS = 20
_TAKEN = -1
_tie_breaker = np.random.default_rng()


class BatchHandle(Protocol):
    """What OpportunisticBatch needs of its profile's framework."""

    profile_name: str

    def snapshot_nodes(self) -> Sequence[NodeInfo]:
        """The snapshot's node list: the same object for as long as no node joined or left."""
        ...

    def current_node_infos(self, names: Iterable[str]) -> list[NodeInfo] | None:
        """The snapshot's NodeInfos of these nodes, or None when one of them is gone."""
        ...

    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None: ...
    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None: ...
    def raw_score_node(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[dict[str, int], Status | None]:
        """Each non-skipped Score plugin's score for one node, before NormalizeScore."""
        ...

    def normalize_scores(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], raw: Mapping[str, IntArray]
    ) -> tuple[IntArray, Status | None]:
        """Weighted totals from raw per-plugin scores aligned with `nodes` (NormalizeScore across them)."""
        ...


class SortedScoredNodes:
    """Scored nodes handed out best first (kube's SortedScoredNodes). Built for every scored cycle
    from the arrays the cycle has anyway; the ordering keys are made on first use only.

    With `rows`, the nodes' positions in `listing` (the snapshot's node list when they were
    scored): while the snapshot keeps that list, their current NodeInfos are found by position."""

    __slots__ = ("_keys", "_left", "listing", "nodes", "raw", "rows", "taken", "totals")

    def __init__(
        self,
        nodes: Sequence[NodeInfo],
        raw: Mapping[str, IntArray],
        totals: IntArray,
        taken: int | None = None,
        rows: IntArray | None = None,
        listing: Sequence[NodeInfo] | None = None,
    ) -> None:
        self.nodes = nodes
        self.raw = raw
        self.totals = totals
        self.taken = taken
        self.rows = rows if listing is not None else None
        self.listing = listing
        self._left = len(nodes) - (taken is not None)
        self._keys: IntArray | None = None

    def __len__(self) -> int:
        return self._left

    def _ordering(self) -> IntArray:
        if self._keys is None:
            keys: IntArray = (self.totals.astype(np.int64) << _RANDOM_BITS) | _tie_breaker.integers(
                0, 1 << _RANDOM_BITS, len(self.nodes), np.int64
            )
            if self.taken is not None:
                keys[self.taken] = _TAKEN
            self._keys = keys
        return self._keys

    def pop(self) -> int:
        """The position of the best node left (highest total; ties in random order)."""
        keys = self._ordering()
        best = int(keys.argmax())
        keys[best] = _TAKEN
        self._left -= 1
        return best

    def row(self, position: int | None) -> int | None:
        """The node's row in `listing`, if known."""
        return int(self.rows[position]) if self.rows is not None and position is not None else None

    def remaining(self) -> IntArray:
        """Positions of the nodes not handed out yet, in no particular order."""
        return np.flatnonzero(self._ordering() != _TAKEN)


@dataclass(slots=True)
class _Batch:
    signature: Signature
    nodes: SortedScoredNodes
    created: float


class OpportunisticBatch:
    """One profile's batch: the kept nodes of the last scored pod and the last cycle's outcome."""

    def __init__(
        self, handle: BatchHandle, generic_workload: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.handle = handle
        self.generic_workload = generic_workload
        self.clock = clock
        self.batch: _Batch | None = None
        self.last_cycle = 0
        self.last_chosen = ""
        # The last chosen node's row in the kept nodes' listing (None: find it by name).
        self.last_row: int | None = None
        self._hinted_row: int | None = None
        # Pods placed on their hint (tests read it, as kube's TotalBatchedPods).
        self.batched_pods = 0

    def get_node_hint(
        self, pod: Pod, signature: Signature | None, nominated: bool, state: CycleState, cycle: int
    ) -> str:
        """The node to try first for `pod`, or "" (kube's GetNodeHint)."""
        started = time.perf_counter()
        profile = self.handle.profile_name
        hint = ""
        batch = self._compatible(signature, nominated, cycle)
        if batch is not None and self._refresh_candidates(batch, pod, state):
            kept = batch.nodes
            best = kept.pop()
            hint = kept.nodes[best].name
            self._hinted_row = kept.row(best)
            log.debug("batch node hint", profile=profile, pod=pod.key, cycle=cycle, hint=hint)
        else:
            metrics.child(metrics.batch_attempts, profile, metrics.BATCH_NO_HINT).inc()
        metrics.child(metrics.get_node_hint_duration, "hint" if hint else "no_hint", profile).observe(
            time.perf_counter() - started
        )
        return hint

    def store_schedule_results(
        self, signature: Signature | None, hinted: str, chosen: str, others: SortedScoredNodes | None, cycle: int
    ) -> None:
        """Remember the cycle's outcome and, for a signed pod not placed on its hint, the other
        feasible nodes (kube's StoreScheduleResults)."""
        started = time.perf_counter()
        profile = self.handle.profile_name
        self.last_cycle = cycle
        self.last_chosen = chosen
        if hinted and hinted == chosen:
            metrics.child(metrics.batch_attempts, profile, metrics.BATCH_HINT_USED).inc()
            self.batched_pods += 1
            self.last_row = self._hinted_row
        else:
            self.last_row = others.row(others.taken) if others is not None else None
            if hinted:
                metrics.child(metrics.batch_attempts, profile, metrics.BATCH_HINT_NOT_USED).inc()
            if signature is not None and others is not None and len(others):
                self.batch = _Batch(signature, others, self.clock())
            else:
                empty = others is None or not len(others)
                self._flush(metrics.FLUSH_EMPTY_LIST if empty else metrics.FLUSH_POD_NOT_BATCHABLE)
                self.batch = None
        metrics.child(metrics.store_schedule_results_duration, profile).observe(time.perf_counter() - started)

    def _flush(self, reason: str) -> None:
        metrics.child(metrics.batch_cache_flushed, self.handle.profile_name, reason).inc()

    def _compatible(self, signature: Signature | None, nominated: bool, cycle: int) -> _Batch | None:
        """The batch, if this pod may use it."""
        batch = self.batch
        if batch is None or not len(batch.nodes):
            return None
        # Another pod's cycle came between (or another profile's). A pod-group cycle tries its
        # members under one cycle count.
        if cycle != self.last_cycle + 1 and not (self.generic_workload and cycle == self.last_cycle):
            reason = metrics.FLUSH_POD_SKIPPED
        elif nominated:
            reason = metrics.FLUSH_POD_NOMINATED
        elif signature is None or signature != batch.signature:
            reason = metrics.FLUSH_POD_INCOMPATIBLE
        elif self.clock() > batch.created + MAX_BATCH_AGE:
            reason = metrics.FLUSH_EXPIRED
        else:
            return batch
        self._flush(reason)
        return None

    def _refresh_candidates(self, batch: _Batch, pod: Pod, state: CycleState) -> bool:
        """The previously chosen node competes again if the pod still fits there."""
        listing = self.handle.snapshot_nodes()
        kept = batch.nodes
        if kept.listing is listing and kept.rows is not None and self.last_row is not None:
            last = listing[self.last_row]
        else:
            found = self.handle.current_node_infos((self.last_chosen,))
            if found is None:
                self._flush(metrics.FLUSH_NODE_MISSING)
                return False
            last = found[0]
        status = self.handle.run_filter(state, pod, last)
        if status is None:
            return self._rescore(batch, pod, state, last)
        if not status.is_rejection:
            self._flush(metrics.FLUSH_FILTER_ERROR)
            return False
        return True

    def _rescore(self, batch: _Batch, pod: Pod, state: CycleState, last: NodeInfo) -> bool:
        started = time.perf_counter()
        profile = self.handle.profile_name
        metrics.child(metrics.batch_rescore_attempts, profile).inc()
        try:
            return self._rescored(batch, pod, state, last)
        finally:
            metrics.child(metrics.batch_rescore_duration, profile).observe(time.perf_counter() - started)

    def _rescored(self, batch: _Batch, pod: Pod, state: CycleState, last: NodeInfo) -> bool:
        kept = batch.nodes
        left = kept.remaining()
        listing = self.handle.snapshot_nodes()
        rows: IntArray | None = None
        if kept.listing is listing and kept.rows is not None and self.last_row is not None:
            # No node joined or left since these were scored: all are there, at the same rows.
            rows = np.append(kept.rows[left], self.last_row)
            infos = [listing[row] for row in rows.tolist()]
        else:
            nodes = kept.nodes
            found = self.handle.current_node_infos([nodes[position].name for position in left.tolist()])
            if found is None:
                self._flush(metrics.FLUSH_NODE_MISSING)
                return False
            infos = [*found, last]
        rescore_state = state.clone()
        if self.handle.run_pre_score(rescore_state, pod, infos) is not None:
            self._flush(metrics.FLUSH_PRESCORE_ERROR)
            return False
        fresh, status = self.handle.raw_score_node(rescore_state, pod, last)
        if status is not None:
            self._flush(metrics.FLUSH_RESCORE_ERROR)
            return False
        raw: dict[str, IntArray] = {}
        for plugin in kept.raw.keys() | fresh.keys():
            before = kept.raw.get(plugin)
            column = before[left] if before is not None else np.zeros(len(left), np.int64)
            raw[plugin] = np.append(column, fresh.get(plugin, 0))
        totals, status = self.handle.normalize_scores(rescore_state, pod, infos, raw)
        if status is not None:
            self._flush(metrics.FLUSH_NORMALIZE_ERROR)
            return False
        batch.nodes = SortedScoredNodes(infos, raw, totals, rows=rows, listing=listing)
        return True
