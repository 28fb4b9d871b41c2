"""PodTopologySpreadArgs and the default constraints for pods that declare none.

Owns argument validation (messages in apimachinery's field-error wording) and the selector
kube-scheduler gives default constraints: the union of the Services selecting the pod and
the selector of its controlling ReplicationController, ReplicaSet or StatefulSet. Those
objects come from a WorkloadLister; must never call the API itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plugins.podtopologyspread.constraints import DO_NOT_SCHEDULE, HOSTNAME_LABEL, SCHEDULE_ANYWAY, ZONE_LABEL
from scheduler.model.objects import Pod
from scheduler.model.selectors import (
    LabelSelector,
    Requirement,
    SelectorError,
    aggregate,
    duplicate_value,
    forbidden,
    invalid_value,
    label_selector,
    qualified_name_errors,
    required_value,
    selector_from_set,
    unsupported_value,
)

Raw = Mapping[str, Any]

KIND = "PodTopologySpreadArgs"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[Raw, ...] = (
    {"topologyKey": HOSTNAME_LABEL, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": ZONE_LABEL, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

REPLICATION_CONTROLLER = ("v1", "ReplicationController")
REPLICA_SET = ("apps/v1", "ReplicaSet")
STATEFUL_SET = ("apps/v1", "StatefulSet")


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    default_constraints: tuple[Raw, ...] = SYSTEM_DEFAULT_CONSTRAINTS
    # System defaulting lets nodes without a zone label still be scored by hostname spreading.
    system_defaulted: bool = True


def parse_args(args: Mapping[str, Any]) -> PodTopologySpreadArgs:
    """Validate PodTopologySpreadArgs as ValidatePodTopologySpreadArgs does; errors name the field."""
    unknown = set(args) - {"defaultConstraints", "defaultingType", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    if args.get("kind", KIND) != KIND:
        raise ValueError(unsupported_value("kind", args["kind"], (KIND,)))
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    constraints: Sequence[Raw] = args.get("defaultConstraints") or ()
    errors: list[str] = []
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errors.append(unsupported_value("defaultingType", defaulting, (SYSTEM_DEFAULTING, LIST_DEFAULTING)))
    elif defaulting == SYSTEM_DEFAULTING and constraints:
        errors.append(invalid_value("defaultingType", defaulting, "when .defaultConstraints are not empty"))
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(constraints):
        path = f"defaultConstraints[{i}]"
        errors.extend(_constraint_errors(path, c))
        key, action = str(c.get("topologyKey") or ""), str(c.get("whenUnsatisfiable") or "")
        if (key, action) in seen:
            errors.append(duplicate_value(path, f"{{{key}, {action}}}"))
        seen.add((key, action))
    if errors:
        raise ValueError(aggregate(errors))
    if defaulting == SYSTEM_DEFAULTING:
        return PodTopologySpreadArgs()
    return PodTopologySpreadArgs(tuple(dict(c) for c in constraints), system_defaulted=False)


def _constraint_errors(path: str, c: Raw) -> list[str]:
    errors: list[str] = []
    max_skew = c.get("maxSkew") or 0
    if max_skew <= 0:
        errors.append(invalid_value(f"{path}.maxSkew", max_skew, "not in valid range (0, inf)"))
    key = str(c.get("topologyKey") or "")
    if not key:
        errors.append(required_value(f"{path}.topologyKey", "can not be empty"))
    errors.extend(invalid_value(f"{path}.topologyKey", key, msg) for msg in qualified_name_errors(key) if key)
    action = c.get("whenUnsatisfiable") or ""
    if not action:
        errors.append(required_value(f"{path}.whenUnsatisfiable", "can not be empty"))
    elif action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        errors.append(unsupported_value(f"{path}.whenUnsatisfiable", action, (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)))
    if c.get("labelSelector") is not None:
        errors.append(
            forbidden(f"{path}.labelSelector", "constraint must not define a selector, as they deduced for each pod")
        )
    return errors


class WorkloadLister(Protocol):
    """The objects whose selectors define which pods a default constraint spreads, as raw API JSON."""

    def services(self, namespace: str) -> Iterable[Raw]: ...

    def controller(self, api_version: str, kind: str, namespace: str, name: str) -> Raw | None:
        """A ReplicationController, ReplicaSet or StatefulSet, or None if unknown."""
        ...


class StaticWorkloads:
    """A WorkloadLister over a fixed list of Services, ReplicationControllers, ReplicaSets and StatefulSets."""

    def __init__(self, objects: Iterable[Raw] = ()) -> None:
        self._services: dict[str, list[Raw]] = {}
        self._controllers: dict[tuple[str, str, str, str], Raw] = {}
        for obj in objects:
            meta: Raw = obj.get("metadata") or {}
            namespace = meta.get("namespace") or ""
            if obj.get("kind") == "Service":
                self._services.setdefault(namespace, []).append(obj)
            else:
                key = (obj.get("apiVersion") or "", obj.get("kind") or "", namespace, meta.get("name") or "")
                self._controllers[key] = obj

    def services(self, namespace: str) -> Iterable[Raw]:
        return self._services.get(namespace, ())

    def controller(self, api_version: str, kind: str, namespace: str, name: str) -> Raw | None:
        return self._controllers.get((api_version, kind, namespace, name))


def _controller_ref(pod: Pod) -> Raw | None:
    for ref in (pod.raw.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            found: Raw = ref
            return found
    return None


def default_selector(pod: Pod, workloads: WorkloadLister) -> LabelSelector:
    """What default constraints select for this pod; selects everything when nothing owns it.

    Services selecting the pod contribute their selectors (a Service without a selector
    selects nothing); the controlling ReplicationController adds its selector map, a
    ReplicaSet or StatefulSet the requirements of its label selector (ignored if malformed).
    """
    merged: dict[str, str] = {}
    for service in workloads.services(pod.namespace):
        wanted: Mapping[str, Any] | None = (service.get("spec") or {}).get("selector")
        if wanted is None:
            continue
        as_strings = {k: str(v) for k, v in wanted.items()}
        if selector_from_set(as_strings).matches(pod.labels):
            merged.update(as_strings)
    requirements: tuple[Requirement, ...] = selector_from_set(merged).requirements
    ref = _controller_ref(pod)
    if ref is None:
        return LabelSelector(requirements)
    api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
    if (api_version, kind) not in (REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET):
        return LabelSelector(requirements)
    owner = workloads.controller(api_version, kind, pod.namespace, ref.get("name") or "")
    if owner is None:
        return LabelSelector(requirements)
    owner_selector = (owner.get("spec") or {}).get("selector")
    if (api_version, kind) == REPLICATION_CONTROLLER:
        merged.update({k: str(v) for k, v in (owner_selector or {}).items()})
        return selector_from_set(merged)
    try:
        parsed = label_selector(owner_selector)
    except SelectorError:
        return LabelSelector(requirements)
    return LabelSelector(requirements + parsed.requirements)
