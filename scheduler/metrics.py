"""Prometheus metrics with kube-scheduler v1.37's names, help, labels and buckets (a leaf module).
One family is this project's own, marked where it is defined (eviction-based preemption).

Owns every family the scheduler exports: the `scheduler_*` families of kube-scheduler
(pkg/scheduler/metrics), client-go's `rest_client_*`, `leader_election_*`, the delegated
authentication and authorization `apiserver_delegated_*`, and `process_*`.
Series that only restate state another component keeps (queue contents, cache sizes) are read
from that component at scrape time through a registered source, so the hot path pays nothing.
Plugin and queueing-hint durations go through a bounded buffer flushed once a second, as
kube's MetricAsyncRecorder does (observations beyond the buffer are dropped, as upstream).

Imports nothing of the scheduler's own; must never block or raise into the code it observes.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import math
import random
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from prometheus_client import (
    CollectorRegistry,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client import Counter as _Counter
from prometheus_client import Gauge as _Gauge
from prometheus_client import Histogram as _Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# kube-scheduler has no `*_created` series; neither do we.
disable_created_metrics()  # type: ignore[no-untyped-call]


_NO_EXEMPLARS = "exemplars are not recorded by the scheduler's metrics"


class _LoopValue:
    """One series' value, written only on the event loop's thread (as every family here is: the
    scheduler, its clients and its /metrics server share one loop), so no lock is taken per write.
    prometheus_client's own value takes a mutex on every inc and get: 0.3-0.8 us per observation,
    ~5 % of a bound pod's CPU on the 20000-node batch workloads (py-spy)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = 0.0

    def inc(self, amount: float) -> None:
        self._value += amount

    def set(self, value: float, timestamp: float | None = None) -> None:
        self._value = value

    def get(self) -> float:
        return self._value

    def set_exemplar(self, exemplar: object) -> None:
        raise ValueError(_NO_EXEMPLARS)

    def get_exemplar(self) -> None:
        return None


class Counter(_Counter):
    """prometheus_client's Counter with the loop's lock-free value."""

    def _metric_init(self) -> None:
        super()._metric_init()
        self._value = _LoopValue()

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        if exemplar:
            raise ValueError(_NO_EXEMPLARS)
        self._value._value += amount


class Gauge(_Gauge):
    """prometheus_client's Gauge with the loop's lock-free value."""

    def _metric_init(self) -> None:
        super()._metric_init()
        self._value = _LoopValue()

    def inc(self, amount: float = 1) -> None:
        self._value._value += amount

    def dec(self, amount: float = 1) -> None:
        self._value._value -= amount

    def set(self, value: float) -> None:
        self._value._value = float(value)


class Histogram(_Histogram):
    """prometheus_client's Histogram with the loop's lock-free values; an observation finds its
    bucket by bisection (an amount equal to a bound counts in that bound's bucket, as `le` says)."""

    def _metric_init(self) -> None:
        super()._metric_init()
        self._sum = _LoopValue()
        self._buckets = [_LoopValue() for _ in self._upper_bounds]

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        if exemplar:
            raise ValueError(_NO_EXEMPLARS)
        self._sum._value += amount
        if not math.isnan(amount):  # NaN falls in no bucket (every `le` comparison with it is false)
            self._buckets[bisect.bisect_left(self._upper_bounds, amount)]._value += 1


REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

_CHILDREN: dict[tuple[int, tuple[str, ...]], Any] = {}


def child(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, remembered: the hot path asks for the same few children for every
    pod, and prometheus_client's labels() validates and locks on each call. Every metric is a
    module-level object that lives as long as the process, so its id() is a stable key."""
    key = (id(metric), values)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*values)
    return found


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ExponentialBuckets, multiplied step by step as Go does (so the bounds are the
    same floats, not merely close: start * factor**i rounds differently)."""
    buckets = []
    for _ in range(count):
        buckets.append(start)
        start *= factor
    return tuple(buckets)


# Percentage of scheduling cycles whose plugin durations are recorded (kube's pluginMetricsSamplePercent).
PLUGIN_METRICS_SAMPLE_PERCENT = 10
# MetricAsyncRecorder(1000, time.Second): at most this many buffered observations per flush.
ASYNC_BUFFER_SIZE = 1000
ASYNC_FLUSH_INTERVAL = 1.0

# Extension point labels (pkg/scheduler/metrics).
PRE_ENQUEUE = "PreEnqueue"
PRE_FILTER = "PreFilter"
FILTER = "Filter"
PRE_FILTER_EXTENSION_ADD_POD = "PreFilterExtensionAddPod"
PRE_FILTER_EXTENSION_REMOVE_POD = "PreFilterExtensionRemovePod"
POST_FILTER = "PostFilter"
PRE_SCORE = "PreScore"
SCORE = "Score"
NORMALIZE_SCORE = "ScoreExtensionNormalize"
RESERVE = "Reserve"
UNRESERVE = "Unreserve"
PERMIT = "Permit"
PRE_BIND = "PreBind"
BIND = "Bind"
POST_BIND = "PostBind"
SIGN = "Sign"

# Goroutine operation label for binding cycles (here: asyncio tasks running a binding cycle).
BINDING = "binding"
POD_POPPED_IN_FLIGHT_EVENT = "PodPopped"
ENTITY_POD = "pod"
# kube-scheduler 1.37 counts an entity into scheduler_queue_incoming_entities_total only where no
# queueing strategy chose the queue: a new pod, a forced activation, a finished backoff, a pop from
# backoffQ (recordIncomingEntitiesMetrics with a nil strategy). Requeues by cluster events and
# failed attempts count pods only.
ENTITY_COUNTED_EVENTS = frozenset({"UnscheduledPodAdd", "ForceActivate", "BackoffComplete", "PopFromBackoffQ"})


def code_label(status: Any) -> str:
    """kube's Code.String() for a Status (None is Success): "UnschedulableAndUnresolvable", …"""
    if status is None:
        return "Success"
    return "".join(part.title() for part in status.code.name.split("_"))


def should_record_plugin_metrics() -> bool:
    """Whether this scheduling cycle is one of the sampled ones (a private RNG: the scheduler's
    own seeded RNG, which breaks score ties, must not be consumed by this)."""
    return _sample_rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT


_sample_rng = random.Random()


# ---- scheduler_* (pkg/scheduler/metrics/metrics.go) --------------------------------------------

schedule_attempts = Counter(
    "scheduler_schedule_attempts",
    "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, "
    "while 'error' means an internal scheduler problem.",
    ["result", "profile"],
    registry=REGISTRY,
)
event_handling_duration = Histogram(
    "scheduler_event_handling_duration_seconds",
    "Event handling latency in seconds.",
    ["event"],
    buckets=exponential_buckets(0.0001, 2, 12),
    registry=REGISTRY,
)
scheduling_attempt_duration = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
    ["result", "profile"],
    buckets=exponential_buckets(0.001, 2, 15),
    registry=REGISTRY,
)
scheduling_algorithm_duration = Histogram(
    "scheduler_scheduling_algorithm_duration_seconds",
    "Scheduling algorithm latency in seconds",
    buckets=exponential_buckets(0.001, 2, 15),
    registry=REGISTRY,
)
preemption_victims = Histogram(
    "scheduler_preemption_victims",
    "Number of selected preemption victims for preemption initiated by a single pod",
    buckets=exponential_buckets(1, 2, 7),
    registry=REGISTRY,
)
preemption_attempts = Counter(
    "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=REGISTRY
)
pending_pods = Gauge(
    "scheduler_pending_pods",
    "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number "
    "of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities that the scheduler "
    "attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never "
    "attempted to schedule because they are gated; 'incomplete' means number of pods in incompletePodGroupPods; "
    "'pending' means number of pods in pendingPodGroupPods.",
    ["queue"],
    registry=REGISTRY,
)
goroutines = Gauge(
    "scheduler_goroutines",
    "Number of running goroutines split by the work they do such as binding.",
    ["operation"],
    registry=REGISTRY,
)
pod_scheduling_sli_duration = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve "
    "multiple scheduling attempts.",
    ["attempts"],
    buckets=exponential_buckets(0.01, 2, 20),
    registry=REGISTRY,
)
pod_scheduling_attempts = Histogram(
    "scheduler_pod_scheduling_attempts",
    "Number of attempts to successfully schedule a pod.",
    buckets=exponential_buckets(1, 2, 5),
    registry=REGISTRY,
)
pod_scheduled_after_flush = Counter(
    "scheduler_pod_scheduled_after_flush",
    "Number of pods that were successfully scheduled after being flushed from unschedulableEntities due to "
    "timeout. This metric helps detect potential queueing hint misconfigurations or event handling issues.",
    registry=REGISTRY,
)
framework_extension_point_duration = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.",
    ["extension_point", "status", "profile"],
    buckets=exponential_buckets(0.0001, 2, 12),
    registry=REGISTRY,
)
plugin_execution_duration = Histogram(
    "scheduler_plugin_execution_duration_seconds",
    "Duration for running a plugin at a specific extension point.",
    ["plugin", "extension_point", "status"],
    buckets=exponential_buckets(0.00001, 1.5, 20),
    registry=REGISTRY,
)
queueing_hint_execution_duration = Histogram(
    "scheduler_queueing_hint_execution_duration_seconds",
    "Duration for running a queueing hint function of a plugin.",
    ["plugin", "event", "hint"],
    buckets=exponential_buckets(0.00001, 1.5, 20),
    registry=REGISTRY,
)
queue_incoming_pods = Counter(
    "scheduler_queue_incoming_pods",
    "Number of pods added to scheduling queues by event and queue type.",
    ["queue", "event"],
    registry=REGISTRY,
)
permit_wait_duration = Histogram(
    "scheduler_permit_wait_duration_seconds",
    "Duration of waiting on permit.",
    ["result"],
    buckets=exponential_buckets(0.001, 2, 15),
    registry=REGISTRY,
)
# Asynchronous preemption (SchedulerAsyncPreemption, on by default since 1.33).
preemption_goroutines_duration = Histogram(
    "scheduler_preemption_goroutines_duration_seconds",
    "Duration in seconds for running goroutines for the preemption.",
    ["result"],
    buckets=exponential_buckets(0.01, 2, 20),
    registry=REGISTRY,
)
preemption_goroutines_execution = Counter(
    "scheduler_preemption_goroutines_execution",
    "Number of preemption goroutines executed.",
    ["result"],
    registry=REGISTRY,
)
# Pod-group (workload) preemption, as v1.37.2 registers them with GenericWorkload.
workload_preemption_attempts = Counter(
    "scheduler_workload_preemption_attempts",
    "Total preemption attempts initiated by workload (including pod groups) in the cluster till now.",
    ["result"],
    registry=REGISTRY,
)
workload_preemption_victims = Histogram(
    "scheduler_workload_preemption_victims",
    "Number of pod preemption victims caused by workload preemption.",
    buckets=exponential_buckets(1, 2, 11),
    registry=REGISTRY,
)
preemption_workload_disruptions = Histogram(
    "scheduler_preemption_workload_disruptions",
    "Number of workload preemption units being preempted. A single preemption unit can be all pods in a pod "
    "group (in case of DisruptionMode=all), or a single pod (in case of DisruptionMode=single).",
    ["preemptor"],
    buckets=exponential_buckets(1, 2, 11),
    registry=REGISTRY,
)
preemption_evaluation_duration = Histogram(
    "scheduler_preemption_evaluation_duration_seconds",
    "Duration in seconds for identifying the target preemption victims.",
    ["preemptor", "result"],
    buckets=exponential_buckets(0.001, 2, 16),
    registry=REGISTRY,
)
preemption_pdb_violations = Counter(
    "scheduler_preemption_pdb_violations",
    "Total number of pod disruption budget violations caused by preemption.",
    ["preemptor"],
    registry=REGISTRY,
)
# This project's own (kube-scheduler deletes its victims): how each eviction of a preemption victim
# ended. evicted; blocked_by_pdb (still refused when evictionTimeoutSeconds ran out, left in place);
# deleted_after_budget (evict-then-delete deleted it then); error (any other failure).
preemption_evictions = Counter(
    "scheduler_preemption_evictions",
    "Number of preemption victims removed through the Eviction API, by how the eviction ended.",
    ["result"],
    registry=REGISTRY,
)
# Pod groups (GenericWorkload; the placement families with TopologyAwareWorkloadScheduling). Registered
# by register_pod_group_metrics when the gates are on, as kube-scheduler registers them.
podgroup_schedule_attempts = Counter(
    "scheduler_podgroup_schedule_attempts",
    "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be "
    "scheduled, while 'error' means an internal scheduler problem.",
    ["result", "profile"],
    registry=None,
)
podgroup_scheduling_attempt_duration = Histogram(
    "scheduler_podgroup_scheduling_attempt_duration_seconds",
    "Pod group scheduling attempt latency in seconds",
    ["result", "profile"],
    buckets=exponential_buckets(0.001, 2, 15),
    registry=None,
)
podgroup_scheduling_algorithm_duration = Histogram(
    "scheduler_podgroup_scheduling_algorithm_duration_seconds",
    "Pod group scheduling algorithm latency in seconds",
    buckets=exponential_buckets(0.001, 2, 15),
    registry=None,
)
generated_placements = Counter(
    "scheduler_generated_placements",
    "Number of candidate placements generated when scheduling pod groups.",
    ["profile"],
    registry=None,
)
placement_evaluations = Counter(
    "scheduler_placement_evaluations",
    "Number of candidate placements evaluated when scheduling pod groups, by result. 'feasible' means the pod "
    "group fit into the placement, while 'infeasible' means it did not.",
    ["result", "profile"],
    registry=None,
)
placement_evaluation_duration = Histogram(
    "scheduler_placement_evaluation_duration_seconds",
    "Latency in seconds of evaluating a single candidate placement when scheduling pod groups, by result. "
    "'feasible' means the pod group fit into the placement, while 'infeasible' means it did not.",
    ["result", "profile"],
    buckets=exponential_buckets(0.001, 2, 15),
    registry=None,
)
# OpportunisticBatching (kube's batch.go): results of hint attempts and why the cached batch was dropped.
BATCH_NO_HINT = "no_hint"
BATCH_HINT_USED = "hint_used"
BATCH_HINT_NOT_USED = "hint_not_used"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"
FLUSH_FILTER_ERROR = "filter_error"
FLUSH_PRESCORE_ERROR = "prescore_error"
FLUSH_RESCORE_ERROR = "rescore_error"
FLUSH_NORMALIZE_ERROR = "normalize_error"

batch_attempts = Counter(
    "scheduler_batch_attempts",
    "Counts of results when we attempt to use batching.",
    ["profile", "result"],
    registry=REGISTRY,
)
batch_cache_flushed = Counter(
    "scheduler_batch_cache_flushed",
    "Counts of cache flushes by reason.",
    ["profile", "reason"],
    registry=REGISTRY,
)
batch_rescore_attempts = Counter(
    "scheduler_batch_rescore_attempts",
    "Counts of rescore attempts during opportunistic batching.",
    ["profile"],
    registry=REGISTRY,
)
get_node_hint_duration = Histogram(
    "scheduler_get_node_hint_duration_seconds",
    "Latency for getting a node hint.",
    ["hinted", "profile"],
    buckets=exponential_buckets(0.00001, 2, 12),
    registry=REGISTRY,
)
store_schedule_results_duration = Histogram(
    "scheduler_store_schedule_results_duration_seconds",
    "Latency for storing scheduling results.",
    ["profile"],
    buckets=exponential_buckets(0.00001, 2, 12),
    registry=REGISTRY,
)
batch_rescore_duration = Histogram(
    "scheduler_batch_rescore_duration_seconds",
    "Latency for rescoring a node during opportunistic batching.",
    ["profile"],
    buckets=exponential_buckets(0.00001, 2, 12),
    registry=REGISTRY,
)
_POD_GROUP_FAMILIES = (
    podgroup_schedule_attempts,
    podgroup_scheduling_attempt_duration,
    podgroup_scheduling_algorithm_duration,
)
_PLACEMENT_FAMILIES = (generated_placements, placement_evaluations, placement_evaluation_duration)
_registered_gated: set[int] = set()


def register_pod_group_metrics(topology_aware: bool) -> None:
    """Export the pod-group families (and, with TopologyAwareWorkloadScheduling, the placement ones);
    once per process, as kube registers them once, whichever scheduler asks first."""
    for family in _POD_GROUP_FAMILIES + (_PLACEMENT_FAMILIES if topology_aware else ()):
        if id(family) not in _registered_gated:
            _registered_gated.add(id(family))
            REGISTRY.register(family)


def observe_pod_group_attempt(result: str, profile: str, started: float) -> None:
    """kube's observePodGroupScheduleAttemptAndLatency (`started` from time.perf_counter)."""
    child(podgroup_scheduling_attempt_duration, result, profile).observe(time.perf_counter() - started)
    child(podgroup_schedule_attempts, result, profile).inc()


def observe_placement_evaluation(feasible: bool, profile: str, started: float) -> None:
    """kube's ObservePlacementEvaluation: one candidate placement tried."""
    result = "feasible" if feasible else "infeasible"
    child(placement_evaluations, result, profile).inc()
    child(placement_evaluation_duration, result, profile).observe(time.perf_counter() - started)


cache_size = Gauge(
    "scheduler_cache_size",
    "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
    ["type"],
    registry=REGISTRY,
)


class _PluginEvaluations(Collector):
    """scheduler_plugin_evaluation_total from plain integer tallies: the Filter and Score paths count
    once per node per plugin, where a locked prometheus Counter per call would cost more than
    the plugin itself."""

    def __init__(self) -> None:
        self.tally: Tally[tuple[str, str, str]] = Tally()

    def add(self, plugin: str, extension_point: str, profile: str, count: int = 1) -> None:
        self.tally[(plugin, extension_point, profile)] += count

    def add_unless_skip(self, plugin: str, extension_point: str, profile: str, status: Any) -> None:
        """PreFilter and PreScore count a call unless the plugin answered Skip (as upstream)."""
        if status is None or status.code.name != "SKIP":
            self.add(plugin, extension_point, profile)

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "scheduler_plugin_evaluation",
            "Number of attempts to schedule pods by each plugin and the extension point (available only in "
            "PreFilter, Filter, PreScore, and Score).",
            labels=["plugin", "extension_point", "profile"],
        )
        for labels, value in list(self.tally.items()):
            family.add_metric(labels, value)
        yield family


plugin_evaluation = _PluginEvaluations()
REGISTRY.register(plugin_evaluation)


SourceFn = Callable[[], Mapping[tuple[str, ...], float]]


class _SourcedGauge(Collector):
    """A gauge family whose series are read at scrape time from the component that owns the state.

    Series once seen stay, at 0, when their count drops to nothing (as a Go gauge decremented to 0).
    """

    def __init__(self, name: str, documentation: str, labels: list[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self._sources: list[SourceFn] = []
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def set_source(self, source: SourceFn) -> None:
        """The one source of these series (a new scheduler replaces the old one's)."""
        with self._lock:
            self._sources = [source]
            self._seen.clear()

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        with self._lock:
            values: dict[tuple[str, ...], float] = {}
            for source in self._sources:
                for key, value in source().items():
                    values[key] = values.get(key, 0.0) + value
            self._seen.update(values)
            for key in sorted(self._seen):
                family.add_metric(list(key), values.get(key, 0.0))
        yield family


unschedulable_pods = _SourcedGauge(
    "scheduler_unschedulable_pods",
    "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins "
    "that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
    ["plugin", "profile"],
)
inflight_events = _SourcedGauge(
    "scheduler_inflight_events",
    "Number of events currently tracked in the scheduling queue.",
    ["event"],
)
for _sourced in (unschedulable_pods, inflight_events):
    REGISTRY.register(_sourced)


class _PodEntities(Collector):
    """The `*_entities` families of 1.37 restated from the pod families: without pod groups
    every scheduling entity is a single pod (type="pod")."""

    def collect(self) -> Iterable[Metric]:
        queued = GaugeMetricFamily(
            "scheduler_queued_entities",
            "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods that are "
            "not members of any podgroup) by the queue type. 'active' means number of entities in activeQ; "
            "'backoff' means number of entities in backoffQ; 'unschedulable' means number of entities in "
            "unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of "
            "unschedulable entities that the scheduler never attempted to schedule because they are gated.",
            labels=["queue", "type"],
        )
        for sample in _samples(pending_pods):
            queued.add_metric([sample.labels["queue"], ENTITY_POD], sample.value)
        incoming = CounterMetricFamily(
            "scheduler_queue_incoming_entities",
            "Number of scheduling entities added to scheduling queues by event, queue type, and entity type. "
            "Entity types are either 'pod' (for individual pods that are not members of any podgroup) or "
            "'podgroup'.",
            labels=["queue", "event", "type"],
        )
        for sample in _samples(queue_incoming_pods):
            if sample.name.endswith("_total") and sample.labels["event"] in ENTITY_COUNTED_EVENTS:
                incoming.add_metric([sample.labels["queue"], sample.labels["event"], ENTITY_POD], sample.value)
        yield queued
        yield incoming


def _samples(metric: Counter | Gauge) -> list[Any]:
    return [sample for family in metric.collect() for sample in family.samples]


REGISTRY.register(_PodEntities())


class AsyncRecorder:
    """kube's MetricAsyncRecorder: a bounded buffer of histogram observations, flushed periodically."""

    def __init__(self, size: int = ASYNC_BUFFER_SIZE) -> None:
        self._size = size
        self._buffer: list[tuple[Histogram, tuple[str, ...], float]] = []

    def observe_plugin_duration(self, extension_point: str, plugin: str, status: Any, seconds: float) -> None:
        self._add(plugin_execution_duration, (plugin, extension_point, code_label(status)), seconds)

    def observe_queueing_hint_duration(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        self._add(queueing_hint_execution_duration, (plugin, event, hint), seconds)

    def _add(self, histogram: Histogram, labels: tuple[str, ...], value: float) -> None:
        if len(self._buffer) < self._size:
            self._buffer.append((histogram, labels, value))

    def flush(self) -> None:
        buffer, self._buffer = self._buffer, []
        for histogram, labels, value in buffer:
            child(histogram, *labels).observe(value)

    async def run(self) -> None:
        """Flush every ASYNC_FLUSH_INTERVAL seconds until cancelled."""
        while True:
            await asyncio.sleep(ASYNC_FLUSH_INTERVAL)
            self.flush()


recorder = AsyncRecorder()


def observe_plugin(state: Any, extension_point: str, plugin: str, status: Any, started: float) -> None:
    """Record one plugin call's duration if this cycle is sampled (`started` from time.perf_counter)."""
    if state.record_plugin_metrics:
        recorder.observe_plugin_duration(extension_point, plugin, status, time.perf_counter() - started)


def observe_event_handling(event: str, started: float) -> None:
    """scheduler_event_handling_duration_seconds for one informer event (`started` from perf_counter)."""
    child(event_handling_duration, event).observe(time.perf_counter() - started)


def observe_extension_point(extension_point: str, status: Any, profile: str, started: float) -> None:
    child(framework_extension_point_duration, extension_point, code_label(status), profile).observe(
        time.perf_counter() - started
    )


Method = TypeVar("Method", bound=Callable[..., Any])


def _status_of(result: Any) -> Any:
    return result if hasattr(result, "code") else None


def timed_extension_point(extension_point: str, status_label: bool = True) -> Callable[[Method], Method]:
    """Decorates a framework method that runs every plugin of one extension point: observes
    scheduler_framework_extension_point_duration_seconds with the Status it returns and the
    framework's `profile_name`. `status_label=False` writes "Success" whatever the outcome, as
    kube-scheduler 1.37 does for PreEnqueue (its deferred observation reads a shadowed, always
    nil status)."""

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = method(self, *args, **kwargs)
            status = _status_of(result) if status_label else None
            observe_extension_point(extension_point, status, self.profile_name, started)
            return result

        return cast(Method, timed)

    return decorate


def timed_async_extension_point(extension_point: str) -> Callable[[Method], Method]:
    """timed_extension_point for the coroutine extension points (PreBind, Bind)."""

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = await method(self, *args, **kwargs)
            observe_extension_point(extension_point, _status_of(result), self.profile_name, started)
            return result

        return cast(Method, timed)

    return decorate


S = TypeVar("S")


def observed_permit_wait(status: S, started: float) -> S:
    """scheduler_permit_wait_duration_seconds for a pod that waited at Permit; returns `status`."""
    child(permit_wait_duration, code_label(status)).observe(time.perf_counter() - started)
    return status


# ---- rest_client_* (component-base/metrics/prometheus/restclient) ------------------------------

_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
_SIZE_BUCKETS = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)

rest_client_request_duration = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
rest_client_request_size = Histogram(
    "rest_client_request_size_bytes",
    "Request size in bytes. Broken down by verb and host.",
    ["verb", "host"],
    buckets=_SIZE_BUCKETS,
    registry=REGISTRY,
)
rest_client_response_size = Histogram(
    "rest_client_response_size_bytes",
    "Response size in bytes. Broken down by verb and host.",
    ["verb", "host"],
    buckets=_SIZE_BUCKETS,
    registry=REGISTRY,
)
rest_client_rate_limiter_duration = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
rest_client_requests = Counter(
    "rest_client_requests",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)

# ---- scheduler_volume_* (plugins/volumebinding/metrics) ------------------------------------------

# Registered as kube-scheduler registers it; 1.37 increments it nowhere (no binder-cache requests).
volume_binder_cache_requests = Counter(
    "scheduler_volume_binder_cache_requests",
    "Total number for request volume binding cache",
    ["operation"],
    registry=REGISTRY,
)
# operation: predicate (Filter's FindPodVolumes), assume (Reserve), bind (PreBind).
volume_scheduling_stage_errors = Counter(
    "scheduler_volume_scheduling_stage_error",
    "Volume scheduling stage error count",
    ["operation"],
    registry=REGISTRY,
)

# ---- scheduler_dra_* (DynamicResources' device binding conditions, kube's metrics.go) ----------

dra_binding_conditions_allocations = Counter(
    "scheduler_dra_bindingconditions_allocations",
    "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
    ["profile", "driver", "status"],
    registry=REGISTRY,
)
dra_binding_conditions_wait_duration = Histogram(
    "scheduler_dra_bindingconditions_wait_duration_seconds",
    "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
    ["profile", "driver", "status"],
    buckets=[0.1 * 2**i for i in range(14)],
    registry=REGISTRY,
)

# ---- leader_election_* (component-base/metrics/prometheus/clientgo/leaderelection) --------------

leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
    "'name' is the string used to identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
leader_election_slowpath = Counter(
    "leader_election_slowpath",
    "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the "
    "lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)

# ---- apiserver_delegated_* (apiserver authenticatorfactory / authorizerfactory) ----------------------

_DELEGATED_BUCKETS = (0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0)

delegated_authn_requests = Counter(
    "apiserver_delegated_authn_request",
    "Number of HTTP requests partitioned by status code.",
    ["code"],
    registry=REGISTRY,
)
delegated_authn_duration = Histogram(
    "apiserver_delegated_authn_request_duration_seconds",
    "Request latency in seconds. Broken down by status code.",
    ["code"],
    buckets=_DELEGATED_BUCKETS,
    registry=REGISTRY,
)
delegated_authz_requests = Counter(
    "apiserver_delegated_authz_request",
    "Number of HTTP requests partitioned by status code.",
    ["code"],
    registry=REGISTRY,
)
delegated_authz_duration = Histogram(
    "apiserver_delegated_authz_request_duration_seconds",
    "Request latency in seconds. Broken down by status code.",
    ["code"],
    buckets=_DELEGATED_BUCKETS,
    registry=REGISTRY,
)


# ---- ours, not kube-scheduler's ----------------------------------------------------------------

binding_cycle_failures = Counter(
    "secondary_scheduler_binding_cycle_failures",
    "Binding cycles that failed after the pod was assumed, by the step that failed (WaitOnPermit, PreBind, Bind). "
    "Not a kube-scheduler metric.",
    ["step"],
    registry=REGISTRY,
)
