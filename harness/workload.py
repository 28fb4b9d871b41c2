"""Run the scheduler as a real subprocess against a control plane; build nodes and pods; poll.

Shared by the cluster tests, `make demo` and the benchmarks. Owns: starting `python -m scheduler
run`, waiting for /readyz, stopping it (and failing if it crashed). Must never: mock anything or
leave the process running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s_client
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from harness.controlplane import ControlPlane, death_signal_prefix, free_ports
from scheduler.model.objects import Resource

T = TypeVar("T")


@dataclass(frozen=True)
class SchedulerProcess:
    """A running scheduler subprocess: its metrics port, its pid (for /proc readings) and its log."""

    port: int
    pid: int
    log_path: Path


@contextmanager
def running_scheduler_process(
    plane: ControlPlane,
    scheduler_name: str,
    config: Path | None = None,
    extra_args: tuple[str, ...] = (),
    python_path: tuple[Path, ...] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[SchedulerProcess]:
    """Like running_scheduler, but yields the whole SchedulerProcess (the benchmarks read its pid);
    `env` adds environment variables (a benchmark variant's settings)."""
    (port,) = free_ports(1)
    log_path = plane.log_dir / f"scheduler-{scheduler_name}.log"
    # Dies with this process, as the control plane's do: a benchmark killed outright (SIGTERM, no
    # finally) once left three schedulers re-binding into a gone apiserver at a core each.
    args = [
        *death_signal_prefix(),
        sys.executable,
        "-m",
        "scheduler",
        "run",
        "--kubeconfig",
        str(plane.kubeconfig),
        "--metrics-address",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--serve-plain-http",
        "--log-level",
        "info",
    ]
    args += ["--config", str(config)] if config else ["--scheduler-name", scheduler_name]
    args += list(extra_args)
    with log_path.open("wb") as log:
        environ = {**os.environ, **(env or {})}
        if python_path:
            environ["PYTHONPATH"] = os.pathsep.join([*map(str, python_path), environ.get("PYTHONPATH", "")])
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=environ)
    try:
        wait_for(lambda: _ready(port, proc, log_path), timeout=30, what="scheduler /readyz")
        yield SchedulerProcess(port=port, pid=proc.pid, log_path=log_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"scheduler did not stop on SIGTERM; log:\n{_tail(log_path)}") from None
        code = proc.returncode
        if code not in (0, -signal.SIGTERM):
            raise AssertionError(f"scheduler exited with {code}; log:\n{_tail(log_path)}")


@contextmanager
def running_scheduler(
    plane: ControlPlane,
    scheduler_name: str,
    config: Path | None = None,
    extra_args: tuple[str, ...] = (),
    python_path: tuple[Path, ...] = (),
) -> Iterator[int]:
    """Yields the metrics port of a running scheduler; on exit checks it stopped cleanly."""
    with running_scheduler_process(plane, scheduler_name, config, extra_args, python_path) as process:
        yield process.port


def _tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _ready(port: int, proc: subprocess.Popen[bytes], log_path: Path) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"scheduler exited early with {proc.returncode}; log:\n{_tail(log_path)}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body: bytes = resp.read()
    return body.decode()


def metric_value(port: int, sample_name: str, **labels: str) -> float:
    """Sum of the samples called `sample_name` on a scheduler's /metrics whose labels include `labels`.

    A name no exposed family can carry is an error, not a zero: a metric the scheduler does not
    export (or a typo) must fail the test. A family exposed without children yet (its HELP and
    TYPE lines only: nothing observed so far) and a labelled child not created yet count 0, as
    PromQL's sum would.
    """
    families = list(text_string_to_metric_families(metrics_text(port)))
    if not any(_family_carries(family, sample_name) for family in families):
        raise AssertionError(f"/metrics on port {port} has no metric family with samples named {sample_name}")
    return _sum_matching(families, sample_name, labels)


def registry_value(registry: CollectorRegistry, sample_name: str, **labels: str) -> float:
    """metric_value's sum over an in-process registry (unit tests), with the same rule."""
    families = list(registry.collect())
    if not any(_family_carries(family, sample_name) for family in families):
        raise AssertionError(f"the registry has no metric family with samples named {sample_name}")
    return _sum_matching(families, sample_name, labels)


_SAMPLE_SUFFIXES = ("", "_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info")


def _family_carries(family: Metric, sample_name: str) -> bool:
    return any(sample_name == family.name + suffix for suffix in _SAMPLE_SUFFIXES)


def _sum_matching(families: Iterable[Metric], sample_name: str, labels: Mapping[str, str]) -> float:
    return sum(
        (
            sample.value
            for family in families
            for sample in family.samples
            if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items())
        ),
        0.0,
    )


def wait_for(
    check: Callable[[], T | bool | None], timeout: float = 30, what: str = "condition", interval: float = 0.2
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def make_node(
    core: Any,
    name: str,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[k8s_client.V1Taint] | None = None,
) -> None:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    node = k8s_client.V1Node(
        metadata=k8s_client.V1ObjectMeta(
            name=name, labels={"type": "kwok", **(labels or {})}, annotations={"kwok.x-k8s.io/node": "fake"}
        ),
        spec=k8s_client.V1NodeSpec(taints=taints),
        status=k8s_client.V1NodeStatus(capacity=capacity, allocatable=capacity),
    )
    created = core.create_node(node)
    if (created.status.allocatable or {}) != capacity:
        # Older apiservers drop status on create; a merge patch does not race kwok's updates.
        core.patch_node_status(name, {"status": {"capacity": capacity, "allocatable": capacity}})


def api_pod(
    name: str, scheduler_name: str, cpu: str = "100m", memory: str = "128Mi", priority_class: str | None = None
) -> k8s_client.V1Pod:
    """A V1Pod to create through the API: one pause container with these requests, labelled app=<name
    without its last -suffix>. (scheduler.testing.builders.make_pod builds model Pods for unit tests.)"""
    return k8s_client.V1Pod(
        metadata=k8s_client.V1ObjectMeta(name=name, labels={"app": name.rsplit("-", 1)[0]}),
        spec=k8s_client.V1PodSpec(
            scheduler_name=scheduler_name,
            priority_class_name=priority_class,
            containers=[
                k8s_client.V1Container(
                    name="c",
                    image="registry.k8s.io/pause:3.10",
                    resources=k8s_client.V1ResourceRequirements(requests={"cpu": cpu, "memory": memory}),
                )
            ],
        ),
    )


def requested_per_node(core: Any, namespace: str | None = None) -> dict[str, Resource]:
    pods = core.list_namespaced_pod(namespace).items if namespace else core.list_pod_for_all_namespaces().items
    totals: dict[str, Resource] = {}
    for pod in pods:
        if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests if container.resources else None) or {}
            totals.setdefault(pod.spec.node_name, Resource()).add(Resource.from_list(requests, pod.metadata.name))
    return totals


def pod_events(core: Any, namespace: str, pod_name: str) -> list[Any]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod_name}").items
    return list(events)


def failed_scheduling_messages(core: Any, namespace: str, pod_name: str) -> list[str]:
    """The messages of the pod's FailedScheduling Events."""
    return [e.message for e in pod_events(core, namespace, pod_name) if e.reason == "FailedScheduling"]


def scheduled_condition(pod: Any) -> Any | None:
    for condition in pod.status.conditions or ():
        if condition.type == "PodScheduled":
            return condition
    return None
