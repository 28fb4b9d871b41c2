"""Upstream's own scheduler_perf test cases, read unchanged from the k8s.io/kubernetes module.

Owns: finding `test/integration/scheduler_perf/` of the pinned K8S_VERSION in the Go module cache
(downloading the module when the cache lacks it), reading every `*/performance-config.yaml` into
test cases and workloads (parameters, labels, thresholds, feature gates), resolving a workload's
operations (`$param` counts, template paths relative to the config file), choosing workloads by
name and label, and saying why a workload cannot run here — a feature gate set away from
K8S_VERSION's default, an opcode or option the executor does not have, a plugin ours lacks.

Must never: change what a test case asks for. The only edits the executor makes to upstream's
objects are those scheduler_perf itself makes (upstream_objects.py), `spec.schedulerName` on pods
(each scheduler under test runs as its own profile) and an optional uniform `scale` of the
parameterised counts, which the report states.
"""

from __future__ import annotations

import functools
import json
import math
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.bench.gotemplate import Template, TemplateError
from harness.controlplane import pinned_versions
from scheduler.config import ConfigError, parse_config
from scheduler.features import (
    DYNAMIC_RESOURCE_ALLOCATION,
    GENERIC_WORKLOAD,
    KNOWN_GATES,
    FeatureGateError,
    FeatureGates,
    parse_feature_gates,
)

SUPPORTED_OPCODES = frozenset(
    {
        "createNodes",
        "createNamespaces",
        "createPods",
        "createPodSets",
        "createAny",
        "updateAny",
        "barrier",
        "sleep",
        "churn",
        "deletePods",
        "startCollectingMetrics",
        "stopCollectingMetrics",
        "createPodGroups",
        "allocResourceClaims",
    }
)
# Kinds createAny and churn can create, and the collection path of each.
KIND_PATHS: Mapping[str, tuple[str, bool]] = {
    "Node": ("/api/v1/nodes", False),
    "Pod": ("/api/v1/namespaces/{namespace}/pods", True),
    "Service": ("/api/v1/namespaces/{namespace}/services", True),
    "Namespace": ("/api/v1/namespaces", False),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1/priorityclasses", False),
    "PersistentVolume": ("/api/v1/persistentvolumes", False),
    "PersistentVolumeClaim": ("/api/v1/namespaces/{namespace}/persistentvolumeclaims", True),
    "StorageClass": ("/apis/storage.k8s.io/v1/storageclasses", False),
    "CSINode": ("/apis/storage.k8s.io/v1/csinodes", False),
    "ConfigMap": ("/api/v1/namespaces/{namespace}/configmaps", True),
    "Secret": ("/api/v1/namespaces/{namespace}/secrets", True),
    "DeviceClass": ("/apis/resource.k8s.io/v1/deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1/resourceslices", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", True),
    "DeviceTaintRule": ("/apis/resource.k8s.io/v1/devicetaintrules", False),
    "PodGroup": ("/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups", True),
}


# The profile name a KubeSchedulerConfiguration means when it names none (kube-scheduler's default).
KUBE_DEFAULT_SCHEDULER = "default-scheduler"
# Objects only a scheduler with DynamicResources can act on.
DRA_KINDS = frozenset({"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"})


def collection_path(manifest: Mapping[str, Any], namespace: str) -> str:
    """Where createAny/updateAny/churn send an object: its kind's collection (KIND_PATHS) in the
    group version the object names, as upstream's REST mapping of the object's apiVersion does
    (consumablecapacity's DeviceClass is resource.k8s.io/v1beta2)."""
    kind = manifest.get("kind", "")
    if kind not in KIND_PATHS:
        raise UpstreamError(f"{kind or 'an object without kind'}: a kind this harness does not create")
    path, namespaced = KIND_PATHS[kind]
    api_version = str(manifest.get("apiVersion") or "")
    if path.startswith("/apis/") and "/" in api_version:
        group = path.split("/")[2]
        if api_version.split("/", maxsplit=1)[0] != group:
            raise UpstreamError(
                f"{kind} {manifest.get('metadata', {}).get('name')}: apiVersion {api_version} is not {group}"
            )
        path = f"/apis/{api_version}/" + path.split("/", 4)[4]
    return path.format(namespace=namespace) if namespaced else path


class UpstreamError(RuntimeError):
    """Upstream's benchmark files could not be found or read."""


@dataclass(frozen=True)
class UpstreamWorkload:
    case: TestCase
    name: str
    labels: tuple[str, ...]
    params: Mapping[str, Any]
    threshold: float | None
    feature_gates: Mapping[str, bool]

    @property
    def key(self) -> str:
        return f"{self.case.name}/{self.name}"

    def gates(self) -> dict[str, bool]:
        return {**self.case.feature_gates, **self.feature_gates}


@dataclass(frozen=True)
class TestCase:
    name: str
    config_file: Path
    ops: tuple[Mapping[str, Any], ...]
    default_pod_template: str | None
    feature_gates: Mapping[str, bool]
    scheduler_config: str | None
    workloads: list[UpstreamWorkload] = field(default_factory=list, compare=False, hash=False)

    def path(self, relative: str) -> Path:
        """A template path as the config file gives it (relative to the config file's folder); for a
        config outside upstream's tree, a path missing there is looked up in upstream's tree as if
        the config sat in one of its folders (`../templates/x.yaml` → scheduler_perf/templates/x.yaml)."""
        local = (self.config_file.parent / relative).resolve()
        if local.exists():
            return local
        upstream = (perf_root() / "misc" / relative).resolve()
        return upstream if upstream.exists() else local


def perf_root(version: str | None = None) -> Path:
    """`test/integration/scheduler_perf` of k8s.io/kubernetes@version in the Go module cache."""
    version = version or pinned_versions()["K8S_VERSION"]
    try:
        info = json.loads(
            subprocess.run(
                ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    except (OSError, subprocess.CalledProcessError, ValueError) as err:
        raise UpstreamError(f"cannot find k8s.io/kubernetes@{version} in the Go module cache: {err}") from err
    root = Path(info["Dir"]) / "test" / "integration" / "scheduler_perf"
    if not root.is_dir():
        raise UpstreamError(f"{root} does not exist")
    return root


@functools.cache
def default_gates(version: str | None = None) -> dict[str, bool]:
    """Every feature gate's default at `version` (K8S_VERSION), read from the module's
    pkg/features/kube_features.go: the last versioned spec at or below that minor."""
    version = version or pinned_versions()["K8S_VERSION"]
    minor = tuple(int(part) for part in version.removeprefix("v").split(".")[:2])
    source = (perf_root(version).parents[2] / "pkg" / "features" / "kube_features.go").read_text()
    table = source[source.index("defaultVersionedKubernetesFeatureGates") :]
    gates: dict[str, bool] = {}
    # A spec with a MinCompatibilityVersion applies only when the cluster's minimum compatibility
    # version (one minor below, by default) has reached it: DRAFractionalCapacityRange is off in 1.37.
    compatible = (minor[0], minor[1] - 1)
    for block in re.finditer(r"\n\t(\w+): \{(.*?)\n\t\},", table, re.S):
        applicable = []
        for spec in re.findall(r"\{Version:[^{}]*\}", block.group(2)):
            since = re.search(r'Version: version\.MustParse\("(\d+)\.(\d+)"\)', spec)
            default = re.search(r"Default: (true|false)", spec)
            floor = re.search(r'MinCompatibilityVersion: version\.MustParse\("(\d+)\.(\d+)"\)', spec)
            if since is None or default is None:
                continue
            if (int(since[1]), int(since[2])) > minor:
                continue
            if floor is not None and (int(floor[1]), int(floor[2])) > compatible:
                continue
            applicable.append(default[1] == "true")
        if applicable:
            gates[block.group(1)] = applicable[-1]
    return gates


def _as_threshold(raw: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):  # per-topic thresholds (DRA); the first is the headline
        raw = next(iter(raw.values()), None)
    return None if raw is None else float(raw)


def load_test_cases(root: Path, pattern: str = "**/performance-config.yaml") -> list[TestCase]:
    """Every test case of the scheduler_perf-format config files under `root` matching `pattern`."""
    cases: list[TestCase] = []
    for config_file in sorted(root.glob(pattern)):
        try:
            documents = yaml.safe_load(config_file.read_text()) or []
        except yaml.YAMLError as err:
            raise UpstreamError(f"{config_file}: {err}") from err
        for raw in documents:
            case = TestCase(
                name=raw["name"],
                config_file=config_file,
                ops=tuple(raw.get("workloadTemplate") or ()),
                default_pod_template=raw.get("defaultPodTemplatePath"),
                feature_gates=dict(raw.get("featureGates") or {}),
                scheduler_config=raw.get("schedulerConfigPath"),
            )
            for workload in raw.get("workloads") or ():
                case.workloads.append(
                    UpstreamWorkload(
                        case=case,
                        name=workload["name"],
                        labels=tuple(workload.get("labels") or ()),
                        params=dict(workload.get("params") or {}),
                        threshold=_as_threshold(workload.get("threshold")),
                        feature_gates=dict(workload.get("featureGates") or {}),
                    )
                )
            cases.append(case)
    return cases


@functools.cache
def upstream_workloads() -> tuple[UpstreamWorkload, ...]:
    return tuple(w for case in load_test_cases(perf_root()) for w in case.workloads)


def user_workloads(directory: Path) -> tuple[UpstreamWorkload, ...]:
    """The workloads of an operator's own scheduler_perf-format configs (every *.yaml directly in
    `directory` or one level below holding a list of test cases). Template paths resolve next to
    the config file first, then in upstream's scheduler_perf tree as if the config sat in one of
    its folders, so `../templates/node-default.yaml` reaches upstream's template unchanged."""
    if not directory.is_dir():
        raise UpstreamError(f"--config-dir {directory}: not a directory")
    cases = [
        case
        for pattern in ("*.yaml", "*/*.yaml")
        for config in sorted(directory.glob(pattern))
        if _is_config(config)
        for case in load_test_cases(config.parent, config.name)
    ]
    if not cases:
        raise UpstreamError(f"--config-dir {directory}: no scheduler_perf-format config (a YAML list of test cases)")
    return tuple(w for case in cases for w in case.workloads)


def _is_config(path: Path) -> bool:
    try:
        documents = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return False
    return isinstance(documents, list) and all(isinstance(d, dict) and "workloadTemplate" in d for d in documents)


def select(
    workloads: Iterable[UpstreamWorkload], cases: Sequence[str] = (), labels: Sequence[str] = ()
) -> list[UpstreamWorkload]:
    """Workloads named in `cases` (`Case` for all its workloads, `Case/Workload` for one) that carry
    every label in `labels`; an unknown name is an error."""
    pool = list(workloads)
    chosen = pool
    if cases:
        wanted: list[UpstreamWorkload] = []
        for name in cases:
            hits = [w for w in pool if name in (w.key, w.case.name)]
            if not hits:
                raise UpstreamError(f"no upstream test case or workload {name!r}")
            wanted += [w for w in hits if w not in wanted]
        chosen = wanted
    return [w for w in chosen if all(label in w.labels for label in labels)]


def resolve_count(op: Mapping[str, Any], params: Mapping[str, Any], key: str = "count") -> int:
    """An op's count: literal, or `$name` of a workload parameter (times countMultiplierParam)."""
    param = op.get(f"{key}Param")
    if param:
        value = params.get(str(param).removeprefix("$"))
        if value is None:
            raise UpstreamError(f"parameter {param} is not set")
        count = int(value)
    else:
        count = int(op.get(key) or 0)
    multiplier = op.get("countMultiplierParam") if key == "count" else None
    if multiplier:
        count *= int(params[str(multiplier).removeprefix("$")])
    return count


def resolve_flag(op: Mapping[str, Any], params: Mapping[str, Any], key: str) -> Any:
    """An op's `key`, or the workload parameter its `keyParam` names (steadyState, duration)."""
    param = op.get(f"{key}Param")
    if not param:
        return op.get(key)
    name = str(param).removeprefix("$")
    if name not in params:
        raise UpstreamError(f"parameter {param} is not set")
    return params[name]


def resolve_template_params(template_params: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """An op's templateParams with `$name` (or `$name|default`, the default read as YAML) taken from
    the workload's parameters, as scheduler_perf's resolveTemplateParams does."""
    resolved = dict(template_params)
    for key, value in template_params.items():
        if not (isinstance(value, str) and value.startswith("$")):
            continue
        name, bar, default = value[1:].partition("|")
        if name in params:
            resolved[key] = params[name]
        elif bar:
            resolved[key] = yaml.safe_load(default) if default else None
        else:
            raise UpstreamError(f"template parameter {key}: parameter {name!r} not found")
    return resolved


def scaled(count: int, scale: float) -> int:
    """A parameterised count at `scale` (never below 1 when it was at least 1)."""
    return count if scale == 1.0 or count == 0 else max(1, math.ceil(count * scale))


def scaled_params(case: TestCase, params: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """The workload's parameters as its templates see them at `scale`: one that an op takes as its
    count is scaled as that count is, so a template reading it too (a gang's minCount of
    $cloggerPods, the $initNodes pods spread over) agrees with the objects made."""
    counted: set[str] = set()
    for op in case.ops:
        for each in (op, op.get("createPodsOp") or {}):
            if each.get("countParam"):
                counted.add(str(each["countParam"]).removeprefix("$"))
    return {k: scaled(int(v), scale) if k in counted else v for k, v in params.items()}


def _templates_of(op: Mapping[str, Any], case: TestCase) -> list[str]:
    keys = (
        "nodeTemplatePath",
        "podTemplatePath",
        "templatePath",
        "namespaceTemplatePath",
        "persistentVolumeTemplatePath",
        "persistentVolumeClaimTemplatePath",
    )
    paths = [op.get(k) for k in keys]
    paths += list(op.get("templatePaths") or ())
    if op.get("opcode") == "createPods" and not op.get("podTemplatePath"):
        paths.append(case.default_pod_template)
    nested = op.get("createPodsOp")
    if nested:
        paths += _templates_of({"opcode": "createPods", **nested}, case)
    return [p for p in paths if p]


def ours_feature_gates(gates: Mapping[str, bool]) -> dict[str, bool]:
    """The gates of a workload that ours takes on its --feature-gates: those v1.37.2's scheduler
    code reads (scheduler.features.KNOWN_GATES). The rest concern only the apiserver and
    controllers, which get every gate."""
    return {name: value for name, value in gates.items() if name in KNOWN_GATES}


def ours_gate_refusal(gates: Mapping[str, bool]) -> str | None:
    """Why ours would refuse to start with these gates (None when it accepts them), decided by
    ours' own flag parser: the gates whose set value it does not implement, or its error."""
    ours = FeatureGates(ours_feature_gates(gates))
    try:
        parse_feature_gates(ours.flag())
    except FeatureGateError as err:
        refused = [
            f"{name}={str(value).lower()}"
            for name, value in sorted(ours.overrides.items())
            if value != KNOWN_GATES[name].default and not KNOWN_GATES[name].honoured
        ]
        return f"ours does not implement {', '.join(refused)}" if refused else f"ours refuses its feature gates: {err}"
    return None


def runtime_config(gates: Mapping[str, bool]) -> dict[str, str]:
    """The apiserver's --runtime-config for a workload's gates, as scheduler_perf's
    mustSetupCluster sets it: every resource.k8s.io version when the workload sets
    DynamicResourceAllocation, scheduling.k8s.io/v1beta1 (Workloads, PodGroups) when it sets
    GenericWorkload."""
    config: dict[str, str] = {}
    if gates.get(DYNAMIC_RESOURCE_ALLOCATION):
        for version in ("v1", "v1beta2", "v1beta1", "v1alpha3"):
            config[f"resource.k8s.io/{version}"] = "true"
    if gates.get(GENERIC_WORKLOAD):
        config["scheduling.k8s.io/v1beta1"] = "true"
    return config


def scheduler_configuration(case: TestCase, scheduler_name: str) -> dict[str, Any] | None:
    """The test case's KubeSchedulerConfiguration (schedulerConfigPath) for the scheduler under
    test: its default-scheduler profile (or the one without a name) renamed `scheduler_name`,
    the rest as upstream wrote it; None when the case runs the default configuration."""
    if not case.scheduler_config:
        return None
    path = case.path(case.scheduler_config)
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise UpstreamError(f"{path}: {err}") from err
    if not isinstance(config, dict):
        raise UpstreamError(f"{path}: not a KubeSchedulerConfiguration")
    profiles: list[dict[str, Any]] = []
    raw: Mapping[str, Any]
    for raw in config.get("profiles") or ({},):
        profile = dict(raw)
        if profile.get("schedulerName", KUBE_DEFAULT_SCHEDULER) == KUBE_DEFAULT_SCHEDULER:
            profile["schedulerName"] = scheduler_name
        profiles.append(profile)
    return {**config, "profiles": profiles}


def skip_reason(workload: UpstreamWorkload, plugins: Iterable[str]) -> str | None:
    """Why this workload cannot be run against ours here; None when it can."""
    defaults = default_gates()
    for gate in sorted(workload.gates()):
        if gate not in defaults:
            return f"feature gate {gate} is unknown to {pinned_versions()['K8S_VERSION']}"
    refusal = ours_gate_refusal(workload.gates())
    if refusal:
        return refusal
    case = workload.case
    config = scheduler_configuration(case, KUBE_DEFAULT_SCHEDULER)
    if config is not None:
        try:
            parse_config(config)
        except ConfigError as err:
            return f"ours refuses its scheduler configuration {case.scheduler_config}: {err}"
    available = set(plugins)
    for op in case.ops:
        opcode = op.get("opcode", "")
        if opcode not in SUPPORTED_OPCODES:
            return f"uses opcode {opcode}, which this harness does not run"
        volumes = op.get("persistentVolumeTemplatePath") or op.get("persistentVolumeClaimTemplatePath")
        if volumes and "VolumeBinding" not in available:
            return "needs volume binding (VolumeBinding), which ours does not have yet"
        if (op.get("nodeAllocatableStrategy") or {}).get("csiNodeAllocatable") and "NodeVolumeLimits" not in available:
            return "needs CSI volume limits (NodeVolumeLimits), which ours does not have yet"
        for template in _templates_of(op, case):
            path = case.path(template)
            text = path.read_text()
            try:
                Template(text, path.name)
            except TemplateError as err:
                return f"template {path.name} cannot be rendered here: {err}"
            devices = "resourceClaim" in text or _kind_of(text) in DRA_KINDS
            if devices and "DynamicResources" not in available:
                return "needs dynamic resource allocation (DynamicResources), which ours does not have"
            prioritised = "priorityClassName" in text or "priority:" in text
            if prioritised and "DefaultPreemption" not in available:
                return "needs preemption (DefaultPreemption), which ours does not have yet"
            kind = _kind_of(text)
            if opcode in ("createAny", "updateAny", "churn") and kind not in KIND_PATHS:
                return f"creates {kind} objects, which this harness does not"
    return None


def _kind_of(text: str) -> str:
    match = re.search(r"^kind:\s*(\w+)", text, re.M)
    return match.group(1) if match else ""


def schedulable(workloads: Iterable[UpstreamWorkload], plugins: Iterable[str]) -> list[tuple[UpstreamWorkload, str]]:
    """(workload, skip reason) for every workload that cannot run; see skip_reason."""
    names = list(plugins)
    return [(w, reason) for w in workloads if (reason := skip_reason(w, names)) is not None]


def upstream_throughput(scheduled_at: Sequence[float], start: float, stop: float) -> list[float]:
    """scheduler_perf's SchedulingThroughput samples for pods scheduled at `scheduled_at` while a
    collector ran from `start` to `stop`: a tick every second; ticks before the first scheduled
    pod are ignored and the first one after it only starts the clock; a tick with nothing new
    is folded into the next one that has something, which then counts once per folded tick."""
    times = sorted(scheduled_at)
    samples: list[float] = []
    started = False
    last_count = 0
    last_time = start
    skipped = 0
    index = 0
    tick = start + 1.0
    while tick <= stop + 1e-9:
        while index < len(times) and times[index] <= tick:
            index += 1
        count = index
        if count == 0:
            tick += 1.0
            continue
        if not started:
            started, last_count, last_time = True, count, tick
            tick += 1.0
            continue
        new = count - last_count
        if new == 0:
            skipped += 1
            tick += 1.0
            continue
        rate = new / (tick - last_time)
        samples += [rate] * (skipped + 1)
        last_count, last_time, skipped = count, tick, 0
        tick += 1.0
    return samples


def throughput_summary(samples: Sequence[float]) -> dict[str, float | None]:
    """Average and the percentiles scheduler_perf reports (its nearest-rank indices)."""
    if not samples:
        return {"average": None, "p50": None, "p90": None, "p95": None, "p99": None}
    ordered = sorted(samples)
    n = len(ordered)

    def rank(q: int) -> float:
        return ordered[math.ceil(n * q / 100) - 1]

    return {"average": sum(ordered) / n, "p50": rank(50), "p90": rank(90), "p95": rank(95), "p99": rank(99)}
