"""Framework runtime: runs one profile's plugins at each extension point, as kube-scheduler does.

Status propagation, Skip handling, score normalisation/validation and weights, Unreserve in
reverse order, Permit waiting, Bind chaining. Knows plugins only through the Protocols.

A plugin that raises never stops the scheduling loop: at points with a Status the exception
becomes an Error status naming the plugin; at points without one (QueueSort, Unreserve) it is
logged — once per plugin and pod, not on every retry — and the point goes on. (PostBind's
exceptions are the binding cycle's to log: it runs after the Binding is final.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import structlog

from scheduler import metrics
from scheduler.features import DEFAULT_FEATURE_GATES, GENERIC_WORKLOAD, OPPORTUNISTIC_BATCHING, FeatureGates
from scheduler.framework.batch import OpportunisticBatch
from scheduler.framework.dra import DraManager
from scheduler.framework.interface import (
    BindPlugin,
    EventSink,
    FilterPlugin,
    NamespaceLister,
    NodeLocalPlugin,
    PermitPlugin,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    Plugin,
    PodGroupPostFilterPlugin,
    PodGroupSimulation,
    PodNominator,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignPlugin,
    SnapshotLister,
)
from scheduler.framework.podgroups import PodGroupState, PodGroupStates
from scheduler.framework.signing import SCHEDULER_NAME, Signature, SignFragment
from scheduler.framework.table import BoolArray, FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    ClusterEventWithHint,
    Code,
    CycleState,
    NodeInfo,
    NodeScore,
    NodeToStatus,
    Placement,
    PlacementProgress,
    PreFilterResult,
    QueuedPodInfo,
    Status,
    plugin_list,
)
from scheduler.framework.volumes import VolumeStore
from scheduler.model.durations import go_duration
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.model.podgroups import PodGroup

if TYPE_CHECKING:
    from scheduler.api.client import ApiClient

# The method each extension point needs; a plugin enabled at a point it lacks is a config error.
POINT_METHODS = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "less",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
    # The pod-group cycle's points (kube 1.37; GenericWorkload and TopologyAwareWorkloadScheduling).
    "placementGenerate": "generate_placements",
    "placementScore": "score_placement",
    "podGroupPostFilter": "pod_group_post_filter",
}

# kube-scheduler's extension points in the order a pod meets them (config validates names against it).
EXTENSION_POINTS = tuple(POINT_METHODS)

MAX_PERMIT_TIMEOUT = 15 * 60.0

log = structlog.get_logger("framework")

# (extension point, plugin, pod uid) already logged; forgotten wholesale past this size.
_MAX_REMEMBERED_CRASHES = 10_000
# Nominated pods placed on their node, remembered for the filter-with-nominated pass.
PLACED_MEMO_SIZE = 10_000


class FrameworkError(Exception):
    """A plugin misbehaved (score out of range, bad status); names the plugin."""


@dataclass
class WaitingPod:
    """A pod held at Permit until every waiting plugin allows it, one rejects it, or time runs out."""

    pod: Pod
    pending: dict[str, float]  # plugin -> timeout seconds
    future: asyncio.Future[Status | None] = field(init=False)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.future = asyncio.get_running_loop().create_future()

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending and not self.future.done():
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        if not self.future.done():
            self._finish(Status.unschedulable(message, plugin=plugin))

    def _finish(self, status: Status | None) -> None:
        for timer in self.timers:
            timer.cancel()
        self.future.set_result(status)


class StaticNamespaces:
    """A NamespaceLister over a dict (the informer keeps one up to date; tests pass their own)."""

    def __init__(self, labels: dict[str, Mapping[str, str]]) -> None:
        self.by_name = labels

    def labels(self, name: str) -> Mapping[str, str] | None:
        return self.by_name.get(name)

    def names(self) -> Sequence[str]:
        return list(self.by_name)


class WorkloadStore:
    """A WorkloadLister kept by the informers (or filled once by tests)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self._services: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._controllers: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
        for obj in objects:
            self.upsert(obj)

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
        meta = obj.get("metadata") or {}
        return (obj.get("apiVersion") or "", obj.get("kind") or "", meta.get("namespace") or "", meta.get("name") or "")

    def upsert(self, obj: Mapping[str, Any]) -> None:
        _, kind, namespace, name = key = self._key(obj)
        if kind == "Service":
            self._services.setdefault(namespace, {})[name] = obj
        else:
            self._controllers[key] = obj

    def delete(self, obj: Mapping[str, Any]) -> None:
        _, kind, namespace, name = key = self._key(obj)
        if kind == "Service":
            self._services.get(namespace, {}).pop(name, None)
        else:
            self._controllers.pop(key, None)

    def services(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._services.get(namespace, {}).values()

    def controller(self, api_version: str, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._controllers.get((api_version, kind, namespace, name))


class PdbStore:
    """A PdbLister kept by the informers (or filled once by tests)."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget] = ()) -> None:
        self._by_key: dict[str, PodDisruptionBudget] = {pdb.key: pdb for pdb in pdbs}

    def upsert(self, pdb: PodDisruptionBudget) -> None:
        self._by_key[pdb.key] = pdb

    def delete(self, key: str) -> None:
        self._by_key.pop(key, None)

    def list(self) -> Sequence[PodDisruptionBudget]:
        return list(self._by_key.values())


class HandleNotWired(RuntimeError):
    """A plugin reached the scheduler's part of a handle that nothing wired."""


@dataclass(frozen=True, slots=True)
class Wiring:
    """The scheduler's part of every profile's handle, given once the scheduler exists (the plugins,
    built first, hold the handle already). Every field is required: a scheduler that leaves one out
    fails when it is built, not with a silent no-op in some later cycle."""

    snapshot: SnapshotLister
    # Move these pods to activeQ now (running PreEnqueue again).
    activate: Callable[[Sequence[str]], None]
    # Run a coroutine beside the scheduling loop (API calls off the cycle); drained at shutdown.
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    # Whether the informers still have this pod (kube's pod lister); False once it was deleted.
    pod_exists: Callable[[Pod], bool]
    nominator: PodNominator
    # The scheduler's recorder per profile (events are reported as the profile's scheduler).
    recorders: Mapping[str, EventSink]

    @classmethod
    def standalone(cls, snapshot: SnapshotLister) -> Wiring:
        """For a handle used without a scheduler (plugin table tests, what-if tools): nothing is
        nominated, every pod exists, events go nowhere, spawned coroutines run detached."""
        return cls(snapshot, _activate_nothing, _spawn_detached, _exists, _NoNominations(), {})


def _activate_nothing(uids: Sequence[str]) -> None:
    return None


def _exists(pod: Pod) -> bool:
    return True


def _spawn_detached(coro: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coro)
    _DETACHED.add(task)
    task.add_done_callback(_DETACHED.discard)


_DETACHED: set[asyncio.Future[None]] = set()


class _NoEvents:
    def eventf(
        self,
        regarding: Pod | PodGroup,
        related: Pod | PodGroup | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        return None


class _NoNominations:
    def pods_for_node(self, node_name: str) -> list[Pod]:
        return []


class FrameworkHandle:
    """What plugins get: listers over the current snapshot, the api client, waiting pods, and — once
    `wire` ran — the scheduler's queue, nominator, task spawner and event recorders."""

    def __init__(
        self,
        client: ApiClient,
        snapshot: SnapshotLister,
        namespaces: NamespaceLister | None = None,
        workloads: WorkloadStore | None = None,
        volumes: VolumeStore | None = None,
        dra: DraManager | None = None,
        feature_gates: FeatureGates = DEFAULT_FEATURE_GATES,
        pod_groups: PodGroupStates | None = None,
    ) -> None:
        self._client = client
        self._feature_gates = feature_gates
        self._pod_groups = pod_groups if pod_groups is not None else PodGroupStates()
        self._volumes = volumes if volumes is not None else VolumeStore()
        self._dra = dra if dra is not None else DraManager()
        self._snapshot = snapshot
        self._namespaces: NamespaceLister = namespaces or StaticNamespaces({})
        self._workloads = workloads if workloads is not None else WorkloadStore()
        self._pdbs = PdbStore()
        self.waiting_pods: dict[str, WaitingPod] = {}
        # Every profile's framework registers itself.
        self.frameworks: dict[str, Framework] = {}
        self._wiring: Wiring | None = None

    def wire(self, wiring: Wiring) -> None:
        """Give the handle the scheduler's parts (its snapshot replaces the one built with)."""
        self._wiring = wiring
        self._snapshot = wiring.snapshot

    @property
    def wiring(self) -> Wiring:
        if self._wiring is None:
            raise HandleNotWired("FrameworkHandle used before wire(): build it into a Scheduler or wire it")
        return self._wiring

    @property
    def activate(self) -> Callable[[Sequence[str]], None]:
        return self.wiring.activate

    @property
    def spawn(self) -> Callable[[Coroutine[Any, Any, None]], object]:
        return self.wiring.spawn

    @property
    def pod_exists(self) -> Callable[[Pod], bool]:
        return self.wiring.pod_exists

    @property
    def nominator(self) -> PodNominator:
        return self.wiring.nominator

    @property
    def snapshot(self) -> SnapshotLister:
        return self._snapshot

    @property
    def client(self) -> ApiClient:
        return self._client

    @property
    def feature_gates(self) -> FeatureGates:
        return self._feature_gates

    @property
    def pod_groups(self) -> PodGroupStates:
        return self._pod_groups

    @property
    def namespaces(self) -> NamespaceLister:
        return self._namespaces

    @property
    def workloads(self) -> WorkloadStore:
        return self._workloads

    @property
    def volumes(self) -> VolumeStore:
        return self._volumes

    @property
    def pdbs(self) -> PdbStore:
        return self._pdbs

    @property
    def dra(self) -> DraManager:
        return self._dra

    def framework(self, profile_name: str) -> Framework:
        return self.frameworks[profile_name]

    def event_recorder(self, profile_name: str) -> EventSink:
        return self.wiring.recorders.get(profile_name) or _NoEvents()

    def allow_waiting_pod(self, uid: str, plugin: str) -> None:
        waiting = self.waiting_pods.get(uid)
        if waiting is not None:
            waiting.allow(plugin)

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        waiting = self.waiting_pods.get(uid)
        if waiting is None:
            return False
        waiting.reject(plugin, message)
        return True


def _normalize(
    ext: ScoreExtensions, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: IntArray
) -> tuple[IntArray, Status | None]:
    batch = getattr(ext, "normalize_batch", None)
    if batch is not None:
        normalized: IntArray | None = batch(state, pod, scores)
        if normalized is not None:
            return normalized, None
    node_scores = [NodeScore(info.name, int(v)) for info, v in zip(nodes, scores, strict=True)]
    status = ext.normalize_score(state, pod, node_scores)
    if status is not None and status.code != Code.SUCCESS:
        return scores, status
    return np.array([s.score for s in node_scores], np.int64), None


def _run_filter_plugin(plugin: FilterPlugin, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
    """One plugin's verdict on one node, named; anything but a rejection is an error in kube's words."""
    timed = state.record_plugin_metrics
    started = time.perf_counter() if timed else 0.0
    try:
        status = plugin.filter(state, pod, node_info)
    except Exception as exc:
        status = Status.as_error(exc)
    if timed:
        metrics.observe_plugin(state, metrics.FILTER, plugin.name, status, started)
    if status is None or status.code == Code.SUCCESS:
        return None
    return _named_rejection(plugin.name, status)


def _says_node_local(plugin: Plugin, state: CycleState) -> bool:
    if not callable(getattr(plugin, "node_local", None)):
        return False
    return cast(NodeLocalPlugin, plugin).node_local(state)


def _named_rejection(plugin: str, status: Status) -> Status:
    """A Filter's non-success status as the framework reports it: named, errors in kube's words."""
    if status.is_rejection:
        return status.with_plugin(plugin)
    message = f'running "{plugin}" filter plugin: {status.message}'
    return Status(Code.ERROR, (message,), status.error or FrameworkError(message), plugin)


# One Filter plugin of a batch run, in profile order: its mask (None: it runs per node) and, when
# its batch form gave them, its verdicts. A plain tuple: a cycle builds one per plugin.
_FilterStep = tuple[FilterPlugin, BoolArray | None, FilterVerdicts | None]


class BatchFilter:
    """The batch Filter answers for one pod: which rows pass every batch form, which plugins still
    run per node, and each rejected row's status as kube's per-node loop would record it — the
    first plugin in profile order that rejects the row, with that plugin's reasons."""

    __slots__ = ("mask", "per_node", "steps")

    def __init__(self, mask: BoolArray, per_node: list[FilterPlugin], steps: list[_FilterStep]) -> None:
        self.mask = mask
        self.per_node = per_node
        self.steps = steps

    def rejections(
        self, state: CycleState, pod: Pod, infos: Sequence[NodeInfo], rows: Sequence[int]
    ) -> list[Status | None]:
        """The statuses of `rows`, which the batch mask rejects (None: no plugin rejects the row,
        a batch form disagreeing with its per-node form). Plugins without verdicts are asked per
        node, and only for the rows they are first to reject."""
        out: list[Status | None] = [None] * len(rows)
        if not rows:
            return out
        pending = np.ones(len(rows), np.bool_)
        at = np.asarray(rows, np.int64)
        for plugin, mask, verdicts in self.steps:
            if mask is None:
                for i in np.flatnonzero(pending).tolist():
                    status = _run_filter_plugin(plugin, state, pod, infos[rows[i]])
                    if status is not None:
                        out[i] = status
                        pending[i] = False
                continue
            hit = pending & ~mask[at]
            if not hit.any():
                continue
            pending &= ~hit
            index = np.flatnonzero(hit)
            explained = verdicts.statuses(at[index]) if verdicts is not None else [None] * len(index)
            named: dict[int, Status] = {}  # a verdict's status object is shared by the rows it covers
            for i, status in zip(index.tolist(), explained, strict=True):
                if status is None:
                    out[i] = _run_filter_plugin(plugin, state, pod, infos[rows[i]])
                else:
                    known = named.get(id(status))
                    if known is None:
                        known = named[id(status)] = _named_rejection(plugin.name, status)
                    out[i] = known
            if not pending.any():
                break
        return out


def _timed(point: str, profile: str, started: float, status: Status | None) -> None:
    metrics.observe_extension_point(point, status, profile, started)


class Framework:
    """One profile: its plugins per extension point, weights and the handle they share."""

    def __init__(
        self,
        profile_name: str,
        plugins: Mapping[str, Sequence[Plugin]],
        score_weights: Mapping[str, int],
        handle: FrameworkHandle,
        percentage_of_nodes_to_score: int | None = None,
        events: Mapping[str, Sequence[ClusterEventWithHint]] | None = None,
        placement_feasible: Sequence[PlacementFeasiblePlugin] = (),
    ) -> None:
        self.profile_name = profile_name
        # Not a configurable point in kube either: GangScheduling is the one such plugin, taken from
        # the profile when GenericWorkload is on (scheduler.profile).
        self.placement_feasible_plugins = list(placement_feasible)
        self.handle = handle
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        get = plugins.get
        self.pre_enqueue_plugins = cast(list[PreEnqueuePlugin], list(get("preEnqueue", ())))
        sorters = cast(list[QueueSortPlugin], list(get("queueSort", ())))
        if len(sorters) != 1:
            raise FrameworkError(f"profile {profile_name!r}: exactly one queueSort plugin must be enabled")
        self.queue_sort = sorters[0]
        self.pre_filter_plugins = cast(list[PreFilterPlugin], list(get("preFilter", ())))
        self.filter_plugins = cast(list[FilterPlugin], list(get("filter", ())))
        # The filter plugins by name, for the list they were taken from (tests swap the list).
        self._filters_by_name: tuple[list[FilterPlugin] | None, dict[str, FilterPlugin]] = (None, {})
        self.post_filter_plugins = cast(list[PostFilterPlugin], list(get("postFilter", ())))
        self.pre_score_plugins = cast(list[PreScorePlugin], list(get("preScore", ())))
        self.score_plugins = cast(list[ScorePlugin], list(get("score", ())))
        self.reserve_plugins = cast(list[ReservePlugin], list(get("reserve", ())))
        self.permit_plugins = cast(list[PermitPlugin], list(get("permit", ())))
        self.pre_bind_plugins = cast(list[PreBindPlugin], list(get("preBind", ())))
        self.bind_plugins = cast(list[BindPlugin], list(get("bind", ())))
        self.post_bind_plugins = cast(list[PostBindPlugin], list(get("postBind", ())))
        self.placement_generate_plugins = cast(list[PlacementGeneratePlugin], list(get("placementGenerate", ())))
        self.placement_score_plugins = cast(list[PlacementScorePlugin], list(get("placementScore", ())))
        self.placement_score_weights = {p.name: score_weights.get(p.name, 1) for p in self.placement_score_plugins}
        self.pod_group_post_filter_plugins = cast(list[PodGroupPostFilterPlugin], list(get("podGroupPostFilter", ())))
        if not self.bind_plugins:
            raise FrameworkError(f"profile {profile_name!r}: at least one bind plugin must be enabled")
        self.score_weights = {p.name: score_weights.get(p.name, 1) for p in self.score_plugins}
        self.events = dict(events or {})
        self._logged_crashes: set[tuple[str, str, str]] = set()
        # (nominated pod uid, node) -> (the nominated Pod object, its copy placed on the node): the
        # same nominations are filtered with on node after node, cycle after cycle.
        self._placed: dict[tuple[str, str], tuple[Pod, Pod]] = {}
        handle.frameworks[profile_name] = self
        # OpportunisticBatching: the plugins that sign pods, when every PreFilter, Filter, PreScore
        # and Score plugin can (else no pod of this profile is signed), and the profile's batch.
        self.signers: list[SignPlugin] | None = None
        # The order plugins are asked to sign in: the one that refused the last pod first.
        self._sign_order: tuple[int, ...] = ()
        self.batch: OpportunisticBatch | None = None
        gates = handle.feature_gates
        if gates.enabled(OPPORTUNISTIC_BATCHING):
            self.signers = self._batchable_plugins()
            self._sign_order = tuple(range(len(self.signers or ())))
            self.batch = OpportunisticBatch(self, gates.enabled(GENERIC_WORKLOAD))

    def _batchable_plugins(self) -> list[SignPlugin] | None:
        signers: dict[str, SignPlugin] = {}
        unsignable: list[str] = []
        candidates: list[Plugin] = [
            *self.pre_filter_plugins,
            *self.filter_plugins,
            *self.pre_score_plugins,
            *self.score_plugins,
        ]
        for plugin in candidates:
            if plugin.name in signers or plugin.name in unsignable:
                continue
            if callable(getattr(plugin, "sign_pod", None)):
                signers[plugin.name] = cast(SignPlugin, plugin)
            else:
                unsignable.append(plugin.name)
        if unsignable:
            log.info(
                "profile signs no pods (OpportunisticBatching off for it): plugins cannot sign",
                profile=self.profile_name,
                plugins=unsignable,
            )
            return None
        return list(signers.values())

    def _plugin_raised(self, point: str, plugin: str, pod: Pod, exc: Exception) -> Status:
        """Log a plugin's exception once per (point, plugin, pod); the Error status it stands for."""
        key = (point, plugin, pod.uid)
        if key not in self._logged_crashes:
            if len(self._logged_crashes) >= _MAX_REMEMBERED_CRASHES:
                self._logged_crashes.clear()
            self._logged_crashes.add(key)
            log.error(
                "plugin raised an exception",
                extension_point=point,
                plugin=plugin,
                pod=pod.key,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=exc,
            )
        return Status.as_error(exc, plugin)

    # ---- queue ---------------------------------------------------------------------------

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        try:
            return self.queue_sort.less(a, b)
        except Exception as exc:
            # The heap must stay ordered whatever the plugin does: fall back to first come, first served.
            self._plugin_raised("QueueSort", self.queue_sort.name, a.pod, exc)
            return a.timestamp < b.timestamp

    def sign_pod(self, pod: Pod) -> Signature | None:
        """The pod's signature: equal for pods this profile filters and scores alike; None when a
        plugin cannot sign it or the profile does not batch (kube's SignPod)."""
        started = time.perf_counter()
        signers = self.signers
        signature = self._sign(signers, pod) if signers is not None else None
        metrics.observe_extension_point(metrics.SIGN, None, self.profile_name, started)
        return signature

    def _sign(self, signers: Sequence[SignPlugin], pod: Pod) -> Signature | None:
        # The plugin that refused the last pod is asked first: a profile whose pods one plugin never
        # signs (PodTopologySpread with default constraints) pays one call per pod, not all of them.
        # Fragments still go into the signature in profile order, whoever was asked first.
        timed = metrics.should_record_plugin_metrics()
        signed: list[Sequence[SignFragment] | None] = [None] * len(signers)
        for position in self._sign_order:
            fragments = self._sign_with(signers[position], pod, timed)
            if fragments is None:
                if self._sign_order[0] != position:
                    self._sign_order = (position, *(other for other in self._sign_order if other != position))
                return None
            signed[position] = fragments
        signature: dict[str, object] = {SCHEDULER_NAME: pod.scheduler_name}
        for fragments in signed:
            for key, value in fragments or ():
                signature[key] = value
        return cast(Signature, tuple(signature.items()))

    def _sign_with(self, plugin: SignPlugin, pod: Pod, timed: bool) -> Sequence[SignFragment] | None:
        """One plugin's fragments, or None when it cannot sign the pod."""
        started = time.perf_counter() if timed else 0.0
        try:
            fragments, status = plugin.sign_pod(pod)
        except Exception as exc:
            status = self._plugin_raised(metrics.SIGN, plugin.name, pod, exc)
            fragments = ()
        if timed:
            metrics.recorder.observe_plugin_duration(metrics.SIGN, plugin.name, status, time.perf_counter() - started)
        if status is not None and status.code != Code.SUCCESS:
            return None
        return fragments

    @metrics.timed_extension_point(metrics.PRE_ENQUEUE, status_label=False)
    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        sampled = metrics.should_record_plugin_metrics()  # the queue samples per pod, not per cycle
        for plugin in self.pre_enqueue_plugins:
            started = time.perf_counter()
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as exc:
                return self._plugin_raised("PreEnqueue", plugin.name, pod, exc)
            if sampled:
                metrics.recorder.observe_plugin_duration(
                    metrics.PRE_ENQUEUE, plugin.name, status, time.perf_counter() - started
                )
            if status is not None and status.code != Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # ---- filtering -----------------------------------------------------------------------

    def run_pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """The merged node restriction, the status, and the plugins whose results narrowed the nodes.

        As kube since #119779: every plugin runs even after one says Unschedulable (preemption needs
        their state; the last such status is returned), UnschedulableAndUnresolvable or an error stops
        at once, and an empty intersection of results is UnschedulableAndUnresolvable.
        """
        started = time.perf_counter()
        result: PreFilterResult | None = None
        narrowing: set[str] = set()
        status: Status | None = None
        for plugin in self.pre_filter_plugins:
            plugin_started = time.perf_counter()
            try:
                plugin_result, plugin_status = plugin.pre_filter(state, pod, nodes)
            except Exception as exc:
                plugin_status = Status.as_error(exc)
                plugin_result = None
            metrics.observe_plugin(state, metrics.PRE_FILTER, plugin.name, plugin_status, plugin_started)
            metrics.plugin_evaluation.add_unless_skip(plugin.name, metrics.PRE_FILTER, self.profile_name, plugin_status)
            if plugin_status is not None and plugin_status.code == Code.SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            if plugin_status is not None and plugin_status.code != Code.SUCCESS:
                plugin_status = plugin_status.with_plugin(plugin.name)
                if plugin_status.code == Code.UNSCHEDULABLE:
                    status = plugin_status
                    continue
                if plugin_status.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    message = f'running PreFilter plugin "{plugin.name}": {plugin_status.message}'
                    plugin_status = Status(
                        Code.ERROR, (message,), plugin_status.error or FrameworkError(message), plugin.name
                    )
                _timed("PreFilter", self.profile_name, started, plugin_status)
                return None, plugin_status, set()
            if plugin_result is not None and plugin_result.node_names is not None:
                narrowing.add(plugin.name)
                result = plugin_result if result is None else result.merge(plugin_result)
                if not result.node_names:
                    status = Status.unresolvable(
                        f"node(s) didn't satisfy plugin {next(iter(narrowing))}"
                        if len(narrowing) == 1
                        else f"node(s) didn't satisfy plugin(s) {plugin_list(narrowing)} simultaneously"
                    )
                    break
        _timed("PreFilter", self.profile_name, started, status)
        return result, status, narrowing

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension(state, pod, pod_to_add, node_info, adding=True)

    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extension(state, pod, pod_to_remove, node_info, adding=False)

    def _run_pre_filter_extension(
        self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo, *, adding: bool
    ) -> Status | None:
        """AddPod or RemovePod of every PreFilter plugin that ran and has extensions; first failure wins."""
        point = metrics.PRE_FILTER_EXTENSION_ADD_POD if adding else metrics.PRE_FILTER_EXTENSION_REMOVE_POD
        for plugin in self.pre_filter_plugins:
            if plugin.name in state.skip_filter_plugins:
                continue
            ext = plugin.pre_filter_extensions()
            if ext is None:
                continue
            plugin_started = time.perf_counter()
            try:
                if adding:
                    status = ext.add_pod(state, pod, other, node_info)
                else:
                    status = ext.remove_pod(state, pod, other, node_info)
            except Exception as exc:
                return self._plugin_raised(point, plugin.name, pod, exc)
            metrics.observe_plugin(state, point, plugin.name, status, plugin_started)
            if status is not None and status.code != Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    def has_pre_filter_extensions(self, state: CycleState) -> bool:
        """Whether AddPod/RemovePod can do anything for this cycle state: some PreFilter plugin with
        extensions ran (did not skip)."""
        skip = state.skip_filter_plugins
        return any(p.name not in skip and p.pre_filter_extensions() is not None for p in self.pre_filter_plugins)

    def node_local(self, state: CycleState) -> bool:
        """Whether everything that acts for this cycle state stays on one node (NodeLocalPlugin): every
        Filter plugin and PreFilter extension whose PreFilter did not skip, and every Reserve plugin
        (Reserve runs whatever PreFilter said). A plugin that cannot say is not node-local."""
        skip = state.skip_filter_plugins
        extended = [p for p in self.pre_filter_plugins if p.pre_filter_extensions() is not None]
        for plugin in (*self.filter_plugins, *extended):
            if plugin.name not in skip and not _says_node_local(plugin, state):
                return False
        return all(_says_node_local(plugin, state) for plugin in self.reserve_plugins)

    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo, first: str = "") -> Status | None:
        """The first non-success Filter status on this node (with its plugin), or None.

        `first` names a plugin to ask before the others (the one that rejected the last, similar
        question): whether any rejects does not depend on the order, which one is reported does."""
        skip = state.skip_filter_plugins
        if first and not (skip and first in skip):
            plugin = self._filter_plugin(first)
            if plugin is not None:
                status = _run_filter_plugin(plugin, state, pod, node_info)
                if status is not None:
                    return status
        for plugin in self.filter_plugins:
            if (skip and plugin.name in skip) or plugin.name == first:
                continue
            status = _run_filter_plugin(plugin, state, pod, node_info)
            if status is not None:
                return status
        return None

    def _filter_plugin(self, name: str) -> FilterPlugin | None:
        plugins, by_name = self._filters_by_name
        if plugins is not self.filter_plugins:
            by_name = {plugin.name: plugin for plugin in self.filter_plugins}
            self._filters_by_name = (self.filter_plugins, by_name)
        return by_name.get(name)

    def run_filter_with_nominated(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, first: str = ""
    ) -> Status | None:
        """Filter twice when higher-or-equal priority pods are nominated here: with them, then without.

        Nominated pods of lower priority are ignored: this pod may take the room freed for them.
        `first` as for run_filter.
        """
        nominated = [
            p
            for p in self.handle.nominator.pods_for_node(node_info.name)
            if p.uid != pod.uid and p.priority >= pod.priority
        ]
        if not nominated:
            return self.run_filter(state, pod, node_info, first)
        with_pods = node_info.clone()
        state_with = state.clone()
        for other in nominated:
            placed = self._placed_on(other, node_info.name)
            with_pods.add_pod(placed)
            add_status = self.run_pre_filter_add_pod(state_with, pod, placed, with_pods)
            if add_status is not None:
                return add_status
        status = self.run_filter(state_with, pod, with_pods, first)
        if status is not None:
            return status
        return self.run_filter(state, pod, node_info, first)

    def _placed_on(self, pod: Pod, node_name: str) -> Pod:
        """`pod` as if bound to `node_name` (a copy, remembered while the nominated object is the same)."""
        key = (pod.uid, node_name)
        found = self._placed.get(key)
        if found is not None and found[0] is pod:
            return found[1]
        if len(self._placed) >= PLACED_MEMO_SIZE:
            self._placed.clear()
        placed = pod.on_node(node_name)
        self._placed[key] = (pod, placed)
        return placed

    def run_post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        """Stops at the first plugin that makes the pod schedulable (e.g. preemption nominates a node).

        The nominated name is None (leave the nomination), "" (clear it) or a node name; among
        rejecting plugins the last one that said anything about the nomination wins.
        """
        started = time.perf_counter()
        messages: list[str] = []
        final: Status | None = Status.unschedulable()
        result: str | None = None
        for plugin in self.post_filter_plugins:
            plugin_started = time.perf_counter()
            try:
                nominated, status = plugin.post_filter(state, pod, node_to_status)
            except Exception as exc:
                final = Status.as_error(exc, plugin.name)
                result = None
                break
            metrics.observe_plugin(state, metrics.POST_FILTER, plugin.name, status, plugin_started)
            if status is None or status.code == Code.SUCCESS:
                _timed("PostFilter", self.profile_name, started, None)
                return nominated, status
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return nominated, status.with_plugin(plugin.name)
            if status.code == Code.ERROR:
                final = status.with_plugin(plugin.name)
                result = None
                messages = list(status.reasons)
                break
            if nominated is not None:
                result = nominated
            messages.extend(status.reasons)
            final = final if final is not None and final.plugin else status.with_plugin(plugin.name)
        _timed("PostFilter", self.profile_name, started, final)
        if final is not None and messages:
            final = Status(final.code, tuple(messages), final.error, final.plugin)
        return result, final

    # ---- scoring -------------------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        started = time.perf_counter()
        result: Status | None = None
        for plugin in self.pre_score_plugins:
            plugin_started = time.perf_counter()
            try:
                status = plugin.pre_score(state, pod, nodes)
            except Exception as exc:
                result = Status.as_error(exc, plugin.name)
                break
            metrics.observe_plugin(state, metrics.PRE_SCORE, plugin.name, status, plugin_started)
            metrics.plugin_evaluation.add_unless_skip(plugin.name, metrics.PRE_SCORE, self.profile_name, status)
            if status is not None and status.code == Code.SKIP:
                state.skip_score_plugins.add(plugin.name)
                continue
            if status is not None and status.code != Code.SUCCESS:
                result = Status.as_error(
                    FrameworkError(f"running PreScore plugin {plugin.name}: {status.message}"), plugin.name
                )
                break
        _timed("PreScore", self.profile_name, started, result)
        return result

    def run_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[list[NodeScore], dict[str, list[NodeScore]], Status | None]:
        """Weighted totals per node, plus each plugin's normalised (unweighted) scores (per-node forms)."""
        totals, per_plugin, status = self.score_nodes(state, pod, nodes)
        if status is not None:
            return [], {}, status
        names = [n.name for n in nodes]
        return (
            [NodeScore(name, int(score)) for name, score in zip(names, totals, strict=True)],
            {p: [NodeScore(n, int(v)) for n, v in zip(names, arr, strict=True)] for p, arr in per_plugin.items()},
            None,
        )

    def score_nodes(
        self,
        state: CycleState,
        pod: Pod,
        nodes: Sequence[NodeInfo],
        table: NodeTable | None = None,
        rows: IntArray | None = None,
        keep_raw: dict[str, IntArray] | None = None,
    ) -> tuple[IntArray, dict[str, IntArray], Status | None]:
        """Weighted totals and normalised per-plugin scores as arrays aligned with `nodes`.

        With a node table and the nodes' rows, plugins that have a batch form score all rows at once.
        `keep_raw` receives each plugin's scores before NormalizeScore (OpportunisticBatching keeps them).
        """
        started = time.perf_counter()
        per_plugin: dict[str, IntArray] = {}
        totals: IntArray = np.zeros(len(nodes), np.int64)
        skip = state.skip_score_plugins
        for plugin in self.score_plugins:
            if plugin.name in skip:
                continue
            metrics.plugin_evaluation.add(plugin.name, metrics.SCORE, self.profile_name, len(nodes))
            plugin_started = time.perf_counter()
            try:
                scores = None
                batch = getattr(plugin, "score_batch", None) if table is not None and rows is not None else None
                if batch is not None:
                    scores = batch(state, pod, table, rows)
                if scores is None:
                    values = []
                    for info in nodes:
                        value, status = plugin.score(state, pod, info)
                        if status is not None and status.code != Code.SUCCESS:
                            error = FrameworkError(f"running Score plugin {plugin.name}: {status.message}")
                            return totals, {}, Status.as_error(error, plugin.name)
                        values.append(value)
                    scores = np.array(values, np.int64)
                metrics.observe_plugin(state, metrics.SCORE, plugin.name, None, plugin_started)
                if keep_raw is not None:
                    keep_raw[plugin.name] = scores.copy()
                scores, status = self._normalized(plugin, state, pod, nodes, scores)
            except Exception as exc:
                return totals, {}, Status.as_error(exc, plugin.name)
            if status is not None:
                return totals, {}, status
            totals += scores * self.score_weights[plugin.name]
            per_plugin[plugin.name] = scores
        _timed("Score", self.profile_name, started, None)
        return totals, per_plugin, None

    def _normalized(
        self, plugin: ScorePlugin, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: IntArray
    ) -> tuple[IntArray, Status | None]:
        """One plugin's scores after its NormalizeScore, checked to be within [0, 100]."""
        ext = plugin.score_extensions()
        if ext is not None:
            plugin_started = time.perf_counter()
            scores, status = _normalize(ext, state, pod, nodes, scores)
            metrics.observe_plugin(state, metrics.NORMALIZE_SCORE, plugin.name, status, plugin_started)
            if status is not None:
                error = FrameworkError(f"running NormalizeScore plugin {plugin.name}: {status.message}")
                return scores, Status.as_error(error, plugin.name)
        if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            bad = int(np.flatnonzero((scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE))[0])
            error = FrameworkError(
                f"plugin {plugin.name!r} returns an invalid score {int(scores[bad])} for node "
                f"{nodes[bad].name!r}, it should be in the range [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] "
                "after normalizing"
            )
            return scores, Status.as_error(error, plugin.name)
        return scores, None

    # ---- OpportunisticBatching's rescoring (framework/batch.py) ---------------------------

    def snapshot_nodes(self) -> Sequence[NodeInfo]:
        return self.handle.snapshot.list()

    def current_node_infos(self, names: Iterable[str]) -> list[NodeInfo] | None:
        """The snapshot's NodeInfos of these nodes; None when one has left (or lost its Node)."""
        get = self.handle.snapshot.get
        infos = [get(name) for name in names]
        for info in infos:
            if info is None or info.node is None:
                return None
        return cast(list[NodeInfo], infos)

    def raw_score_node(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[dict[str, int], Status | None]:
        """Each non-skipped Score plugin's score of one node, before NormalizeScore (kube's RunRawScorePlugins)."""
        raw: dict[str, int] = {}
        for plugin in self.score_plugins:
            if plugin.name in state.skip_score_plugins:
                continue
            plugin_started = time.perf_counter()
            try:
                value, status = plugin.score(state, pod, node_info)
            except Exception as exc:
                return {}, Status.as_error(exc, plugin.name)
            metrics.observe_plugin(state, metrics.SCORE, plugin.name, status, plugin_started)
            if status is not None and status.code != Code.SUCCESS:
                error = FrameworkError(f"plugin {plugin.name!r} failed with: {status.message}")
                return {}, Status.as_error(error, plugin.name)
            raw[plugin.name] = value
        return raw, None

    def normalize_scores(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], raw: Mapping[str, IntArray]
    ) -> tuple[IntArray, Status | None]:
        """Weighted totals over `nodes` from raw scores aligned with them (kube's NormalizeScores):
        each non-skipped plugin's NormalizeScore runs across these nodes only."""
        totals: IntArray = np.zeros(len(nodes), np.int64)
        for plugin in self.score_plugins:
            if plugin.name in state.skip_score_plugins:
                continue
            column = raw.get(plugin.name)
            scores = column.copy() if column is not None else np.zeros(len(nodes), np.int64)
            try:
                scores, status = self._normalized(plugin, state, pod, nodes, scores)
            except Exception as exc:
                return totals, Status.as_error(exc, plugin.name)
            if status is not None:
                return totals, status
            totals += scores * self.score_weights[plugin.name]
        return totals, None

    def record_filter_evaluations(self, state: CycleState, feasible: int, rejected: Mapping[str, Status]) -> None:
        """scheduler_plugin_evaluation_total for one cycle's Filter, counted as kube's per-node loop
        calls plugins (each node up to the plugin that rejected it) whichever form ran; once per
        cycle, as a counter per plugin call would cost more than the call."""
        stops: dict[str, int] = {}
        for status in rejected.values():
            stops[status.plugin] = stops.get(status.plugin, 0) + 1
        evaluated = feasible
        for plugin in reversed(self.filter_plugins):
            if plugin.name not in state.skip_filter_plugins:
                evaluated += stops.get(plugin.name, 0)
                if evaluated:
                    metrics.plugin_evaluation.add(plugin.name, metrics.FILTER, self.profile_name, evaluated)

    def run_filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> BatchFilter:
        """Every batch-capable Filter plugin's answer for all rows; the others are left per node."""
        mask: BoolArray = np.ones(table.size, np.bool_)
        per_node: list[FilterPlugin] = []
        steps: list[_FilterStep] = []
        skip = state.skip_filter_plugins
        for plugin in self.filter_plugins:
            if skip and plugin.name in skip:
                continue
            batch = getattr(plugin, "filter_batch", None)
            started = time.perf_counter()
            result = batch(state, pod, table) if batch is not None else None
            if result is None:
                per_node.append(plugin)
                steps.append((plugin, None, None))
                continue
            metrics.observe_plugin(state, metrics.FILTER, plugin.name, None, started)
            if isinstance(result, FilterVerdicts):
                mask &= result.passes
                steps.append((plugin, result.passes, result))
            else:
                mask &= result
                steps.append((plugin, result, None))
        return BatchFilter(mask, per_node, steps)

    def run_filter_plugins(
        self, plugins: Sequence[FilterPlugin], state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> Status | None:
        """run_filter restricted to `plugins` (those without a batch verdict for this pod)."""
        for plugin in plugins:
            status = _run_filter_plugin(plugin, state, pod, node_info)
            if status is not None:
                return status
        return None

    # ---- reserve / permit ----------------------------------------------------------------

    @metrics.timed_extension_point(metrics.RESERVE)
    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for plugin in self.reserve_plugins:
            plugin_started = time.perf_counter()
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as exc:
                return Status.as_error(exc, plugin.name)
            metrics.observe_plugin(state, metrics.RESERVE, plugin.name, status, plugin_started)
            if status is not None and status.code != Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    @metrics.timed_extension_point(metrics.UNRESERVE)
    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in reversed(self.reserve_plugins):
            plugin_started = time.perf_counter()
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception as exc:
                self._plugin_raised("Unreserve", plugin.name, pod, exc)
            metrics.observe_plugin(state, metrics.UNRESERVE, plugin.name, None, plugin_started)

    def run_placement_feasible(self, group: PodGroupState, progress: PlacementProgress) -> Status | None:
        """kube's RunPlacementFeasiblePlugins: Unschedulable stops at once; Wait is remembered while
        the rest run; anything else is an Error naming the plugin."""
        result: Status | None = None
        for plugin in self.placement_feasible_plugins:
            try:
                status = plugin.placement_feasible(group, progress)
            except Exception as exc:
                status = Status.as_error(exc)
            if status is None or status.code == Code.SUCCESS:
                continue
            if status.code == Code.WAIT:
                result = status.with_plugin(plugin.name)
                continue
            if status.code == Code.UNSCHEDULABLE:
                return status.with_plugin(plugin.name)
            if status.code == Code.ERROR:
                error = FrameworkError(f"running PlacementFeasible plugin: {status.message}")
                return Status.as_error(error, plugin.name)
            error = FrameworkError(f"unexpected status from PlacementFeasible plugin: {status.code.name}")
            return Status.as_error(error, plugin.name)
        return result

    def run_placement_generate(
        self, group: PodGroupState, nodes: Sequence[NodeInfo]
    ) -> tuple[list[Placement], Status | None]:
        """kube's RunPlacementGeneratePlugins: the first generator splits the whole cluster; without one
        the cluster is the one placement."""
        parent = Placement("", tuple(nodes))
        if not self.placement_generate_plugins:
            return [parent], None
        plugin = self.placement_generate_plugins[0]
        try:
            placements, status = plugin.generate_placements(group, parent)
        except Exception as exc:
            placements, status = [], Status.as_error(exc)
        if status is not None and status.code != Code.SUCCESS:
            return [], status.with_plugin(plugin.name)
        if not placements:
            return [], Status.unschedulable("no feasible placements found", plugin=plugin.name)
        return placements, None

    def run_placement_score(
        self, group: PodGroupState, candidates: Sequence[tuple[Placement, Sequence[tuple[Pod, str]]]]
    ) -> tuple[list[int], Status | None]:
        """kube's RunPlacementScorePlugins: each plugin scores every placement, normalizes, then the
        weighted sum per placement."""
        totals = [0] * len(candidates)
        for plugin in self.placement_score_plugins:
            scores: list[int] = []
            for placement, assignments in candidates:
                try:
                    score, status = plugin.score_placement(group, placement, assignments)
                except Exception as exc:
                    score, status = 0, Status.as_error(exc)
                if status is not None and status.code != Code.SUCCESS:
                    error = FrameworkError(
                        f'running PlacementScore plugins: plugin "{plugin.name}" failed with: {status.message}'
                    )
                    return [], Status.as_error(error, plugin.name)
                scores.append(score)
            status = plugin.normalize_placement_scores(group, scores)
            if status is not None and status.code != Code.SUCCESS:
                error = FrameworkError(
                    f'running NormalizePlacementScore on PlacementScore plugins: plugin "{plugin.name}" failed with: '
                    f"{status.message}"
                )
                return [], Status.as_error(error, plugin.name)
            weight = self.placement_score_weights[plugin.name]
            totals = [total + score * weight for total, score in zip(totals, scores, strict=True)]
        return totals, None

    def run_pod_group_post_filter(
        self, group: PodGroupState, members: Sequence[Pod], simulation: PodGroupSimulation
    ) -> tuple[Mapping[str, str], Status | None]:
        """kube's RunPodGroupPostFilterPlugins: the first success or UnschedulableAndUnresolvable wins
        (with its nominations); Unschedulable reasons are gathered; anything else is an Error naming
        the plugin."""
        reasons: list[str] = []
        rejector = ""
        for plugin in self.pod_group_post_filter_plugins:
            nominations: Mapping[str, str] = {}
            try:
                nominations, status = plugin.pod_group_post_filter(group, members, simulation)
            except Exception as exc:
                status = Status.as_error(exc)
            if status is None or status.code == Code.SUCCESS:
                return nominations, status
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return {}, status.with_plugin(plugin.name)
            if status.code == Code.UNSCHEDULABLE:
                reasons.extend(status.reasons)
                rejector = rejector or plugin.name
                continue
            error = FrameworkError(f'error in "{plugin.name}" PodGroupPostFilter plugins: {status.message}')
            return {}, Status.as_error(error, plugin.name)
        return {}, Status(Code.UNSCHEDULABLE, tuple(reasons), plugin=rejector)

    @metrics.timed_extension_point(metrics.PERMIT)
    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """None to go on, Wait when some plugin holds the pod, or the rejecting status."""
        pending: dict[str, float] = {}
        for plugin in self.permit_plugins:
            plugin_started = time.perf_counter()
            try:
                status, timeout = plugin.permit(state, pod, node_name)
            except Exception as exc:
                return Status.as_error(exc, plugin.name)
            metrics.observe_plugin(state, metrics.PERMIT, plugin.name, status, plugin_started)
            if status is None or status.code == Code.SUCCESS:
                continue
            if status.code == Code.WAIT:
                pending[plugin.name] = min(timeout, MAX_PERMIT_TIMEOUT)
                continue
            if status.is_rejection:
                return status.with_plugin(plugin.name)
            return Status.as_error(
                status.error or FrameworkError(f"running Permit plugin {plugin.name}: {status.message}"),
                plugin.name,
            )
        if pending:
            waiting = WaitingPod(pod, pending)
            loop = asyncio.get_running_loop()
            for name, timeout in pending.items():
                waiting.timers.append(
                    loop.call_later(
                        timeout,
                        waiting.reject,
                        name,
                        f"rejected due to timeout after waiting {go_duration(timeout)} at plugin {name}",
                    )
                )
            self.handle.waiting_pods[pod.uid] = waiting
            return Status(Code.WAIT, ("one or more plugins asked to wait",))
        return None

    async def wait_on_permit(self, pod: Pod) -> Status | None:
        waiting = self.handle.waiting_pods.get(pod.uid)
        if waiting is None:
            return None
        started = time.perf_counter()
        try:
            return metrics.observed_permit_wait(await waiting.future, started)
        finally:
            self.handle.waiting_pods.pop(pod.uid, None)

    # ---- binding -------------------------------------------------------------------------

    @metrics.timed_async_extension_point(metrics.PRE_BIND)
    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for plugin in self.pre_bind_plugins:
            plugin_started = time.perf_counter()
            try:
                status = await plugin.pre_bind(state, pod, node_name)
            except Exception as exc:
                status = Status.as_error(exc, plugin.name)
            else:
                metrics.observe_plugin(state, metrics.PRE_BIND, plugin.name, status, plugin_started)
            if status is None or status.code in (Code.SUCCESS, Code.SKIP):
                continue
            if status.is_rejection:
                return status.with_plugin(plugin.name)
            # kube wraps a PreBind error with the plugin's name (the pod's SchedulerError message).
            error = FrameworkError(f'running PreBind plugin "{plugin.name}": {status.message}')
            return Status.as_error(error, plugin.name)
        return None

    @metrics.timed_async_extension_point(metrics.BIND)
    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for plugin in self.bind_plugins:
            plugin_started = time.perf_counter()
            try:
                status = await plugin.bind(state, pod, node_name)
            except Exception as exc:
                return Status.as_error(exc, plugin.name)
            metrics.observe_plugin(state, metrics.BIND, plugin.name, status, plugin_started)
            if status is not None and status.code == Code.SKIP:
                continue
            if status is not None and status.code != Code.SUCCESS:
                return status.with_plugin(plugin.name)
            return None
        return Status(Code.SKIP, ("all bind plugins skipped the pod",))

    @metrics.timed_extension_point(metrics.POST_BIND)
    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in self.post_bind_plugins:
            plugin_started = time.perf_counter()
            plugin.post_bind(state, pod, node_name)
            metrics.observe_plugin(state, metrics.POST_BIND, plugin.name, None, plugin_started)

    def plugin_names(self) -> dict[str, list[str]]:
        """For logs and `explain`: enabled plugins per extension point."""
        points: dict[str, Any] = {
            "preEnqueue": self.pre_enqueue_plugins,
            "queueSort": [self.queue_sort],
            "preFilter": self.pre_filter_plugins,
            "filter": self.filter_plugins,
            "postFilter": self.post_filter_plugins,
            "preScore": self.pre_score_plugins,
            "score": self.score_plugins,
            "reserve": self.reserve_plugins,
            "permit": self.permit_plugins,
            "preBind": self.pre_bind_plugins,
            "bind": self.bind_plugins,
            "postBind": self.post_bind_plugins,
            "placementGenerate": self.placement_generate_plugins,
            "placementScore": self.placement_score_plugins,
            "podGroupPostFilter": self.pod_group_post_filter_plugins,
        }
        return {point: [p.name for p in plugins] for point, plugins in points.items()}
