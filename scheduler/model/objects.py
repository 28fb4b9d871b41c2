"""Compact, immutable views of Pods and Nodes built once from the API's JSON.

The informer converts each raw object exactly once; everything downstream (queue,
cache, plugins) reads these structs. A malformed object raises InvalidObject naming the
object and the field, so the caller can report it instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from scheduler import codec
from scheduler.model.podresources import (
    DEFAULT_NON_MISSING,
    PodResources,
    ResourceListError,
    non_missing_for_node_info,
)
from scheduler.model.quantity import QuantityError, ceil_int, ceil_milli, to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

Raw = Mapping[str, Any]


class InvalidObject(ValueError):
    """An API object the scheduler cannot interpret; the message names object and field."""


@dataclass(slots=True)
class Resource:
    """Amounts of the resources a node offers or a pod asks for (cpu in millicores)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pods: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pods += other.allowed_pods
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + amount

    def sub(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pods -= other.allowed_pods
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) - amount

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        for name, amount in other.scalar.items():
            self.scalar[name] = max(self.scalar.get(name, 0), amount)

    def copy(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pods, dict(self.scalar))

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pods
        return self.scalar.get(name, 0)

    def is_zero(self) -> bool:
        return (
            self.milli_cpu == 0 and self.memory == 0 and self.ephemeral_storage == 0 and not any(self.scalar.values())
        )

    @classmethod
    def from_amounts(cls, amounts: Mapping[str, Decimal]) -> Resource:
        """Build from exact amounts, rounding up as resource.Quantity's Value/MilliValue do."""
        res = cls()
        for name, amount in amounts.items():
            if name == CPU:
                res.milli_cpu = _milli(amount)
            elif name == MEMORY:
                res.memory = _whole(amount)
            elif name == EPHEMERAL_STORAGE:
                res.ephemeral_storage = _whole(amount)
            elif name == PODS:
                res.allowed_pods = _whole(amount)
            else:
                res.scalar[name] = _whole(amount)
        return res

    @classmethod
    def from_list(cls, amounts: Raw | None, where: str) -> Resource:
        """Build from a ResourceList ({"cpu": "100m", ...}); `where` names the field for errors."""
        res = cls()
        for name, value in (amounts or {}).items():
            try:
                if name == CPU:
                    res.milli_cpu = to_milli(value)
                elif name == MEMORY:
                    res.memory = to_int(value)
                elif name == EPHEMERAL_STORAGE:
                    res.ephemeral_storage = to_int(value)
                elif name == PODS:
                    res.allowed_pods = to_int(value)
                else:
                    res.scalar[name] = to_int(value)
            except QuantityError as exc:
                raise InvalidObject(f"{where}.{name}: {exc}") from exc
        return res


def _timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Pod:
    """What the scheduler needs of a Pod; `raw` keeps the rest for plugins that need more."""

    uid: str
    namespace: str
    name: str
    node_name: str
    scheduler_name: str
    priority: int
    created: float
    resource_version: str
    labels: Mapping[str, str]
    phase: str
    deleting: bool
    scheduling_gates: tuple[str, ...]
    requests: Resource
    # Requests with kube-scheduler's defaults for containers that ask for nothing (scoring only).
    non_zero_milli_cpu: int
    non_zero_memory: int
    raw: Raw = field(repr=False, compare=False, hash=False)
    # Requests from the spec alone, set only when in-place resize status makes them differ.
    spec_requests: Resource | None = field(default=None, repr=False, compare=False, hash=False)
    # What NodeResourcesFit scores this pod with, set only where it differs from the non-zero
    # cpu/memory and the requests: kube-scheduler 1.37 builds that plugin's scorer without its
    # feature flags, so it reads the spec's containers with the 100m/200Mi defaults, ignoring
    # pod-level resources and in-place resize status (overhead still added).
    fit_scoring_requests: Resource | None = field(default=None, repr=False, compare=False, hash=False)

    @property
    def fit_requests(self) -> Resource:
        """What NodeResourcesFit's PreFilter checks: the spec's requests (the pod is not running yet)."""
        return self.spec_requests if self.spec_requests is not None else self.requests

    def fit_scoring_request(self, name: str) -> int:
        """The pod's request of one resource as NodeResourcesFit's Score sees it."""
        scoring = self.fit_scoring_requests
        if scoring is not None:
            return scoring.get(name)
        if name == CPU:
            return self.non_zero_milli_cpu
        if name == MEMORY:
            return self.non_zero_memory
        return self.requests.get(name)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def spec(self) -> Raw:
        spec: Raw = self.raw.get("spec") or {}
        return spec

    @property
    def has_pod_affinity(self) -> bool:
        """Any pod affinity or anti-affinity (required or preferred)."""
        affinity = self.spec.get("affinity") or {}
        return affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None

    @property
    def has_required_anti_affinity(self) -> bool:
        anti = (self.spec.get("affinity") or {}).get("podAntiAffinity") or {}
        return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @classmethod
    def from_raw(cls, raw: Raw) -> Pod:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        key = f"pod {meta.get('namespace', '')}/{meta.get('name', '')}"
        requests, nz_cpu, nz_mem, fit_requests, fit_scoring = _pod_requests(raw, key)
        priority = spec.get("priority")
        if priority is not None and not isinstance(priority, int):
            raise InvalidObject(f"{key}: spec.priority: {priority!r} is not an integer")
        return cls(
            uid=meta.get("uid", ""),
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            node_name=spec.get("nodeName") or "",
            scheduler_name=spec.get("schedulerName") or "default-scheduler",
            priority=priority or 0,
            created=_timestamp(meta.get("creationTimestamp")),
            resource_version=meta.get("resourceVersion", ""),
            labels=dict(meta.get("labels") or {}),
            phase=(raw.get("status") or {}).get("phase", ""),
            deleting=bool(meta.get("deletionTimestamp")),
            scheduling_gates=tuple(g.get("name", "") for g in spec.get("schedulingGates") or ()),
            requests=requests,
            non_zero_milli_cpu=nz_cpu,
            non_zero_memory=nz_mem,
            raw=raw,
            spec_requests=fit_requests,
            fit_scoring_requests=fit_scoring,
        )


_RequestsResult = tuple[Resource, int, int, Resource | None, Resource | None]
# Pods of one template (a Deployment's, a benchmark's) ask for the same: their requests are worked
# out once. Keyed by every field PodResources reads (as JSON), bounded, values copied on the way out.
_REQUESTS_MEMO: dict[bytes, _RequestsResult] = {}
_REQUESTS_MEMO_SIZE = 4096


def _pod_requests(raw: Raw, key: str) -> _RequestsResult:
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    try:
        memo_key = codec.dumps(
            [
                spec.get("containers"),
                spec.get("initContainers"),
                spec.get("resources"),
                spec.get("overhead"),
                status.get("containerStatuses"),
                status.get("initContainerStatuses"),
                status.get("resources"),
                status.get("allocatedResources"),
                status.get("conditions"),
            ]
        )
    except (TypeError, ValueError):
        return _compute_pod_requests(raw, key)
    found = _REQUESTS_MEMO.get(memo_key)
    if found is None:
        found = _compute_pod_requests(raw, key)  # an invalid pod raises, and is not remembered
        if len(_REQUESTS_MEMO) >= _REQUESTS_MEMO_SIZE:
            _REQUESTS_MEMO.clear()
        _REQUESTS_MEMO[memo_key] = found
    requests, nz_cpu, nz_mem, fit, scoring = found
    return requests.copy(), nz_cpu, nz_mem, fit and fit.copy(), scoring and scoring.copy()


def _compute_pod_requests(raw: Raw, key: str) -> _RequestsResult:
    """Requests as kube-scheduler 1.37 computes them (see scheduler.model.podresources).

    Returns the requests the cache accounts (pod-level resources and in-place resize status
    included), the non-zero cpu/memory of framework.PodInfo, and — only where they differ — the
    spec-only requests NodeResourcesFit filters with and the requests its Score uses.
    """
    try:
        resources = PodResources(raw, key)
        requests = resources.requests(use_status=True)
        pod_level = resources.pod_level_requests_set
        non_zero = resources.requests(use_status=True, non_missing=non_missing_for_node_info(requests, pod_level))
        differs = resources.status_matters
        fit = Resource.from_amounts(resources.requests(use_status=False)) if differs else None
        scoring = None
        if pod_level or differs:
            scoring = Resource.from_amounts(
                resources.requests(use_status=False, non_missing=DEFAULT_NON_MISSING, pod_level=False)
            )
    except ResourceListError as exc:
        raise InvalidObject(str(exc)) from exc
    return Resource.from_amounts(requests), _milli(non_zero.get(CPU)), _whole(non_zero.get(MEMORY)), fit, scoring


def _milli(amount: Decimal | None) -> int:
    return 0 if amount is None else ceil_milli(amount)


def _whole(amount: Decimal | None) -> int:
    return 0 if amount is None else ceil_int(amount)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Node:
    """What the scheduler needs of a Node."""

    uid: str
    name: str
    resource_version: str
    labels: Mapping[str, str]
    allocatable: Resource
    unschedulable: bool
    taints: tuple[Taint, ...]
    images: Mapping[str, int]
    raw: Raw = field(repr=False, compare=False, hash=False)
    # status.declaredFeatures (NodeDeclaredFeatures; the apiserver keeps it sorted and unique).
    declared_features: tuple[str, ...] = ()

    def same_scheduling_properties(self, other: Node) -> bool:
        """True when nothing a scheduler looks at differs (e.g. a heartbeat-only status update)."""
        return (
            self.allocatable == other.allocatable
            and self.unschedulable == other.unschedulable
            and self.taints == other.taints
            and self.labels == other.labels
            and self.images == other.images
            and self.declared_features == other.declared_features
            and (self.raw.get("metadata") or {}).get("annotations")
            == (other.raw.get("metadata") or {}).get("annotations")
        )

    @classmethod
    def from_raw(cls, raw: Raw) -> Node:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        key = f"node {meta.get('name', '')}"
        images: dict[str, int] = {}
        for image in status.get("images") or ():
            for name in image.get("names") or ():
                images.setdefault(name, int(image.get("sizeBytes") or 0))  # the first entry naming it counts
        return cls(
            uid=meta.get("uid", ""),
            name=meta.get("name", ""),
            resource_version=meta.get("resourceVersion", ""),
            labels=dict(meta.get("labels") or {}),
            allocatable=Resource.from_list(status.get("allocatable"), f"{key}: status.allocatable"),
            unschedulable=bool(spec.get("unschedulable")),
            taints=tuple(
                Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in spec.get("taints") or ()
            ),
            images=images,
            raw=raw,
            declared_features=tuple(status.get("declaredFeatures") or ()),
        )


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """What preemption needs of a policy/v1 PodDisruptionBudget (spec.selector stays raw)."""

    namespace: str
    name: str
    selector: Raw | None
    disruptions_allowed: int
    # Pods whose eviction the apiserver already admitted (status.disruptedPods): not counted again.
    disrupted_pods: frozenset[str]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: Raw) -> PodDisruptionBudget:
        meta = raw.get("metadata") or {}
        status = raw.get("status") or {}
        allowed = status.get("disruptionsAllowed") or 0
        if not isinstance(allowed, int):
            key = f"poddisruptionbudget {meta.get('namespace', '')}/{meta.get('name', '')}"
            raise InvalidObject(f"{key}: status.disruptionsAllowed: {allowed!r} is not an integer")
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            selector=(raw.get("spec") or {}).get("selector"),
            disruptions_allowed=allowed,
            disrupted_pods=frozenset(status.get("disruptedPods") or ()),
        )
