"""Extended resources backed by DRA (DRAExtendedResource, GA in v1.37.2), as kube's
extendeddynamicresources.go: a pod asking for `example.com/gpu: 1` (or the implicit
`deviceclass.resource.kubernetes.io/<class>`) that a node does not advertise, where a DeviceClass
backs that name, gets a special claim — in memory until PreBind creates it as
`<pod>-extended-resources-<suffix>` — whose requests are built per node from the containers'
requests, and `status.extendedResourceClaimStatus` naming it and mapping containers to requests.

Pure functions except create_claim / delete_claim / patch_pod_status, which write through the
client they are given (PreBind, Unreserve, PostFilter only).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.dynamicresources.claims import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    SPECIAL_CLAIM_NAME,
    meta,
    name_of,
    namespace_of,
)
from plugins.helper.resource_allocation import is_extended_resource
from scheduler.api.client import ApiClient, ApiError
from scheduler.framework.dra import DEVICE_CLASS_PREFIX, FINALIZER, ClaimObject, DraManager
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import Pod
from scheduler.model.quantity import QuantityError, to_int

__all__ = ["SPECIAL_CLAIM_NAME", "ExtendedProblem", "ExtendedRequests"]

# How long PreBind waits for the informer to bring back the claim it created (kube: 120 s).
ASSUME_EXTENDED_CLAIM_TIMEOUT_SECONDS = 120.0
ASSUME_POLL_SECONDS = 0.05


class ExtendedProblem(Exception):
    """Why the pod's extended resources cannot be served on a node (kube's message as str)."""


def is_dra_extended_resource_name(name: str) -> bool:
    return is_extended_resource(name) or name.startswith(DEVICE_CLASS_PREFIX)


@dataclass(frozen=True)
class ExtendedRequests:
    """The pod's scalar requests (name -> amount) when at least one is backed by a DeviceClass."""

    scalar: Mapping[str, int]


def pod_extended_requests(pod: Pod, dra: DraManager) -> ExtendedRequests | None:
    scalar = pod.requests.scalar
    if any(
        amount and is_dra_extended_resource_name(name) and dra.device_class_for_resource(name) is not None
        for name, amount in scalar.items()
    ):
        return ExtendedRequests(dict(scalar))
    return None


def find_or_make_claim(pod: Pod, claims: Sequence[ClaimObject]) -> ClaimObject:
    """The claim an earlier cycle created for the pod's extended resources, else the in-memory one.
    `claims`: the claims the pod owns (ClaimTracker.owned_by), or any superset of them."""
    for claim in claims:
        if (meta(claim).get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
            continue
        for ref in meta(claim).get("ownerReferences") or ():
            if ref.get("name") == pod.name and ref.get("controller") and ref.get("uid") == pod.uid:
                return claim
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": SPECIAL_CLAIM_NAME,
            "uid": str(uuid.uuid4()),
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {},
    }


# What node_claim made for a set of DRA-backed amounts: nodes alike (the resources device plugins
# serve on them) share one special claim in a cycle.
NodeClaims = dict[frozenset[tuple[str, int]], tuple[ClaimObject, list[dict[str, str]]]]


def node_claim(
    pod: Pod,
    claim: ClaimObject,
    requests: ExtendedRequests,
    node_info: NodeInfo,
    dra: DraManager,
    made: NodeClaims | None = None,
) -> tuple[ClaimObject | None, list[dict[str, str]]]:
    """The special claim with this node's device requests and the container mappings; (None, [])
    when device plugins on the node serve everything. Raises ExtendedProblem. `made` (one per pod
    and claim) keeps what was made for other nodes: the same amounts give the same claim, to be read,
    not changed."""
    if ((claim.get("spec") or {}).get("devices") or {}).get("requests") is not None:
        raise ExtendedProblem("cannot schedule extended resource claim")
    backed: dict[str, int] = {}
    allocatable = node_info.allocatable.scalar
    for name, amount in requests.scalar.items():
        if not amount or not is_dra_extended_resource_name(name):
            continue
        has = name in allocatable
        if dra.device_class_for_resource(name) is not None and not allocatable.get(name):
            backed[name] = amount
        elif not has:
            raise ExtendedProblem("cannot fit resource")
    if not backed:
        return None, []
    if (claim.get("status") or {}).get("allocation") is not None:
        return None, []
    key = frozenset(backed.items())
    if made is not None and (known := made.get(key)) is not None:
        return known
    device_requests, mappings = requests_and_mappings(pod, backed, dra)
    node = {**claim, "spec": {"devices": {"requests": device_requests}}}
    if made is not None:
        made[key] = (node, mappings)
    return node, mappings


def _container_amount(container: Mapping[str, Any], resource: str) -> int:
    value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if value is None:
        return 0
    try:
        return to_int(value)
    except QuantityError:
        return 0


def _request_for_container(
    index: int,
    container: Mapping[str, Any],
    resource: str,
    class_name: str,
    reusable: Sequence[dict[str, Any] | None],
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """A container's device request (None when earlier long-lived containers' requests cover it:
    an init container reuses what the containers after it will hold) and its mappings."""
    wanted = _container_amount(container, resource)
    if wanted == 0:
        return None, []
    mappings = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += int(request["exactly"]["count"])
        mappings.append(
            {"containerName": container.get("name", ""), "resourceName": resource, "requestName": request["name"]}
        )
        if covered >= wanted:
            return None, mappings
    names = sorted((container.get("resources") or {}).get("requests") or {})
    position = names.index(resource) if resource in names else 0
    name = f"container-{index}-request-{position}"
    request = {
        "name": name,
        "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": wanted - covered},
    }
    mappings.append({"containerName": container.get("name", ""), "resourceName": resource, "requestName": name})
    return request, mappings


def requests_and_mappings(
    pod: Pod, backed: Mapping[str, int], dra: DraManager
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """kube's createRequestsAndMappings: one request per long-lived container (regular containers and
    sidecars) and one for the largest short-lived init container, per resource, sorted by name."""
    init = list(pod.spec.get("initContainers") or ())
    containers = [*init, *(pod.spec.get("containers") or ())]
    long_lived = [i for i, c in enumerate(containers) if i >= len(init) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(init)) if i not in long_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(backed):
        device_class = dra.device_class_for_resource(resource)
        if device_class is None:
            continue
        class_name = name_of(device_class)
        long_requests: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            long_requests[i], found = _request_for_container(i, containers[i], resource, class_name, ())
            long_mappings.extend(found)
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            request, found = _request_for_container(i, containers[i], resource, class_name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings.extend(found)
        if largest is not None and len(short_names) > 1:
            # Init containers run one after another: the largest request serves them all.
            short_names.discard(largest["name"])
            for mapping in short_mappings:
                if mapping["requestName"] in short_names:
                    mapping["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in long_requests if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


async def create_claim(client: ApiClient, claim: ClaimObject) -> ClaimObject:
    """Create the node's special claim under its generated name (with the finalizer: PreBind then
    writes only the status). Raises ApiError."""
    metadata = {k: v for k, v in meta(claim).items() if k not in ("name", "uid", "resourceVersion")}
    metadata["finalizers"] = [FINALIZER]
    body = {k: v for k, v in claim.items() if k not in ("metadata", "status")}
    return await client.create_resource_claim({**body, "metadata": metadata})


async def wait_in_tracker(dra: DraManager, claim: ClaimObject) -> bool:
    """Wait until the informer has the created claim, then assume the written version (kube's
    waitForExtendedClaimInAssumeCache): until then its devices would look free to the next pod."""
    deadline = time.monotonic() + ASSUME_EXTENDED_CLAIM_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if dra.claims.get(namespace_of(claim), name_of(claim)) is not None:
            with contextlib.suppress(ValueError):  # the informer already has a newer version
                dra.claims.assume(claim)
            return True
        await asyncio.sleep(ASSUME_POLL_SECONDS)
    return False


async def patch_pod_status(client: ApiClient, pod: Pod, claim: ClaimObject, mappings: list[dict[str, str]]) -> None:
    if not mappings:
        raise ExtendedProblem(
            f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus"
        )
    await client.patch_pod_status_fields(
        pod,
        {"extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": name_of(claim)}},
    )


async def delete_claim(client: ApiClient, claim: ClaimObject) -> None:
    """Drop the scheduler's finalizer, then delete the claim (a gone claim is fine). Raises ApiError."""
    try:
        current = await client.get_resource_claim(namespace_of(claim), name_of(claim))
        finalizers = [f for f in meta(current).get("finalizers") or () if f != FINALIZER]
        if len(finalizers) != len(meta(current).get("finalizers") or ()):
            await client.update_resource_claim({**current, "metadata": {**meta(current), "finalizers": finalizers}})
        await client.delete_resource_claim(current)
    except ApiError as exc:
        if not exc.not_found:
            raise
