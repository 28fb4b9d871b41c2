"""Agreement harness: the same scenarios through the real kube-scheduler and through ours.

A scenario (tests/agreement/scenarios/*.yaml, or one from the seeded generator in
harness/generator.py, same format) is nodes, existing pods (bound to a node or not),
namespaces with labels, PriorityClasses, other raw objects (RuntimeClasses, Services, ...) and an
ordered list of steps: pending pods, each created and settled one at a time, and actions (patch a
node or a pod, delete a pod, create a node) after which named pods are observed again. Objects are
raw Kubernetes objects; node_object() and pod_object() fill the defaults from a few short keys.

Each scheduler gets one control plane for the whole run and both run side by side: kube-scheduler
at the pinned K8S_VERSION (v1.37.2; leader election off) on one, ours (`--no-leader-elect`) on the
other, each with the same profiles (PROFILES) under its own schedulerNames. Between scenarios a
side deletes what the last one created and waits until the scheduler's cache
(scheduler_cache_size) is empty; after creating nodes (their status in the create body) and
existing pods it waits until the cache holds exactly them, so no pod is ever tried against a
half-seen cluster. Pods are followed by a watch: a step waits for the apiserver's report of the
change, never a fixed time (except an action's delay, which outlasts the queues' backoff).

Per pod it compares: bound vs unschedulable; the FailedScheduling message (the part kube-scheduler's
PostFilter plugins add, ` preemption: ...` from DefaultPreemption, is cut off and counted apart: we
have no PostFilter plugin yet); whether our node is among kube-scheduler's top-scored nodes, read
from its own `-v=10` log lines ("Calculated node's final score for pod"); and whether each
scheduler's node is one ours could have chosen: our framework is replayed in-process
(FakeApiClient) over the nodes and pods the pod met in each run, and that run's node must be in our
top-score set.

Owns: the scenario format, both drivers, the replay, the comparison, the table (stdout and
markdown) and the CLI (`python -m harness.agreement [--scenarios DIR] [--only NAME]
[--seed N --generated K] [--no-files] [--dump DIR]`).
Must never: tune either scheduler beyond the shared PROFILES, or touch a cluster it did not start.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import fnmatch
import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness import generator
from harness.apiwatch import KeepAliveClient, PodWatch
from harness.controlplane import REPO_ROOT, ControlPlane, ManagedProcess, deep_merge, pinned_versions
from harness.workload import metrics_text, running_scheduler, wait_for
from scheduler.api.fake import FakeApiClient
from scheduler.app import VOLUME_KINDS, WORKLOAD_KINDS, build_scheduler, collection_path, full_registry
from scheduler.config import API_VERSION, KIND, SchedulerConfig, parse_config
from scheduler.framework.types import CycleState, FitError
from scheduler.informers import Informers
from scheduler.model.objects import Pod

Raw = dict[str, Any]

SCENARIOS_DIR = REPO_ROOT / "tests" / "agreement" / "scenarios"
RESULTS_FILE = REPO_ROOT / "tests" / "agreement" / "RESULTS.md"

KUBE = "kube-scheduler"
OURS = "ours"

# How the PostFilter reasons of kube-scheduler's DynamicResources and DefaultPreemption begin.
POST_FILTER_REASONS = (
    "no new claims to deallocate",
    "plugin disabled",
    "deallocation of ResourceClaim completed",
    "deletion of ResourceClaim completed",
    "still not schedulable",
    "preemption: ",
)
DRA_STATE_MISSING = "not found"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
# An unbound existing pod nobody schedules (schedulerName of no profile).
NOBODY = "no-scheduler"
# Pods in these phases hold nothing: schedulers' informers drop them.
TERMINAL_PHASES = ("Succeeded", "Failed")

SETTLE_TIMEOUT = 30.0
# How long a pod with scheduling gates must stay unbound to count as gated; how long observed
# pods must stay unchanged after an action to count as settled.
QUIET_SECONDS = 1.0
# Before an action: past the initial backoff of every pod that failed once, so that the event moves
# them all to activeQ together (and priority decides their order, not backoff expiry).
# kube-scheduler (1.34 to 1.37) truncates backoff expiry to 1 s windows and backs a pod off while its expiry
# is not before the current window: 1 s of backoff may last until 2 s after the failure.
DEFAULT_ACTION_DELAY = 2.2

# The profiles both schedulers run, by the name a scenario picks with `profile:`. Same args on both
# sides; kube-scheduler's defaults fill the rest, as ours do. Args carry no apiVersion/kind: both
# infer <plugin>Args from the plugin's name.
PROFILES: dict[str, Raw] = {
    "default": {},
    "most-allocated": {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "MostAllocated",
                        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                    },
                },
            }
        ]
    },
    "requested-to-capacity": {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
                        "requestedToCapacityRatio": {
                            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                        },
                    },
                },
            }
        ]
    },
    "added-affinity": {
        "pluginConfig": [
            {
                "name": "NodeAffinity",
                "args": {
                    "addedAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["secondary"]}]}
                            ]
                        }
                    },
                },
            }
        ]
    },
}


def scheduler_name(side: str, profile: str) -> str:
    return f"agreement-{'kube' if side == KUBE else 'ours'}-{profile}"


def scheduler_config(side: str) -> Raw:
    """The KubeSchedulerConfiguration profiles of one side (every profile in PROFILES)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [{"schedulerName": scheduler_name(side, name), **extra} for name, extra in PROFILES.items()],
    }


# --------------------------------------------------------------------------- scenario format


class ScenarioError(ValueError):
    """A scenario file that does not follow the format; the message names the file and field."""


def _check_keys(short: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(short) - allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown}; known: {sorted(allowed)}")


_NODE_KEYS = {"name", "cpu", "memory", "pods", "resources", "labels", "zone", "taints", "unschedulable", "images"}
_NODE_KEYS |= {"metadata", "spec", "status"}


def node_object(short: Mapping[str, Any], where: str = "node") -> Raw:
    """A Node from short keys: name; cpu (4), memory (16Gi), pods (110) and `resources` (more
    allocatable, e.g. example.com/gpu) as capacity = allocatable; labels (kubernetes.io/hostname is
    the name unless given), zone (topology.kubernetes.io/zone), taints, unschedulable, images
    (name -> size: one image entry each); metadata/spec/status merged in last, raw."""
    _check_keys(short, _NODE_KEYS, where)
    name = str(short["name"])
    resources = {
        "cpu": str(short.get("cpu", "4")),
        "memory": str(short.get("memory", "16Gi")),
        "pods": str(short.get("pods", "110")),
        **{key: str(value) for key, value in (short.get("resources") or {}).items()},
    }
    labels = {HOSTNAME_LABEL: name, **{k: str(v) for k, v in (short.get("labels") or {}).items()}}
    if "zone" in short:
        labels[ZONE_LABEL] = str(short["zone"])
    spec: Raw = {}
    if short.get("taints"):
        spec["taints"] = list(short["taints"])
    if short.get("unschedulable"):
        spec["unschedulable"] = True
    status: Raw = {"capacity": dict(resources), "allocatable": dict(resources)}
    images = short.get("images") or {}
    if images:
        status["images"] = [{"names": [image], "sizeBytes": _bytes(size)} for image, size in images.items()]
    node: Raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": spec,
        "status": status,
    }
    for part in ("metadata", "spec", "status"):
        if part in short:
            node[part] = deep_merge(node[part], short[part])
    return node


def _bytes(size: Any) -> int:
    """An image size: an int, or a quantity with a binary suffix (500Mi, 1Gi)."""
    if isinstance(size, int):
        return size
    text = str(size)
    for suffix, factor in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


_POD_KEYS = {"name", "namespace", "labels", "cpu", "memory", "requests", "image", "priorityClassName", "node"}
_POD_KEYS |= {"gates", "hostPort", "schedulerName", "phase", "metadata", "spec"}


def pod_object(short: Mapping[str, Any], where: str = "pod") -> Raw:
    """A Pod from short keys: name, namespace (default), labels; one container `c` (image, default
    pause) requesting cpu / memory / `requests` (more resources; extended ones and hugepages get the
    same limits) if given, with `hostPort` (TCP); priorityClassName; node (spec.nodeName: created
    bound); gates (schedulingGates names); schedulerName and phase (for existing pods: pending pods
    get their side's scheduler; a phase is written to the status after creation); metadata/spec
    merged in last, raw (a `spec.containers` replaces the default container)."""
    _check_keys(short, _POD_KEYS, where)
    requests = {key: str(short[key]) for key in ("cpu", "memory") if key in short}
    requests.update({key: str(value) for key, value in (short.get("requests") or {}).items()})
    container: Raw = {"name": "c", "image": str(short.get("image", PAUSE_IMAGE))}
    if requests:
        # Extended resources and hugepages cannot be overcommitted: validation wants limit = request.
        limits = {k: v for k, v in requests.items() if "/" in k or k.startswith("hugepages-")}
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    if "hostPort" in short:
        port = int(short["hostPort"])
        container["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
    spec: Raw = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if "priorityClassName" in short:
        spec["priorityClassName"] = str(short["priorityClassName"])
    if "node" in short:
        spec["nodeName"] = str(short["node"])
    if "schedulerName" in short:
        spec["schedulerName"] = str(short["schedulerName"])
    if short.get("gates"):
        spec["schedulingGates"] = [{"name": str(gate)} for gate in short["gates"]]
    metadata: Raw = {"name": str(short["name"]), "namespace": str(short.get("namespace", "default"))}
    if short.get("labels"):
        metadata["labels"] = {k: str(v) for k, v in short["labels"].items()}
    pod: Raw = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if "phase" in short:
        pod["status"] = {"phase": str(short["phase"])}
    for part in ("metadata", "spec"):
        if part in short:
            pod[part] = deep_merge(pod[part], short[part])
    return pod


@dataclass(frozen=True)
class PodStep:
    """Create one pending pod and wait until it is bound, unschedulable or (with gates) gated.

    An unschedulable pod is then deleted, unless `keep`: left pending, a scheduler may retry it
    on a later event at a moment of its own choosing, and later steps would not be repeatable."""

    pod: Raw
    keep: bool = False

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


ACTIONS = ("patch", "delete", "create")


@dataclass(frozen=True)
class ActionStep:
    """After `delay` seconds, merge-patch a node or pod, delete one, or create a node; then observe
    the (kept) pods in `observe` until all are bound or none changed for a while. The event is
    what makes the schedulers try those pods again (their queueing hints decide)."""

    action: str  # patch | delete | create
    kind: str  # node | pod
    name: str
    body: Raw  # the merge patch, or the node to create
    observe: tuple[str, ...]
    delay: float = DEFAULT_ACTION_DELAY

    @property
    def label(self) -> str:
        return f"after {self.action} {self.kind} {self.name}"


def _action_step(item: Mapping[str, Any], where: str) -> ActionStep:
    _check_keys(item, {"action", "node", "pod", "body", "observe", "delay"}, where)
    action = str(item["action"])
    kinds = [kind for kind in ("node", "pod") if kind in item]
    if action not in ACTIONS or len(kinds) != 1:
        raise ScenarioError(f"{where}: an action is one of {ACTIONS} on exactly one `node:` or `pod:`")
    kind = kinds[0]
    if action == "create":
        if kind != "node":
            raise ScenarioError(f"{where}: only nodes are created by an action (pending pods are steps)")
        body = node_object(item["node"], f"{where}.node")
        name = str(body["metadata"]["name"])
    else:
        body, name = dict(item.get("body") or {}), str(item[kind])
        if action == "patch" and not body:
            raise ScenarioError(f"{where}.body: a patch needs a body")
    observe = tuple(str(p) for p in item.get("observe") or ())
    return ActionStep(action, kind, name, body, observe, float(item.get("delay", DEFAULT_ACTION_DELAY)))


Step = PodStep | ActionStep


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    plugins: tuple[str, ...]  # the plugins it is about; pending while one is not in our registry
    profile: str
    namespaces: tuple[Raw, ...]
    objects: tuple[Raw, ...]  # PriorityClasses, RuntimeClasses, Services, ...
    nodes: tuple[Raw, ...]
    existing_pods: tuple[Raw, ...]
    steps: tuple[Step, ...]
    generated: bool = False  # by harness/generator.py, not from a file

    def pending_plugins(self, registered: Sequence[str]) -> list[str]:
        return [name for name in self.plugins if name not in registered]


_SCENARIO_KEYS = {"description", "plugins", "profile", "namespaces", "priorityClasses", "objects", "nodes"}
_SCENARIO_KEYS |= {"existingPods", "pods"}


def parse_scenario(name: str, raw: Any, *, generated: bool = False) -> Scenario:
    where = f"scenario {name}"
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: not a mapping")
    _check_keys(raw, _SCENARIO_KEYS, where)
    profile = str(raw.get("profile", "default"))
    if profile not in PROFILES:
        raise ScenarioError(f"{where}.profile: {profile!r} is not one of {sorted(PROFILES)}")
    namespaces = tuple(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": str(ns), "labels": dict(labels or {})}}
        for ns, labels in (raw.get("namespaces") or {}).items()
    )
    objects = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": str(pc)},
            "value": int(value),
        }
        for pc, value in (raw.get("priorityClasses") or {}).items()
    ]
    objects += [dict(obj) for obj in raw.get("objects") or ()]
    nodes = tuple(node_object(n, f"{where}.nodes[{i}]") for i, n in enumerate(raw.get("nodes") or ()))
    if not nodes:
        raise ScenarioError(f"{where}.nodes: at least one node is needed")
    existing = tuple(
        pod_object({"schedulerName": NOBODY, **short}, f"{where}.existingPods[{i}]")
        for i, short in enumerate(raw.get("existingPods") or ())
    )
    steps: list[Step] = []
    for i, item in enumerate(raw.get("pods") or ()):
        here = f"{where}.pods[{i}]"
        if "action" in item:
            steps.append(_action_step(item, here))
        else:
            short = {k: v for k, v in item.items() if k != "keep"}
            steps.append(PodStep(pod_object(short, here), keep=bool(item.get("keep", False))))
    if not steps:
        raise ScenarioError(f"{where}.pods: at least one pending pod is needed")
    return Scenario(
        name=name,
        description=str(raw.get("description", "")).strip(),
        plugins=tuple(str(p) for p in raw.get("plugins") or ()),
        profile=profile,
        namespaces=namespaces,
        objects=tuple(objects),
        nodes=nodes,
        existing_pods=existing,
        steps=tuple(steps),
        generated=generated,
    )


def name_matches(name: str, only: str | None) -> bool:
    """`only`: None (everything), or comma-separated names or globs (`gen-137-4,gen-137-3*`)."""
    return only is None or any(fnmatch.fnmatch(name, pattern.strip()) for pattern in only.split(","))


def load_scenarios(directory: Path = SCENARIOS_DIR, only: str | None = None) -> list[Scenario]:
    """Every *.yaml in `directory` (sorted by name) whose name matches `only` (name_matches)."""
    scenarios = []
    for path in sorted(directory.glob("*.yaml")):
        if not name_matches(path.stem, only):
            continue
        scenarios.append(parse_scenario(path.stem, yaml.safe_load(path.read_text())))
    return scenarios


# --------------------------------------------------------------------------- observations


@dataclass(frozen=True)
class Outcome:
    verdict: str  # bound | unschedulable | error | gated | pending (never tried) | timeout
    node: str = ""
    message: str = ""

    def __str__(self) -> str:
        if self.verdict == "bound":
            return f"bound to {self.node}"
        return f"{self.verdict}: {self.message}" if self.message else self.verdict


@dataclass(frozen=True)
class ClusterState:
    """What a pending pod met: namespaces, workloads (Services, controllers: the selectors of
    default topology spreading), nodes and assigned pods, raw as the apiserver has them."""

    namespaces: tuple[Raw, ...]
    workloads: tuple[tuple[str, str, Raw], ...]  # (apiVersion, kind, object)
    nodes: tuple[Raw, ...]
    pods: tuple[Raw, ...]
    volumes: tuple[tuple[str, Raw], ...] = ()  # (kind, object): the volume plugins' listers


@dataclass(frozen=True)
class Encounter:
    """A pending pod as the apiserver created it and the cluster it met: what the replay needs."""

    pod: Raw
    state: ClusterState

    @property
    def preset(self) -> bool:
        """Created with spec.nodeName: bound without any scheduler."""
        return bool(self.pod["spec"].get("nodeName"))


@dataclass(frozen=True)
class Observation:
    label: str  # the pod's name, or "<name> (after patch node n1)"
    outcome: Outcome
    encounter: Encounter | None = None  # pod steps only: after an action several pods move at once
    kube_scores: KubeScores | None = None  # kube-scheduler's side, bound pods: its own logged scores


@dataclass
class SideRun:
    observations: list[Observation] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0


# --------------------------------------------------------------------------- one side


class ApiFailure(RuntimeError):
    pass


_RESOURCE_PATHS = {
    ("v1", "Service"): ("services", True),
    ("v1", "ReplicationController"): ("replicationcontrollers", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "PersistentVolume"): ("persistentvolumes", False),
    ("storage.k8s.io/v1", "StorageClass"): ("storageclasses", False),
    ("storage.k8s.io/v1", "CSINode"): ("csinodes", False),
}


def _collection_path(obj: Mapping[str, Any]) -> str:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in _RESOURCE_PATHS:
        raise ScenarioError(f"objects: unsupported kind {key[1]} ({key[0]}); supported: {sorted(_RESOURCE_PATHS)}")
    plural, namespaced = _RESOURCE_PATHS[key]
    group = "/api/v1" if key[0] == "v1" else f"/apis/{key[0]}"
    if namespaced:
        return f"{group}/namespaces/{obj['metadata'].get('namespace', 'default')}/{plural}"
    return f"{group}/{plural}"


def _scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def _outcome(pod: Mapping[str, Any]) -> Outcome | None:
    """Bound, or failed by the scheduler; None while neither (gated pods included)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return Outcome("bound", node=str(node))
    condition = _scheduled_condition(pod)
    if condition is not None and condition.get("status") == "False":
        reason = condition.get("reason")
        if reason == "Unschedulable":
            return Outcome("unschedulable", message=str(condition.get("message", "")))
        if reason == "SchedulerError":
            return Outcome("error", message=str(condition.get("message", "")))
    return None


def _waiting(pod: Mapping[str, Any]) -> Outcome:
    """A pod no scheduler has decided on: gated (the apiserver's SchedulingGated condition) or pending."""
    condition = _scheduled_condition(pod) or {}
    if condition.get("reason") == "SchedulingGated":
        return Outcome("gated", message=str(condition.get("message", "")))
    return Outcome("pending")


class Side:
    """One scheduler on its own control plane, taken through scenarios one after the other.

    Requests go over one kept-alive connection; pods are followed by a watch (PodWatch), so a
    step waits for the apiserver to report the change, never a fixed time. `score_log` is
    kube-scheduler's log, whose `-v=10` lines give the side's own per-node final scores."""

    def __init__(
        self,
        side: str,
        plane: ControlPlane,
        cache_sizes: Callable[[], dict[str, int]],
        score_log: Path | None = None,
    ) -> None:
        self.side = side
        self.plane = plane
        self.cache_sizes = cache_sizes
        self._score_log = score_log
        self._client = KeepAliveClient(plane)
        self._watch = PodWatch(plane, side)
        self._namespaces: set[str] = {"default"}
        self._objects: list[str] = []  # paths of objects to delete before the next scenario
        self._uids: dict[str, tuple[str, str]] = {}  # this scenario's pods: name -> (namespace, uid)

    # ---- API -----------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        return self._client.request(method, path, body, headers)

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Raw:
        status, data = self.request(method, path, body)
        if status not in ok:
            raise ApiFailure(f"{self.side}: {method} {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data) if data else {}
        return result

    def _merge_patch(self, path: str, body: Raw) -> Raw:
        status, data = self.request("PATCH", path, body, headers={"Content-Type": "application/merge-patch+json"})
        if status != 200:
            raise ApiFailure(f"{self.side}: PATCH {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data)
        return result

    def _wait_cache(self, nodes: int, pods: int, what: str) -> None:
        # A scheduler's cache is visible only through its metrics or its dump: polled, not slept on.
        seen: dict[str, int] = {}

        def synced() -> bool:
            seen.update(self.cache_sizes())
            return seen.get("nodes") == nodes and seen.get("pods") == pods

        try:
            wait_for(synced, timeout=30, what=f"{self.side} cache {what} ({nodes} nodes, {pods} pods)", interval=0.05)
        except AssertionError as err:
            raise AssertionError(f"{err}; last seen {seen}") from None

    def _log_offset(self) -> int:
        if self._score_log is None:
            return 0
        try:
            return self._score_log.stat().st_size
        except OSError:
            return 0

    def _scores_since(self, offset: int, namespace: str, name: str) -> KubeScores | None:
        if self._score_log is None:
            return None
        with self._score_log.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        return parse_kube_scores(text, f"{namespace}/{name}")

    # ---- a scenario ----------------------------------------------------------------------

    def run_all(self, scenarios: Sequence[Scenario], progress: Callable[[str], None]) -> dict[str, SideRun]:
        runs: dict[str, SideRun] = {}
        self._watch.start()
        try:
            for scenario in scenarios:
                began = time.monotonic()
                run = SideRun()
                try:
                    self.reset()
                    self.setup(scenario)
                    self.play(scenario, run)
                except (ApiFailure, AssertionError, ScenarioError, OSError, http.client.HTTPException) as err:
                    run.error = str(err)
                run.seconds = time.monotonic() - began
                runs[scenario.name] = run
                progress(f"{self.side:>14}: {scenario.name} ({run.seconds:.1f} s){' ERROR' if run.error else ''}")
            self.reset()
        finally:
            self._watch.stop()
            self._client.close()
        return runs

    def reset(self) -> None:
        """Back to an empty cluster: no pods, nodes, scenario namespaces or objects.

        Nothing is deleted while kwok still has work queued for it: kwok patches by name, from the
        object as it last saw it, so a node or pod initialised after its deletion would land on the
        next scenario's object of the same name (a new node n1 with the old n1's allocatable)."""
        self._wait_kwok_done()
        for namespace in sorted(self._namespaces):
            self.api("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
        self.api("DELETE", "/api/v1/nodes", ok=(200,))
        for path in self._objects:
            self.api("DELETE", path, ok=(200, 202, 404))
        self._objects.clear()
        for namespace in sorted(self._namespaces - {"default"}):
            self._delete_namespace(namespace)
        self._namespaces = {"default"}
        self._uids.clear()
        self._wait_cache(0, 0, "emptied")

    def _wait_kwok_done(self) -> None:
        """Until kwok has initialised every node (Ready) and started every bound pod (Running, or
        the terminal phase a scenario wrote after that)."""

        def pods_started() -> bool | None:
            for pod in self._watch.pods():
                phase = (pod.get("status") or {}).get("phase")
                if (pod.get("spec") or {}).get("nodeName") and phase not in ("Running", *TERMINAL_PHASES):
                    return None
            return True

        if self._watch.wait_until(pods_started, SETTLE_TIMEOUT) is None:
            raise ApiFailure(f"{self.side}: kwok did not start every bound pod within {SETTLE_TIMEOUT:.0f} s")

        def nodes_ready() -> bool:
            return all(_node_ready(node) for node in self.api("GET", "/api/v1/nodes")["items"])

        wait_for(nodes_ready, timeout=SETTLE_TIMEOUT, what=f"{self.side}: kwok initialising every node", interval=0.05)

    def _delete_namespace(self, name: str) -> None:
        """Delete and finalize at once: no namespace controller runs here, and the next scenario
        may want the same name back."""
        deleted = self.api("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))
        if deleted.get("kind") == "Namespace":
            deleted["spec"]["finalizers"] = []
            self.api("PUT", f"/api/v1/namespaces/{name}/finalize", deleted, ok=(200, 404))
        wait_for(
            lambda: self.request("GET", f"/api/v1/namespaces/{name}")[0] == 404,
            timeout=10,
            what=f"namespace {name} gone",
            interval=0.05,
        )

    def setup(self, scenario: Scenario) -> None:
        for namespace in scenario.namespaces:
            name = namespace["metadata"]["name"]
            if name == "default":
                self._merge_patch(
                    "/api/v1/namespaces/default", {"metadata": {"labels": namespace["metadata"]["labels"]}}
                )
            else:
                self.api("POST", "/api/v1/namespaces", namespace)
            self._namespaces.add(name)
        for obj in scenario.objects:
            collection = _collection_path(obj)
            self.api("POST", collection, obj)
            self._objects.append(f"{collection}/{obj['metadata']['name']}")
        for node in scenario.nodes:
            self._create_node(node)
        for pod in scenario.existing_pods:
            namespace = pod["metadata"]["namespace"]
            self._namespaces.add(namespace)
            created = self.api("POST", self._pod_path(namespace), pod)
            name = pod["metadata"]["name"]
            self._uids[name] = (namespace, created["metadata"]["uid"])
            if "status" in pod:
                self._set_status(namespace, name, pod["status"])
        bound = sum(
            1
            for pod in scenario.existing_pods
            if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        )
        self._wait_cache(len(scenario.nodes), bound, "filled")

    def _set_status(self, namespace: str, name: str, status: Raw) -> None:
        """Write an existing pod's status once kwok has made it Running: a patch before that races
        with kwok's pod-ready stage, which may then write Running over a Succeeded or Failed."""

        def running() -> bool | None:
            pod = self._current(name)
            return True if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

        if self._watch.wait_until(running, SETTLE_TIMEOUT) is None:
            raise ApiFailure(f"{self.side}: kwok did not make pod {namespace}/{name} Running")
        self._merge_patch(self._pod_path(namespace, name) + "/status", {"status": status})

    def _create_node(self, node: Raw) -> None:
        # The status goes in the create body: a create followed by a status patch races with kwok's
        # node initialisation, which may then write its own allocatable over ours.
        created = self.api("POST", "/api/v1/nodes", node)
        _check_allocatable(self.side, node, created)

    def state(self) -> ClusterState:
        pods = [
            pod
            for pod in self.api("GET", "/api/v1/pods")["items"]
            if (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        workloads = []
        for group, version, plural, kind in WORKLOAD_KINDS:
            api_version = f"{group}/{version}" if group else version
            path = collection_path(group, version, plural)
            workloads += [(api_version, kind, item) for item in self.api("GET", path)["items"]]
        volumes = []
        for group, version, plural, kind in VOLUME_KINDS:
            volumes += [(kind, item) for item in self.api("GET", collection_path(group, version, plural))["items"]]
        return ClusterState(
            namespaces=tuple(self.api("GET", "/api/v1/namespaces")["items"]),
            workloads=tuple(workloads),
            nodes=tuple(self.api("GET", "/api/v1/nodes")["items"]),
            pods=tuple(pods),
            volumes=tuple(volumes),
        )

    def play(self, scenario: Scenario, run: SideRun) -> None:
        name = scheduler_name(self.side, scenario.profile)
        expected = {node["metadata"]["name"]: node for node in scenario.nodes}
        for step in scenario.steps:
            if isinstance(step, PodStep):
                run.observations.append(self._pod_step(step, name, expected))
            else:
                if step.action == "create":
                    expected[step.name] = step.body
                run.observations.extend(self._action_step(step))

    def _pod_path(self, namespace: str, name: str = "") -> str:
        return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")

    def _pod_step(self, step: PodStep, scheduler: str, expected: Mapping[str, Raw]) -> Observation:
        pod = copy.deepcopy(step.pod)
        pod["spec"]["schedulerName"] = scheduler
        namespace = pod["metadata"]["namespace"]
        self._namespaces.add(namespace)
        state = self.state()
        for node in state.nodes:
            if node["metadata"]["name"] in expected:
                _check_allocatable(self.side, expected[node["metadata"]["name"]], node)
        offset = self._log_offset()
        created = self.api("POST", self._pod_path(namespace), pod)
        uid = created["metadata"]["uid"]
        self._uids[step.name] = (namespace, uid)
        gated = bool(pod["spec"].get("schedulingGates"))
        outcome = self._settle(namespace, step.name, uid, gated)
        if outcome.verdict == "unschedulable" and not step.keep:
            self.api("DELETE", self._pod_path(namespace, step.name) + "?gracePeriodSeconds=0", ok=(200, 404))
        scores = self._scores_since(offset, namespace, step.name) if outcome.verdict == "bound" else None
        return Observation(step.name, outcome, Encounter(created, state), scores)

    def _current(self, name: str) -> Raw | None:
        """The watch's latest copy of this scenario's pod `name` (None until the watch saw it);
        an error once it is deleted: nothing here deletes a pod it observes, so the scheduler did
        (a preemption victim)."""
        namespace, uid = self._uids[name]
        pod = self._watch.get(namespace, name)
        if pod is not None and pod["metadata"]["uid"] == uid:
            return pod
        if self._watch.deleted(uid):
            raise ApiFailure(
                f"{self.side}: pod {namespace}/{name} is gone: preempted? (scenarios must leave no victims)"
            )
        return None

    def _settle(self, namespace: str, name: str, uid: str, gated: bool) -> Outcome:
        def decided() -> Outcome | None:
            pod = self._current(name)
            return None if pod is None else _outcome(pod)

        outcome = self._watch.wait_until(decided, QUIET_SECONDS if gated else SETTLE_TIMEOUT)
        if outcome is not None:
            return outcome
        if not gated:
            watch = f" (last watch error: {self._watch.error})" if self._watch.error else ""
            return Outcome("timeout", message=f"neither bound nor failed after {SETTLE_TIMEOUT:.0f} s{watch}")
        current = self._current(name)
        return _waiting(current) if current is not None else Outcome("pending")

    def _action_step(self, step: ActionStep) -> list[Observation]:
        # The delay outlasts the backoff of pods that failed once (see DEFAULT_ACTION_DELAY): a
        # property of both schedulers' queues that no watch can announce.
        time.sleep(step.delay)
        offset = self._log_offset()
        if step.action == "create":
            self._create_node(step.body)
        else:
            path = f"/api/v1/nodes/{step.name}"
            if step.kind == "pod":
                path = self._pod_path(self._uids[step.name][0], step.name)
            if step.action == "patch":
                self._merge_patch(path, step.body)
            else:
                self.api("DELETE", path + "?gracePeriodSeconds=0")
        for pod in step.observe:
            if pod not in self._uids:
                raise ApiFailure(f"{self.side}: pod {pod} is not one of this scenario's pods")
        last: dict[str, Outcome | None] = {}
        changed = time.monotonic()
        deadline = changed + SETTLE_TIMEOUT

        def settled() -> bool | None:
            nonlocal last, changed
            pods = {pod: self._current(pod) for pod in step.observe}
            outcomes = {pod: None if raw is None else _outcome(raw) for pod, raw in pods.items()}
            now = time.monotonic()
            if outcomes != last:
                changed = now
            last = outcomes
            all_bound = all(o is not None and o.verdict == "bound" for o in outcomes.values())
            return True if all_bound or now - changed > QUIET_SECONDS or now > deadline else None

        while self._watch.wait_until(settled, QUIET_SECONDS / 4) is None:
            pass
        observations = []
        for pod in step.observe:
            raw = self._current(pod)
            outcome = (_outcome(raw) or _waiting(raw)) if raw is not None else Outcome("pending")
            namespace = self._uids[pod][0]
            scores = self._scores_since(offset, namespace, pod) if outcome.verdict == "bound" else None
            observations.append(Observation(f"{pod} ({step.label})", outcome, None, scores))
        return observations


def _node_ready(node: Raw) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _check_allocatable(side: str, wanted: Raw, seen: Raw) -> None:
    want = wanted["status"]["allocatable"]
    got = (seen.get("status") or {}).get("allocatable")
    if got != want:
        name = wanted["metadata"]["name"]
        raise ApiFailure(f"{side}: node {name} status.allocatable is {got}, not {want} (kwok's defaults?)")


@dataclass(frozen=True)
class KubeScores:
    """kube-scheduler's own account of one pod's last scoring: the final score of every feasible
    node (empty when it did not score: one feasible node, or a batching hint), per-plugin scores,
    and whether OpportunisticBatching handed it a node hint."""

    final: Mapping[str, int]
    plugins: Mapping[str, Mapping[str, int]]  # node -> plugin -> score
    hinted: bool

    def top(self, bound_to: str) -> tuple[str, ...]:
        if not self.final:
            return (bound_to,)
        best = max(self.final.values())
        return tuple(sorted(node for node, score in self.final.items() if score == best))


_FINAL_SCORE = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(-?\d+)')
_PLUGIN_SCORE = re.compile(r'"Plugin scored node for pod" pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')
_HINT = re.compile(r'"OpportunisticBatch provided node hint" .*?pod="([^"]+)"')


def parse_kube_scores(log: str, pod: str) -> KubeScores:
    """The last scoring of `pod` ("namespace/name") in a slice of kube-scheduler's text log.

    kube-scheduler logs every node's final score of one attempt in a row; a node seen again
    starts the next attempt, so what remains is the attempt that bound the pod."""
    final: dict[str, int] = {}
    plugins: dict[str, dict[str, int]] = {}
    hinted = False
    for line in log.splitlines():
        if (match := _FINAL_SCORE.search(line)) is not None and match.group(1) == pod:
            node, score = match.group(2), int(match.group(3))
            if node in final:
                final = {}
            final[node] = score
            hinted = False
        elif (match := _PLUGIN_SCORE.search(line)) is not None and match.group(1) == pod:
            plugin, node, score = match.group(2), match.group(3), int(match.group(4))
            if plugin in plugins.get(node, {}):
                plugins, final = {}, {}
            plugins.setdefault(node, {})[plugin] = score
        elif (match := _HINT.search(line)) is not None and match.group(1) == pod:
            final, plugins, hinted = {}, {}, True
    return KubeScores(final, plugins, hinted)


# --------------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class Replay:
    """Our framework's view of one pod over one cluster state."""

    feasible: tuple[str, ...]
    top: tuple[str, ...]  # every node with the highest total score (the feasible one if only one)
    scores: Mapping[str, int]
    message: str  # the FailedScheduling message when nothing is feasible
    plugins: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # node -> plugin -> weighted score


def replay(config: SchedulerConfig, state: ClusterState, pod_raw: Mapping[str, Any], profile: str) -> Replay:
    """Filter and score `pod_raw` (as profile `profile` of our side) over `state`, in-process."""
    namespaces: dict[str, Mapping[str, str]] = {}
    sched = build_scheduler(config, full_registry(), FakeApiClient(), namespaces)
    informers = Informers(sched, namespaces)
    for namespace in state.namespaces:
        informers.on_namespace("ADDED", namespace)
    for api_version, kind, workload in state.workloads:
        informers.on_workload(api_version, kind, "ADDED", workload)
    for kind, volume in state.volumes:
        informers.on_volume_object(kind, "ADDED", volume)
    for node in state.nodes:
        informers.on_node("ADDED", node)
    for assigned in state.pods:
        informers.on_pod("ADDED", assigned)
    raw = copy.deepcopy(dict(pod_raw))
    raw["spec"]["schedulerName"] = scheduler_name(OURS, profile)
    pod = Pod.from_raw(raw)
    fw = sched.frameworks[pod.scheduler_name]
    sched.cache.update_snapshot(sched.snapshot)
    cycle = CycleState()
    feasible, diagnosis = sched.find_nodes_that_fit(fw, cycle, pod)
    if not feasible:
        return Replay((), (), {}, str(FitError(pod, len(sched.snapshot), diagnosis)))
    names = tuple(info.name for info in feasible)
    if len(feasible) == 1:
        return Replay(names, names, {}, "")
    totals = sched.prioritize_nodes(fw, cycle, pod, feasible)  # aligned with `feasible`
    scores = {info.name: int(total) for info, total in zip(feasible, totals, strict=True)}
    # Each plugin's weighted share too, as kube-scheduler logs it ("Plugin scored node for pod"):
    # the PreScore state is in `cycle` already.
    rows = np.fromiter((sched.snapshot.position[n] for n in names), np.int64, len(names))
    _, per_plugin, _ = fw.score_nodes(cycle, pod, feasible, sched.snapshot.table, rows)
    plugins = {
        name: {plugin: int(values[i]) * fw.score_weights[plugin] for plugin, values in per_plugin.items()}
        for i, name in enumerate(names)
    }
    best = max(scores.values())
    return Replay(names, tuple(sorted(n for n, s in scores.items() if s == best)), scores, "", plugins)


# --------------------------------------------------------------------------- comparison


def split_post_filter(message: str) -> tuple[str, str]:
    """A FailedScheduling message without the PostFilter part kube-scheduler appends (FitError.Error:
    `<filter histogram>. <post-filter message>`), and that part ("" if none).

    The PostFilter plugins of kube-scheduler's default profile that we do not have yet:
    DefaultPreemption ("preemption: 0/3 nodes are available: ...") and DynamicResources (in 1.37 it
    answers a pod without claims with a bare Unschedulable, which adds nothing; older releases said
    "no new claims to deallocate"). When a PreFilter plugin before DynamicResources rejected the
    pod, DynamicResources' PostFilter finds no state of its own and fails with the CycleState's
    "not found", which ends up as the whole post-filter message."""
    cuts = [i for reason in POST_FILTER_REASONS if (i := message.find(" " + reason)) >= 0]
    if message.endswith(" " + DRA_STATE_MISSING):
        cuts.append(len(message) - len(DRA_STATE_MISSING) - 1)
    if not cuts:
        return message, ""
    return message[: min(cuts)], message[min(cuts) + 1 :]


@dataclass(frozen=True)
class PodComparison:
    label: str
    kube: Outcome
    ours: Outcome
    verdict_agrees: bool
    message_agrees: bool
    # None: not applicable (not bound on both sides, or created with nodeName).
    kube_top: bool | None  # our node is among kube-scheduler's top-scored nodes (its own -v=10 scores)
    replay_top: bool | None  # both nodes are in our top-score set replayed over the cluster each met
    post_filter: str  # kube-scheduler's PostFilter part of the message, not compared
    notes: tuple[str, ...] = ()
    kube_scored: bool = False  # kube-scheduler's log had final scores for this pod
    # Informational, not part of `agrees`: kube-scheduler's logged final scores equal our replay's
    # over its cluster (None: not both scored), and the plugins whose scores differ.
    scores_equal: bool | None = None
    plugins_differing: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return (
            self.verdict_agrees and self.message_agrees and self.kube_top is not False and self.replay_top is not False
        )


@dataclass(frozen=True)
class Counts:
    pods: int = 0
    verdicts: int = 0
    messages: int = 0
    kube_top: int = 0
    kube_top_checks: int = 0
    replay_top: int = 0
    replay_checks: int = 0
    post_filter: int = 0
    scores_equal: int = 0
    scores_checks: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    status: str  # compared | pending | error
    pods: tuple[PodComparison, ...] = ()
    error: str = ""

    @property
    def agrees(self) -> bool:
        return self.status == "compared" and all(p.agrees for p in self.pods)

    def counts(self) -> Counts:
        kube = [p.kube_top for p in self.pods if p.kube_top is not None]
        replay = [p.replay_top for p in self.pods if p.replay_top is not None]
        return Counts(
            pods=len(self.pods),
            verdicts=sum(p.verdict_agrees for p in self.pods),
            messages=sum(p.message_agrees for p in self.pods),
            kube_top=sum(kube),
            kube_top_checks=len(kube),
            replay_top=sum(replay),
            replay_checks=len(replay),
            post_filter=sum(1 for p in self.pods if p.post_filter),
            scores_equal=sum(1 for p in self.pods if p.scores_equal),
            scores_checks=sum(1 for p in self.pods if p.scores_equal is not None),
        )

    def diff(self) -> str:
        """A readable account of every disagreement (or of why the scenario was not compared)."""
        if self.status != "compared":
            return f"{self.scenario.name}: {self.status}: {self.error}"
        lines = []
        for pod in self.pods:
            if pod.agrees:
                continue
            lines.append(f"{self.scenario.name} / {pod.label}:")
            lines.append(f"    kube-scheduler: {pod.kube}")
            lines.append(f"    ours:           {pod.ours}")
            lines.extend(f"    {note}" for note in pod.notes)
        return "\n".join(lines)


def _kube_top_check(kube: Observation, ours: Observation) -> tuple[bool, list[str]]:
    """Is our node among kube-scheduler's top-scored nodes, by kube-scheduler's own log?"""
    scores = kube.kube_scores or KubeScores({}, {}, hinted=False)
    top = scores.top(kube.outcome.node)
    if ours.outcome.node in top:
        return True, []
    if scores.final:
        how = f"its final scores {dict(sorted(scores.final.items()))}"
        if scores.plugins:
            per_plugin = {node: dict(sorted(p.items())) for node, p in sorted(scores.plugins.items())}
            how += f", per plugin {per_plugin}"
    elif scores.hinted:
        how = "no scoring: an OpportunisticBatching node hint"
    else:
        how = "no scoring: one feasible node"
    return False, [f"our node {ours.outcome.node} is not in kube-scheduler's top set {list(top)} ({how})"]


def compare_pod(
    kube: Observation, ours: Observation, config: SchedulerConfig, profile: str, same_cluster: bool = True
) -> PodComparison:
    """One pod's comparison. `same_cluster`: every earlier pod of the scenario got the same verdict
    and node on both sides, so kube-scheduler's scores are for the cluster our pod met too (after
    a tie broken differently, only the replays, each over its own side's cluster, apply)."""
    kube_message, post_filter = split_post_filter(kube.outcome.message)
    our_message, _ = split_post_filter(ours.outcome.message)
    verdict_agrees = kube.outcome.verdict == ours.outcome.verdict
    message_agrees = verdict_agrees and kube_message == our_message
    notes: list[str] = []
    kube_top: bool | None = None
    replay_top: bool | None = None
    both_bound = verdict_agrees and kube.outcome.verdict == "bound"
    preset = kube.encounter is not None and kube.encounter.preset
    if both_bound and not preset and same_cluster:
        kube_top, kube_notes = _kube_top_check(kube, ours)
        notes += kube_notes
    scores_equal: bool | None = None
    differing: tuple[str, ...] = ()
    if both_bound and kube.encounter is not None and ours.encounter is not None and not preset:
        replay_top = True
        for whose, observed, encounter in (
            ("kube-scheduler's", kube, kube.encounter),
            ("our", ours, ours.encounter),
        ):
            result = replay(config, encounter.state, encounter.pod, profile)
            if observed is kube and kube.kube_scores is not None and kube.kube_scores.final and result.scores:
                scores_equal = dict(result.scores) == dict(kube.kube_scores.final)
                differing = plugins_differing(kube.kube_scores, result)
            if observed.outcome.node not in result.top:
                replay_top = False
                per_plugin = {node: dict(sorted(p.items())) for node, p in sorted(result.plugins.items())}
                notes.append(
                    f"{whose} node {observed.outcome.node} is not in our top set {list(result.top)} (replayed "
                    f"scores {dict(sorted(result.scores.items()))}, per plugin {per_plugin}, feasible "
                    f"{list(result.feasible)})"
                )
    if not verdict_agrees and kube.encounter is not None:
        result = replay(config, kube.encounter.state, kube.encounter.pod, profile)
        verdict = f"top set {list(result.top)}" if result.feasible else result.message
        notes.append(f"our replay over kube-scheduler's cluster: {verdict}")
    if verdict_agrees and not message_agrees:
        notes.append(f"message: kube-scheduler {kube_message!r} vs ours {our_message!r}")
    return PodComparison(
        kube.label,
        kube.outcome,
        ours.outcome,
        verdict_agrees,
        message_agrees,
        kube_top,
        replay_top,
        post_filter,
        tuple(notes),
        kube_scored=bool(kube.kube_scores and kube.kube_scores.final),
        scores_equal=scores_equal,
        plugins_differing=differing,
    )


def plugins_differing(kube: KubeScores, ours: Replay) -> tuple[str, ...]:
    """The Score plugins whose weighted score for some node differs between kube-scheduler's log
    and our replay over the same cluster (plugins only one side has count when not 0)."""
    out = set()
    for node in set(kube.plugins) | set(ours.plugins):
        theirs, mine = kube.plugins.get(node, {}), ours.plugins.get(node, {})
        out |= {plugin for plugin in set(theirs) | set(mine) if theirs.get(plugin, 0) != mine.get(plugin, 0)}
    return tuple(sorted(out))


def compare(scenario: Scenario, kube: SideRun, ours: SideRun, config: SchedulerConfig) -> ScenarioResult:
    if kube.error or ours.error:
        errors = [f"{side}: {run.error}" for side, run in ((KUBE, kube), (OURS, ours)) if run.error]
        return ScenarioResult(scenario, "error", error="; ".join(errors))
    if [o.label for o in kube.observations] != [o.label for o in ours.observations]:
        return ScenarioResult(scenario, "error", error="the two runs observed different pods")
    pods = []
    same_cluster = True
    for k, o in zip(kube.observations, ours.observations, strict=True):
        pods.append(compare_pod(k, o, config, scenario.profile, same_cluster))
        same_cluster = same_cluster and k.outcome.verdict == o.outcome.verdict and k.outcome.node == o.outcome.node
    return ScenarioResult(scenario, "compared", tuple(pods))


# --------------------------------------------------------------------------- running it all


@dataclass(frozen=True)
class RunInfo:
    """Where a report comes from: the date, the commit, the generator's seed and count."""

    date: str
    commit: str
    seed: int | None = None
    generated: int = 0

    @staticmethod
    def now(seed: int | None = None, generated: int = 0) -> RunInfo:
        date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        return RunInfo(date, _commit(), seed, generated)


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{' (with uncommitted changes)' if dirty else ''}"


TABLE_HEADER = (
    "scenario",
    "pods",
    "verdicts agree",
    "messages agree",
    "ours in kube's top set",
    "both in our replayed top set",
    "post-filter",
    "result",
)


@dataclass
class AgreementReport:
    results: list[ScenarioResult]
    seconds: float
    registered: tuple[str, ...]
    info: RunInfo = field(default_factory=RunInfo.now)

    @property
    def compared(self) -> list[ScenarioResult]:
        return [r for r in self.results if r.status != "pending"]

    @property
    def kube_scored_pods(self) -> int:
        """Pods for which kube-scheduler's own per-node final scores were read from its log."""
        return sum(p.kube_scored for r in self.compared for p in r.pods)

    @property
    def failures(self) -> list[ScenarioResult]:
        """Every scenario that did not agree: a disagreement, an error in either run, or a scenario
        not run at all (pending). Any of them fails the run; nothing is excused."""
        return [r for r in self.results if not r.agrees]

    def result(self, scenario: str) -> ScenarioResult:
        for result in self.results:
            if result.scenario.name == scenario:
                return result
        raise KeyError(scenario)

    def table_rows(self) -> list[list[str]]:
        rows = []
        for result in self.results:
            if result.status == "pending":
                missing = ", ".join(result.scenario.pending_plugins(self.registered))
                rows.append([result.scenario.name, *"-" * 6, f"pending ({missing} not registered)"])
                continue
            if result.status == "error":
                rows.append([result.scenario.name, *"-" * 6, "ERROR"])
                continue
            c = result.counts()
            verdict = "agree" if result.agrees else "DISAGREE"
            rows.append(
                [
                    result.scenario.name,
                    str(c.pods),
                    f"{c.verdicts}/{c.pods}",
                    f"{c.messages}/{c.pods}",
                    f"{c.kube_top}/{c.kube_top_checks}",
                    f"{c.replay_top}/{c.replay_checks}",
                    str(c.post_filter),
                    verdict,
                ]
            )
        return rows

    def totals(self, generated: bool | None = None) -> Counts:
        """Counts over compared scenarios (only generated ones, only hand-written, or all)."""
        total = Counts()
        for result in self.compared:
            if generated is None or result.scenario.generated == generated:
                total = total + result.counts()
        return total

    def _summary(self, generated: bool | None = None) -> str:
        scenarios = [r for r in self.compared if generated is None or r.scenario.generated == generated]
        agreeing = sum(r.agrees for r in scenarios)
        c = self.totals(generated)
        return (
            f"{len(scenarios)} scenarios ({agreeing} agree), {c.pods} pods; verdicts {c.verdicts}/{c.pods}, "
            f"messages {c.messages}/{c.pods}, our node in kube-scheduler's top set {c.kube_top}/{c.kube_top_checks}, "
            f"both nodes in our replayed top set {c.replay_top}/{c.replay_checks}; {c.post_filter} messages had a "
            f"PostFilter part; kube-scheduler's final scores equal our replay's {c.scores_equal}/{c.scores_checks}"
        )

    def _diffs(self) -> list[str]:
        out = []
        for result in self.results:
            if not result.agrees:
                out.append(result.diff())
        return out

    def text(self) -> str:
        rows = [list(TABLE_HEADER), *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEADER))]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"total: {self._summary()}; {self.seconds:.0f} s")
        diffs = self._diffs()
        if diffs:
            lines += ["", "disagreements and errors:", *diffs]
        return "\n".join(lines)

    def markdown(self) -> str:
        version = pinned_versions()["K8S_VERSION"]
        info = self.info
        generated = ""
        if info.generated:
            generated = (
                f" plus {info.generated} generated ones (harness/generator.py, `--seed {info.seed} "
                f"--generated {info.generated}`)"
            )
        out = [
            f"# Agreement with kube-scheduler {version}",
            "",
            f"Run {info.date} at commit {info.commit}, wall time {self.seconds:.0f} s, by `python -m "
            f"harness.agreement` (harness/agreement.py) over tests/agreement/scenarios/"
            f"{generated}.",
            "",
            "Per pod: the verdict (bound / unschedulable / gated); the FailedScheduling message's Filter part",
            "(the PostFilter part, DefaultPreemption's `preemption: …`, is cut off here and compared, with the",
            "victims, by tests/cluster/test_preemption_agreement.py; the *post-filter* column counts the pods",
            "whose message had one); whether our",
            "node is among kube-scheduler's top-scored nodes, read from kube-scheduler's own `-v=10` log",
            '("Calculated node\'s final score for pod"; a pod it did not score, having one feasible node or a',
            "batching hint, has its own node as the top set); and whether both schedulers' nodes are in our",
            "top-score set replayed over the cluster the pod met in that scheduler's run.",
            "",
            f"**Total**: {self._summary()}.",
        ]
        if info.generated:
            out += [
                "",
                f"- hand-written: {self._summary(generated=False)}.",
                f"- generated: {self._summary(generated=True)}.",
            ]
        out += [
            "",
            "| " + " | ".join(TABLE_HEADER) + " |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        out += ["| " + " | ".join(row) + " |" for row in self.table_rows()]
        diffs = self._diffs()
        if diffs:
            out += ["", "## Disagreements and errors", ""]
            out += ["```", *diffs, "```"]
        compared_scores = [p for r in self.compared for p in r.pods if p.scores_equal is not None]
        if compared_scores:
            equal = sum(1 for p in compared_scores if p.scores_equal)
            by_plugin = Counter(plugin for p in compared_scores for plugin in p.plugins_differing)
            out += ["", "## Scores (informational)", ""]
            out += [
                f"kube-scheduler's logged final scores equal our replay's over the same cluster for {equal} of "
                f"{len(compared_scores)} pods both scored. Pods where a plugin's weighted score differs on some "
                "node, by plugin:",
                "",
            ]
            out += [f"- {plugin}: {count}" for plugin, count in sorted(by_plugin.items())] or ["- none"]
        post_filter = sorted({p.post_filter for r in self.compared for p in r.pods if p.post_filter})
        if post_filter:
            out += ["", "## kube-scheduler's PostFilter parts (not compared)", ""]
            out += [f"- `{text}`" for text in post_filter]
        out += ["", "## Scenarios", ""]
        for result in self.results:
            scenario = result.scenario
            about = ", ".join(scenario.plugins)
            profile = "" if scenario.profile == "default" else f" (profile {scenario.profile})"
            if scenario.generated:
                out.append(f"- **{scenario.name}**{profile}: {scenario.description}")
            else:
                out.append(f"- **{scenario.name}** [{about}]{profile}: {' '.join(scenario.description.split())}")
        return "\n".join(out) + "\n"


def _metric_cache_sizes(metrics: Callable[[], str]) -> Callable[[], dict[str, int]]:
    """Our scheduler's cache sizes, from scheduler_cache_size (kept current on every change)."""

    def sizes() -> dict[str, int]:
        out: dict[str, int] = {}
        for family in text_string_to_metric_families(metrics()):
            for sample in family.samples:
                if sample.name == "scheduler_cache_size":
                    out[sample.labels.get("type", "")] = int(sample.value)
        return out

    return sizes


_DUMP_NODES = '"Dump of cached NodeInfo"'
_DUMP_QUEUE = '"Dump of scheduling queue"'
_DUMP_POD_COUNT = re.compile(r"Scheduled Pods\(number: (\d+)\)")
DUMP_TIMEOUT = 10.0


def _kube_cache_sizes(proc: ManagedProcess) -> Callable[[], dict[str, int]]:
    """kube-scheduler's cache sizes as its CacheDebugger dumps them to the log on SIGUSR2: exact and
    at once, where its scheduler_cache_size gauge is refreshed only once a second."""

    def sizes() -> dict[str, int]:
        offset = proc.log_path.stat().st_size
        proc.signal(signal.SIGUSR2)
        deadline = time.monotonic() + DUMP_TIMEOUT
        while True:
            with proc.log_path.open("rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
            start = text.find(_DUMP_NODES)
            end = text.find(_DUMP_QUEUE, start)
            if start >= 0 and end >= 0:
                dump = text[start:end]
                return {
                    "nodes": dump.count("Deleted: false"),
                    "pods": sum(int(n) for n in _DUMP_POD_COUNT.findall(dump)),
                }
            if time.monotonic() > deadline or not proc.alive():
                raise ApiFailure(f"{KUBE}: no cache dump in {proc.log_path} within {DUMP_TIMEOUT:.0f} s of SIGUSR2")
            time.sleep(0.01)  # the dump is a few log lines away

    return sizes


# kube-scheduler logs every node's final score (and each plugin's) at -v=10 in schedule_one.go, and
# OpportunisticBatching's hints at -v=3 in batch.go; --vmodule keeps the rest of its log at -v=2.
KUBE_SCORE_LOGGING = ("--vmodule=schedule_one=10,batch=3",)


@dataclass
class _Sides:
    kube: Side
    ours: Side


def _start_sides(stack: ExitStack) -> _Sides:
    """Two control planes, kube-scheduler on one and ours on the other (all from the main thread,
    so every child dies with this process)."""
    kube_plane = stack.enter_context(ControlPlane())
    our_plane = stack.enter_context(ControlPlane())
    kube_config = scheduler_config(KUBE)
    kube_scheduler = kube_plane.start_kube_scheduler(
        scheduler_name(KUBE, "default"), {"profiles": kube_config["profiles"]}, extra_args=KUBE_SCORE_LOGGING
    )
    assert kube_scheduler.port is not None
    config_path = our_plane.workdir / "agreement-scheduler.yaml"
    config_path.write_text(yaml.safe_dump(scheduler_config(OURS), sort_keys=False))
    port = stack.enter_context(
        running_scheduler(our_plane, scheduler_name(OURS, "default"), config_path, ("--no-leader-elect",))
    )
    return _Sides(
        Side(KUBE, kube_plane, _kube_cache_sizes(kube_scheduler), score_log=kube_scheduler.log_path),
        Side(OURS, our_plane, _metric_cache_sizes(lambda: metrics_text(port))),
    )


def run_agreement(
    scenarios: Sequence[Scenario],
    progress: Callable[[str], None] | None = None,
    info: RunInfo | None = None,
) -> AgreementReport:
    """Run `scenarios` through both schedulers (side by side) and compare them."""
    say = progress or (lambda _line: None)
    began = time.monotonic()
    registered = tuple(full_registry())
    config = parse_config(scheduler_config(OURS))
    runnable = [s for s in scenarios if not s.pending_plugins(registered)]
    runs: dict[str, tuple[SideRun, SideRun]] = {}
    if runnable:
        lock = threading.Lock()

        def locked_say(line: str) -> None:
            with lock:
                say(line)

        with ExitStack() as stack:
            sides = _start_sides(stack)
            say(f"control planes and schedulers up in {time.monotonic() - began:.1f} s")
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="agreement") as pool:
                kube_future = pool.submit(sides.kube.run_all, runnable, locked_say)
                our_future = pool.submit(sides.ours.run_all, runnable, locked_say)
                kube_runs, our_runs = kube_future.result(), our_future.result()
        runs = {name: (kube_runs[name], our_runs[name]) for name in kube_runs}
    results = []
    for scenario in scenarios:
        if scenario.name not in runs:
            missing = ", ".join(scenario.pending_plugins(registered))
            results.append(ScenarioResult(scenario, "pending", error=f"not run: {missing} not registered"))
        else:
            results.append(compare(scenario, *runs[scenario.name], config))
    return AgreementReport(results, time.monotonic() - began, registered, info or RunInfo.now())


def generated_scenarios(seed: int, count: int) -> list[Scenario]:
    """`count` generated scenarios of `seed` (gen-<seed>-0 ...), parsed like scenario files."""
    scenarios = []
    for raw in generator.generate_many(seed, count):
        name = raw.pop("name")
        scenarios.append(parse_scenario(name, raw, generated=True))
    return scenarios


# The fixed seed of `make test`'s generated scenarios and of `make agreement`'s.
DEFAULT_SEED = 137


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.agreement",
        description="Run scenarios through kube-scheduler and through ours; print the agreement table.",
    )
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS_DIR, help="folder of scenario *.yaml files")
    parser.add_argument("--no-files", action="store_true", help="run generated scenarios only")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the generated scenarios")
    parser.add_argument("--generated", type=int, default=0, metavar="K", help="add K generated scenarios")
    parser.add_argument("--only", help="scenario names or globs to run, comma-separated, e.g. gen-137-42,fit-*")
    parser.add_argument("--dump", type=Path, help="write the generated scenarios as YAML files into this folder")
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"markdown table to write (default: {RESULTS_FILE.relative_to(REPO_ROOT)} for a full run)",
    )
    args = parser.parse_args(argv)
    scenarios = [] if args.no_files else load_scenarios(args.scenarios, args.only)
    generated = [s for s in generated_scenarios(args.seed, args.generated) if name_matches(s.name, args.only)]
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
        for raw in generator.generate_many(args.seed, args.generated):
            name = raw.pop("name")
            if name_matches(name, args.only):
                (args.dump / f"{name}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        print(f"wrote {len(generated)} scenarios into {args.dump}")
        return 0
    scenarios += generated
    if not scenarios:
        print(f"no scenarios{f' matching {args.only!r}' if args.only else ''}", file=sys.stderr)
        return 2
    info = RunInfo.now(args.seed if args.generated else None, len(generated))
    report = run_agreement(scenarios, progress=lambda line: print(line, flush=True), info=info)
    results = args.results or (RESULTS_FILE if args.only is None and not args.no_files else None)
    return publish(report, results)


def publish(report: AgreementReport, results: Path | None) -> int:
    """Print the table (and write it to `results`); the exit status: 1 when any scenario failed."""
    print(report.text())
    if results is not None:
        results.write_text(report.markdown())
        print(f"wrote {results}")
    failures = report.failures
    if failures:
        names = ", ".join(r.scenario.name for r in failures)
        print(f"{len(failures)} of {len(report.results)} scenarios failed: {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
