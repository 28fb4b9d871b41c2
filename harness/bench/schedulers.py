"""The schedulers a benchmark measures, each started on a fresh control plane.

Owns: starting and stopping each scheduler under test with a schedulerName of its own — ours
(`python -m scheduler run --no-leader-elect`), kube-scheduler from the harness (leader election
off, client QPS/burst 5000 as scheduler_perf sets them) and the null binder (round-robin binds,
no logic: the apiserver's own limit) — and handing the runner its pid (for /proc readings) and a
way to read its Prometheus metrics when it has any. A workload may ask for feature gates and a
KubeSchedulerConfiguration of its own (`Setup`): kube-scheduler gets the gates and that
configuration merged with the harness's settings; ours the gates it reads
(upstream.ours_feature_gates) and the same configuration in a file with the same settings; the
null binder, which has no logic to configure, neither.

Must never: create workload objects or measure anything itself (runner.py does).
"""

from __future__ import annotations

import os
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.bench.upstream import ours_feature_gates
from harness.controlplane import ControlPlane, ControlPlaneError, ManagedProcess, binary, deep_merge, tail
from harness.workload import metrics_text, running_scheduler_process
from scheduler.features import FeatureGates

NULL_BINDER_READY = "null-binder ready"


@dataclass(frozen=True)
class Running:
    """A scheduler under test while it runs."""

    pid: int
    metrics: Callable[[], str] | None  # its /metrics text; None when it has no metrics endpoint


@dataclass(frozen=True)
class Setup:
    """What a workload asks of the scheduler under test beyond its name."""

    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # A KubeSchedulerConfiguration whose profile already carries the scheduler's name.
    config: Mapping[str, Any] | None = None


DEFAULT_SETUP = Setup()


@dataclass(frozen=True)
class SchedulerKind:
    key: str  # what --schedulers takes
    title: str
    scheduler_name: str  # spec.schedulerName of its pods
    honours_constraints: bool  # False: binds anything anywhere, placements are not checked
    start: Callable[[ControlPlane, str, Setup], AbstractContextManager[Running]]
    # The work tree it runs from when not this one (an --ours-variant's PYTHONPATH): its commit is the row's.
    tree: Path | None = None


# The client rate limit every scheduler under test gets (scheduler_perf's QPS/burst 5000).
CLIENT_QPS = 5000


def ours_arguments(kubeconfig: Path, setup: Setup) -> tuple[list[str], dict[str, Any] | None]:
    """Ours' extra command-line arguments for `setup`, and the configuration file's content when
    the setup has a configuration (its clientConnection then carries the rate limit, which the
    flags do not override when a file is given)."""
    args = ["--no-leader-elect"]
    gates = FeatureGates(ours_feature_gates(setup.feature_gates))
    if gates.overrides:
        args.append(f"--feature-gates={gates.flag()}")
    if setup.config is None:
        return [*args, f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_QPS}"], None
    client = {"clientConnection": {"kubeconfig": str(kubeconfig), "qps": CLIENT_QPS, "burst": CLIENT_QPS}}
    return args, deep_merge(dict(setup.config), client)


@contextmanager
def _ours(
    plane: ControlPlane, scheduler_name: str, setup: Setup = DEFAULT_SETUP, env: Mapping[str, str] | None = None
) -> Iterator[Running]:
    extra, config = ours_arguments(plane.kubeconfig, setup)
    path = None
    if config is not None:
        path = plane.workdir / f"ours-{scheduler_name}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
    with running_scheduler_process(plane, scheduler_name, path, extra_args=tuple(extra), env=env) as process:
        yield Running(process.pid, lambda: metrics_text(process.port))


def ours_variant(spec: str) -> SchedulerKind:
    """`LABEL:NAME=VALUE[,NAME=VALUE]`: ours with those environment variables, as scheduler
    `ours-LABEL` (an A/B of one setting in the same run, e.g. `stdjson:SECONDARY_SCHEDULER_JSON=stdlib`)."""
    label, _, assignments = spec.partition(":")
    env = dict(pair.split("=", 1) for pair in assignments.split(",") if "=" in pair)
    if not label or not env:
        raise ValueError(f"--ours-variant {spec!r}: expected LABEL:NAME=VALUE[,NAME=VALUE]")

    def start(plane: ControlPlane, name: str, setup: Setup = DEFAULT_SETUP) -> AbstractContextManager[Running]:
        return _ours(plane, name, setup, env)

    path = env.get("PYTHONPATH", "").split(os.pathsep)[0]
    tree = Path(path) if path else None
    return SchedulerKind(
        f"ours-{label}", f"secondary-scheduler ({assignments})", f"bench-ours-{label}", True, start, tree
    )


def _unverified_loopback() -> ssl.SSLContext:
    # kube-scheduler serves /metrics over HTTPS with a certificate it makes up in memory; this reads
    # our own child on loopback (the control plane's health probe does the same).
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextmanager
def _kube_scheduler(plane: ControlPlane, scheduler_name: str, setup: Setup = DEFAULT_SETUP) -> Iterator[Running]:
    # Verbosity 1: at 2 it logs a line per bound pod, which ours (at info) does not.
    proc = plane.start_kube_scheduler(
        scheduler_name, setup.config, verbosity=1, feature_gates=dict(setup.feature_gates)
    )
    context = _unverified_loopback()

    def metrics() -> str:
        url = f"https://127.0.0.1:{proc.port}/metrics"
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            body: bytes = response.read()
        return body.decode()

    try:
        yield Running(proc.pid, metrics)
    finally:
        plane.stop_process(proc)


@contextmanager
def _null_binder(plane: ControlPlane, scheduler_name: str, _setup: Setup = DEFAULT_SETUP) -> Iterator[Running]:
    log_path = plane.log_dir / "null-binder.log"
    proc = ManagedProcess(
        "null-binder",
        [
            str(binary("null-binder")),
            f"--kubeconfig={plane.kubeconfig}",
            f"--scheduler-name={scheduler_name}",
            "--workers=64",
            "--qps=5000",
            "--burst=5000",
        ],
        log_path,
    )
    try:
        deadline = time.monotonic() + 30
        while NULL_BINDER_READY not in tail(log_path, 5):
            if not proc.alive():
                raise proc.failure("exited during start-up")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"null-binder not ready within 30 s; log:\n{tail(log_path)}")
            time.sleep(0.05)
        yield Running(proc.pid, None)
    finally:
        proc.stop()


SCHEDULERS: tuple[SchedulerKind, ...] = (
    SchedulerKind("ours", "secondary-scheduler", "bench-ours", True, _ours),
    SchedulerKind("kube", "kube-scheduler", "bench-kube-scheduler", True, _kube_scheduler),
    SchedulerKind("null", "null binder", "bench-null-binder", False, _null_binder),
)
