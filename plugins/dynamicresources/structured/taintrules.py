"""DeviceTaintRules applied to ResourceSlices, as kube's resourceslice tracker patches them.

Owns the matching: a rule without `deviceSelector` taints nothing; `driver`, `pool` and `device`
each narrow it when set; a matching device gets the rule's taint appended to its own. The
allocator then sees those taints like any other (tolerated or not by the request).
Must never modify a slice it is given: a patched slice is a copy, an untouched one is returned
as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Raw = Mapping[str, Any]


def _taints_for(slice_: Raw, rules: Sequence[Raw]) -> dict[int, list[Raw]]:
    spec = slice_.get("spec") or {}
    driver = spec.get("driver") or ""
    pool = (spec.get("pool") or {}).get("name") or ""
    added: dict[int, list[Raw]] = {}
    for rule in rules:
        rule_spec = rule.get("spec") or {}
        selector = rule_spec.get("deviceSelector")
        if selector is None:
            continue
        if selector.get("driver") is not None and selector["driver"] != driver:
            continue
        if selector.get("pool") is not None and selector["pool"] != pool:
            continue
        for index, device in enumerate(spec.get("devices") or ()):
            if selector.get("device") is not None and selector["device"] != device.get("name"):
                continue
            added.setdefault(index, []).append(rule_spec.get("taint") or {})
    return added


def apply_device_taint_rules(slices: Sequence[Raw], rules: Sequence[Raw]) -> list[Raw]:
    """The slices with every matching rule's taint added to the devices it selects."""
    if not rules:
        return list(slices)
    patched: list[Raw] = []
    for slice_ in slices:
        added = _taints_for(slice_, rules)
        if not added:
            patched.append(slice_)
            continue
        spec = dict(slice_.get("spec") or {})
        devices = list(spec.get("devices") or ())
        for index, taints in added.items():
            device = dict(devices[index])
            device["taints"] = [*(device.get("taints") or ()), *taints]
            devices[index] = device
        spec["devices"] = devices
        patched.append({**slice_, "spec": spec})
    return patched
