"""Runs upstream scheduler_perf workloads (see upstream.py) against each scheduler under test.

Owns: executing a workload's operations in order on a fresh control plane with the scheduler
under test already running (as scheduler_perf starts its scheduler before the first operation):
nodes from upstream's node templates and prepare strategies (CSINodes included), namespaces,
pods, with a pre-bound PersistentVolume and claim each where the op asks (rapidly, then
waiting until they are scheduled unless told not to), pod sets, arbitrary objects, barriers,
sleeps, churn in the background, deletions, and the collectors that measure SchedulingThroughput
as upstream computes it, plus the scheduler's CPU seconds, peak RSS and attempt latency over each
measured phase; the `python -m harness.bench upstream` command and its report.

Must never: alter an object beyond what scheduler_perf itself does (upstream_objects.py) and
`spec.schedulerName` of pods, or run two workloads at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import datetime
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.bench import report
from harness.bench.gotemplate import Template, is_template
from harness.bench.rawapi import RawApi, run_concurrently
from harness.bench.runner import (
    ATTEMPT_HISTOGRAM,
    RESULTS_DIR,
    Profiler,
    cpu_seconds,
    harness_cpu_seconds,
    machine_busy_seconds,
    peak_rss_mib,
)
from harness.bench.schedulers import CLIENT_QPS, SCHEDULERS, Running, SchedulerKind, Setup, ours_variant
from harness.bench.upstream import (
    KIND_PATHS,
    TestCase,
    UpstreamError,
    UpstreamWorkload,
    collection_path,
    resolve_count,
    resolve_flag,
    resolve_template_params,
    runtime_config,
    scaled,
    scaled_params,
    scheduler_configuration,
    select,
    skip_reason,
    throughput_summary,
    upstream_throughput,
    upstream_workloads,
    user_workloads,
)
from harness.bench.upstream_dra import allocate_claims
from harness.bench.upstream_objects import (
    allocatable_patch,
    as_pod_group,
    bound,
    csi_node,
    name_nodes,
    node_strategy,
    pod_with_volume,
    strategy_labels,
    with_signature,
)
from harness.controlplane import REPO_ROOT, ControlPlane, feature_gate_args, pinned_versions
from plugins.registry import IN_TREE
from scheduler.features import DYNAMIC_RESOURCE_ALLOCATION

CREATORS = 32
# libyaml's loader when PyYAML has it: a Go template is parsed once per object it makes.
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Where the control-plane and scheduler logs of a failed workload run are kept (its work dir is not).
FAILED_LOGS_DIR = Path(tempfile.gettempdir()) / "upstream-bench-failures"
# A directory named here receives the control-plane and scheduler logs of every workload run.
KEEP_LOGS_ENV = "UPSTREAM_BENCH_KEEP_LOGS"
ATTEMPTS_COUNTER = "scheduler_schedule_attempts"
INCOMING_COUNTER = "scheduler_queue_incoming_pods"
REQUESTS_COUNTER = "rest_client_requests"
DEFAULT_NODE_TEMPLATE = "../templates/node-default.yaml"
# The pod createPods makes when neither the op nor the test case names a template: upstream's
# makeBasePod (scheduler_perf util.go, MakePodSpec in runners.go), with the pause image its templates use.
BASE_POD: Mapping[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "pod-"},
    "spec": {
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10.2",
                "ports": [{"containerPort": 80}],
                "resources": {
                    "limits": {"cpu": "100m", "memory": "500Mi"},
                    "requests": {"cpu": "100m", "memory": "500Mi"},
                },
            }
        ]
    },
}
# --scaling: the two test cases at these cluster sizes (initNodes), ours and kube-scheduler.
SCALING_CASES = ("SchedulingBasic/5000Nodes_10000Pods", "SchedulingPodAntiAffinity/5000Nodes_2000Pods")
SCALING_NODES = (500, 1000, 2000, 5000, 15000)
# Pods (initial + measured) per node at most for a --scaling size, where a case needs it.
PODS_PER_NODE_CAP = {"SchedulingPodAntiAffinity": 0.6}
# scheduler_perf's apiserver (util.go) also runs without the Priority admission plugin: upstream's
# templates set spec.priority themselves, which that plugin rejects. The flag adds to the control
# plane's own --disable-admission-plugins list.
APISERVER_ARGS = ("--disable-admission-plugins=Priority",)
# The controllers scheduler_perf runs beside a DRA workload's scheduler (util.go; its GC and
# namespace controllers matter to no workload's measurement).
CLAIM_CONTROLLERS = ("resourceclaim-controller",)
# How scheduler_perf runs that controller (test/integration/util's CreateResourceClaimController on
# scheduler_perf's client, the schedulers' CLIENT_QPS): 5 workers. kube-controller-manager's own
# defaults (50 workers, 20 requests/s, bursts of 30) paced every claim-template workload at 20
# requests/s: 2 writes per pod created (its claim, the pod's status), about 4 in a steady state.
CLAIM_CONTROLLER_WORKERS = 5
CLAIM_CONTROLLER_ARGS = (
    f"--concurrent-resourceclaim-syncs={CLAIM_CONTROLLER_WORKERS}",
    f"--kube-api-qps={CLIENT_QPS}",
    f"--kube-api-burst={CLIENT_QPS}",
)
# upstream's opcode -> Executor.op_<method>
OPCODE_METHODS = {
    "createNodes": "create_nodes",
    "createNamespaces": "create_namespaces",
    "createPods": "create_pods",
    "createPodSets": "create_pod_sets",
    "createAny": "create_any",
    "updateAny": "update_any",
    "barrier": "barrier",
    "sleep": "sleep",
    "churn": "churn",
    "deletePods": "delete_pods",
    "startCollectingMetrics": "start_collecting_metrics",
    "stopCollectingMetrics": "stop_collecting_metrics",
    "createPodGroups": "create_pod_groups",
    "allocResourceClaims": "alloc_resource_claims",
}
# How long createPodGroups waits for its PodGroups to be listed (upstream: 10 s in its informer).
POD_GROUPS_VISIBLE_SECONDS = 10.0
RESOURCE = "/apis/resource.k8s.io/v1"


def _duration_seconds(raw: Any) -> float:
    """A metav1.Duration as upstream writes them ("10s", "500ms", "1m")."""
    text = str(raw)
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    raise UpstreamError(f"cannot read duration {raw!r}")


def tick_at(now: float, due: float, period: float) -> tuple[float, float]:
    """Go's time.Ticker as its receiver meets it, which is how scheduler_perf paces updateAny,
    deletePods and churn: a receiver arriving at `now` takes the tick that fired while it was busy at
    once (the ticker keeps one and drops the rest), else waits for the next one, `due`. Returns when
    it gets the tick and when the one after it is due. The work done between ticks does not stretch
    the period, as a sleep before each step would."""
    if due > now:
        return due, due + period
    return now, due + period * (math.floor((now - due) / period) + 1)


class Ticker:
    """tick_at on the event loop's clock; the first tick is one period after the ticker is made."""

    def __init__(self, per_second: float) -> None:
        self.period = 1 / per_second
        self._due = asyncio.get_running_loop().time() + self.period

    async def tick(self) -> None:
        now = asyncio.get_running_loop().time()
        fires, self._due = tick_at(now, self._due, self.period)
        if fires > now:
            await asyncio.sleep(fires - now)


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str] | None) -> bool:
    return all(labels.get(k) == v for k, v in (selector or {}).items())


@dataclass
class Collector:
    """One measured phase: the pods scheduled in `namespaces` while it ran."""

    namespaces: set[str]
    selector: Mapping[str, str] | None
    started: float
    cpu_before: float
    histogram_before: Mapping[float, float]
    accounted_before: float = 0.0  # CPU seconds of the scheduler, the control plane and the harness
    busy_before: float = 0.0  # of the whole machine
    scheduled_at: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class OpReading:
    """The scheduler's state between two ops, for --per-op."""

    at: float
    cpu: float
    attempts: Mapping[str, float]  # by result
    incoming: Mapping[str, float]  # by queue/event
    requests: Mapping[str, float]  # the scheduler's API requests, by method/code


def op_breakdown(index: int, opcode: str, before: OpReading, after: OpReading) -> dict[str, Any]:
    """One op's share of a run: wall time, scheduler CPU, attempts by result, queue moves by queue/event,
    API requests by method/code."""
    return {
        "op": f"{index:02d}-{opcode}",
        "seconds": round(after.at - before.at, 3),
        "cpu_seconds": round(after.cpu - before.cpu, 3),
        "attempts": report.counter_deltas(before.attempts, after.attempts),
        "incoming": report.counter_deltas(before.incoming, after.incoming),
        "requests": report.counter_deltas(before.requests, after.requests),
    }


@dataclass
class PodTracker:
    """Every pod's node (from one cluster-wide watch), per namespace, and when each got one."""

    nodes: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    labels: dict[str, dict[str, Mapping[str, str]]] = field(default_factory=lambda: defaultdict(dict))
    attempted: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    collectors: list[Collector] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # namespace -> names of its pods as they get a node (a steady-state createPods listens)
    bound_queues: dict[str, asyncio.Queue[str]] = field(default_factory=dict)

    def on_event(self, kind: str, pod: dict[str, Any], arrived: float) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if kind == "DELETED":
            self.nodes[namespace].pop(name, None)
            self.labels[namespace].pop(name, None)
            self.attempted[namespace].discard(name)
            self.changed.set()
            return
        node = pod["spec"].get("nodeName") or ""
        was = self.nodes[namespace].get(name, "")
        self.nodes[namespace][name] = node
        self.labels[namespace][name] = meta.get("labels") or {}
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if node or any(c.get("type") == "PodScheduled" for c in conditions):
            self.attempted[namespace].add(name)
        if node and not was:
            if namespace in self.bound_queues:
                self.bound_queues[namespace].put_nowait(name)
            for collector in self.collectors:
                if namespace in collector.namespaces and _labels_match(meta.get("labels") or {}, collector.selector):
                    collector.scheduled_at.append(arrived)
        self.changed.set()

    def scheduled(self, namespace: str, selector: Mapping[str, str] | None = None) -> int:
        labels = self.labels[namespace]
        return sum(
            1 for name, node in self.nodes[namespace].items() if node and _labels_match(labels.get(name, {}), selector)
        )

    def attempted_count(self, namespace: str, selector: Mapping[str, str] | None = None) -> int:
        labels = self.labels[namespace]
        return sum(1 for name in self.attempted[namespace] if _labels_match(labels.get(name, {}), selector))

    async def wait(self, ready: Any, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what} not within {seconds:.0f} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 1.0))


class Executor:
    """One workload against one running scheduler."""

    def __init__(
        self,
        api: RawApi,
        workload: UpstreamWorkload,
        kind: SchedulerKind,
        running: Running,
        scale: float,
        timeout: float,
        profile: Path | None = None,
        plane_pids: Sequence[int] = (),
        per_op: bool = False,
    ) -> None:
        self.api = api
        # With per_op, each op's wall time, scheduler CPU, attempts by result, queue moves by queue
        # and event, and API requests by method and code, read from the scheduler's own counters
        # after the op: where retries go.
        self.per_op = per_op
        self.ops: list[dict[str, Any]] = []
        self.plane_pids = tuple(plane_pids)  # the control plane's processes, for other_busy_cores
        self.profile = profile  # py-spy's collapsed stacks of the measured phases go here
        self._profiler: Profiler | None = None
        self.workload = workload
        self.case: TestCase = workload.case
        self.kind = kind
        self.running = running
        self.scale = scale
        self.timeout = timeout
        self.pods = PodTracker()
        self.expected: dict[str, int] = {}  # namespace -> pods created that a barrier waits for
        self.namespaces: set[str] = {"default"}
        self.background: list[asyncio.Task[None]] = []
        self.phases: list[dict[str, Any]] = []
        self._current: Collector | None = None
        self.rng = random.Random()  # node names, as upstream's random suffixes
        self._sources: dict[Path, Template | dict[str, Any]] = {}
        self.template_values = scaled_params(self.case, workload.params, scale)

    # ---------------------------------------------------------------- helpers

    def count(self, op: Mapping[str, Any], key: str = "count") -> int:
        """An op's count at the run's scale. With countMultiplierParam (pods per group) the group
        count is scaled and then multiplied, so every group keeps all its members."""
        multiplier = op.get("countMultiplierParam") if key == "count" else None
        base = {k: v for k, v in op.items() if k != "countMultiplierParam"}
        value = resolve_count(base, self.workload.params, key)
        value = scaled(value, self.scale) if op.get(f"{key}Param") else value
        if multiplier:
            value *= resolve_count({"countParam": multiplier}, self.workload.params)
        return value

    def template(self, relative: str) -> dict[str, Any]:
        """A file read as plain YAML, where upstream reads it so (churn, namespaces, volumes)."""
        loaded: dict[str, Any] = yaml.load(self.case.path(relative).read_text(), Loader=YAML_LOADER)
        return loaded

    def _source(self, relative: str) -> Template | dict[str, Any]:
        path = self.case.path(relative)
        if path not in self._sources:
            text = path.read_text()
            self._sources[path] = Template(text, path.name) if is_template(text) else yaml.load(text, YAML_LOADER)
        return self._sources[path]

    def shared_object(self, relative: str) -> bool:
        """Whether every object `objects` makes from this file is one and the same (a plain file)."""
        return isinstance(self._source(relative), dict)

    def objects(self, relative: str, count: int, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """`count` objects from a template as scheduler_perf makes them: a Go template rendered once
        per object with the op's templateParams plus Index and Count, a plain file shared by all."""
        source = self._source(relative)
        if isinstance(source, dict):
            return [source] * count
        resolved = resolve_template_params(params or {}, self.template_values)
        made: list[dict[str, Any]] = []
        for index in range(count):
            text = source.render({**resolved, "Index": index, "Count": count})
            made.append(yaml.load(text, Loader=YAML_LOADER))
        return made

    def signature_batch_size(self, op: Mapping[str, Any]) -> int:
        """createPods' signatureBatchSize (or its parameter); upstream's default is 1, a label per pod."""
        param = op.get("signatureBatchSizeParam")
        value = self.workload.params.get(str(param).removeprefix("$")) if param else op.get("signatureBatchSize")
        size = int(value or 0)
        if size < 0:
            raise UpstreamError(f"signatureBatchSize {size} must not be negative")
        return size or 1

    def pod_manifest(self, template: Mapping[str, Any]) -> dict[str, Any]:
        manifest = copy.deepcopy(dict(template))
        manifest.setdefault("spec", {})["schedulerName"] = self.kind.scheduler_name
        return manifest

    async def ensure_namespace(self, name: str, template: Mapping[str, Any] | None = None) -> None:
        if name in self.namespaces:
            return
        manifest = copy.deepcopy(dict(template or {"apiVersion": "v1", "kind": "Namespace"}))
        manifest.setdefault("metadata", {})["name"] = name
        manifest["metadata"].pop("generateName", None)
        status, body = await self.api.request("POST", "/api/v1/namespaces", manifest)
        if status not in (201, 409):
            raise UpstreamError(f"creating namespace {name}: HTTP {status}: {body}")
        self.namespaces.add(name)

    def path_of(self, manifest: Mapping[str, Any], namespace: str) -> str:
        return collection_path(manifest, namespace)

    def start_collecting(self, namespaces: Sequence[str], selector: Mapping[str, str] | None) -> None:
        if self._current is not None:
            raise UpstreamError("metrics collection is overlapping: a collector started before the last one stopped")
        metrics = self.running.metrics() if self.running.metrics else ""
        self._current = Collector(
            namespaces=set(namespaces),
            selector=selector,
            started=time.monotonic(),
            cpu_before=cpu_seconds(self.running.pid),
            histogram_before=report.histogram_buckets(metrics, ATTEMPT_HISTOGRAM) if metrics else {},
            accounted_before=self._accounted_cpu(),
            busy_before=machine_busy_seconds(),
        )
        self.pods.collectors.append(self._current)
        if self.profile is not None and self._profiler is None and not self.profile.exists():
            self._profiler = Profiler(self.running.pid, self.profile)

    def _accounted_cpu(self) -> float:
        """CPU seconds so far of what a run is made of: the scheduler, the control plane, the harness."""
        total = harness_cpu_seconds()
        for pid in {self.running.pid, *self.plane_pids}:  # kube-scheduler is one of the plane's
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += cpu_seconds(pid)
        return total

    def stop_collecting(self) -> None:
        collector = self._current
        if collector is None:
            raise UpstreamError("stopCollectingMetrics without a running collector")
        self._current = None
        self.pods.collectors.remove(collector)
        stopped = time.monotonic()
        cpu = cpu_seconds(self.running.pid) - collector.cpu_before
        others = (machine_busy_seconds() - collector.busy_before) - (self._accounted_cpu() - collector.accounted_before)
        if self._profiler is not None:
            self._profiler.stop()
            self._profiler = None
        metrics = self.running.metrics() if self.running.metrics else ""
        after = report.histogram_buckets(metrics, ATTEMPT_HISTOGRAM) if metrics else {}
        samples = upstream_throughput(collector.scheduled_at, collector.started, stopped)
        scheduled = len(collector.scheduled_at)
        p50 = report.histogram_quantile(0.50, collector.histogram_before, after) if after else None
        p99 = report.histogram_quantile(0.99, collector.histogram_before, after) if after else None
        inf = float("inf")
        attempts = after.get(inf, 0.0) - collector.histogram_before.get(inf, 0.0) if after else None
        self.phases.append(
            {
                "namespaces": sorted(collector.namespaces),
                "scheduled": scheduled,
                "seconds": stopped - collector.started,
                "samples": len(samples),
                "throughput": throughput_summary(samples),
                "cpu_seconds": cpu,
                "cpu_ms_per_pod": 1000 * cpu / scheduled if scheduled else None,
                "attempt_p50_ms": None if p50 is None else 1000 * p50,
                "attempt_p99_ms": None if p99 is None else 1000 * p99,
                # Scheduling attempts (every result) per pod bound in the phase: retries show here.
                "attempts_per_pod": attempts / scheduled if attempts is not None and scheduled else None,
                # Cores kept busy meanwhile by anything but this run (another benchmark, a test
                # run): well above 0, throughput was shared; CPU per pod is the steadier figure.
                "other_busy_cores": round(max(others, 0.0) / (stopped - collector.started), 2),
            }
        )

    def _op_reading(self) -> OpReading:
        metrics = self.running.metrics() if self.running.metrics else ""
        read = report.counters(
            metrics,
            {ATTEMPTS_COUNTER: ("result",), INCOMING_COUNTER: ("queue", "event"), REQUESTS_COUNTER: ("method", "code")},
        )
        return OpReading(
            time.monotonic(),
            cpu_seconds(self.running.pid),
            read[ATTEMPTS_COUNTER],
            read[INCOMING_COUNTER],
            read[REQUESTS_COUNTER],
        )

    # ---------------------------------------------------------------- operations

    async def run(self) -> None:
        rv = await self.api.list_resource_version("/api/v1/pods")
        watch = asyncio.create_task(self.api.watch("/api/v1/pods", rv, self.pods.on_event))
        reading = self._op_reading() if self.per_op else None
        try:
            for index, op in enumerate(self.case.ops):
                handler = getattr(self, "op_" + OPCODE_METHODS[op["opcode"]])
                await handler(index, op)
                if reading is not None:
                    after = self._op_reading()
                    self.ops.append(op_breakdown(index, op["opcode"], reading, after))
                    reading = after
                if watch.done():
                    watch.result()
        finally:
            for task in [*self.background, watch]:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def op_create_nodes(self, _index: int, op: Mapping[str, Any]) -> None:
        strategy = node_strategy(op)
        made = self.objects(
            op.get("nodeTemplatePath") or DEFAULT_NODE_TEMPLATE, self.count(op), op.get("templateParams")
        )
        nodes = name_nodes([copy.deepcopy(node) for node in made], self.rng)
        for i, node in enumerate(nodes):
            # Upstream patches these labels on after creating the node; the node ends up the same.
            node["metadata"]["labels"].update(strategy_labels(strategy, i))
        created: list[dict[str, Any]] = []
        await self.api.create_all("/api/v1/nodes", nodes, CREATORS, lambda _i, obj, _t: created.append(obj))
        if strategy is None or strategy[0] != "nodeAllocatableStrategy":
            return
        spec = strategy[1]

        async def prepare(i: int) -> None:
            node = created[i]
            name = node["metadata"]["name"]
            patch = allocatable_patch(node, spec)
            if patch is not None:
                status, body = await self.api.request(
                    "PATCH", f"/api/v1/nodes/{name}", patch, content_type="application/merge-patch+json"
                )
                if status != 200:
                    raise UpstreamError(f"patching node {name}: HTTP {status}: {body}")
            await self.api.create("/apis/storage.k8s.io/v1/csinodes", csi_node(name, spec))

        await run_concurrently(len(created), CREATORS, prepare)

    async def op_create_namespaces(self, _index: int, op: Mapping[str, Any]) -> None:
        template = self.template(op["namespaceTemplatePath"]) if op.get("namespaceTemplatePath") else None
        for i in range(self.count(op)):
            await self.ensure_namespace(f"{op['prefix']}-{i}", template)

    async def op_create_pods(self, index: int, op: Mapping[str, Any]) -> None:
        namespace = op.get("namespace") or f"namespace-{index}"
        await self.ensure_namespace(namespace)
        path = op.get("podTemplatePath") or self.case.default_pod_template
        count = self.count(op)
        made = self.objects(path, count, op.get("templateParams")) if path else [BASE_POD] * count
        if op.get("collectMetrics"):
            self.start_collecting([namespace], None)
        steady = bool(resolve_flag(op, self.workload.params, "steadyState"))
        if steady:
            # Listening before the first pod is created, so that no binding is missed.
            self.pods.bound_queues[namespace] = asyncio.Queue()
        if not path or self.shared_object(path):
            manifests = [self.pod_manifest(made[0])] * count if made else []
        else:
            manifests = [self.pod_manifest(pod) for pod in made]
        # Pods from a template carry upstream's `signature` label, one value per batch of pods.
        batch = self.signature_batch_size(op) if path else None
        if op.get("persistentVolumeClaimTemplatePath"):
            await self.create_pods_with_volumes(op, namespace, manifests, batch)
        else:
            # Upstream's templates use generateName: one body makes `count` distinct pods.
            bodies = manifests if batch is None else [with_signature(m, i, batch) for i, m in enumerate(manifests)]
            await self.api.create_all(f"/api/v1/namespaces/{namespace}/pods", bodies, CREATORS)
        if op.get("skipWaitToCompletion"):
            self.expected[namespace] = self.expected.get(namespace, 0) + count
        elif steady:
            # Each replacement is made as upstream makes it: a batch of one, its first pod.
            replacement = manifests[-1] if batch is None else with_signature(manifests[-1], 0, batch)
            await self.keep_steady(op, namespace, replacement)
        else:
            await self.pods.wait(
                lambda: self.pods.scheduled(namespace) >= count,
                self.timeout,
                f"{count} pods scheduled in {namespace}",
            )
        if op.get("collectMetrics"):
            self.stop_collecting()

    async def keep_steady(self, op: Mapping[str, Any], namespace: str, manifest: Mapping[str, Any]) -> None:
        """createPods in steady state, after its `count` pods were created (their bindings already
        queued since before the first was created): for the op's duration,
        each pod of the namespace seen bound is deleted at once and one more created, so the
        scheduler always has the same backlog (upstream's createPodsSteadily). A duration in
        which no pod was bound is an error, as upstream's."""
        duration = _duration_seconds(resolve_flag(op, self.workload.params, "duration"))
        bound_pods = self.pods.bound_queues[namespace]
        pods = f"/api/v1/namespaces/{namespace}/pods"
        seen = 0
        deadline = time.monotonic() + duration
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    name = await asyncio.wait_for(bound_pods.get(), remaining)
                except TimeoutError:
                    break
                seen += 1
                status, body = await self.api.request(
                    "DELETE", f"{pods}/{name}?gracePeriodSeconds=0&propagationPolicy=Background"
                )
                if status not in (200, 202, 404):
                    raise UpstreamError(f"deleting scheduled pod {namespace}/{name}: HTTP {status}: {body}")
                await self.api.create(pods, dict(manifest))
        finally:
            self.pods.bound_queues.pop(namespace, None)
        if seen == 0:
            raise UpstreamError(
                f"no pod at all got scheduled in {namespace} within {duration:g} s, "
                "either because of a problem or because the interval was too small"
            )

    async def create_pods_with_volumes(
        self, op: Mapping[str, Any], namespace: str, pods: Sequence[Mapping[str, Any]], batch: int | None
    ) -> None:
        """Per pod, in upstream's order: the claim, its status Bound, the PV pre-bound to it, its
        status Bound, then the pod using the claim (CreatePodWithPersistentVolume)."""
        pv_template = self.template(op["persistentVolumeTemplatePath"])
        pvc_template = self.template(op["persistentVolumeClaimTemplatePath"])
        claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        volumes = "/api/v1/persistentvolumes"

        async def set_bound(collection: str, created: Mapping[str, Any]) -> None:
            path = f"{collection}/{created['metadata']['name']}/status"
            status, body = await self.api.request("PUT", path, bound(created))
            if status != 200:
                raise UpstreamError(f"PUT {path}: HTTP {status}: {body}")

        async def create_one(index: int) -> None:
            pod = pods[index]
            signed = pod if batch is None else with_signature(pod, index, batch)
            pv, pvc, manifest = pod_with_volume(pv_template, pvc_template, signed, namespace, index)
            await set_bound(claims, await self.api.create(claims, pvc))
            await set_bound(volumes, await self.api.create(volumes, pv))
            await self.api.create(f"/api/v1/namespaces/{namespace}/pods", manifest)

        await run_concurrently(len(pods), CREATORS, create_one)

    async def op_create_pod_sets(self, index: int, op: Mapping[str, Any]) -> None:
        inner = dict(op["createPodsOp"])
        for i in range(self.count(op)):
            await self.op_create_pods(index, {**inner, "namespace": f"{op['namespacePrefix']}-{i}"})

    async def op_create_any(self, index: int, op: Mapping[str, Any]) -> None:
        namespace = op.get("namespace") or f"namespace-{index}"
        count = self.count(op) if (op.get("count") is not None or op.get("countParam")) else 1
        made = self.objects(op["templatePath"], count, op.get("templateParams"))
        if not made:
            return
        if KIND_PATHS[made[0].get("kind", "")][1]:
            await self.ensure_namespace(namespace)
        manifests = [self.pod_manifest(m) if m.get("kind") == "Pod" else m for m in made]
        await self.api.create_all(self.path_of(made[0], namespace), manifests, CREATORS)

    def update_requests(self, op: Mapping[str, Any]) -> list[tuple[list[str], dict[str, Any]]]:
        """updateAny's requests: per rendered object the paths it is PUT to (the object or the op's
        subresource, then its status) and the body. A pod keeps this run's schedulerName: an update
        naming none would move it to default-scheduler, a change of spec the apiserver refuses."""
        namespace = op.get("namespace") or ""
        count = self.count(op) if (op.get("count") is not None or op.get("countParam")) else 1
        subresource = "/".join(op.get("subresources") or ())
        requests = []
        for obj in self.objects(op["templatePath"], count, op.get("templateParams")):
            if obj.get("kind") == "Pod":
                obj = self.pod_manifest(obj)
            path = f"{self.path_of(obj, namespace)}/{obj['metadata']['name']}"
            requests.append(([f"{path}/{subresource}" if subresource else path, f"{path}/status"], obj))
        return requests

    async def op_update_any(self, index: int, op: Mapping[str, Any]) -> None:
        """updateAny: each rendered object PUT as it is (no resourceVersion: an unconditional
        update), then its status, at updatePerSecond when set — as scheduler_perf's update.go."""
        per_second = int(op.get("updatePerSecond") or 0)
        ticker = Ticker(per_second) if per_second else None
        for targets, obj in self.update_requests(op):
            if ticker is not None:
                await ticker.tick()
            for target in targets:
                status, body = await self.api.request("PUT", target + "?fieldValidation=Strict", obj)
                if status != 200:
                    raise UpstreamError(f"updateAny PUT {target}: HTTP {status}: {body}")

    async def op_barrier(self, _index: int, op: Mapping[str, Any]) -> None:
        namespaces = list(op.get("namespaces") or self.expected)
        attempted = op.get("stageRequirement") == "Attempted"
        selector = op.get("labelSelector")

        def done() -> bool:
            for namespace in namespaces:
                have = (
                    self.pods.attempted_count(namespace, selector)
                    if attempted
                    else self.pods.scheduled(namespace, selector)
                )
                if have < self.expected.get(namespace, 0):
                    return False
            return True

        await self.pods.wait(done, self.timeout, f"barrier over {namespaces}")
        if not attempted:
            for namespace in namespaces:
                self.expected.pop(namespace, None)

    async def op_sleep(self, _index: int, op: Mapping[str, Any]) -> None:
        raw = op.get("duration") or self.workload.params[str(op["durationParam"]).removeprefix("$")]
        await asyncio.sleep(_duration_seconds(raw))

    async def op_churn(self, index: int, op: Mapping[str, Any]) -> None:
        namespace = op.get("namespace") or f"namespace-{index}"
        await self.ensure_namespace(namespace)
        templates = [self.template(path) for path in op.get("templatePaths") or ()]
        manifests = [self.pod_manifest(t) if t.get("kind") == "Pod" else t for t in templates]
        interval = (op.get("intervalMilliseconds") or 500) / 1000
        number = int(op.get("number") or 0)
        recreate = op.get("mode") == "recreate"

        async def churn() -> None:
            slots: list[list[str]] = [[""] * max(number, 1) for _ in manifests]
            tick = 0
            ticker = Ticker(1 / interval)
            while recreate or number == 0 or tick < number:
                await ticker.tick()
                for i, manifest in enumerate(manifests):
                    path = self.path_of(manifest, namespace)
                    slot = tick % max(number, 1)
                    if recreate and slots[i][slot]:
                        await self.api.request("DELETE", f"{path}/{slots[i][slot]}")
                        slots[i][slot] = ""
                        continue
                    status, body = await self.api.request("POST", path, manifest)
                    if status == 201 and recreate:
                        slots[i][slot] = body["metadata"]["name"]
                tick += 1

        self.background.append(asyncio.create_task(churn()))

    async def op_delete_pods(self, _index: int, op: Mapping[str, Any]) -> None:
        namespace = op["namespace"]
        selector = op.get("labelSelector") or {}
        query = ",".join(f"{k}={v}" for k, v in selector.items())
        path = f"/api/v1/namespaces/{namespace}/pods"
        per_second = int(op.get("deletePodsPerSecond") or 0)

        async def delete() -> None:
            if per_second <= 0:
                await self.api.request("DELETE", f"{path}?labelSelector={query}" if query else path)
                return
            status, body = await self.api.request("GET", f"{path}?labelSelector={query}" if query else path)
            ticker = Ticker(per_second)
            for item in (body or {}).get("items") or () if status == 200 else ():
                await ticker.tick()
                await self.api.request("DELETE", f"{path}/{item['metadata']['name']}")

        if op.get("skipWaitToCompletion"):
            self.background.append(asyncio.create_task(delete()))
        else:
            await delete()

    async def op_create_pod_groups(self, _index: int, op: Mapping[str, Any]) -> None:
        """createPodGroups: `count` PodGroups from the template (Index and the op's templateParams)
        in the op's namespace, then wait until a list shows them all, as upstream waits for its
        informer."""
        namespace = op["namespace"]
        await self.ensure_namespace(namespace)
        count = self.count(op)
        groups = [as_pod_group(g) for g in self.objects(op["templatePath"], count, op.get("templateParams"))]
        path = KIND_PATHS["PodGroup"][0].format(namespace=namespace)
        await self.api.create_all(path + "?fieldValidation=Strict", groups, CREATORS)
        deadline = time.monotonic() + POD_GROUPS_VISIBLE_SECONDS
        while True:
            status, body = await self.api.request("GET", path)
            listed = len((body or {}).get("items") or ()) if status == 200 else 0
            if listed >= count:
                return
            if time.monotonic() > deadline:
                raise UpstreamError(f"{count} PodGroups in {namespace} not listed within 10 s (HTTP {status})")
            await asyncio.sleep(0.1)

    async def op_alloc_resource_claims(self, _index: int, op: Mapping[str, Any]) -> None:
        """allocResourceClaims: every unallocated claim of the namespace (all namespaces when none)
        allocated on a random node that fits it, and its status written (upstream_dra.py)."""
        namespace = op.get("namespace") or ""
        claims = await self.list_all(
            f"{RESOURCE}/namespaces/{namespace}/resourceclaims" if namespace else f"{RESOURCE}/resourceclaims"
        )
        allocated = allocate_claims(
            claims,
            await self.list_all("/api/v1/nodes"),
            await self.list_all(f"{RESOURCE}/resourceslices"),
            await self.list_all(f"{RESOURCE}/deviceclasses"),
            await self.list_all(f"{RESOURCE}/devicetaintrules"),
            self.rng,
        )
        for claim, allocation in allocated:
            meta = claim["metadata"]
            path = f"{RESOURCE}/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}/status"
            status, body = await self.api.request("PUT", path, {**claim, "status": {"allocation": allocation}})
            if status != 200:
                raise UpstreamError(f"PUT {path}: HTTP {status}: {body}")

    async def list_all(self, path: str) -> list[dict[str, Any]]:
        status, body = await self.api.request("GET", path)
        if status != 200:
            raise UpstreamError(f"GET {path}: HTTP {status}: {body}")
        items: list[dict[str, Any]] = body.get("items") or []
        return items

    async def op_start_collecting_metrics(self, _index: int, op: Mapping[str, Any]) -> None:
        self.start_collecting(list(op.get("namespaces") or ()), op.get("labelSelector"))

    async def op_stop_collecting_metrics(self, _index: int, _op: Mapping[str, Any]) -> None:
        self.stop_collecting()


def row_commit(kind: SchedulerKind) -> str:
    """The commit a row measures: the variant's own work tree for an --ours-variant run from one
    (its PYTHONPATH), else this harness's."""
    return report.git_revision(kind.tree or REPO_ROOT)


def claim_controller_args(gates: dict[str, bool]) -> list[str] | None:
    """kube-controller-manager's arguments for the ResourceClaim controller a workload runs beside
    its scheduler (as scheduler_perf: it makes the claims of templates), or None without DRA."""
    if not gates.get(DYNAMIC_RESOURCE_ALLOCATION):
        return None
    return [*CLAIM_CONTROLLER_ARGS, *feature_gate_args(gates)]


def run_workload(
    workload: UpstreamWorkload,
    kind: SchedulerKind,
    *,
    scale: float,
    timeout: float,
    profile: Path | None = None,
    per_op: bool = False,
) -> dict[str, Any]:
    """One upstream workload against one scheduler on a fresh control plane; its result row."""
    row: dict[str, Any] = {
        "workload": workload.key,
        "scheduler": kind.key,
        "title": kind.title,
        "threshold": workload.threshold,
        "scale": scale,
        "commit": row_commit(kind),
    }
    began = time.monotonic()
    gates = workload.gates()
    setup = Setup(gates, scheduler_configuration(workload.case, kind.scheduler_name))
    try:
        with (
            ControlPlane(
                kwok=False, apiserver_args=APISERVER_ARGS, feature_gates=gates, runtime_config=runtime_config(gates)
            ) as plane,
            kind.start(plane, kind.scheduler_name, setup) as running,
        ):
            claim_args = claim_controller_args(gates)
            if claim_args is not None:
                plane.start_kube_controller_manager(CLAIM_CONTROLLERS, extra_args=claim_args)

            async def go() -> Executor:
                async with RawApi(plane) as api:
                    pids = [proc.pid for proc in plane.processes]
                    executor = Executor(api, workload, kind, running, scale, timeout, profile, pids, per_op)
                    await executor.run()
                    return executor

            try:
                executor = asyncio.run(go())
            except Exception as err:
                # The control plane's work dir goes with it: keep the logs of a failed run.
                kept = FAILED_LOGS_DIR / f"{workload.key.replace('/', '_')}-{kind.key}"
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(plane.log_dir, kept, ignore=shutil.ignore_patterns("audit.log*"))
                raise RuntimeError(f"{type(err).__name__}: {err} (logs kept in {kept})") from err
            row["peak_rss_mib"] = peak_rss_mib(running.pid)
            keep = os.environ.get(KEEP_LOGS_ENV)
            if keep:
                # Every run's logs, not only a failed one's: to read why a scheduler retried.
                kept = Path(keep) / f"{workload.key.replace('/', '_')}-{kind.key}"
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(plane.log_dir, kept, ignore=shutil.ignore_patterns("audit.log*"))
        phases = executor.phases
        row["phases"] = phases
        if per_op:
            row["ops"] = executor.ops
        if phases:
            main = max(phases, key=lambda p: p["scheduled"])
            row.update(
                {
                    "throughput_avg": main["throughput"]["average"],
                    "throughput_p50": main["throughput"]["p50"],
                    "throughput_p99": main["throughput"]["p99"],
                    "scheduled": main["scheduled"],
                    "cpu_ms_per_pod": main["cpu_ms_per_pod"],
                    "cpu_seconds": main["cpu_seconds"],
                    "attempt_p50_ms": main["attempt_p50_ms"],
                    "attempt_p99_ms": main["attempt_p99_ms"],
                    "attempts_per_pod": main.get("attempts_per_pod"),
                    "other_busy_cores": main.get("other_busy_cores"),
                }
            )
    except Exception as err:
        row["error"] = f"{type(err).__name__}: {err}"
    row["wall_seconds"] = time.monotonic() - began
    return row


def at_nodes(workload: UpstreamWorkload, nodes: int) -> UpstreamWorkload:
    """The workload with upstream's `initNodes` parameter set to `nodes` (its pods as they are)."""
    if "initNodes" not in workload.params:
        raise UpstreamError(f"{workload.key} has no initNodes parameter to vary")
    params = {**workload.params, "initNodes": nodes}
    share = PODS_PER_NODE_CAP.get(workload.case.name)
    if share is not None:
        # One pod per node at most (required anti-affinity on the hostname): shrink both pod counts
        # alike, as upstream's own 500Nodes workload does (100 + 400 pods).
        pods = int(params["initPods"]) + int(params["measurePods"])
        factor = min(1.0, share * nodes / pods)
        params["initPods"] = max(1, int(int(params["initPods"]) * factor))
        params["measurePods"] = max(1, int(int(params["measurePods"]) * factor))
    return dataclasses.replace(workload, name=f"{workload.name}@{nodes}Nodes", params=params)


def _scaling_points(results: Mapping[str, Any]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """case -> scheduler -> [(nodes, CPU ms per pod)], from the rows of a --scaling run."""
    points: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for run in results["runs"]:
        base, _, nodes = run["workload"].partition("@")
        if nodes and run.get("cpu_ms_per_pod"):
            points[base][run["scheduler"]].append((int(nodes.removesuffix("Nodes")), run["cpu_ms_per_pod"]))
    return points


def scaling_markdown(results: Mapping[str, Any]) -> str:
    lines = ["## CPU ms per bound pod by cluster size", ""]
    for case, by_kind in _scaling_points(results).items():
        sizes = sorted({n for pts in by_kind.values() for n, _ in pts})
        lines += [
            f"### {case}",
            "",
            "| nodes | " + " | ".join(by_kind) + " | ours ÷ kube |",
            "|--:|" + "--:|" * (len(by_kind) + 1),
        ]
        for size in sizes:
            values = {kind: dict(pts).get(size) for kind, pts in by_kind.items()}
            cells = " | ".join(_fmt(v, 2) for v in values.values())
            lines.append(f"| {size} | {cells} | {_ratio(values.get('ours'), values.get('kube'))} |")
        lines.append("")
    return "\n".join(lines)


def scaling_plot(results: Mapping[str, Any], out_dir: Path) -> list[str]:
    """One PNG per case: CPU ms per pod against nodes, a line per scheduler; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib (pip install -e '.[bench]'): scaling plot left out", flush=True)
        return []
    written = []
    for case, by_kind in _scaling_points(results).items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for kind, pts in by_kind.items():
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, marker="o", label=kind)
        ax.set_xscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel("CPU ms per bound pod")
        ax.set_title(f"{case}: cost per pod as the cluster grows")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        name = f"scaling-{case.replace('/', '_')}.png"
        fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(name)
    return written


def _fmt(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cpu(run: Mapping[str, Any]) -> str:
    """CPU ms per bound pod; for a measured phase that binds no pod (PublishResourceSlices
    measures the scheduler taking in ResourceSlices) the phase's CPU seconds."""
    if run.get("cpu_ms_per_pod") is None and run.get("cpu_seconds") is not None and not run.get("scheduled"):
        return f"{run['cpu_seconds']:.2f} s"
    return _fmt(run.get("cpu_ms_per_pod"), 2)


def _ratio(a: Any, b: Any) -> str:
    return "-" if not a or not b else f"{a / b:.2f}"


def _resumes(results: Mapping[str, Any]) -> str:
    times = results.get("resumed") or ()
    return f", resumed {', '.join(times)} (each row at its own commit)" if times else ""


def _counts_cell(counts: Mapping[str, float]) -> str:
    return ", ".join(f"{key} {value:.0f}" for key, value in counts.items())


def ops_markdown(results: Mapping[str, Any]) -> str:
    """The --per-op breakdown of every run that has one: one table per run, one row per op."""
    lines: list[str] = []
    for row in results["runs"]:
        if not row.get("ops"):
            continue
        lines += [
            f"## {row['workload']} / {row['title']}, per op",
            "",
            "| op | s | CPU s | attempts by result | queue moves (queue/event) | API requests (method/code) |",
            "|---|--:|--:|---|---|---|",
        ]
        for op in row["ops"]:
            counts = " | ".join(_counts_cell(op.get(key, {})) for key in ("attempts", "incoming", "requests"))
            lines.append(f"| {op['op']} | {op['seconds']:.2f} | {op['cpu_seconds']:.2f} | {counts} |")
        lines.append("")
    return "\n".join(lines)


def markdown(results: Mapping[str, Any]) -> str:
    lines = [
        f"# Upstream scheduler_perf workloads ({results['kubernetes']}), {results['date']}",
        "",
        f"Machine: {results['machine'].get('cpu', '?')}, {results['machine'].get('cores', '?')} cores; "
        f"commit {results['commit']}{_resumes(results)}; scale {results['scale']} of upstream's counts. "
        "Thresholds are upstream's (their 6-CPU CI machines), for scale only.",
        "",
        "| workload | threshold | ours pods/s avg (p50/p99) | kube pods/s avg (p50/p99) | null pods/s | ours ÷ kube"
        " | ours ÷ null | CPU ms/pod ours / kube | peak RSS MiB ours / kube | attempt p50/p99 ms ours | kube |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    by_workload: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for run in results["runs"]:
        by_workload[run["workload"]][run["scheduler"]] = run
    for name, runs in by_workload.items():
        ours, kube, null = runs.get("ours", {}), runs.get("kube", {}), runs.get("null", {})

        def tp(run: Mapping[str, Any]) -> str:
            if run.get("error"):
                return "error"
            return (
                f"{_fmt(run.get('throughput_avg'))} ({_fmt(run.get('throughput_p50'))}/"
                f"{_fmt(run.get('throughput_p99'))})"
            )

        lines.append(
            f"| {name} | {_fmt(ours.get('threshold') or kube.get('threshold'))} | {tp(ours)} | {tp(kube)} | "
            f"{_fmt(null.get('throughput_avg'))} | {_ratio(ours.get('throughput_avg'), kube.get('throughput_avg'))} | "
            f"{_ratio(ours.get('throughput_avg'), null.get('throughput_avg'))} | "
            f"{_cpu(ours)} / {_cpu(kube)} | "
            f"{_fmt(ours.get('peak_rss_mib'))} / {_fmt(kube.get('peak_rss_mib'))} | "
            f"{_fmt(ours.get('attempt_p50_ms'), 1)}/{_fmt(ours.get('attempt_p99_ms'), 1)} | "
            f"{_fmt(kube.get('attempt_p50_ms'), 1)}/{_fmt(kube.get('attempt_p99_ms'), 1)} |"
        )
    variants = [
        (name, key, run)
        for name, runs in by_workload.items()
        for key, run in runs.items()
        if key.startswith("ours-") and not run.get("error")
    ]
    if variants:
        lines += [
            "",
            "Variants of ours (the same workload in the same run; ÷ ours compares with the row above):",
            "",
            "| workload | variant | pods/s avg | CPU ms/pod | ours CPU ÷ variant CPU | ours ÷ variant pods/s"
            " | peak RSS MiB |",
            "|---|---|--:|--:|--:|--:|--:|",
        ]
        for name, _key, run in variants:
            ours = by_workload[name].get("ours", {})
            lines.append(
                f"| {name} | {run['title']} | {_fmt(run.get('throughput_avg'))} | "
                f"{_fmt(run.get('cpu_ms_per_pod'), 2)} | "
                f"{_ratio(ours.get('cpu_ms_per_pod'), run.get('cpu_ms_per_pod'))} | "
                f"{_ratio(ours.get('throughput_avg'), run.get('throughput_avg'))} | {_fmt(run.get('peak_rss_mib'))} |"
            )
    errors = [f"- {r['workload']} / {r['title']}: {r['error']}" for r in results["runs"] if r.get("error")]
    if errors:
        lines += ["", "Errors:", *errors]
    if results["skipped"]:
        lines += ["", "Skipped (upstream workloads this harness or ours cannot run as they are):"]
        lines += [f"- {s['workload']}: {s['reason']}" for s in results["skipped"]]
    return "\n".join(lines) + "\n"


def _resumed(path: Path, results: Mapping[str, Any]) -> dict[str, Any]:
    """The results to carry on from: `results` with the rows of an earlier run in the same folder that
    finished without error, when it measured the same thing (scale, Kubernetes version). The kept rows
    stay as written (each says its commit and when it was measured), and the file stays the first
    run's: its `date`, `started` and `commit`, with `resumed` listing when each resume started."""
    if not path.exists():
        return dict(results)
    earlier = json.loads(path.read_text())
    for key in ("scale", "kubernetes"):
        if earlier.get(key) != results[key]:
            raise UpstreamError(f"--resume: {path} has {key} {earlier.get(key)}, this run {results[key]}")
    return {
        **results,
        **{key: earlier[key] for key in ("date", "started", "commit")},
        "resumed": [*earlier.get("resumed", ()), results["started"]],
        "runs": [row for row in earlier.get("runs") or () if not row.get("error")],
    }


def _record(results: dict[str, Any], row: dict[str, Any], path: Path) -> None:
    """Add a row that has just finished, stamped with that time, and write the results: after every
    row, so an interrupted unattended run keeps what it measured (--resume)."""
    row["measured_at"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    results["runs"].append(row)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.bench upstream",
        description="Upstream scheduler_perf test cases, read from the k8s.io/kubernetes module, "
        "against ours, kube-scheduler and the null binder.",
    )
    parser.add_argument("--cases", default="", help="comma-separated: Case or Case/Workload")
    parser.add_argument("--label", action="append", default=[], help="keep workloads with this label (repeatable)")
    parser.add_argument("--schedulers", default="ours,kube,null", help="ours,kube,null")
    parser.add_argument("--full", action="store_true", help="upstream's own sizes (same as --scale 1)")
    parser.add_argument("--scale", type=float, default=0.2, help="multiply upstream's parameterised counts")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a createPods/barrier may wait")
    parser.add_argument("--list", action="store_true", help="list the chosen workloads and skip reasons, run nothing")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--tag", default="", help="a word in the results folder's name (<date>-upstream-<tag>-<scale>)")
    parser.add_argument(
        "--ours-variant",
        action="append",
        default=[],
        metavar="LABEL:NAME=VALUE[,NAME=VALUE]",
        help="also run ours with these environment variables, as scheduler ours-LABEL (repeatable)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy profile of ours over its first measured phase")
    parser.add_argument(
        "--per-op",
        action="store_true",
        help="record, after each op, its wall time, the scheduler's CPU, its attempts by result, its queue "
        "moves by queue and event and its API requests by method and code (results.json, `ops` of each run): "
        "which stage the retries come from",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help=f"{' and '.join(SCALING_CASES)} (or --cases) at {', '.join(map(str, SCALING_NODES))} nodes, "
        "ours and kube-scheduler",
    )
    parser.add_argument("--scaling-nodes", default=",".join(map(str, SCALING_NODES)), help="node counts of --scaling")
    parser.add_argument(
        "--config-dir",
        type=Path,
        help="run the scheduler_perf-format configs in this directory (your own workload shapes) instead of "
        "upstream's; template paths missing there resolve in upstream's scheduler_perf tree",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows of an interrupted run in the same results folder and run only the rest "
        "(a workload that errored is run again)",
    )
    args = parser.parse_args(argv)
    scale = 1.0 if args.full or args.scaling else args.scale
    try:
        if args.scaling:
            sizes = [int(n) for n in args.scaling_nodes.split(",") if n]
            cases = [c for c in args.cases.split(",") if c] or list(SCALING_CASES)
            chosen = [
                at_nodes(workload, nodes) for workload in select(upstream_workloads(), cases, []) for nodes in sizes
            ]
        else:
            pool = user_workloads(args.config_dir) if args.config_dir else upstream_workloads()
            chosen = select(pool, [c for c in args.cases.split(",") if c], args.label)
    except UpstreamError as err:
        parser.error(str(err))
    known = {kind.key: kind for kind in SCHEDULERS}
    kinds = [known[k.strip()] for k in args.schedulers.split(",") if k.strip() in known]
    try:
        variants = [ours_variant(spec) for spec in args.ours_variant]
    except ValueError as err:
        parser.error(str(err))
    position = next((i + 1 for i, kind in enumerate(kinds) if kind.key == "ours"), len(kinds))
    kinds[position:position] = variants
    if args.scaling:
        kinds = [kind for kind in kinds if kind.key != "null"]
    # A stand-in plugin (one that refuses what it does not implement) does not count as having it.
    ours = [module.NAME for module in IN_TREE if not getattr(module, "STAND_IN", False)]
    runnable, skipped = [], []
    for workload in chosen:
        reason = skip_reason(workload, ours)
        if reason is None:
            runnable.append(workload)
        else:
            skipped.append({"workload": workload.key, "reason": reason})
            print(f"skip {workload.key}: {reason}", flush=True)
    if args.list:
        for workload in runnable:
            print(f"run  {workload.key} (threshold {workload.threshold}, labels {','.join(workload.labels)})")
        return 0
    now = datetime.datetime.now().astimezone()
    results: dict[str, Any] = {
        "date": now.strftime("%Y-%m-%d"),
        "started": now.isoformat(timespec="seconds"),
        "machine": report.machine(),
        "kubernetes": pinned_versions()["K8S_VERSION"],
        "commit": report.git_revision(REPO_ROOT),
        "scale": scale,
        "runs": [],
        "skipped": skipped,
    }
    kind_name = "scaling" if args.scaling else "full" if scale == 1.0 else f"scale{scale:g}"
    if args.config_dir:
        kind_name = f"{args.config_dir.resolve().name}-{kind_name}"
        # An operator's own shapes, not upstream's: the README's upstream tables leave such runs out.
        results["config_dir"] = args.config_dir.resolve().name
    if args.tag:
        kind_name = f"{args.tag}-{kind_name}"
    out_dir = args.results_dir / f"{results['date']}-upstream-{kind_name}"
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = _resumed(out_dir / "results.json", results) if args.resume else results
    except UpstreamError as err:
        parser.error(str(err))
    done = {(row["workload"], row["scheduler"]) for row in results["runs"]}
    for workload in runnable:
        for kind in kinds:
            if (workload.key, kind.key) in done:
                print(f"{workload.key} / {kind.title}: kept from the interrupted run", flush=True)
                continue
            print(f"{workload.key} / {kind.title} (scale {scale})", flush=True)
            profile = (
                out_dir / f"profile-{workload.key.replace('/', '_')}.txt"
                if args.profile and kind.key == "ours"
                else None
            )
            if profile is not None:
                profile.unlink(missing_ok=True)
            row = run_workload(workload, kind, scale=scale, timeout=args.timeout, profile=profile, per_op=args.per_op)
            if profile is not None and profile.exists():
                with profile.open() as collapsed:
                    profile.with_suffix(".md").write_text(
                        f"# py-spy profile of ours on {workload.key} (first measured phase)\n\n"
                        + report.profile_summary(collapsed)
                    )
            print(
                f"  {row.get('error') or ''}"
                f"{_fmt(row.get('throughput_avg'))} pods/s avg, CPU {_fmt(row.get('cpu_ms_per_pod'), 2)} ms/pod, "
                f"{_fmt(row.get('attempts_per_pod'), 2)} attempts/pod, {row['wall_seconds']:.0f} s, "
                f"{_fmt(row.get('other_busy_cores'), 2)} cores busy with other work",
                flush=True,
            )
            _record(results, row, out_dir / "results.json")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results)
    per_op = ops_markdown(results)
    if per_op:
        text += "\n" + per_op
    if args.scaling:
        text += "\n" + scaling_markdown(results)
        for name in scaling_plot(results, out_dir):
            text += f"\n![{name}]({name})\n"
    (out_dir / "results.md").write_text(text)
    (args.results_dir / ("latest-scaling.md" if args.scaling else "latest-upstream.md")).write_text(text)
    print(text)
    return 1 if any(run.get("error") for run in results["runs"]) else 0
