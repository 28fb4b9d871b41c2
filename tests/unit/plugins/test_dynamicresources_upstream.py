"""Cases of upstream's TestPlugin (dynamicresources_test.go, v1.37.2) ported as a table: the same
names, objects and expected statuses per extension point, run against the plugin with the fake
API client (no scheduler around it).

Ported where they test behaviour with v1.37.2's default gates. Left out: the podgroup-* and
postfilter-*-podgroup cases (GenericWorkload and DRAWorkloadResourceClaims are off), the
node-allocatable-* cases (DRANodeAllocatableResources, alpha), *-feature-disabled /
*-without-*-featuregate / timeout_disabled (gates off), allocated-skip-node-operations-*
(DRAOptionalNodeOperations, alpha), canceled (a Go context), the fail-patch / creation-failure
cases that need an API reactor to fail one specific write (the fake's claim_errors covers one
write, used in test_dynamicresources.py), and the metrics-gatherer checks.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from plugins.dynamicresources import DynamicResources, parse_args
from scheduler.api.fake import FakeApiClient
from scheduler.framework.dra import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from scheduler.framework.types import Code, CycleState, NodeToStatus, Status
from scheduler.testing.builders import make_handle, make_node, make_pod, node_info

NODE = "worker"
DRIVER = "some-driver"
POD = "my-pod"
POD_UID = "1234"
RESOURCE = "my-resource"
CLAIM = f"{POD}-{RESOURCE}"
CLASS = "my-resource-class"
ATTR = "healthy"  # a device attribute the worker's device does not have
EXTENDED = "example.com/gpu"

U = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def slice_(node: str = NODE, *devices: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": d} for d in devices or ("instance-1",)],
        },
    }


def device_class(extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if extended:
        spec["extendedResourceName"] = extended
    return {"metadata": {"name": CLASS, "uid": "class-uid"}, "spec": spec}


def claim(
    *, owned: bool = True, selectors: list[dict[str, Any]] | None = None, class_name: str = CLASS
) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": 1}
    if selectors:
        request["selectors"] = selectors
    meta: dict[str, Any] = {"name": CLAIM, "namespace": "default", "uid": "claim-uid", "resourceVersion": "1"}
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID, "controller": True}]
    return {"metadata": meta, "spec": {"devices": {"requests": [{"name": "req-1", "exactly": request}]}}, "status": {}}


def prioritized_claim(class_name: str) -> dict[str, Any]:
    obj = claim()
    obj["spec"]["devices"]["requests"] = [
        {
            "name": "req-1",
            "firstAvailable": [
                {"name": "subreq-1", "deviceClassName": class_name, "allocationMode": "ExactCount", "count": 1}
            ],
        }
    ]
    return obj


def allocated(obj: dict[str, Any], node: str = NODE, result: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["status"]["allocation"] = {
        "devices": {
            "results": [{"request": "req-1", "driver": DRIVER, "pool": node, "device": "instance-1", **(result or {})}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
            ]
        },
    }
    return obj


def other_claim() -> dict[str, Any]:
    obj = claim(owned=False)
    obj["metadata"].update(name="not-my-claim", uid="other-uid")
    return obj


def pod(*, template: bool = False, in_status: bool = True, extended: bool = False) -> Any:
    builder = make_pod(POD).uid(POD_UID)
    if extended:
        return builder.container(requests={EXTENDED: "1"})
    source = {"resourceClaimTemplateName": "tmpl"} if template else {"resourceClaimName": CLAIM}
    builder = builder.spec(resourceClaims=[{"name": RESOURCE, **source}])
    if template and in_status:
        builder.raw["status"]["resourceClaimStatuses"] = [{"name": RESOURCE, "resourceClaimName": CLAIM}]
    return builder


BROKEN = [{"cel": {"expression": f'device.attributes["{DRIVER}"].{ATTR}'}}]
BINDING = {"bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]}


@dataclass
class Case:
    pod: Any
    claims: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    node_allocatable: dict[str, str] = field(default_factory=dict)
    # extension point -> (code, message); "filter" is the worker's verdict
    want: dict[str, tuple[Code, str] | None] = field(default_factory=dict)
    # the claim as PostFilter or PreBind left it in the fake API: (allocated?, reserved pod names)
    stored: tuple[bool, list[str]] | None = None


def failed_binding() -> dict[str, Any]:
    obj = allocated(claim(), result=BINDING)
    obj["status"]["devices"] = [
        {"driver": DRIVER, "pool": NODE, "device": "instance-1", "conditions": [{"type": "failed", "status": "True"}]}
    ]
    return obj


def timed_out_binding() -> dict[str, Any]:
    obj = allocated(claim(), result=BINDING)
    obj["status"]["allocation"]["allocationTimestamp"] = "2020-01-01T00:00:00Z"
    obj["status"]["devices"] = [{"driver": DRIVER, "pool": NODE, "device": "instance-1"}]
    return obj


CEL_ERROR = (
    f"claim default/{CLAIM}: selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: no such key: "
    f"{ATTR}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)

CASES = {
    "empty": Case(make_pod(POD).uid(POD_UID), want={"prefilter": (Code.SKIP, "")}),
    "claim-reference": Case(pod(), [allocated(claim())], [device_class()], [slice_()], stored=(True, [POD]), want={}),
    "claim-template": Case(
        pod(template=True), [allocated(claim())], [device_class()], [slice_()], stored=(True, [POD]), want={}
    ),
    "missing-claim": Case(
        pod(template=True, in_status=False),
        [allocated(claim()), other_claim()],
        want={"preenqueue": (U, f'pod "default/{POD}": ResourceClaim not created yet')},
    ),
    "deleted-claim": Case(
        pod(template=True),
        [{**allocated(claim()), "metadata": {**claim()["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}],
        want={"preenqueue": (U, f'resourceclaim "{CLAIM}" is being deleted')},
    ),
    "wrong-claim": Case(
        pod(template=True),
        [claim(owned=False)],
        want={
            "preenqueue": (U, f"ResourceClaim default/{CLAIM} was not created for Pod default/{POD} (Pod is not owner)")
        },
    ),
    "with-resources": Case(pod(), [claim()], [device_class()], [slice_()], stored=(True, [POD]), want={}),
    "exhausted-resources-in-informer-cache": Case(
        pod(),
        [claim(), allocated(other_claim())],
        [device_class()],
        [slice_()],
        want={"filter": (U, "cannot allocate all claims"), "postfilter": (Code.UNSCHEDULABLE, "")},
    ),
    "exhausted-resources-in-flight-claim": Case(
        pod(),
        [claim(), other_claim()],
        [device_class()],
        [slice_()],
        in_flight=[allocated(other_claim())],
        want={"filter": (U, "cannot allocate all claims"), "postfilter": (Code.UNSCHEDULABLE, "")},
    ),
    "claim-parameters-CEL-runtime-error": Case(
        pod(), [claim(selectors=BROKEN)], [device_class()], [slice_()], want={"filter": (Code.ERROR, CEL_ERROR)}
    ),
    "missing-class": Case(
        pod(),
        [claim()],
        want={
            "prefilter": (U, f"request req-1: device class {CLASS} does not exist"),
            "postfilter": (Code.UNSCHEDULABLE, ""),
        },
    ),
    "claim-with-prioritized-list-unknown-device-class": Case(
        pod(),
        [prioritized_claim("does-not-exist")],
        want={
            "prefilter": (U, "request req-1/subreq-1: device class does-not-exist does not exist"),
            "postfilter": (Code.UNSCHEDULABLE, ""),
        },
    ),
    "wrong-topology": Case(
        pod(),
        [allocated(claim(), node="other")],
        want={
            "filter": (U, "resourceclaim not available on the node"),
            "postfilter": (Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed"),
        },
        stored=(False, []),
    ),
    "good-topology": Case(pod(), [allocated(claim())], stored=(True, [POD]), want={}),
    "bound-claim-with-failed-binding": Case(
        pod(),
        [failed_binding()],
        [device_class()],
        [slice_()],
        want={
            "filter": (U, "resourceclaim not available on the node"),
            "postfilter": (Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed"),
        },
        stored=(False, []),
    ),
    "bound-claim-with-timed-out-binding": Case(
        pod(),
        [timed_out_binding()],
        [device_class()],
        [slice_()],
        want={
            "filter": (U, "resourceclaim not available on the node"),
            "postfilter": (Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed"),
        },
        stored=(False, []),
    ),
    "extended-resource-name-with-node-resource": Case(
        pod(extended=True), classes=[device_class(EXTENDED)], node_allocatable={EXTENDED: "1"}, want={}
    ),
    "non-DRA-extended-resource-name-with-zero-allocatable": Case(
        pod(extended=True),
        classes=[device_class()],
        slices=[slice_()],
        node_allocatable={EXTENDED: "0"},
        want={"prefilter": (Code.SKIP, "")},
    ),
    "extended-resource-name-no-resource": Case(
        pod(extended=True),
        classes=[device_class(EXTENDED)],
        want={"filter": (U, "cannot allocate all claims"), "postfilter": (Code.UNSCHEDULABLE, "")},
    ),
}


def _verdict(status: Status | None) -> tuple[Code, str] | None:
    if status is None or status.code == Code.SUCCESS:
        return None
    return status.code, status.message


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_plugin(case: Case) -> None:
    node = make_node(NODE).label("kubernetes.io/hostname", NODE).capacity(cpu="10", memory="10Gi", pods="110")
    if case.node_allocatable:
        node = node.capacity(case.node_allocatable)
    info = node_info(node.obj())
    handle = make_handle(info)
    client = handle.client
    assert isinstance(client, FakeApiClient)
    for obj in case.claims:
        handle.dra.upsert(RESOURCE_CLAIM, obj)
        client.resource_claims[f"default/{obj['metadata']['name']}"] = copy.deepcopy(obj)
    for obj in case.classes:
        handle.dra.upsert(DEVICE_CLASS, obj)
    for obj in case.slices:
        handle.dra.upsert(RESOURCE_SLICE, obj)
    for obj in case.in_flight:
        handle.dra.claims.signal_pending_allocation(obj["metadata"]["uid"], obj)
    plugin = DynamicResources(parse_args({}), handle)
    p = case.pod.obj()
    got: dict[str, tuple[Code, str] | None] = {}

    async def cycle() -> None:
        got["preenqueue"] = _verdict(plugin.pre_enqueue(p))
        if got["preenqueue"] is not None:
            return
        state = CycleState()
        got["prefilter"] = _verdict(plugin.pre_filter(state, p, [info])[1])
        if got["prefilter"] is None:
            got["filter"] = _verdict(plugin.filter(state, p, info))
        rejected = [got.get(point) for point in ("prefilter", "filter")]
        if any(v is not None and v[0] not in (Code.SKIP, Code.ERROR) for v in rejected):
            got["postfilter"] = _verdict(plugin.post_filter(state, p, NodeToStatus())[1])
            await asyncio.sleep(0.01)  # PostFilter's write runs beside the cycle
        elif all(v is None or v[0] == Code.SKIP for v in rejected):
            got["reserve"] = _verdict(plugin.reserve(state, p, NODE))
            got["prebind"] = _verdict(await plugin.pre_bind(state, p, NODE))

    asyncio.run(cycle())
    want = {point: case.want.get(point) for point in got}
    assert got == want
    if case.stored is not None:
        stored = client.resource_claims[f"default/{CLAIM}"]
        status = stored.get("status") or {}
        reserved = [entry["name"] for entry in status.get("reservedFor") or ()]
        assert (status.get("allocation") is not None, reserved) == case.stored
