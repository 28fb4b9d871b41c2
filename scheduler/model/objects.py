"""Compact, immutable views of Pods and Nodes built once from the API's JSON.

The informer converts each raw object exactly once; everything downstream (queue,
cache, plugins) reads these structs. A malformed object raises InvalidObject naming the
object and the field, so the caller can report it instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.model.quantity import QuantityError, to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler counts a container without requests as this much when it spreads or
# scores load (never when it checks fit): 100 millicores and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

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
        requests, nz_cpu, nz_mem = _pod_requests(spec, key)
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
        )


def _pod_requests(spec: Raw, key: str) -> tuple[Resource, int, int]:
    """Effective requests: regular containers plus sidecars, at least any init step, plus overhead.

    Restartable init containers (sidecars) keep running, so they add to everything that
    starts after them; a plain init container runs alone next to the sidecars started
    before it. Also returns the non-zero cpu/memory used for scoring.
    """
    total = Resource()
    nz_cpu = nz_mem = 0
    for i, container in enumerate(spec.get("containers") or ()):
        req = Resource.from_list(
            (container.get("resources") or {}).get("requests"),
            f"{key}: spec.containers[{i}].resources.requests",
        )
        total.add(req)
        nz_cpu += req.milli_cpu or (DEFAULT_MILLI_CPU_REQUEST if CPU not in _req_names(container) else 0)
        nz_mem += req.memory or (DEFAULT_MEMORY_REQUEST if MEMORY not in _req_names(container) else 0)
    sidecars = Resource()
    init_peak = Resource()
    nz_sidecar_cpu = nz_sidecar_mem = 0
    nz_init_cpu = nz_init_mem = 0
    for i, container in enumerate(spec.get("initContainers") or ()):
        req = Resource.from_list(
            (container.get("resources") or {}).get("requests"),
            f"{key}: spec.initContainers[{i}].resources.requests",
        )
        c_cpu = req.milli_cpu or (DEFAULT_MILLI_CPU_REQUEST if CPU not in _req_names(container) else 0)
        c_mem = req.memory or (DEFAULT_MEMORY_REQUEST if MEMORY not in _req_names(container) else 0)
        if container.get("restartPolicy") == "Always":
            total.add(req)
            sidecars.add(req)
            nz_cpu += c_cpu
            nz_mem += c_mem
            nz_sidecar_cpu += c_cpu
            nz_sidecar_mem += c_mem
            step = sidecars.copy()
            step_cpu, step_mem = nz_sidecar_cpu, nz_sidecar_mem
        else:
            step = req.copy()
            step.add(sidecars)
            step_cpu, step_mem = c_cpu + nz_sidecar_cpu, c_mem + nz_sidecar_mem
        init_peak.set_max(step)
        nz_init_cpu = max(nz_init_cpu, step_cpu)
        nz_init_mem = max(nz_init_mem, step_mem)
    total.set_max(init_peak)
    nz_cpu = max(nz_cpu, nz_init_cpu)
    nz_mem = max(nz_mem, nz_init_mem)
    overhead = Resource.from_list(spec.get("overhead"), f"{key}: spec.overhead")
    total.add(overhead)
    return total, nz_cpu + overhead.milli_cpu, nz_mem + overhead.memory


def _req_names(container: Raw) -> Mapping[str, Any]:
    requests: Mapping[str, Any] = (container.get("resources") or {}).get("requests") or {}
    return requests


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

    def same_scheduling_properties(self, other: Node) -> bool:
        """True when nothing a scheduler looks at differs (e.g. a heartbeat-only status update)."""
        return (
            self.allocatable == other.allocatable
            and self.unschedulable == other.unschedulable
            and self.taints == other.taints
            and self.labels == other.labels
            and self.images == other.images
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
                images[name] = int(image.get("sizeBytes") or 0)
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
