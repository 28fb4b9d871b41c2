"""Prometheus metrics with kube-scheduler's names, labels and buckets (a leaf module)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # 1ms .. ~16s, as upstream

schedule_attempts = Counter(
    "scheduler_schedule_attempts",
    "Number of attempts to schedule pods, by the result.",
    ["result", "profile"],
    registry=REGISTRY,
)
scheduling_attempt_duration = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
    ["result", "profile"],
    buckets=_ATTEMPT_BUCKETS,
    registry=REGISTRY,
)
pending_pods = Gauge(
    "scheduler_pending_pods",
    "Number of pending pods, by the queue type.",
    ["queue"],
    registry=REGISTRY,
)
queue_incoming_pods = Counter(
    "scheduler_queue_incoming_pods",
    "Number of pods added to scheduling queues by event and queue type.",
    ["queue", "event"],
    registry=REGISTRY,
)
pod_scheduling_attempts = Histogram(
    "scheduler_pod_scheduling_attempts",
    "Number of attempts to successfully schedule a pod.",
    buckets=(1, 2, 4, 8, 16),
    registry=REGISTRY,
)
pod_scheduling_sli_duration = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue",
    ["attempts"],
    buckets=tuple(0.01 * 2**i for i in range(20)),
    registry=REGISTRY,
)
framework_extension_point_duration = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.",
    ["extension_point", "status", "profile"],
    buckets=tuple(0.0001 * 2**i for i in range(12)),
    registry=REGISTRY,
)
preemption_attempts = Counter(
    "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=REGISTRY
)
preemption_victims = Histogram(
    "scheduler_preemption_victims",
    "Number of selected preemption victims",
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
# Asynchronous preemption (SchedulerAsyncPreemption, on by default since 1.33).
preemption_goroutines_duration = Histogram(
    "scheduler_preemption_goroutines_duration_seconds",
    "Duration in seconds for running goroutines for the preemption.",
    ["result"],
    buckets=tuple(0.01 * 2**i for i in range(20)),
    registry=REGISTRY,
)
preemption_goroutines_execution = Counter(
    "scheduler_preemption_goroutines_execution",
    "Number of preemption goroutines executed.",
    ["result"],
    registry=REGISTRY,
)
binding_errors = Counter(
    "scheduler_binding_errors",
    "Binding cycles that failed after the pod was assumed, by extension point.",
    ["extension_point"],
    registry=REGISTRY,
)
cache_size = Gauge(
    "scheduler_cache_size",
    "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
    ["type"],
    registry=REGISTRY,
)
