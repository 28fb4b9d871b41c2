"""What a pod asks of a node, computed the way component-helpers' resource.PodRequests does (1.37).

Owns the arithmetic only: containers summed, restartable init containers (sidecars) added to
everything that starts after them, the peak of any init step, pod-level `spec.resources`
(cpu, memory, hugepages-*) replacing the container aggregate, `spec.overhead` added, and for
a pod that may have been resized in place the larger of spec, allocated
(`status.allocatedResources` / `containerStatuses[].allocatedResources`) and actuated
(`status.resources`) amounts. Amounts are Quantities summed as resource.Quantity sums (exact,
in kube's representation) until the caller converts them. Must never look at nodes or feature
gates of its own: the options say what kube-scheduler 1.37 passes at each call site.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.model.quantity import Quantity, QuantityError, parse

Raw = Mapping[str, Any]
Amounts = dict[str, Quantity]

CPU = "cpu"
MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
POD_RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"

# kube-scheduler counts a container without a cpu / memory request as this much when it scores
# or spreads load (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest).
DEFAULT_CPU_REQUEST = parse("100m")
DEFAULT_MEMORY_REQUEST = parse("200Mi")
DEFAULT_NON_MISSING: Mapping[str, Quantity] = {CPU: DEFAULT_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


class ResourceListError(ValueError):
    """A ResourceList entry that is not a quantity; the message names the field."""


def parse_list(amounts: Raw | None, where: str) -> Amounts | None:
    """A ResourceList as exact amounts; None when the field is absent (Go's nil map)."""
    if amounts is None:
        return None
    out: Amounts = {}
    for name, value in amounts.items():
        try:
            out[name] = parse(value)
        except QuantityError as exc:
            raise ResourceListError(f"{where}.{name}: {exc}") from exc
    return out


def is_supported_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def is_resize_infeasible(status: Raw) -> bool:
    """resource.IsPodResizeInfeasible: the (first) PodResizePending condition says Infeasible."""
    for condition in status.get("conditions") or ():
        if condition.get("type") == POD_RESIZE_PENDING:
            return bool(condition.get("reason") == REASON_INFEASIBLE)
    return False


def _add(total: Amounts, more: Mapping[str, Quantity] | None) -> None:
    for name, amount in (more or {}).items():
        known = total.get(name)
        total[name] = amount if known is None else known + amount  # kube copies the first, then Adds


def _set_max(total: Amounts, more: Mapping[str, Quantity] | None) -> None:
    for name, amount in (more or {}).items():
        if name not in total or amount > total[name]:
            total[name] = amount


def _max_of(*lists: Mapping[str, Quantity] | None) -> Amounts:
    out: Amounts = {}
    for amounts in lists:
        _set_max(out, amounts)
    return out


class PodResources:
    """The parsed resource fields of one pod, ready for PodRequests with any options."""

    __slots__ = (
        "containers",
        "has_status_resources",
        "infeasible",
        "init_containers",
        "overhead",
        "pod_level",
        "status_allocated",
        "status_matters",
        "status_requests",
    )

    def __init__(self, raw: Raw, where: str) -> None:
        spec: Raw = raw.get("spec") or {}
        status: Raw = raw.get("status") or {}
        statuses: dict[str, tuple[Raw, str]] = {}
        # Init container statuses first so that, as upstream's lookup does, a regular container's
        # status wins when both lists name the same container.
        for field_name in ("initContainerStatuses", "containerStatuses"):
            for i, cs in enumerate(status.get(field_name) or ()):
                statuses[cs.get("name", "")] = (cs, f"{where}: status.{field_name}[{i}]")
        self.containers = [
            _ContainerResources(c, statuses.get(c.get("name", "")), f"{where}: spec.containers[{i}]")
            for i, c in enumerate(spec.get("containers") or ())
        ]
        self.init_containers = [
            _ContainerResources(c, statuses.get(c.get("name", "")), f"{where}: spec.initContainers[{i}]")
            for i, c in enumerate(spec.get("initContainers") or ())
        ]
        self.pod_level = parse_list((spec.get("resources") or {}).get("requests"), f"{where}: spec.resources.requests")
        self.overhead = parse_list(spec.get("overhead"), f"{where}: spec.overhead")
        status_resources = status.get("resources")
        self.status_requests: Amounts | None = None
        self.status_allocated = parse_list(status.get("allocatedResources"), f"{where}: status.allocatedResources")
        self.has_status_resources = status_resources is not None  # Go's pod.Status.Resources != nil
        if status_resources is not None:
            self.status_requests = parse_list(status_resources.get("requests"), f"{where}: status.resources.requests")
        self.infeasible = is_resize_infeasible(status)
        # Whether requests(use_status=True) can differ from the spec-only requests: without any
        # status resources (and no Infeasible resize) allocated and actual both fall back to spec.
        self.status_matters = (
            self.infeasible
            or self.has_status_resources
            or self.status_allocated is not None
            or any(c.allocated is not None or c.actuated is not None for c in self.containers)
            or any(c.allocated is not None or c.actuated is not None for c in self.init_containers)
        )

    @property
    def pod_level_requests_set(self) -> bool:
        """resource.IsPodLevelRequestsSet: some supported resource requested at pod level."""
        return any(is_supported_pod_level_resource(name) for name in self.pod_level or ())

    def requests(
        self, *, use_status: bool, non_missing: Mapping[str, Quantity] | None = None, pod_level: bool = True
    ) -> Amounts:
        """resource.PodRequests with InPlacePodLevelResourcesVerticalScaling on; `pod_level=False` is
        its SkipPodLevelResources."""
        reqs = self._container_requests(use_status, non_missing)
        if pod_level and self.pod_level_requests_set:
            effective: Mapping[str, Quantity] | None = self.pod_level
            if use_status and self.has_status_resources:
                effective = _max_of(
                    None if self.infeasible else self.pod_level, self.status_requests, self.status_allocated
                )
            for name, amount in (effective or {}).items():
                if is_supported_pod_level_resource(name):
                    reqs[name] = amount
        _add(reqs, self.overhead)
        return reqs

    def _container_requests(self, use_status: bool, non_missing: Mapping[str, Quantity] | None) -> Amounts:
        spec = _aggregate(self, "spec", non_missing)
        if not use_status or not self.status_matters:
            return spec
        if self.status_allocated is not None and self.has_status_resources and self.status_requests is not None:
            # Pod-level status maps already hold the aggregate over all containers.
            allocated: Amounts | None = self.status_allocated
            actuated: Amounts | None = self.status_requests
        else:
            allocated = _aggregate(self, "allocated", non_missing)
            actuated = _aggregate(self, "actuated", non_missing)
        if self.infeasible:
            return _max_of(actuated, allocated)
        return _max_of(spec, actuated, allocated)


class _ContainerResources:
    __slots__ = ("actuated", "allocated", "name", "sidecar", "spec")

    def __init__(self, container: Raw, status: tuple[Raw, str] | None, where: str) -> None:
        self.name = container.get("name", "")
        self.sidecar = container.get("restartPolicy") == "Always"
        self.spec = parse_list((container.get("resources") or {}).get("requests"), f"{where}.resources.requests")
        self.allocated: Amounts | None = None
        self.actuated: Amounts | None = None
        if status is not None:
            cs, status_where = status
            self.allocated = parse_list(cs.get("allocatedResources"), f"{status_where}.allocatedResources")
            resources = cs.get("resources")
            if resources is not None:
                self.actuated = parse_list(resources.get("requests"), f"{status_where}.resources.requests")

    def requests(self, which: str, infeasible: bool) -> Amounts | None:
        if which == "spec":
            return self.spec
        if which == "actuated" and self.actuated is not None:
            return self.actuated
        if self.allocated is not None:
            return self.allocated
        return None if infeasible else self.spec


def _with_defaults(amounts: Amounts | None, non_missing: Mapping[str, Quantity] | None) -> Amounts | None:
    if not non_missing:
        return amounts
    out = dict(amounts or {})
    for name, amount in non_missing.items():
        if name not in out:
            out[name] = amount
    return out


def _aggregate(pod: PodResources, which: str, non_missing: Mapping[str, Quantity] | None) -> Amounts:
    infeasible = pod.infeasible and which != "spec"
    total: Amounts = {}
    for container in pod.containers:
        _add(total, _with_defaults(container.requests(which, infeasible), non_missing))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for container in pod.init_containers:
        amounts = _with_defaults(container.requests(which, infeasible), non_missing)
        if container.sidecar:
            _add(total, amounts)
            _add(sidecars, amounts)
            step: Amounts = sidecars
        else:
            step = dict(amounts or {})
            _add(step, sidecars)
        _set_max(init_peak, step)
    _set_max(total, init_peak)
    return total


def non_missing_for_node_info(requests: Mapping[str, Quantity], pod_level_set: bool) -> Mapping[str, Quantity]:
    """The defaults framework.PodInfo.CalculateResource fills in for its non-zero requests.

    Without pod-level requests every container lacking cpu / memory counts the defaults; with
    them, a default applies only to a resource missing at both container and pod level.
    """
    if not pod_level_set:
        return DEFAULT_NON_MISSING
    return {name: amount for name, amount in DEFAULT_NON_MISSING.items() if name not in requests}
