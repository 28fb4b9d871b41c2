"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): loading, defaulting, validation.

Produces plain config objects; building frameworks from them happens in scheduler.profile.
Every error names the field (e.g. `profiles[0].plugins.filter.enabled[1].name`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.features import (
    DEFAULT_FEATURE_GATES,
    GENERIC_WORKLOAD,
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING,
    FeatureGates,
)
from scheduler.framework.runtime import EXTENSION_POINTS
from scheduler.model.durations import go_duration, parse_go_duration

# kube's LeaderElectionConfiguration / ClientConnectionConfiguration defaults (the lease name excepted:
# kube-scheduler's own "kube-scheduler" lease must never be shared with it).
DEFAULT_LEASE_NAME = "secondary-scheduler"
JSON = "application/json"
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_PARALLELISM = 16

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "secondary-scheduler"

# kube-scheduler 1.37's default profile (getDefaultPlugins + applyFeatureGates with 1.37's default
# gates: NodeDeclaredFeatures appended, DynamicResources before DefaultPreemption), in its
# multiPoint order, with score weights. Plugins not (yet) in the registry are left out of the
# default profile by the builder.
DEFAULT_MULTI_POINT: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeName", 0),
    ("NodeUnschedulable", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
    ("NodeDeclaredFeatures", 0),
)


def default_multi_point(gates: FeatureGates) -> tuple[tuple[str, int], ...]:
    """The default profile with kube's applyFeatureGates for the gates this scheduler honours:
    GenericWorkload appends GangScheduling, TopologyAwareWorkloadScheduling TopologyPlacementGenerator
    and PodGroupPodsCount (placement score weight 1)."""
    extra: tuple[tuple[str, int], ...] = ()
    if gates.enabled(GENERIC_WORKLOAD):
        extra += (("GangScheduling", 0),)
    if gates.enabled(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING):
        extra += (("TopologyPlacementGenerator", 0), ("PodGroupPodsCount", 1))
    return DEFAULT_MULTI_POINT + extra


class ConfigError(ValueError):
    """An invalid configuration; the message starts with the offending field's path."""


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 0


@dataclass(frozen=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfileConfig:
    scheduler_name: str
    # extension point (or "multiPoint") -> set; not yet merged with the defaults
    plugins: Mapping[str, PluginSet]
    plugin_args: Mapping[str, Mapping[str, Any]]
    percentage_of_nodes_to_score: int | None = None


@dataclass(frozen=True)
class LeaderElectionConfig:
    """The file's leaderElection; explicit --leader-elect* flags override it (kube's ApplyLeaderElectionTo)."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = DEFAULT_LEASE_NAME
    # Empty: $POD_NAMESPACE, else kube-system (decided when the scheduler starts).
    resource_namespace: str = ""


@dataclass(frozen=True)
class ClientConnectionConfig:
    """The file's clientConnection. As in kube-scheduler, the --kube-api-* flags apply only without --config."""

    kubeconfig: str = ""
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    content_type: str = JSON


@dataclass(frozen=True)
class SchedulerConfig:
    profiles: tuple[ProfileConfig, ...]
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    client_connection: ClientConnectionConfig = field(default_factory=ClientConnectionConfig)
    # From --feature-gates (kube-scheduler's configuration file has no field for them).
    feature_gates: FeatureGates = DEFAULT_FEATURE_GATES

    def profile(self, name: str) -> ProfileConfig:
        for p in self.profiles:
            if p.scheduler_name == name:
                return p
        raise KeyError(name)


def default_config(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    return SchedulerConfig(profiles=(ProfileConfig(scheduler_name, {}, {}),))


def _expect(value: Any, kind: type | tuple[type, ...], path: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{path}: Invalid value: {value!r}: must be {names}")
    return value


def _int(value: Any, path: str, low: int, high: int | None = None) -> int:
    _expect(value, int, path)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{path}: Invalid value: {value}: must be in {bound}")
    result: int = value
    return result


def _plugin_set(raw: Any, path: str) -> PluginSet:
    raw = _expect(raw or {}, dict, path)
    unknown = set(raw) - {"enabled", "disabled"}
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {sorted(unknown)}")
    enabled = []
    for i, item in enumerate(_expect(raw.get("enabled") or [], list, f"{path}.enabled")):
        item = _expect(item, dict, f"{path}.enabled[{i}]")
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{path}.enabled[{i}].name: Required value")
        weight = _int(item.get("weight", 0), f"{path}.enabled[{i}].weight", 0, 100)
        enabled.append(PluginRef(name, weight))
    disabled = []
    for i, item in enumerate(_expect(raw.get("disabled") or [], list, f"{path}.disabled")):
        item = _expect(item, dict, f"{path}.disabled[{i}]")
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise ConfigError(f"{path}.disabled[{i}].name: Required value")
        disabled.append(name)
    return PluginSet(tuple(enabled), tuple(disabled))


def parse_duration(value: Any, path: str) -> float:
    """A Go duration string ("15s", "1m30s", "500ms") in seconds."""
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return parse_go_duration(value)
    except ValueError:
        raise ConfigError(
            f'{path}: Invalid value: {json.dumps(value)}: must be a duration such as "15s" or "1m30s"'
        ) from None


def validate_leader_election(le: LeaderElectionConfig) -> None:
    """component-base's ValidateLeaderElectionConfiguration (after flags are applied, as kube does)."""
    if not le.leader_elect:
        return
    for name, seconds in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if seconds <= 0:
            raise ConfigError(
                f'leaderElection.{name}: Invalid value: "{go_duration(seconds)}": must be greater than zero'
            )
    if le.lease_duration <= le.renew_deadline:
        raise ConfigError(
            f'leaderElection.leaseDuration: Invalid value: "{go_duration(le.renew_deadline)}": '
            "must be greater than `RenewDeadline`"
        )
    if not le.resource_name:
        raise ConfigError("leaderElection.resourceName: Required value")


def _leader_election(raw: Any) -> LeaderElectionConfig:
    path = "leaderElection"
    raw = _expect(raw or {}, dict, path)
    known = {
        "leaderElect",
        "leaseDuration",
        "renewDeadline",
        "retryPeriod",
        "resourceLock",
        "resourceName",
        "resourceNamespace",
    }
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{path}.{sorted(unknown)[0]}: unknown field")
    defaults = LeaderElectionConfig()
    leader_elect = _expect(raw.get("leaderElect", True), bool, f"{path}.leaderElect")
    lock = raw.get("resourceLock", "leases")
    if leader_elect and lock != "leases":
        raise ConfigError(
            f'{path}.resourceLock: Invalid value: {json.dumps(lock)}: resourceLock value must be "leases"'
        )
    durations = {
        name: parse_duration(raw[name], f"{path}.{name}") if name in raw else getattr(defaults, attr)
        for name, attr in (
            ("leaseDuration", "lease_duration"),
            ("renewDeadline", "renew_deadline"),
            ("retryPeriod", "retry_period"),
        )
    }
    return LeaderElectionConfig(
        leader_elect=leader_elect,
        lease_duration=durations["leaseDuration"],
        renew_deadline=durations["renewDeadline"],
        retry_period=durations["retryPeriod"],
        resource_name=_expect(raw.get("resourceName", defaults.resource_name), str, f"{path}.resourceName"),
        resource_namespace=_expect(raw.get("resourceNamespace", ""), str, f"{path}.resourceNamespace"),
    )


def client_connection(kubeconfig: str, qps: float, burst: int, content_type: str, path: str) -> ClientConnectionConfig:
    """Defaulted and checked as kube-scheduler does (qps 0 → 50, burst 0 → 100, negative qps: no limit)."""
    if burst < 0:
        raise ConfigError(f"{path}.burst: Invalid value: {burst}: must be non-negative")
    if content_type and content_type != JSON:
        # kube's default is protobuf; this client speaks JSON only, so a request for protobuf is refused.
        raise ConfigError(
            f"{path}.contentType: Unsupported value: {json.dumps(content_type)}: supported values: {json.dumps(JSON)}"
        )
    return ClientConnectionConfig(kubeconfig, qps or DEFAULT_QPS, burst or DEFAULT_BURST, JSON)


def _client_connection(raw: Any) -> ClientConnectionConfig:
    path = "clientConnection"
    raw = _expect(raw or {}, dict, path)
    unknown = set(raw) - {"kubeconfig", "qps", "burst", "contentType", "acceptContentTypes"}
    if unknown:
        raise ConfigError(f"{path}.{sorted(unknown)[0]}: unknown field")
    accept = _expect(raw.get("acceptContentTypes", ""), str, f"{path}.acceptContentTypes")
    if accept and JSON not in (t.strip() for t in accept.split(",")):
        raise ConfigError(f"{path}.acceptContentTypes: Unsupported value: {json.dumps(accept)}: must include {JSON}")
    return client_connection(
        _expect(raw.get("kubeconfig", ""), str, f"{path}.kubeconfig"),
        float(_expect(raw.get("qps", 0), (int, float), f"{path}.qps")),
        _expect(raw.get("burst", 0), int, f"{path}.burst"),
        _expect(raw.get("contentType", ""), str, f"{path}.contentType"),
        path,
    )


def parse_config(raw: Any, default_scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    """Validate and default a decoded KubeSchedulerConfiguration document."""
    raw = _expect(raw, dict, "<root>")
    if raw.get("apiVersion") != API_VERSION:
        raise ConfigError(
            f"apiVersion: Unsupported value: {raw.get('apiVersion')!r}: supported values: {API_VERSION!r}"
        )
    if raw.get("kind") != KIND:
        raise ConfigError(f"kind: Unsupported value: {raw.get('kind')!r}: supported values: {KIND!r}")
    known = {
        "apiVersion",
        "kind",
        "profiles",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "parallelism",
        "leaderElection",
        "clientConnection",
        "extenders",
        "delayCacheUntilActive",
    }
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: unknown field")
    pct = raw.get("percentageOfNodesToScore")
    if pct is not None:
        pct = _int(pct, "percentageOfNodesToScore", 0, 100)
    initial = _int(raw.get("podInitialBackoffSeconds", 1), "podInitialBackoffSeconds", 1)
    maximum = _int(raw.get("podMaxBackoffSeconds", 10), "podMaxBackoffSeconds", 1)
    if maximum < initial:
        raise ConfigError(
            f"podMaxBackoffSeconds: Invalid value: {maximum}: must be greater than or equal to "
            f"podInitialBackoffSeconds ({initial})"
        )
    parallelism = raw.get("parallelism", DEFAULT_PARALLELISM)
    if _expect(parallelism, int, "parallelism") <= 0:
        raise ConfigError(f"parallelism: Invalid value: {parallelism}: should be an integer value greater than zero")
    if parallelism != DEFAULT_PARALLELISM:
        # Refused rather than ignored: there is no worker pool to size, filtering and scoring run in one
        # thread over arrays of all nodes.
        raise ConfigError(
            f"parallelism: Unsupported value: {parallelism}: this scheduler filters and scores nodes in one "
            f"thread over arrays and has no worker pool to size; remove the field or set {DEFAULT_PARALLELISM}"
        )
    if raw.get("extenders"):
        raise ConfigError("extenders: Unsupported value: scheduler extenders are not supported")
    profiles_raw = raw.get("profiles") or [{"schedulerName": default_scheduler_name}]
    profiles = []
    seen: set[str] = set()
    for i, prof in enumerate(_expect(profiles_raw, list, "profiles")):
        path = f"profiles[{i}]"
        prof = _expect(prof, dict, path)
        unknown = set(prof) - {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}
        if unknown:
            raise ConfigError(f"{path}.{sorted(unknown)[0]}: unknown field")
        name = prof.get("schedulerName") or (default_scheduler_name if i == 0 else None)
        if not name:
            raise ConfigError(f"{path}.schedulerName: Required value")
        if name in seen:
            raise ConfigError(f"{path}.schedulerName: Duplicate value: {name!r}")
        seen.add(name)
        plugins_raw = _expect(prof.get("plugins") or {}, dict, f"{path}.plugins")
        plugins: dict[str, PluginSet] = {}
        for point, value in plugins_raw.items():
            if point != "multiPoint" and point not in EXTENSION_POINTS:
                raise ConfigError(f"{path}.plugins.{point}: unknown extension point")
            plugins[point] = _plugin_set(value, f"{path}.plugins.{point}")
        args: dict[str, Mapping[str, Any]] = {}
        for j, entry in enumerate(_expect(prof.get("pluginConfig") or [], list, f"{path}.pluginConfig")):
            entry = _expect(entry, dict, f"{path}.pluginConfig[{j}]")
            pname = entry.get("name")
            if not pname:
                raise ConfigError(f"{path}.pluginConfig[{j}].name: Required value")
            if pname in args:
                raise ConfigError(f'{path}.pluginConfig[{j}]: Duplicate value: "{pname}"')
            args[pname] = _expect(entry.get("args") or {}, dict, f"{path}.pluginConfig[{j}].args")
        ppct = prof.get("percentageOfNodesToScore")
        if ppct is not None:
            ppct = _int(ppct, f"{path}.percentageOfNodesToScore", 0, 100)
        profiles.append(ProfileConfig(name, plugins, args, ppct))
    return SchedulerConfig(
        profiles=tuple(profiles),
        percentage_of_nodes_to_score=pct,
        pod_initial_backoff_seconds=float(initial),
        pod_max_backoff_seconds=float(maximum),
        leader_election=_leader_election(raw.get("leaderElection")),
        client_connection=_client_connection(raw.get("clientConnection")),
    )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line report (with a caret drawing) as one line: the problem and where."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(exc).split())


def load_config(path: str | Path, default_scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from exc
    try:
        return parse_config(raw, default_scheduler_name)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def merge_plugin_set(defaults: Sequence[PluginRef], custom: PluginSet) -> list[PluginRef]:
    """kube-scheduler's merge: defaults minus disabled ("*" = all), re-configured in place, then custom."""
    disabled = set(custom.disabled)
    custom_by_name = {p.name: p for p in custom.enabled}
    replaced: set[str] = set()
    merged: list[PluginRef] = []
    if "*" not in disabled:
        for ref in defaults:
            if ref.name in disabled:
                continue
            if ref.name in custom_by_name:
                ref = custom_by_name[ref.name]
                replaced.add(ref.name)
            merged.append(ref)
    merged.extend(p for p in custom.enabled if p.name not in replaced)
    return merged
