"""Compact, immutable views of Pods and Nodes built once from the API's JSON.

The informer converts each raw object exactly once; everything downstream (queue,
cache, plugins) reads these structs. A malformed object raises InvalidObject naming the
object and the field, so the caller can report it instead of crashing. A legal quantity too
large for kube's int64 counts is converted as kube-scheduler converts it (see
scheduler.model.quantity) and named in the struct's `out_of_range`, for the caller to report;
every integer in a Resource is an int64, so no table or sum downstream has to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from scheduler import codec
from scheduler.model.podresources import (
    DEFAULT_NON_MISSING,
    PodResources,
    ResourceListError,
    non_missing_for_node_info,
)
from scheduler.model.quantity import INT64_MAX, INT64_MIN, MILLI, Quantity, QuantityError, parse, wrap_int64

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

    # Sums wrap as kube's int64 fields do (two 5E memory requests on one node sum to a negative
    # number there too); a wrapped sum is the node's own oddity and never an OverflowError in a table.

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pods += other.allowed_pods
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + amount
        self._wrap()

    def sub(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pods -= other.allowed_pods
        for name, amount in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) - amount
        self._wrap()

    def _wrap(self) -> None:
        # Binds and preemption's what-ifs come through here: one chained comparison per field is
        # the cheapest of the forms measured (bit_length of the OR, min/max of the four).
        if not INT64_MIN <= self.milli_cpu <= INT64_MAX:
            self.milli_cpu = wrap_int64(self.milli_cpu)
        if not INT64_MIN <= self.memory <= INT64_MAX:
            self.memory = wrap_int64(self.memory)
        if not INT64_MIN <= self.ephemeral_storage <= INT64_MAX:
            self.ephemeral_storage = wrap_int64(self.ephemeral_storage)
        if not INT64_MIN <= self.allowed_pods <= INT64_MAX:
            self.allowed_pods = wrap_int64(self.allowed_pods)
        for name, amount in self.scalar.items():
            if not INT64_MIN <= amount <= INT64_MAX:
                self.scalar[name] = wrap_int64(amount)

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

    def set(self, name: str, amount: int) -> None:
        if name == CPU:
            self.milli_cpu = amount
        elif name == MEMORY:
            self.memory = amount
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = amount
        elif name == PODS:
            self.allowed_pods = amount
        else:
            self.scalar[name] = amount

    @classmethod
    def from_amounts(cls, amounts: Mapping[str, Quantity], out_of_range: list[str] | None = None) -> Resource:
        """Build from Quantities with kube's MilliValue (cpu) / Value (the rest); the names of the
        resources whose exact value does not fit in int64 are appended to `out_of_range`."""
        res = cls()
        for name, amount in amounts.items():
            converted, fits = amount.scaled(MILLI if name == CPU else 0)
            res.set(name, converted)
            if not fits and out_of_range is not None:
                out_of_range.append(name)
        return res

    @classmethod
    def from_list(cls, amounts: Raw | None, where: str, out_of_range: list[str] | None = None) -> Resource:
        """Build from a ResourceList ({"cpu": "100m", ...}); `where` names the field for errors, and
        fields beyond int64 are described in `out_of_range`."""
        res = cls()
        for name, value in (amounts or {}).items():
            try:
                quantity = parse(value)
            except QuantityError as exc:
                raise InvalidObject(f"{where}.{name}: {exc}") from exc
            converted, fits = quantity.scaled(MILLI if name == CPU else 0)
            res.set(name, converted)
            if not fits and out_of_range is not None:
                out_of_range.append(_beyond_int64(f"{where}.{name}", value, name))
        return res


def _int64_unit(resource: str) -> str:
    if resource == CPU:
        return "int64 millicores"
    if resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-"):
        return "int64 bytes"
    return "int64"


def _beyond_int64(field_name: str, value: object, resource: str) -> str:
    """One field's problem, as reports name it."""
    return f"{field_name}: {value} is beyond {_int64_unit(resource)}"


def _start_time(raw: Raw) -> float | None:
    """status.startTime, None when absent (or, should one slip through, not a timestamp)."""
    value = (raw.get("status") or {}).get("startTime")
    if not value:
        return None
    try:
        return _timestamp(str(value))
    except ValueError:
        return None


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
    # Request fields beyond int64 (counted as kube-scheduler counts them), for one report; and the
    # reason the pod is not placed when such a field is in what NodeResourcesFit filters with.
    out_of_range: tuple[str, ...] = field(default=(), repr=False, compare=False, hash=False)
    fit_out_of_range: str = field(default="", repr=False, compare=False, hash=False)
    # spec.tolerations, parsed once: TaintToleration, NodeUnschedulable and PodTopologySpread's
    # node eligibility read them for every pod attempt.
    tolerations: tuple[Toleration, ...] = field(default=(), repr=False, compare=False, hash=False)
    # Every (hostIP, protocol, hostPort) its long-running containers (and sidecars) bind on the
    # node, defaults filled in (0.0.0.0, TCP): NodePorts and the node's used ports read them.
    host_ports: tuple[HostPort, ...] = field(default=(), repr=False, compare=False, hash=False)
    # Any pod affinity or anti-affinity (required or preferred), and required anti-affinity: a
    # node's pod lists by affinity follow them on every add and remove, preemption's dry runs too.
    has_pod_affinity: bool = field(default=False, repr=False, compare=False, hash=False)
    has_required_anti_affinity: bool = field(default=False, repr=False, compare=False, hash=False)
    # status.startTime as a timestamp, None before the pod started (preemption orders victims by it).
    started: float | None = field(default=None, repr=False, compare=False, hash=False)

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

    def on_node(self, node_name: str) -> Pod:
        """This pod placed on `node_name` (assumed there, or a filter's dry run): what
        dataclasses.replace(pod, node_name=...) gives, without running __init__ over every field
        (a gang member is placed once per placement tried)."""
        placed = object.__new__(Pod)
        for name in _POD_FIELDS:
            object.__setattr__(placed, name, getattr(self, name))
        object.__setattr__(placed, "node_name", node_name)
        return placed

    @property
    def spec(self) -> Raw:
        spec: Raw = self.raw.get("spec") or {}
        return spec

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @classmethod
    def from_raw(cls, raw: Raw) -> Pod:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        key = f"pod {meta.get('namespace', '')}/{meta.get('name', '')}"
        requests, nz_cpu, nz_mem, fit_requests, fit_scoring, out_of_range, fit_out_of_range = _pod_requests(raw, key)
        priority = spec.get("priority")
        if priority is not None and not isinstance(priority, int):
            raise InvalidObject(f"{key}: spec.priority: {priority!r} is not an integer")
        affinity = spec.get("affinity") or {}
        anti_affinity = affinity.get("podAntiAffinity")
        required_anti = (anti_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
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
            out_of_range=out_of_range,
            fit_out_of_range=f"{key}: {fit_out_of_range}" if fit_out_of_range else "",
            tolerations=tuple(Toleration.from_raw(t) for t in spec.get("tolerations") or ()),
            host_ports=_host_ports(spec),
            has_pod_affinity=affinity.get("podAffinity") is not None or anti_affinity is not None,
            has_required_anti_affinity=bool(required_anti),
            started=_start_time(raw),
        )


_POD_FIELDS = tuple(f.name for f in fields(Pod))

# (hostIP, protocol, hostPort), as kube's HostPortInfo keys a node's used ports.
HostPort = tuple[str, str, int]
BIND_ALL_HOST_IP = "0.0.0.0"


def _host_ports(spec: Raw) -> tuple[HostPort, ...]:
    """The host ports of the regular containers and of sidecars (restartable init containers);
    a port number the apiserver would not have accepted binds nothing."""
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers.extend(spec.get("containers") or ())
    ports: list[HostPort] = []
    for container in containers:
        for port in container.get("ports") or ():
            number = port.get("hostPort")
            if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                ports.append((port.get("hostIP") or BIND_ALL_HOST_IP, port.get("protocol") or "TCP", number))
    return tuple(ports)


_RequestsResult = tuple[Resource, int, int, Resource | None, Resource | None, tuple[str, ...], str]
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
    requests, nz_cpu, nz_mem, fit, scoring, out_of_range, fit_out_of_range = found
    return (
        requests.copy(),
        nz_cpu,
        nz_mem,
        fit and fit.copy(),
        scoring and scoring.copy(),
        out_of_range,
        fit_out_of_range,
    )


def _compute_pod_requests(raw: Raw, key: str) -> _RequestsResult:
    """Requests as kube-scheduler 1.37 computes them (see scheduler.model.podresources).

    Returns the requests the cache accounts (pod-level resources and in-place resize status
    included), the non-zero cpu/memory of framework.PodInfo, and — only where they differ — the
    spec-only requests NodeResourcesFit filters with and the requests its Score uses.
    """
    beyond: list[str] = []  # resources whose accounted (or scoring) amount is beyond int64
    fit_beyond: list[str] = []  # ... in what NodeResourcesFit filters with, where that differs
    try:
        resources = PodResources(raw, key)
        requests = resources.requests(use_status=True)
        pod_level = resources.pod_level_requests_set
        non_zero = resources.requests(use_status=True, non_missing=non_missing_for_node_info(requests, pod_level))
        differs = resources.status_matters
        fit = Resource.from_amounts(resources.requests(use_status=False), fit_beyond) if differs else None
        scoring = None
        if pod_level or differs:
            scoring = Resource.from_amounts(
                resources.requests(use_status=False, non_missing=DEFAULT_NON_MISSING, pod_level=False), beyond
            )
    except ResourceListError as exc:
        raise InvalidObject(str(exc)) from exc
    accounted_beyond: list[str] = []
    accounted = Resource.from_amounts(requests, accounted_beyond)
    if fit is None:
        fit_beyond = accounted_beyond
    beyond += accounted_beyond
    non_zero_resource = Resource.from_amounts({n: non_zero[n] for n in (CPU, MEMORY) if n in non_zero}, beyond)
    out_of_range: tuple[str, ...] = ()
    fit_reason = ""
    if beyond or fit_beyond:
        out_of_range = tuple(_describe_beyond(raw, name) for name in dict.fromkeys([*fit_beyond, *beyond]))
        if fit_beyond:
            fit_reason = "; ".join(_describe_beyond(raw, name) for name in dict.fromkeys(fit_beyond))
    return (
        accounted,
        non_zero_resource.milli_cpu,
        non_zero_resource.memory,
        fit,
        scoring,
        out_of_range,
        fit_reason,
    )


def _request_fields(raw: Raw, resource: str) -> list[tuple[str, Any]]:
    """Every field of the pod that asks for `resource`, with its value, as (path, value)."""
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    found: list[tuple[str, Any]] = []

    def look(path: str, amounts: Raw | None) -> None:
        if amounts and resource in amounts:
            found.append((f"{path}.{resource}", amounts[resource]))

    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or ()):
            look(f"spec.{kind}[{i}].resources.requests", (container.get("resources") or {}).get("requests"))
    look("spec.resources.requests", (spec.get("resources") or {}).get("requests"))
    look("spec.overhead", spec.get("overhead"))
    for kind in ("containerStatuses", "initContainerStatuses"):
        for i, container_status in enumerate(status.get(kind) or ()):
            look(f"status.{kind}[{i}].allocatedResources", container_status.get("allocatedResources"))
            look(f"status.{kind}[{i}].resources.requests", (container_status.get("resources") or {}).get("requests"))
    look("status.allocatedResources", status.get("allocatedResources"))
    look("status.resources.requests", (status.get("resources") or {}).get("requests"))
    return found


def _describe_beyond(raw: Raw, resource: str) -> str:
    """Names the fields that put a pod's request of `resource` beyond int64: those beyond it on
    their own, or else all that were summed."""
    scale = MILLI if resource == CPU else 0
    fields = _request_fields(raw, resource)
    alone = [(path, value) for path, value in fields if not parse(value).scaled(scale)[1]]
    if alone:
        return "; ".join(_beyond_int64(path, value, resource) for path, value in alone)
    summed = " + ".join(f"{path} ({value})" for path, value in fields)
    return f"requests.{resource}: the sum {summed} is beyond {_int64_unit(resource)}"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""  # "" means Equal
    value: str = ""
    effect: str = ""  # "" means every effect

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> Toleration:
        return cls(
            key=raw.get("key") or "",
            operator=raw.get("operator") or "",
            value=raw.get("value") or "",
            effect=raw.get("effect") or "",
        )


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
    # Allocatable fields beyond int64 (counted as kube-scheduler counts them), for one report.
    out_of_range: tuple[str, ...] = field(default=(), repr=False, compare=False, hash=False)

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
        out_of_range: list[str] = []
        try:
            allocatable = Resource.from_list(status.get("allocatable"), "status.allocatable", out_of_range)
        except InvalidObject as exc:
            raise InvalidObject(f"{key}: {exc}") from exc
        images: dict[str, int] = {}
        for image in status.get("images") or ():
            for name in image.get("names") or ():
                images.setdefault(name, int(image.get("sizeBytes") or 0))  # the first entry naming it counts
        return cls(
            uid=meta.get("uid", ""),
            name=meta.get("name", ""),
            resource_version=meta.get("resourceVersion", ""),
            labels=dict(meta.get("labels") or {}),
            allocatable=allocatable,
            unschedulable=bool(spec.get("unschedulable")),
            taints=tuple(
                Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in spec.get("taints") or ()
            ),
            images=images,
            raw=raw,
            declared_features=tuple(status.get("declaredFeatures") or ()),
            out_of_range=tuple(out_of_range),
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
