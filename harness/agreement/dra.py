"""DRA objects in agreement scenarios: the short forms of DeviceClasses, ResourceSlices,
ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1), a pending pod's `claims:` key, and
what a scenario's claims look like once a scheduler has been at them (ClaimOutcome).

Owns: turning a scenario's short keys into the raw objects the apiserver takes, and reading back,
from a pod and its claims as the apiserver returns them, which devices each claim got.
Must never: talk to the API (run.py does), or decide what counts as agreement (compare.py does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.controlplane import deep_merge

Raw = dict[str, Any]

API_VERSION = "resource.k8s.io/v1"
# The driver a short slice or device class means when it names none.
DRIVER = "gpu.example.com"
# The key a pod's claim for DRA-backed extended resources is filed under (its name has a random
# suffix: `<pod>-extended-resources-<suffix>`), beside the pod's own spec.resourceClaims names.
EXTENDED_RESOURCES = "<extended resources>"


class DraFormatError(ValueError):
    """A DRA short form that does not follow the format; the message names the field."""


def _check_keys(short: Mapping[str, Any], allowed: set[str], where: str) -> None:
    if not isinstance(short, Mapping):
        raise DraFormatError(f"{where}: not a mapping")
    unknown = sorted(set(short) - allowed)
    if unknown:
        raise DraFormatError(f"{where}: unknown key(s) {unknown}; known: {sorted(allowed)}")


def _selectors(expressions: Iterable[Any]) -> list[Raw]:
    return [{"cel": {"expression": str(expression)}} for expression in expressions]


# --------------------------------------------------------------------------- DeviceClass

_CLASS_KEYS = {"selector", "selectors", "extendedResourceName", "spec"}


def device_class_object(name: str, short: Any, where: str = "deviceClass") -> Raw:
    """A DeviceClass from `name: <CEL expression>` or `name: {selector | selectors,
    extendedResourceName, spec (merged in last, raw)}`; no selector matches every device."""
    if short is None or isinstance(short, str):
        short = {} if short is None else {"selector": short}
    _check_keys(short, _CLASS_KEYS, where)
    expressions = list(short.get("selectors") or ())
    if "selector" in short:
        expressions.insert(0, short["selector"])
    spec: Raw = {}
    if expressions:
        spec["selectors"] = _selectors(expressions)
    if "extendedResourceName" in short:
        spec["extendedResourceName"] = str(short["extendedResourceName"])
    spec = deep_merge(spec, short.get("spec") or {})
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": {"name": str(name)}, "spec": spec}


# --------------------------------------------------------------------------- ResourceSlice


def _attribute(value: Any) -> Raw:
    """A device attribute from a plain value (bool, int, string) or a raw mapping ({version: ...})."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def _capacity(value: Any) -> Raw:
    """A device capacity from a quantity, or a raw mapping (`{value, requestPolicy}`)."""
    return dict(value) if isinstance(value, Mapping) else {"value": str(value)}


def _counters(short: Mapping[str, Any]) -> Raw:
    return {str(name): {"value": str(value)} for name, value in short.items()}


_DEVICE_KEYS = {"name", "count", "attributes", "capacity", "consumesCounters", "taints", "nodeName"}
_DEVICE_KEYS |= {"nodeSelector", "allNodes", "allowMultipleAllocations", "bindsToNode"}
_DEVICE_KEYS |= {"bindingConditions", "bindingFailureConditions"}


def _devices(short: Any, where: str) -> list[Raw]:
    """One device from a name or a mapping: attributes (plain values), capacity (quantities),
    consumesCounters ({counter set: {counter: quantity}}), the rest raw; `count: N` repeats it as
    <name>-0 ... <name>-(N-1)."""
    if isinstance(short, str):
        return [{"name": short}]
    _check_keys(short, _DEVICE_KEYS, where)
    device: Raw = {k: v for k, v in short.items() if k not in ("name", "count", "attributes", "capacity")}
    if short.get("attributes"):
        device["attributes"] = {str(k): _attribute(v) for k, v in short["attributes"].items()}
    if short.get("capacity"):
        device["capacity"] = {str(k): _capacity(v) for k, v in short["capacity"].items()}
    if "consumesCounters" in short:
        device["consumesCounters"] = [
            {"counterSet": str(counter_set), "counters": _counters(counters)}
            for counter_set, counters in short["consumesCounters"].items()
        ]
    name = str(short["name"])
    if "count" not in short:
        return [{"name": name, **device}]
    return [{"name": f"{name}-{i}", **device} for i in range(int(short["count"]))]


_SLICE_KEYS = {"name", "driver", "pool", "node", "allNodes", "nodeSelector", "perDeviceNodeSelection"}
_SLICE_KEYS |= {"generation", "sliceCount", "devices", "sharedCounters", "spec"}


def resource_slice_object(short: Mapping[str, Any], where: str = "resourceSlice") -> Raw:
    """A ResourceSlice from short keys: driver (gpu.example.com); one of node (spec.nodeName),
    allNodes, nodeSelector (raw), perDeviceNodeSelection; pool (the node's name unless given),
    generation (1) and sliceCount (resourceSliceCount, 1); name (<pool>-<driver> unless given);
    devices (see _devices); sharedCounters ({counter set: {counter: quantity}}); spec merged in last."""
    _check_keys(short, _SLICE_KEYS, where)
    placements = [key for key in ("node", "allNodes", "nodeSelector", "perDeviceNodeSelection") if key in short]
    if len(placements) != 1:
        raise DraFormatError(f"{where}: exactly one of node, allNodes, nodeSelector, perDeviceNodeSelection")
    driver = str(short.get("driver", DRIVER))
    if "pool" not in short and "node" not in short:
        raise DraFormatError(f"{where}.pool: a slice that is not a node's own needs a pool name")
    pool = str(short.get("pool", short.get("node")))
    spec: Raw = {
        "driver": driver,
        "pool": {
            "name": pool,
            "generation": int(short.get("generation", 1)),
            "resourceSliceCount": int(short.get("sliceCount", 1)),
        },
    }
    if "node" in short:
        spec["nodeName"] = str(short["node"])
    elif "nodeSelector" in short:
        spec["nodeSelector"] = dict(short["nodeSelector"])
    else:
        key = placements[0]
        spec[key] = bool(short[key])
    devices = [d for i, item in enumerate(short.get("devices") or ()) for d in _devices(item, f"{where}.devices[{i}]")]
    if devices:
        spec["devices"] = devices
    if short.get("sharedCounters"):
        spec["sharedCounters"] = [
            {"name": str(name), "counters": _counters(counters)} for name, counters in short["sharedCounters"].items()
        ]
    spec = deep_merge(spec, short.get("spec") or {})
    name = str(short.get("name", f"{pool}-{driver}"))
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


# --------------------------------------------------------------------------- claims

_REQUEST_KEYS = {"name", "class", "count", "mode", "selectors", "adminAccess", "tolerations", "capacity"}


def _exact_request(short: Mapping[str, Any], where: str) -> Raw:
    """The device part of a request: class (deviceClassName), count, mode (allocationMode),
    selectors (CEL expressions), adminAccess, tolerations (raw), capacity ({name: quantity})."""
    if "class" not in short:
        raise DraFormatError(f"{where}.class: a request names its DeviceClass")
    out: Raw = {"deviceClassName": str(short["class"])}
    if short.get("selectors"):
        out["selectors"] = _selectors(short["selectors"])
    if "mode" in short:
        out["allocationMode"] = str(short["mode"])
    if "count" in short:
        out["count"] = int(short["count"])
    if "adminAccess" in short:
        out["adminAccess"] = bool(short["adminAccess"])
    if short.get("tolerations"):
        out["tolerations"] = list(short["tolerations"])
    if short.get("capacity"):
        out["capacity"] = {"requests": {str(k): str(v) for k, v in short["capacity"].items()}}
    return out


def _request(short: Mapping[str, Any], where: str) -> Raw:
    """A DeviceRequest: `exactly` from the short keys, or `firstAvailable` (a list of sub-requests
    in the same short keys, each with its name)."""
    if "firstAvailable" in short:
        _check_keys(short, {"name", "firstAvailable"}, where)
        subrequests = []
        for i, sub in enumerate(short["firstAvailable"]):
            here = f"{where}.firstAvailable[{i}]"
            _check_keys(sub, _REQUEST_KEYS - {"adminAccess"}, here)
            subrequests.append({"name": str(sub["name"]), **_exact_request(sub, here)})
        return {"name": str(short["name"]), "firstAvailable": subrequests}
    _check_keys(short, _REQUEST_KEYS, where)
    return {"name": str(short["name"]), "exactly": _exact_request(short, where)}


_CLAIM_KEYS = {"name", "namespace", "requests", "constraints", "config", "metadata", "status"}


def claim_spec(short: Mapping[str, Any], where: str) -> Raw:
    requests = [_request(r, f"{where}.requests[{i}]") for i, r in enumerate(short.get("requests") or ())]
    if not requests:
        raise DraFormatError(f"{where}.requests: a claim asks for at least one request")
    devices: Raw = {"requests": requests}
    for key in ("constraints", "config"):
        if short.get(key):
            devices[key] = list(short[key])
    return {"devices": devices}


def claim_object(short: Mapping[str, Any], where: str = "claim") -> Raw:
    """A ResourceClaim from short keys: name, namespace (default), requests (_request), constraints
    and config (raw), metadata merged in; `status` (raw, e.g. an allocation) is written through the
    status subresource after the claim is created."""
    _check_keys(short, _CLAIM_KEYS, where)
    metadata = deep_merge(
        {"name": str(short["name"]), "namespace": str(short.get("namespace", "default"))}, short.get("metadata") or {}
    )
    claim: Raw = {"apiVersion": API_VERSION, "kind": "ResourceClaim", "metadata": metadata}
    claim["spec"] = claim_spec(short, where)
    if "status" in short:
        claim["status"] = dict(short["status"])
    return claim


def claim_template_object(short: Mapping[str, Any], where: str = "claimTemplate") -> Raw:
    """A ResourceClaimTemplate from the claim short keys (no status)."""
    _check_keys(short, _CLAIM_KEYS - {"status"}, where)
    metadata = deep_merge(
        {"name": str(short["name"]), "namespace": str(short.get("namespace", "default"))}, short.get("metadata") or {}
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": {"spec": claim_spec(short, where)},
    }


def pod_claims(short: Sequence[Any], where: str) -> list[Raw]:
    """A pod's spec.resourceClaims from `claims:`: a name (the ResourceClaim of that name), or
    `{name, claim}` / `{name, template}` (resourceClaimName / resourceClaimTemplateName)."""
    out = []
    for i, item in enumerate(short):
        here = f"{where}[{i}]"
        if isinstance(item, str):
            out.append({"name": item, "resourceClaimName": item})
            continue
        _check_keys(item, {"name", "claim", "template"}, here)
        sources = [key for key in ("claim", "template") if key in item]
        if len(sources) != 1:
            raise DraFormatError(f"{here}: exactly one of claim, template")
        field = "resourceClaimName" if sources[0] == "claim" else "resourceClaimTemplateName"
        out.append({"name": str(item["name"]), field: str(item[sources[0]])})
    return out


# --------------------------------------------------------------------------- what a claim got


@dataclass(frozen=True, order=True)
class AllocatedDevice:
    """One entry of status.allocation.devices.results, without what differs between runs by design
    (shareID is a fresh UID; tolerations and binding conditions are copied from the request)."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    consumed_capacity: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        text = f"{self.request}: {self.driver}/{self.pool}/{self.device}"
        if self.admin_access:
            text += " (admin access)"
        if self.consumed_capacity:
            text += " consumed " + ", ".join(f"{k}={v}" for k, v in self.consumed_capacity)
        return text


@dataclass(frozen=True)
class ClaimOutcome:
    """A pod's claim as the apiserver has it after the pod settled: filed under the pod's name for
    it (spec.resourceClaims[].name, or EXTENDED_RESOURCES), the allocated devices (sorted; empty
    and `allocated` False when not allocated), and the pods it is reserved for (names, sorted).
    `claim` is the ResourceClaim's own name, "" when the pod's claim does not exist (yet)."""

    key: str
    claim: str
    allocated: bool = False
    devices: tuple[AllocatedDevice, ...] = ()
    reserved_for: tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.claim:
            return f"{self.key}: no claim"
        state = "[" + "; ".join(str(d) for d in self.devices) + "]" if self.allocated else "not allocated"
        reserved = f", reserved for {list(self.reserved_for)}" if self.reserved_for else ""
        return f"{self.key}: {state}{reserved}"


def claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, ResourceClaim name) of every claim of `pod`: spec.resourceClaims in order (a
    template's claim through status.resourceClaimStatuses, "" while the controller has not made
    it), then the claim the scheduler made for DRA-backed extended resources, if any."""
    status = pod.get("status") or {}
    generated = {
        str(entry.get("name")): str(entry.get("resourceClaimName") or "")
        for entry in status.get("resourceClaimStatuses") or ()
    }
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = str(entry.get("name"))
        if entry.get("resourceClaimName"):
            out.append((name, str(entry["resourceClaimName"])))
        else:
            out.append((name, generated.get(name, "")))
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        out.append((EXTENDED_RESOURCES, str(extended)))
    return out


def claim_outcome(key: str, claim: Mapping[str, Any] | None) -> ClaimOutcome:
    """What `claim` (the raw ResourceClaim, None when it does not exist) got."""
    if claim is None:
        return ClaimOutcome(key, "")
    name = str(claim["metadata"]["name"])
    status = claim.get("status") or {}
    reserved = tuple(sorted(str(ref.get("name")) for ref in status.get("reservedFor") or ()))
    allocation = status.get("allocation")
    if allocation is None:
        return ClaimOutcome(key, name, reserved_for=reserved)
    devices = tuple(
        sorted(
            AllocatedDevice(
                request=str(result.get("request")),
                driver=str(result.get("driver")),
                pool=str(result.get("pool")),
                device=str(result.get("device")),
                admin_access=bool(result.get("adminAccess")),
                consumed_capacity=tuple(
                    sorted((str(k), str(v)) for k, v in (result.get("consumedCapacity") or {}).items())
                ),
            )
            for result in (allocation.get("devices") or {}).get("results") or ()
        )
    )
    return ClaimOutcome(key, name, True, devices, reserved)


def as_scheduled(
    created: Mapping[str, Any], current: Mapping[str, Any], claims: Sequence[Raw]
) -> tuple[Raw, list[Raw]]:
    """The pod and its template claims as a scheduler met them, for a replay over the cluster
    captured before the pod was created: the pod as created with the status.resourceClaimStatuses
    the controller wrote since, and the claims made from its templates (among `claims`, the pod's
    claims as the apiserver has them now) without the status a scheduler gave them since."""
    statuses = (current.get("status") or {}).get("resourceClaimStatuses")
    pod = dict(created)
    if statuses:
        pod["status"] = {**(created.get("status") or {}), "resourceClaimStatuses": list(statuses)}
    generated = {str(entry.get("resourceClaimName")) for entry in statuses or () if entry.get("resourceClaimName")}
    made = [
        {k: v for k, v in claim.items() if k != "status"} for claim in claims if claim["metadata"]["name"] in generated
    ]
    return pod, made
