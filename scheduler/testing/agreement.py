"""Agreement harness: the same scenarios through the real kube-scheduler and through ours.

A scenario (tests/agreement/scenarios/*.yaml) is nodes, existing pods (bound to a node or not),
namespaces with labels, PriorityClasses, other raw objects (RuntimeClasses, Services, ...) and an
ordered list of steps: pending pods, each created and settled one at a time, and actions (patch a
node or a pod, delete a pod, create a node) after which named pods are observed again. Objects are
raw Kubernetes objects; node_object() and pod_object() fill the defaults from a few short keys.

Each scheduler gets one control plane for the whole run and both run side by side: kube-scheduler
v1.34.4 (leader election off) on one, ours (`--no-leader-elect`) on the other, each with the same
profiles (PROFILES) under its own schedulerNames. Between scenarios a side deletes what the last
one created and waits until the scheduler's cache (scheduler_cache_size) is empty; after creating
nodes and existing pods it waits until the cache holds exactly them, so no pod is ever tried
against a half-seen cluster.

Per pod it compares: bound vs unschedulable; the FailedScheduling message (the part kube-scheduler's
PostFilter plugins add, ` preemption: ...` from DefaultPreemption and DRA's "no new claims to
deallocate", is cut off and reported apart: we have neither plugin yet); and whether each
scheduler's node is one the other could have chosen: our framework is replayed in-process
(FakeApiClient) over the nodes and pods the pod met in kube-scheduler's run, and kube-scheduler's
node must be in our top-score set; likewise our node in the replay over our own run.

Owns: the scenario format, both drivers, the replay, the comparison, the table (stdout and
markdown) and the CLI (`python -m scheduler.testing.agreement [--scenarios DIR] [--only NAME]`).
Must never: tune either scheduler beyond the shared PROFILES, or touch a cluster it did not start.
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import json
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from scheduler.api.fake import FakeApiClient
from scheduler.app import VOLUME_KINDS, WORKLOAD_KINDS, build_scheduler, full_registry
from scheduler.config import API_VERSION, KIND, SchedulerConfig, parse_config
from scheduler.framework.types import CycleState, FitError
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.testing.controlplane import REPO_ROOT, ControlPlane, deep_merge
from scheduler.testing.workload import metrics_text, running_scheduler, wait_for

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
POLL_INTERVAL = 0.05
# How long a pod with scheduling gates must stay unbound to count as gated; how long observed
# pods must stay unchanged after an action to count as settled.
QUIET_SECONDS = 1.0
# Before an action: past the initial backoff of every pod that failed once, so that the event moves
# them all to activeQ together (and priority decides their order, not backoff expiry).
# kube-scheduler 1.34 truncates backoff expiry to 1 s windows and backs a pod off while its expiry
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

    def pending_plugins(self, registered: Sequence[str]) -> list[str]:
        return [name for name in self.plugins if name not in registered]


_SCENARIO_KEYS = {"description", "plugins", "profile", "namespaces", "priorityClasses", "objects", "nodes"}
_SCENARIO_KEYS |= {"existingPods", "pods"}


def parse_scenario(name: str, raw: Any) -> Scenario:
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
    )


def load_scenarios(directory: Path = SCENARIOS_DIR, only: str | None = None) -> list[Scenario]:
    """Every *.yaml in `directory` (sorted by name); `only` is a name or a glob on names."""
    scenarios = []
    for path in sorted(directory.glob("*.yaml")):
        if only and not fnmatch.fnmatch(path.stem, only):
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
    """One scheduler on its own control plane, taken through scenarios one after the other."""

    def __init__(self, side: str, plane: ControlPlane, metrics: Callable[[], str]) -> None:
        self.side = side
        self.plane = plane
        self._metrics = metrics
        self._namespaces: set[str] = {"default"}
        self._objects: list[str] = []  # paths of objects to delete before the next scenario

    # ---- API -----------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Raw:
        status, data = self.plane.http_request(method, path, body, timeout=30.0)
        if status not in ok:
            raise ApiFailure(f"{self.side}: {method} {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data) if data else {}
        return result

    def _merge_patch(self, path: str, body: Raw) -> Raw:
        status, data = self.plane.http_request(
            "PATCH", path, body, headers={"Content-Type": "application/merge-patch+json"}, timeout=30.0
        )
        if status != 200:
            raise ApiFailure(f"{self.side}: PATCH {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data)
        return result

    def cache_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for family in text_string_to_metric_families(self._metrics()):
            for sample in family.samples:
                if sample.name == "scheduler_cache_size":
                    sizes[sample.labels.get("type", "")] = int(sample.value)
        return sizes

    def _wait_cache(self, nodes: int, pods: int, what: str) -> None:
        def synced() -> bool:
            sizes = self.cache_sizes()
            return sizes.get("nodes") == nodes and sizes.get("pods") == pods

        wait_for(synced, timeout=30, what=f"{self.side} cache {what} ({nodes} nodes, {pods} pods)", interval=0.1)

    # ---- a scenario ----------------------------------------------------------------------

    def run_all(self, scenarios: Sequence[Scenario], progress: Callable[[str], None]) -> dict[str, SideRun]:
        runs: dict[str, SideRun] = {}
        for scenario in scenarios:
            began = time.monotonic()
            run = SideRun()
            try:
                self.reset()
                self.setup(scenario)
                self.play(scenario, run)
            except (ApiFailure, AssertionError, ScenarioError, OSError) as err:
                run.error = str(err)
            run.seconds = time.monotonic() - began
            runs[scenario.name] = run
            progress(f"{self.side:>14}: {scenario.name} ({run.seconds:.1f} s){' ERROR' if run.error else ''}")
        self.reset()
        return runs

    def reset(self) -> None:
        """Back to an empty cluster: no pods, nodes, scenario namespaces or objects."""
        for namespace in sorted(self._namespaces):
            self.api("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
        self.api("DELETE", "/api/v1/nodes", ok=(200,))
        for path in self._objects:
            self.api("DELETE", path, ok=(200, 202, 404))
        self._objects.clear()
        for namespace in sorted(self._namespaces - {"default"}):
            self._delete_namespace(namespace)
        self._namespaces = {"default"}
        self._wait_cache(0, 0, "emptied")

    def _delete_namespace(self, name: str) -> None:
        """Delete and finalize at once: no namespace controller runs here, and the next scenario
        may want the same name back."""
        deleted = self.api("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))
        if deleted.get("kind") == "Namespace":
            deleted["spec"]["finalizers"] = []
            self.api("PUT", f"/api/v1/namespaces/{name}/finalize", deleted, ok=(200, 404))
        wait_for(
            lambda: self.plane.http_request("GET", f"/api/v1/namespaces/{name}")[0] == 404,
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
            self.api("POST", self._pod_path(namespace), pod)
            if "status" in pod:
                self._merge_patch(
                    self._pod_path(namespace, pod["metadata"]["name"]) + "/status", {"status": pod["status"]}
                )
        bound = sum(
            1
            for pod in scenario.existing_pods
            if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        )
        self._wait_cache(len(scenario.nodes), bound, "filled")

    def _create_node(self, node: Raw) -> None:
        created = self.api("POST", "/api/v1/nodes", node)
        if (created.get("status") or {}).get("allocatable") != node["status"]["allocatable"]:
            # Older apiservers drop status on create; a merge patch does not race kwok's updates.
            self._merge_patch(f"/api/v1/nodes/{node['metadata']['name']}/status", {"status": node["status"]})

    def state(self) -> ClusterState:
        pods = [
            pod
            for pod in self.api("GET", "/api/v1/pods")["items"]
            if (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        workloads = []
        for group, version, plural, kind in WORKLOAD_KINDS:
            api_version = f"{group}/{version}" if group else version
            prefix = f"/apis/{api_version}" if group else f"/api/{version}"
            workloads += [(api_version, kind, item) for item in self.api("GET", f"{prefix}/{plural}")["items"]]
        volumes = []
        for group, version, plural, kind in VOLUME_KINDS:
            prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
            volumes += [(kind, item) for item in self.api("GET", f"{prefix}/{plural}")["items"]]
        return ClusterState(
            namespaces=tuple(self.api("GET", "/api/v1/namespaces")["items"]),
            workloads=tuple(workloads),
            nodes=tuple(self.api("GET", "/api/v1/nodes")["items"]),
            pods=tuple(pods),
            volumes=tuple(volumes),
        )

    def play(self, scenario: Scenario, run: SideRun) -> None:
        name = scheduler_name(self.side, scenario.profile)
        for step in scenario.steps:
            if isinstance(step, PodStep):
                run.observations.append(self._pod_step(step, name))
            else:
                run.observations.extend(self._action_step(step))

    def _pod_path(self, namespace: str, name: str = "") -> str:
        return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")

    def _pod_step(self, step: PodStep, scheduler: str) -> Observation:
        pod = copy.deepcopy(step.pod)
        pod["spec"]["schedulerName"] = scheduler
        namespace = pod["metadata"]["namespace"]
        self._namespaces.add(namespace)
        state = self.state()
        created = self.api("POST", self._pod_path(namespace), pod)
        gated = bool(pod["spec"].get("schedulingGates"))
        outcome = self._settle(namespace, step.name, gated)
        if outcome.verdict == "unschedulable" and not step.keep:
            self.api("DELETE", self._pod_path(namespace, step.name) + "?gracePeriodSeconds=0", ok=(200, 404))
        return Observation(step.name, outcome, Encounter(created, state))

    def _get_pod(self, path: str) -> Raw:
        status, data = self.plane.http_request("GET", path, timeout=30.0)
        if status == 404:
            # Nothing here deletes a pod it observes: the scheduler did (a preemption victim).
            raise ApiFailure(f"{self.side}: {path} is gone: preempted? (scenarios must leave no victims)")
        if status != 200:
            raise ApiFailure(f"{self.side}: GET {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        pod: Raw = json.loads(data)
        return pod

    def _settle(self, namespace: str, name: str, gated: bool) -> Outcome:
        path = self._pod_path(namespace, name)
        deadline = time.monotonic() + (QUIET_SECONDS if gated else SETTLE_TIMEOUT)
        while True:
            current = self._get_pod(path)
            outcome = _outcome(current)
            if outcome is not None:
                return outcome
            if time.monotonic() > deadline:
                if not gated:
                    return Outcome("timeout", message=f"neither bound nor failed after {SETTLE_TIMEOUT:.0f} s")
                return _waiting(current)
            time.sleep(POLL_INTERVAL)

    def _action_step(self, step: ActionStep) -> list[Observation]:
        time.sleep(step.delay)
        if step.action == "create":
            self._create_node(step.body)
        else:
            path = f"/api/v1/nodes/{step.name}"
            if step.kind == "pod":
                path = self._pod_path(self._namespace_of(step.name), step.name)
            if step.action == "patch":
                self._merge_patch(path, step.body)
            else:
                self.api("DELETE", path + "?gracePeriodSeconds=0")
        paths = {pod: self._pod_path(self._namespace_of(pod), pod) for pod in step.observe}
        last: dict[str, Raw] = {}
        changed = time.monotonic()
        deadline = changed + SETTLE_TIMEOUT
        while True:
            now = {pod: self._get_pod(path) for pod, path in paths.items()}
            outcomes = {pod: _outcome(raw) for pod, raw in now.items()}
            if outcomes != {pod: _outcome(raw) for pod, raw in last.items()}:
                changed = time.monotonic()
            last = now
            all_bound = all(o is not None and o.verdict == "bound" for o in outcomes.values())
            if all_bound or time.monotonic() - changed > QUIET_SECONDS or time.monotonic() > deadline:
                break
            time.sleep(POLL_INTERVAL)
        return [Observation(f"{pod} ({step.label})", _outcome(raw) or _waiting(raw)) for pod, raw in last.items()]

    def _namespace_of(self, pod: str) -> str:
        for namespace in sorted(self._namespaces):
            status, _ = self.plane.http_request("GET", self._pod_path(namespace, pod))
            if status == 200:
                return namespace
        raise ApiFailure(f"{self.side}: pod {pod} not found in {sorted(self._namespaces)}")


# --------------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class Replay:
    """Our framework's view of one pod over one cluster state."""

    feasible: tuple[str, ...]
    top: tuple[str, ...]  # every node with the highest total score (the feasible one if only one)
    scores: Mapping[str, int]
    message: str  # the FailedScheduling message when nothing is feasible


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
    best = max(scores.values())
    return Replay(names, tuple(sorted(n for n, s in scores.items() if s == best)), scores, "")


# --------------------------------------------------------------------------- comparison


def split_post_filter(message: str) -> tuple[str, str]:
    """A FailedScheduling message without the PostFilter part kube-scheduler appends (FitError.Error:
    `<filter histogram>. <post-filter message>`), and that part ("" if none).

    The PostFilter plugins of kube-scheduler's default profile that we do not have yet:
    DynamicResources (DRA is GA in 1.34; with no claims it says "no new claims to deallocate") and
    DefaultPreemption ("preemption: 0/3 nodes are available: ..."). When a PreFilter plugin before
    DynamicResources rejected the pod, DynamicResources' PostFilter finds no state of its own and
    fails with the CycleState's "not found", which ends up as the whole post-filter message."""
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
    top_set: bool | None  # None: not applicable (not bound on both sides, or nodeName given)
    post_filter: str  # kube-scheduler's PostFilter part of the message, not compared
    notes: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return self.verdict_agrees and self.message_agrees and self.top_set is not False


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    status: str  # compared | pending | error
    pods: tuple[PodComparison, ...] = ()
    error: str = ""

    @property
    def agrees(self) -> bool:
        return self.status == "compared" and all(p.agrees for p in self.pods)

    def counts(self) -> tuple[int, int, int, int]:
        """(verdicts agree, messages agree, node in top set, top-set checks)."""
        checks = [p.top_set for p in self.pods if p.top_set is not None]
        return (
            sum(p.verdict_agrees for p in self.pods),
            sum(p.message_agrees for p in self.pods),
            sum(checks),
            len(checks),
        )

    def diff(self) -> str:
        """A readable account of every disagreement."""
        if self.status == "error":
            return f"{self.scenario.name}: {self.error}"
        lines = []
        for pod in self.pods:
            if pod.agrees:
                continue
            lines.append(f"{self.scenario.name} / {pod.label}:")
            lines.append(f"    kube-scheduler: {pod.kube}")
            lines.append(f"    ours:           {pod.ours}")
            lines.extend(f"    {note}" for note in pod.notes)
        return "\n".join(lines)


def compare_pod(kube: Observation, ours: Observation, config: SchedulerConfig, profile: str) -> PodComparison:
    kube_message, post_filter = split_post_filter(kube.outcome.message)
    our_message, _ = split_post_filter(ours.outcome.message)
    verdict_agrees = kube.outcome.verdict == ours.outcome.verdict
    message_agrees = verdict_agrees and kube_message == our_message
    notes: list[str] = []
    top_set: bool | None = None
    both_bound = verdict_agrees and kube.outcome.verdict == "bound"
    if both_bound and kube.encounter is not None and ours.encounter is not None and not kube.encounter.preset:
        top_set = True
        for whose, observed, encounter in (
            ("kube-scheduler's", kube, kube.encounter),
            ("our", ours, ours.encounter),
        ):
            result = replay(config, encounter.state, encounter.pod, profile)
            if observed.outcome.node not in result.top:
                top_set = False
                notes.append(
                    f"{whose} node {observed.outcome.node} is not in our top set {list(result.top)} (replayed "
                    f"scores {dict(sorted(result.scores.items()))}, feasible {list(result.feasible)})"
                )
    if not verdict_agrees and kube.encounter is not None:
        result = replay(config, kube.encounter.state, kube.encounter.pod, profile)
        verdict = f"top set {list(result.top)}" if result.feasible else result.message
        notes.append(f"our replay over kube-scheduler's cluster: {verdict}")
    if verdict_agrees and not message_agrees:
        notes.append(f"message: kube-scheduler {kube_message!r} vs ours {our_message!r}")
    return PodComparison(
        kube.label, kube.outcome, ours.outcome, verdict_agrees, message_agrees, top_set, post_filter, tuple(notes)
    )


def compare(scenario: Scenario, kube: SideRun, ours: SideRun, config: SchedulerConfig) -> ScenarioResult:
    if kube.error or ours.error:
        errors = [f"{side}: {run.error}" for side, run in ((KUBE, kube), (OURS, ours)) if run.error]
        return ScenarioResult(scenario, "error", error="; ".join(errors))
    if [o.label for o in kube.observations] != [o.label for o in ours.observations]:
        return ScenarioResult(scenario, "error", error="the two runs observed different pods")
    pods = tuple(
        compare_pod(k, o, config, scenario.profile) for k, o in zip(kube.observations, ours.observations, strict=True)
    )
    return ScenarioResult(scenario, "compared", pods)


# --------------------------------------------------------------------------- running it all


@dataclass
class AgreementReport:
    results: list[ScenarioResult]
    seconds: float
    registered: tuple[str, ...]

    @property
    def compared(self) -> list[ScenarioResult]:
        return [r for r in self.results if r.status != "pending"]

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
                rows.append([result.scenario.name, "-", "-", "-", "-", "-", f"pending ({missing} not registered)"])
                continue
            if result.status == "error":
                rows.append([result.scenario.name, "-", "-", "-", "-", "-", "ERROR"])
                continue
            verdicts, messages, top, checks = result.counts()
            total = len(result.pods)
            suffixes = sum(1 for p in result.pods if p.post_filter)
            rows.append(
                [
                    result.scenario.name,
                    str(total),
                    f"{verdicts}/{total}",
                    f"{messages}/{total}",
                    f"{top}/{checks}",
                    str(suffixes),
                    "agree" if result.agrees else "DISAGREE",
                ]
            )
        return rows

    def totals(self) -> tuple[int, int, int, int, int]:
        """(pods, verdicts agree, messages agree, in top set, top-set checks) over compared scenarios."""
        pods = verdicts = messages = top = checks = 0
        for result in self.compared:
            v, m, t, c = result.counts()
            pods += len(result.pods)
            verdicts, messages, top, checks = verdicts + v, messages + m, top + t, checks + c
        return pods, verdicts, messages, top, checks

    def text(self) -> str:
        header = ["scenario", "pods", "verdicts agree", "messages agree", "node in top set", "post-filter", "result"]
        rows = [header, *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        pods, verdicts, messages, top, checks = self.totals()
        lines.append(
            f"total: {len(self.compared)} scenarios, {pods} pods; verdicts {verdicts}/{pods}, "
            f"messages {messages}/{pods}, node in top set {top}/{checks}; {self.seconds:.0f} s"
        )
        diffs = [r.diff() for r in self.results if r.status != "pending" and not r.agrees]
        if diffs:
            lines += ["", "disagreements:", *diffs]
        return "\n".join(lines)

    def markdown(self) -> str:
        pods, verdicts, messages, top, checks = self.totals()
        out = [
            "# Agreement with kube-scheduler v1.34.4",
            "",
            "Generated by `python -m scheduler.testing.agreement` (scheduler/testing/agreement.py) from",
            "tests/agreement/scenarios/. Per pod: the verdict (bound / unschedulable / gated), the",
            "FailedScheduling message (the part kube-scheduler's PostFilter plugins DynamicResources and",
            "DefaultPreemption append is cut off, as we have neither yet; the *post-filter* column counts the",
            "pods whose message had one), and whether each scheduler's node is in our top-score set replayed",
            "over the cluster that pod met in that scheduler's run.",
            "",
            "| scenario | pods | verdicts agree | messages agree | node in top set | post-filter | result |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        out += ["| " + " | ".join(row) + " |" for row in self.table_rows()]
        out += [
            "",
            f"**Total**: {len(self.compared)} scenarios, {pods} pods; verdicts {verdicts}/{pods}, messages "
            f"{messages}/{pods}, node in top set {top}/{checks}. Wall time {self.seconds:.0f} s.",
        ]
        diffs = [r.diff() for r in self.results if r.status != "pending" and not r.agrees]
        if diffs:
            out += ["", "## Disagreements", ""]
            out += ["The cause of each, when it is on our side, is the scenario's xfail reason in"]
            out += ["tests/cluster/test_agreement.py.", "", "```", *diffs, "```"]
        post_filter = sorted({p.post_filter for r in self.compared for p in r.pods if p.post_filter})
        if post_filter:
            out += ["", "## kube-scheduler's PostFilter parts (not compared)", ""]
            out += [f"- `{text}`" for text in post_filter]
        out += ["", "## Scenarios", ""]
        for result in self.results:
            scenario = result.scenario
            about = ", ".join(scenario.plugins)
            profile = "" if scenario.profile == "default" else f" (profile {scenario.profile})"
            out.append(f"- **{scenario.name}** [{about}]{profile}: {' '.join(scenario.description.split())}")
        return "\n".join(out) + "\n"


def _kube_metrics(port: int) -> Callable[[], str]:
    # kube-scheduler serves /metrics over HTTPS with a certificate made up in memory; it is our own
    # child on loopback, so no verification (as ControlPlane's health probe).
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))

    def fetch() -> str:
        with opener.open(f"https://127.0.0.1:{port}/metrics", timeout=5) as response:
            body: bytes = response.read()
        return body.decode()

    return fetch


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
        scheduler_name(KUBE, "default"), {"profiles": kube_config["profiles"]}
    )
    assert kube_scheduler.port is not None
    config_path = our_plane.workdir / "agreement-scheduler.yaml"
    config_path.write_text(yaml.safe_dump(scheduler_config(OURS), sort_keys=False))
    port = stack.enter_context(
        running_scheduler(our_plane, scheduler_name(OURS, "default"), config_path, ("--no-leader-elect",))
    )
    return _Sides(
        Side(KUBE, kube_plane, _kube_metrics(kube_scheduler.port)),
        Side(OURS, our_plane, lambda: metrics_text(port)),
    )


def run_agreement(scenarios: Sequence[Scenario], progress: Callable[[str], None] | None = None) -> AgreementReport:
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
            results.append(ScenarioResult(scenario, "pending"))
        else:
            results.append(compare(scenario, *runs[scenario.name], config))
    return AgreementReport(results, time.monotonic() - began, registered)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.testing.agreement",
        description="Run scenarios through kube-scheduler and through ours; print the agreement table.",
    )
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS_DIR, help="folder of scenario *.yaml files")
    parser.add_argument("--only", help="scenario name (or glob) to run")
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"markdown table to write (default: {RESULTS_FILE.relative_to(REPO_ROOT)} for a full run)",
    )
    args = parser.parse_args(argv)
    scenarios = load_scenarios(args.scenarios, args.only)
    if not scenarios:
        print(f"no scenarios{f' matching {args.only!r}' if args.only else ''} in {args.scenarios}", file=sys.stderr)
        return 2
    report = run_agreement(scenarios, progress=lambda line: print(line, flush=True))
    print(report.text())
    results = args.results or (RESULTS_FILE if args.only is None else None)
    if results is not None:
        results.write_text(report.markdown())
        print(f"wrote {results}")
    return 0 if all(r.agrees for r in report.compared) else 1


if __name__ == "__main__":
    sys.exit(main())
