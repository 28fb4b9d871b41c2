"""The fault suite's shared parts: scheduler replicas as processes, a pod stream, the one invariant
check every fault test ends with, and the results table (tests/faults/RESULTS.md).

Owns: what "nothing lost, nothing undone" means, written once — every pod bound exactly once or
PodScheduled=False with a FailedScheduling event (core/v1 or events.k8s.io/v1), no node's summed
requests over its allocatable (all schedulers' pods), no assumed pod left, the queue holding just
the pods that cannot fit, the metrics matching what happened; and for pod groups
(scheduling.k8s.io/v1beta1 PodGroups): no gang partly bound (fewer than minCount members bound
while others wait), no gang left wholly unbound while enough of its members fit together (two
gangs that together do not fit: one is placed whole), and members held before the queue only
while their group has fewer than minCount members (upstream's PreEnqueue). Each test runs inside fault_run,
which writes its row whatever happens: every problem found (a broken invariant, a replica that
hangs on SIGTERM, a traceback in a log, the test stopping on an exception) is in the row, in
RESULTS.json and RESULTS.md alike, and fails the test. Must never: mock anything, sleep for a fixed
time instead of waiting on a condition, leave a process behind, or let a problem pass unrecorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from kubernetes import client as k8s_client
from prometheus_client.parser import text_string_to_metric_families

from harness.controlplane import REPO_ROOT, ControlPlane, free_ports
from harness.workload import api_pod, make_node, wait_for
from scheduler.model.objects import Node, Pod, Resource

RESULTS_JSON = REPO_ROOT / "tests" / "faults" / "RESULTS.json"

# The workload every fault runs under: 490 pods that fit (nodes about 90 % full) and 10 that never do.
NODE_COUNT = 50
NODE_CPU = "2"
NODE_MEMORY = "8Gi"
FITTING_PODS = 490
FITTING_CPU = "180m"
UNFITTING_PODS = 10
UNFITTING_CPU = "3"
POD_MEMORY = "128Mi"
PODGROUPS_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"


# ---- scheduler replicas ------------------------------------------------------------------------


class Process:
    """A child process writing to its own log: start, signal, wait, stop. A process that outlives
    SIGTERM by `stop_grace` seconds is killed and reported, never passed over."""

    def __init__(self, label: str, args: Sequence[str], log_path: Path, *, stop_grace: float = 20.0) -> None:
        self.label = label
        self.args = list(args)
        self.log_path = log_path
        self.stop_grace = stop_grace
        self._proc: subprocess.Popen[bytes] | None = None
        self.exited_at: float | None = None

    def start(self) -> Self:
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.exited_at = None
        return self

    @property
    def returncode(self) -> int | None:
        if self._proc is None:
            return None
        code = self._proc.poll()
        if code is not None and self.exited_at is None:
            self.exited_at = time.time()
        return code

    def alive(self) -> bool:
        return self._proc is not None and self.returncode is None

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        assert self._proc is not None
        self._proc.send_signal(sig)
        self._proc.wait(timeout=30)
        self.returncode  # noqa: B018 - records exited_at

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code, or None when it is still running after `timeout` seconds."""
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self.returncode  # noqa: B018 - records exited_at
        return code

    def stop(self) -> str:
        """SIGTERM, then SIGKILL after `stop_grace` seconds. The problem ("" when it stopped, or had
        already exited): a process still running `stop_grace` seconds after SIGTERM, with its log."""
        if self._proc is None or self._proc.poll() is not None:
            return ""
        self._proc.send_signal(signal.SIGTERM)
        if self.wait_exit(self.stop_grace) is not None:
            return ""
        self._proc.kill()
        self._proc.wait()
        tail = self.log_tail(15)
        return (
            f"replica {self.label} did not stop within {self.stop_grace:g} s of SIGTERM (killed); its log ends:\n{tail}"
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


class Replica(Process):
    """`python -m scheduler run` as a child process; start, kill, restart, read its log and metrics."""

    def __init__(
        self,
        plane: ControlPlane,
        scheduler_name: str,
        label: str,
        *,
        kubeconfig: Path | None = None,
        lease: str | None = None,
        lease_timings: tuple[float, float, float] = (6.0, 4.0, 1.0),
        extra_args: Sequence[str] = (),
    ) -> None:
        self.plane = plane
        (self.port,) = free_ports(1)
        args = [
            sys.executable,
            "-m",
            "scheduler",
            "run",
            f"--kubeconfig={kubeconfig or plane.kubeconfig}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.port}",
            f"--scheduler-name={scheduler_name}",
            "--log-level=info",
            "--serve-plain-http",  # the suite reads /metrics and /readyz without a token
        ]
        if lease is None:
            args.append("--no-leader-elect")
        else:
            duration, deadline, retry = lease_timings
            args += [
                "--leader-elect-resource-namespace=kube-system",
                f"--leader-elect-resource-name={lease}",
                f"--leader-elect-lease-duration={duration}",
                f"--leader-elect-renew-deadline={deadline}",
                f"--leader-elect-retry-period={retry}",
            ]
        super().__init__(label, [*args, *extra_args], plane.log_dir / f"scheduler-{scheduler_name}-{label}.log")

    def start(self, wait_ready: bool = True) -> Self:
        super().start()
        if wait_ready:
            wait_for(self._ready, timeout=60, what=f"scheduler {self.label} /readyz")
        return self

    def _ready(self) -> bool:
        if self.returncode is not None:
            raise AssertionError(f"scheduler {self.label} exited with {self.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples `name` with these labels (the replica must be alive)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError as err:
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
            raise AssertionError(f"replica {self.label}: /metrics unreachable ({err}); its log ends:\n{tail}") from err
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total


def stop_all(started: Sequence[Process]) -> list[str]:
    """Stop every process (all of them, whichever fails); the problems of those that would not stop."""
    return [problem for process in started if (problem := process.stop())]


@contextlib.contextmanager
def replicas(*started: Process) -> Iterator[None]:
    """Stop every replica at the end, whatever happened; one that hangs on SIGTERM fails the test."""
    try:
        yield
    finally:
        problems = stop_all(started)
        if problems:
            raise AssertionError("\n".join(problems))


# ---- the cluster and the workload --------------------------------------------------------------


def make_nodes(core: Any, prefix: str, count: int = NODE_COUNT) -> list[str]:
    names = [f"{prefix}-n{i:02d}" for i in range(count)]
    for name in names:
        make_node(core, name, cpu=NODE_CPU, memory=NODE_MEMORY)
    return names


def delete_nodes(core: Any, names: Sequence[str]) -> None:
    for name in names:
        with contextlib.suppress(k8s_client.ApiException):
            core.delete_node(name)


class PodStream(threading.Thread):
    """Creates the workload's pods at `rate` per second from its own client; a failed create (the
    apiserver restarting) is retried until it lands, so every pod of the stream exists in the end."""

    def __init__(self, plane: ControlPlane, namespace: str, scheduler_name: str, rate: float = 60.0) -> None:
        super().__init__(name="pod-stream", daemon=True)
        self.plane, self.namespace, self.scheduler_name, self.rate = plane, namespace, scheduler_name, rate
        self.specs = [(f"fit-{i:03d}", FITTING_CPU) for i in range(FITTING_PODS)]
        # The pods that never fit go in early, so that they wait through the fault.
        for j in range(UNFITTING_PODS):
            self.specs.insert(j * 40, (f"big-{j:02d}", UNFITTING_CPU))
        self.created = 0
        self.create_errors = 0
        self.finished_at: float | None = None
        self._halt = threading.Event()

    @property
    def total(self) -> int:
        return len(self.specs)

    def run(self) -> None:
        from tests.conftest import api_client

        api = api_client(self.plane)
        core = k8s_client.CoreV1Api(api)
        try:
            began = time.monotonic()
            for index, (name, cpu) in enumerate(self.specs):
                pause = began + index / self.rate - time.monotonic()
                if pause > 0 and self._halt.wait(pause):
                    return
                body = api_pod(name, self.scheduler_name, cpu=cpu, memory=POD_MEMORY)
                while not self._halt.is_set():
                    try:
                        core.create_namespaced_pod(self.namespace, body, _request_timeout=10)
                        break
                    except k8s_client.ApiException as exc:
                        if exc.status == 409:
                            break  # created by the attempt whose answer was lost
                        self.create_errors += 1
                    except Exception:  # the apiserver is down: connection refused / reset
                        self.create_errors += 1
                    self._halt.wait(0.2)
                self.created += 1
            self.finished_at = time.time()
        finally:
            api.close()

    def wait_created(self, count: int, timeout: float = 120) -> None:
        wait_for(lambda: self.created >= count, timeout=timeout, what=f"{count} pods created")

    def finish(self, timeout: float = 180) -> None:
        self.join(timeout)
        if self.is_alive():
            self._halt.set()
            raise AssertionError(f"pod stream did not finish within {timeout}s ({self.created}/{self.total})")


def gang_spec(name: str, members: int, min_count: int, cpu: str) -> tuple[Any, list[Any]]:
    """A gang PodGroup and its member pods (pause, these requests), raw: spec.schedulingGroup is newer
    than the `kubernetes` client's models."""
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    container = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": POD_MEMORY}},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "labels": {"app": name}},
            "spec": {
                "schedulingGroup": {"podGroupName": name},
                "terminationGracePeriodSeconds": 0,
                "containers": [container],
            },
        }
        for i in range(members)
    ]
    return group, pods


class GangStream(threading.Thread):
    """Creates gangs at `rate` gangs per second: each PodGroup, then its members (as upstream's
    scheduler_perf podgroup workloads do), or with `interleave` every gang's PodGroup first and then
    the members round-robin (a-0, b-0, a-1, ...: the order that deadlocks per-pod gang schedulers).
    A failed create is retried until it lands."""

    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        scheduler_name: str,
        gangs: Sequence[tuple[str, int, int, str]],  # name, members, minCount, cpu per member
        *,
        rate: float = 4.0,
        interleave: bool = False,
    ) -> None:
        super().__init__(name="gang-stream", daemon=True)
        self.plane, self.namespace, self.rate = plane, namespace, rate
        self.specs = [gang_spec(*gang) for gang in gangs]
        for _group, pods in self.specs:
            for pod in pods:
                pod["spec"]["schedulerName"] = scheduler_name
        self.interleave = interleave
        self.created = 0  # pods
        self.create_errors = 0
        self._halt = threading.Event()

    @property
    def total(self) -> int:
        return sum(len(pods) for _group, pods in self.specs)

    def members(self, gang: str) -> list[str]:
        return next([p["metadata"]["name"] for p in pods] for g, pods in self.specs if g["metadata"]["name"] == gang)

    def _create(self, plural: str, body: Any) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        if plural == "podgroups":
            path = PODGROUPS_PATH.format(namespace=self.namespace)
        while not self._halt.is_set():
            try:
                status, _ = self.plane.http_request("POST", path, body, timeout=10)
            except OSError:
                status = 0
            if status in (201, 409):  # 409: created by the attempt whose answer was lost
                return
            self.create_errors += 1
            self._halt.wait(0.2)

    def run(self) -> None:
        began = time.monotonic()
        if self.interleave:
            for group, _pods in self.specs:
                self._create("podgroups", group)
            longest = max(len(pods) for _group, pods in self.specs)
            for i in range(longest):
                for _group, pods in self.specs:
                    if i < len(pods):
                        self._create("pods", pods[i])
                        self.created += 1
            return
        for index, (group, pods) in enumerate(self.specs):
            pause = began + index / self.rate - time.monotonic()
            if pause > 0 and self._halt.wait(pause):
                return
            self._create("podgroups", group)
            for pod in pods:
                self._create("pods", pod)
                self.created += 1

    def wait_created(self, count: int, timeout: float = 120) -> None:
        wait_for(lambda: self.created >= count, timeout=timeout, what=f"{count} gang members created")

    def finish(self, timeout: float = 180) -> None:
        self.join(timeout)
        if self.is_alive():
            self._halt.set()
            raise AssertionError(f"gang stream did not finish within {timeout}s ({self.created}/{self.total})")


# ---- the invariant check, written once ---------------------------------------------------------


@dataclass
class Outcome:
    fault: str
    pods: int
    nodes: int
    bound: int = 0
    unschedulable: int = 0
    lost: int = 0
    overcommitted: int = 0
    double_bound: int = 0
    recover_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    groups: int = 0  # PodGroups in the namespace
    partly_bound_groups: int = 0


def _get(plane: ControlPlane, path: str) -> Any:
    status, body = plane.http_request("GET", path, timeout=30)
    if status != 200:
        raise AssertionError(f"GET {path}: HTTP {status}: {body[:300]!r}")
    return json.loads(body)


def _events_by_pod(plane: ControlPlane, namespace: str) -> dict[str, dict[str, int]]:
    """pod name -> reason -> how many times. The events.k8s.io/v1 view shows every Event, whichever
    API wrote it: core/v1 counts arrive as deprecatedCount, events.k8s.io/v1 repeats as series."""
    counts: dict[str, dict[str, int]] = {}
    for item in _get(plane, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]:
        name = (item.get("regarding") or {}).get("name", "")
        reasons = counts.setdefault(name, {})
        times = max(1, int(item.get("deprecatedCount") or 0), int((item.get("series") or {}).get("count") or 0))
        reasons[item.get("reason", "")] = reasons.get(item.get("reason", ""), 0) + times
    return counts


def _bind_times(pods: Sequence[Any]) -> list[float]:
    """When the apiserver bound each bound pod (its PodScheduled=True transition, 1 s resolution)."""
    times = []
    for raw in pods:
        for condition in (raw.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
                stamp = condition.get("lastTransitionTime")
                if stamp:
                    times.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return sorted(times)


def recovery_seconds(plane: ControlPlane, namespace: str, fault_over_at: float, since: float | None = None) -> float:
    """Seconds from `since` (default: the end of the fault) to the first bind at or after the end of the
    fault (0 when binding never stopped)."""
    times = _bind_times(_get(plane, f"/api/v1/namespaces/{namespace}/pods")["items"])
    after = [t for t in times if t >= int(fault_over_at)]
    if not after:
        return 0.0
    return max(0.0, after[0] - (fault_over_at if since is None else since))


def _fits_somewhere(pod: Pod, nodes: Sequence[Node], used: dict[str, Resource], counts: dict[str, int]) -> str:
    """A node where `pod` would fit by resources, schedulability and NoSchedule taints ("" if none)."""
    for node in nodes:
        if node.unschedulable or any(t.effect in ("NoSchedule", "NoExecute") for t in node.taints):
            continue
        free = node.allocatable.copy()
        free.sub(used.get(node.name, Resource()))
        if (
            pod.requests.milli_cpu <= free.milli_cpu
            and pod.requests.memory <= free.memory
            and counts.get(node.name, 0) < node.allocatable.allowed_pods
        ):
            return node.name
    return ""


# ---- pod groups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupCheck:
    """The pod-group invariants over one namespace's final state: the problems, the groups checked,
    how many were partly bound, and the members legitimately held before the queue (their group
    has fewer than minCount members, so upstream's GangScheduling never lets them in)."""

    problems: tuple[str, ...] = ()
    groups: int = 0
    partly_bound: int = 0
    held: frozenset[str] = frozenset()  # pod keys


def _group_name(pod: Any) -> str:
    return str(((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "")


def _fit_together(members: Sequence[Pod], count: int, nodes: Sequence[Node], used: dict[str, Resource],
                  counts: dict[str, int]) -> dict[str, str]:  # fmt: skip
    """`count` of `members` placed first-fit, biggest first, on what the nodes have free ({} when
    first-fit finds no way: it may miss one, never invents one)."""
    used = {name: r.copy() for name, r in used.items()}
    counts = dict(counts)
    placed: dict[str, str] = {}
    for pod in sorted(members, key=lambda p: (-p.requests.milli_cpu, -p.requests.memory)):
        node = _fits_somewhere(pod, nodes, used, counts)
        if not node:
            continue
        used.setdefault(node, Resource()).add(pod.requests)
        counts[node] = counts.get(node, 0) + 1
        placed[pod.name] = node
        if len(placed) == count:
            return placed
    return {}


def held_members(pods: Sequence[Any], pod_groups: Sequence[Any]) -> set[str]:
    """Keys of the pods waiting for their gang to have minCount members (none of them bound)."""
    held: set[str] = set()
    for group in pod_groups:
        meta = group["metadata"]
        gang = ((group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
        members = [p for p in _members(pods, meta) if not p["metadata"].get("deletionTimestamp")]
        if gang and len(members) < int(gang["minCount"]) and not any(p["spec"].get("nodeName") for p in members):
            held |= {f"{meta['namespace']}/{p['metadata']['name']}" for p in members}
    return held


def _members(pods: Sequence[Any], meta: Any) -> list[Any]:
    return [p for p in pods if _group_name(p) == meta["name"] and p["metadata"]["namespace"] == meta["namespace"]]


def check_groups(
    pods: Sequence[Any], pod_groups: Sequence[Any], nodes: Sequence[Node], used: dict[str, Resource],
    counts: dict[str, int],
) -> GroupCheck:  # fmt: skip
    """The pod-group invariants over raw `pods` and `pod_groups` of one namespace; `used` / `counts`
    are every node's summed requests and pod count (all schedulers' pods)."""
    problems: list[str] = []
    held = held_members(pods, pod_groups)
    partly = 0
    for group in pod_groups:
        meta = group["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        gang = ((group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
        min_count = int(gang["minCount"]) if gang else 1
        members = [p for p in _members(pods, meta) if not p["metadata"].get("deletionTimestamp")]
        bound = sorted(p["metadata"]["name"] for p in members if (p.get("spec") or {}).get("nodeName"))
        waiting = sorted(p["metadata"]["name"] for p in members if not (p.get("spec") or {}).get("nodeName"))
        if len(members) < min_count and not bound:
            continue
        if gang and 0 < len(bound) < min_count and waiting:
            partly += 1
            problems.append(
                f"pod group {key} partly bound: {len(bound)} of {len(members)} members bound (minCount "
                f"{min_count}), {waiting} left waiting"
            )
        if not bound and len(members) >= min_count:
            fit = _fit_together([Pod.from_raw(p) for p in members], min_count, nodes, used, counts)
            if fit:
                problems.append(
                    f"pod group {key} left wholly unbound, but {min_count} of its members fit together: {fit}"
                )
    return GroupCheck(tuple(problems), len(pod_groups), partly, frozenset(held))


def _pod_groups(plane: ControlPlane, namespace: str) -> list[Any]:
    """The namespace's PodGroups; none when the apiserver does not serve scheduling.k8s.io/v1beta1."""
    status, body = plane.http_request("GET", PODGROUPS_PATH.format(namespace=namespace), timeout=30)
    if status == 404:
        return []
    if status != 200:
        raise AssertionError(f"GET PodGroups in {namespace}: HTTP {status}: {body[:300]!r}")
    items: list[Any] = json.loads(body)["items"]
    return items


def _settled(replica: Replica, unbound: int) -> bool:
    pending = replica.metric("scheduler_pending_pods")
    assumed = replica.metric("scheduler_cache_size", type="assumed_pods")
    return pending == unbound and assumed == 0


def failed_binds_now_bound(log_text: str, bound_keys: set[str]) -> int:
    """Pods whose Bind this replica logged as failed but which are bound now.

    When the apiserver applies a Binding and its reply is lost (it was killed mid-request), the
    binding cycle fails and counts an `error` attempt, as kube-scheduler's does; the informer then
    shows the pod bound. Such a pod is bound by this replica without a `scheduled` attempt.
    """
    failed: set[str] = set()
    for line in log_text.splitlines():
        if '"binding failed' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if str(entry.get("event", "")).startswith("binding failed") and entry.get("pod") in bound_keys:
            failed.add(entry["pod"])
    return len(failed)


def scheduled_metric_problem(scheduled: int, bound: int, failed_but_bound: int) -> str:
    """The scheduled-attempts count against the pods bound: each bound pod counts once as scheduled,
    except those whose Binding landed while its reply was lost (at most one per such pod)."""
    if scheduled > bound:
        return f"scheduled-attempts metric {scheduled}, but it bound only {bound} pods"
    if bound - scheduled > failed_but_bound:
        return (
            f"scheduled-attempts metric {scheduled}, but it bound {bound} pods "
            f"({failed_but_bound} of them after a bind it logged as failed)"
        )
    return ""


def check_invariants(
    plane: ControlPlane,
    namespace: str,
    scheduler_name: str,
    fault: str,
    expected_pods: int,
    live: Replica | None,
    *,
    fault_over_at: float,
    fault_began_at: float | None = None,
    bound_by_others: int | None = None,
    timeout: float = 120,
) -> Outcome:
    """Wait until every pod is decided, then check every invariant; the outcome (FaultRun records it).

    `live` is the replica still running (its queue, cache and metrics are checked);
    With `bound_by_others` (pods bound by another replica or by the test itself), the live replica's
    scheduled-attempts metric must equal the rest of the bound pods. Recovery is measured from
    `fault_began_at` when given (a takeover: the whole gap), else from `fault_over_at`.
    """

    def decided() -> list[Any] | None:
        items = _get(plane, f"/api/v1/namespaces/{namespace}/pods")["items"]
        if len(items) < expected_pods:
            return None
        unbound = []
        held = held_members(items, _pod_groups(plane, namespace))
        for raw in items:
            if (raw.get("spec") or {}).get("nodeName") or f"{namespace}/{raw['metadata']['name']}" in held:
                continue
            conditions = (raw.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions):
                return None
            unbound.append(raw["metadata"]["name"])
        # Events are written after the condition, asynchronously: give them their moment too.
        events = _events_by_pod(plane, namespace) if unbound else {}
        if any(events.get(name, {}).get("FailedScheduling", 0) == 0 for name in unbound):
            return None
        return list(items)

    outcome = Outcome(fault=fault, pods=0, nodes=0)
    problems = outcome.problems
    try:
        items = wait_for(decided, timeout=timeout, what="every pod bound or reported unschedulable", interval=1.0)
    except AssertionError as err:
        # Not the end of the check: the pods undecided are named one by one below.
        problems.append(str(err))
        items = _get(plane, f"/api/v1/namespaces/{namespace}/pods")["items"]
    outcome.pods = len(items)
    if len(items) != expected_pods:
        problems.append(f"{len(items)} pods exist, {expected_pods} expected")

    all_pods = [Pod.from_raw(raw) for raw in _get(plane, "/api/v1/pods")["items"]]
    nodes = [Node.from_raw(raw) for raw in _get(plane, "/api/v1/nodes")["items"]]
    outcome.nodes = len(nodes)
    used: dict[str, Resource] = {}
    counts: dict[str, int] = {}
    for pod in all_pods:
        if pod.node_name and not pod.terminal:
            used.setdefault(pod.node_name, Resource()).add(pod.requests)
            counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
    for node in nodes:
        request = used.get(node.name, Resource())
        if (
            request.milli_cpu > node.allocatable.milli_cpu
            or request.memory > node.allocatable.memory
            or counts.get(node.name, 0) > node.allocatable.allowed_pods
        ):
            outcome.overcommitted += 1
            problems.append(f"node {node.name} over-committed: {request} on {node.allocatable}")

    groups = check_groups(items, _pod_groups(plane, namespace), nodes, used, counts)
    outcome.groups, outcome.partly_bound_groups = groups.groups, groups.partly_bound
    problems.extend(groups.problems)
    events = _events_by_pod(plane, namespace)
    unbound: list[Pod] = []
    for raw in items:
        pod = Pod.from_raw(raw)
        reasons = events.get(pod.name, {})
        if pod.node_name:
            outcome.bound += 1
            if reasons.get("Scheduled", 0) > 1:
                outcome.double_bound += 1
                problems.append(f"pod {pod.key} has {reasons['Scheduled']} Scheduled events")
            continue
        if pod.key in groups.held:
            unbound.append(pod)  # in the queue, held by PreEnqueue until its gang has minCount members
            continue
        conditions = (raw.get("status") or {}).get("conditions") or ()
        reported = any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)
        if not reported or reasons.get("FailedScheduling", 0) == 0:
            outcome.lost += 1
            problems.append(f"pod {pod.key} neither bound nor reported (condition {reported}, events {reasons})")
            continue
        outcome.unschedulable += 1
        unbound.append(pod)
        # A group's member may fit alone and still wait with its group: check_groups judges those.
        fits_on = "" if _group_name(raw) else _fits_somewhere(pod, nodes, used, counts)
        if fits_on:
            problems.append(f"pod {pod.key} is left pending but fits on {fits_on}")

    if live is not None:
        try:
            wait_for(lambda: _settled(live, len(unbound)), timeout=30, what="queue and cache settled")
        except AssertionError:
            problems.append(
                f"replica {live.label}: pending_pods {live.metric('scheduler_pending_pods')} (expected "
                f"{len(unbound)}), assumed {live.metric('scheduler_cache_size', type='assumed_pods')} (expected 0)"
            )
        if bound_by_others is not None:
            scheduled = live.metric("scheduler_schedule_attempts_total", result="scheduled", profile=scheduler_name)
            bound_keys = {f"{namespace}/{raw['metadata']['name']}" for raw in items if raw["spec"].get("nodeName")}
            problem = scheduled_metric_problem(
                int(scheduled), outcome.bound - bound_by_others, failed_binds_now_bound(live.log_text(), bound_keys)
            )
            if problem:
                problems.append(f"replica {live.label}: {problem}")
    outcome.recover_seconds = round(recovery_seconds(plane, namespace, fault_over_at, fault_began_at), 1)
    return outcome


# ---- one fault test's run and its row -----------------------------------------------------------


@dataclass
class FaultRun:
    """One fault test: the invariant outcome plus every other problem the test finds (a replica
    that hangs on SIGTERM, a traceback in a log, a test-specific check), all in its row."""

    fault: str
    outcome: Outcome | None = None
    problems: list[str] = field(default_factory=list)

    def invariants(
        self, plane: ControlPlane, namespace: str, scheduler_name: str, expected_pods: int, live: Replica | None,
        **options: Any,
    ) -> Outcome:  # fmt: skip
        """check_invariants under this run's fault name; its outcome becomes the row."""
        self.outcome = check_invariants(plane, namespace, scheduler_name, self.fault, expected_pods, live, **options)
        return self.outcome

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)

    def no_traceback(self, replica: Process) -> None:
        text = replica.log_text()
        self.check(
            "Traceback" not in text and '"exception"' not in text,
            f"replica {replica.label} logged an exception; its log ends:\n{replica.log_tail(80)}",
        )

    @contextlib.contextmanager
    def replicas(self, *started: Process) -> Iterator[None]:
        """Stop every replica at the end, whatever happened; one that hangs on SIGTERM is a problem."""
        try:
            yield
        finally:
            self.problems += stop_all(started)

    def row(self) -> Outcome:
        outcome = self.outcome or Outcome(self.fault, pods=0, nodes=0)
        return replace(outcome, problems=[*outcome.problems, *self.problems])


@contextlib.contextmanager
def fault_run(fault: str, results: Path = RESULTS_JSON) -> Iterator[FaultRun]:
    """Run one fault test and always write its row (to `results` and the markdown beside it): the
    outcome with every problem, or, when the test stopped on an exception, that exception as a
    problem. The test fails on any problem."""
    run = FaultRun(fault)
    try:
        yield run
    except Exception as err:
        run.problems.append(f"the test stopped early: {type(err).__name__}: {err}")
        record(run.row(), results)
        raise
    row = run.row()
    record(row, results)
    print(
        f"\nfault={row.fault} pods={row.pods} bound={row.bound} unschedulable={row.unschedulable} "
        f"lost={row.lost} overcommitted={row.overcommitted} double_bound={row.double_bound} "
        f"recover_s={row.recover_seconds} groups={row.groups} partly_bound_groups={row.partly_bound_groups} "
        f"problems={len(row.problems)}"
    )
    assert not row.problems, "\n".join(row.problems[:30])


# ---- the results table -------------------------------------------------------------------------

# Problems per fault written into RESULTS.md (all of them stay in RESULTS.json).
PROBLEMS_SHOWN = 10


def record(outcome: Outcome, results: Path = RESULTS_JSON) -> None:
    """Add (or replace) this fault's row in `results` (JSON) and regenerate the markdown beside it."""
    rows: dict[str, Any] = {}
    if results.exists():
        rows = {row["fault"]: row for row in json.loads(results.read_text())}
    row = asdict(outcome)
    row["measured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows[outcome.fault] = row
    results.write_text(json.dumps(sorted(rows.values(), key=lambda r: str(r["fault"])), indent=1) + "\n")
    render(results)


def render(results: Path = RESULTS_JSON) -> None:
    """RESULTS.md from RESULTS.json: a row per fault, its problems counted and listed below."""
    ordered = json.loads(results.read_text())
    lines = [
        "# Fault suite results",
        "",
        "Written by `pytest -m cluster tests/faults` (harness/faults.py); every figure is from the",
        f"suite's own last run on this machine (`{os.uname().nodename}`, {os.cpu_count()} CPUs).",
        f"Each fault hits a stream of {FITTING_PODS + UNFITTING_PODS} pods ({UNFITTING_PODS} of which fit nowhere) "
        f"onto {NODE_COUNT} kwok nodes; the *gangs:* rows (tests/faults/test_group_faults.py) hit gangs of",
        "scheduling.k8s.io/v1beta1 PodGroups (GenericWorkload on) instead, and every broken group invariant",
        "(a gang partly bound while members wait, a gang left unbound though it fits) is one of their problems.",
        "*lost*: neither bound nor PodScheduled=False with a FailedScheduling event;",
        "*overcommitted*: nodes whose summed requests (every scheduler's pods) exceed allocatable;",
        "*double-bound*: pods with more than one Scheduled event; *seconds to recover*: from the end of the",
        "fault (for a takeover or restart: from the fault itself) to the next bind, at the apiserver's 1 s",
        "resolution of PodScheduled times (`< 1`: binding never stopped or resumed within the second);",
        "*problems*: every invariant broken or check failed in that run (listed below the table); a run",
        "with any problem failed.",
        "",
        "| fault | pods | nodes | bound | unschedulable | lost | overcommitted | double-bound "
        "| seconds to recover | problems | measured |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    failed = [r for r in ordered if r["problems"]]
    for r in ordered:
        recover = f"{r['recover_seconds']:g}" if r["recover_seconds"] >= 1 else "< 1"
        problems = f"**{len(r['problems'])} (FAILED)**" if r["problems"] else "0"
        lines.append(
            f"| {r['fault']} | {r['pods']} | {r['nodes']} | {r['bound']} | {r['unschedulable']} | {r['lost']} | "
            f"{r['overcommitted']} | {r['double_bound']} | {recover} | {problems} | {r['measured']} |"
        )
    if failed:
        lines += ["", "## Problems"]
        for r in failed:
            lines += ["", f"### {r['fault']}", "", "```"]
            for problem in r["problems"][:PROBLEMS_SHOWN]:
                lines += problem.splitlines()
            if len(r["problems"]) > PROBLEMS_SHOWN:
                lines.append(f"... and {len(r['problems']) - PROBLEMS_SHOWN} more (RESULTS.json)")
            lines.append("```")
    results.with_suffix(".md").write_text("\n".join(lines) + "\n")
