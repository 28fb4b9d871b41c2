"""Claim constraints: `matchAttribute` and `distinctAttribute` (constraint.go, allocator_incubating.go).

Owns the per-claim bookkeeping while the search adds and removes devices. Constraints are
monotonic: once a device breaks one, adding more devices never mends it, so the search may stop
there. Every successful add is undone by exactly one remove with the same arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .types import DeviceID

# The value fields of a v1 DeviceAttribute, in the order kube's switch checks them.
_VALUE_KINDS = ("string", "int", "bool", "version")


def lookup_attribute(device: Mapping[str, Any], device_id: DeviceID, name: str) -> Mapping[str, Any] | None:
    """A device attribute by fully qualified name; a bare key counts for the driver's own domain."""
    attributes: Mapping[str, Mapping[str, Any]] = device.get("attributes") or {}
    found = attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id.driver:
        return None
    return attributes.get(ident)


def _kind(attribute: Mapping[str, Any]) -> str | None:
    for kind in _VALUE_KINDS:
        if attribute.get(kind) is not None:
            return kind
    return None


class Constraint(Protocol):
    def add(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> bool: ...

    def remove(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> None: ...


class _Scoped:
    """Which requests a constraint applies to: all when none are named; a named request covers
    its subrequests, and a subrequest may be named as `request/subrequest`."""

    def __init__(self, requests: list[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(sub_request) and f"{request}/{sub_request}" in self.requests


class MatchAttribute(_Scoped):
    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def add(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> bool:
        if not self.applies(request, sub_request):
            return True
        attribute = lookup_attribute(device, device_id, self.attribute)
        if attribute is None:
            return False
        kind = _kind(attribute)
        if self.count == 0:
            self.value = (kind or "", attribute.get(kind) if kind else None)
            self.count = 1
            return True
        if kind is None or self.value is None or self.value[0] != kind or self.value[1] != attribute[kind]:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> None:
        if self.applies(request, sub_request):
            self.count -= 1


class DistinctAttribute(_Scoped):
    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[tuple[str | None, Any]] = []

    def add(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> bool:
        if not self.applies(request, sub_request):
            return True
        attribute = lookup_attribute(device, device_id, self.attribute)
        if attribute is None:
            return False
        kind = _kind(attribute)
        if kind is None:
            # An attribute without a known value type never satisfies the constraint, unless it
            # is the first (kube compares against the earlier ones only).
            if self.values:
                return False
        elif (kind, attribute[kind]) in self.values:
            return False
        self.values.append((kind, attribute.get(kind) if kind else None))
        return True

    def remove(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> None:
        if self.applies(request, sub_request):
            self.values.pop()
