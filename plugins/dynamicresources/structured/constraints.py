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

    def value_of(self, device: Mapping[str, Any], device_id: DeviceID) -> tuple[str | None, Any] | None:
        """The device's (value type, value) of the attribute; None when it lacks the attribute."""
        attribute = lookup_attribute(device, device_id, self.attribute)
        if attribute is None:
            return None
        kind = _kind(attribute)
        return kind, attribute[kind] if kind else None


class MatchAttribute(_Scoped):
    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str | None, Any] | None = None
        self.count = 0

    def add(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> bool:
        if not self.applies(request, sub_request):
            return True
        value = self.value_of(device, device_id)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        # A value of no known type matches nothing, not even another such value.
        if value[0] is None or value != self.value:
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
        value = self.value_of(device, device_id)
        if value is None:
            return False
        # A value of no known type is distinct from nothing, except when it comes first (kube
        # compares against the earlier values only).
        if (value[0] is None and self.values) or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, sub_request: str, device: Mapping[str, Any], device_id: DeviceID) -> None:
        if self.applies(request, sub_request):
            self.values.pop()
