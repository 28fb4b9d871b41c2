"""A pod's ResourceClaims: resolving them from the pod (kube's resourceclaim.Name / IsForPod) and
the claim store a cycle works on (kube's claims.go). Pure functions over the claim tracker's view;
never writes, never calls the API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.framework.dra import ClaimObject, ClaimTracker, allocation_of, uid_of
from scheduler.model.objects import Pod

# The in-memory name of the special claim for extended resources until PreBind creates it.
SPECIAL_CLAIM_NAME = "<extended-resources>"
# Marks a claim the scheduler created for a pod's extended resources (resourceapi annotation).
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


class ClaimProblem(Exception):
    """Why a pod cannot be scheduled now because of its claims (kube's message as str)."""


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("metadata") or {}
    return value


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("status") or {}
    return value


def requests_of(claim: ClaimObject) -> Sequence[Mapping[str, Any]]:
    requests: Sequence[Mapping[str, Any]] = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()
    return requests


def pod_claim_name(pod: Pod, pod_claim: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The claim's name and whether its owner must be checked (it came from a template); None when
    no claim was generated for a template entry on purpose. Raises ClaimProblem."""
    if pod_claim.get("resourceClaimName") is not None:
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName") is not None:
        for status in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or ():
            if status.get("name") == pod_claim.get("name"):
                name = status.get("resourceClaimName")
                return (str(name) if name is not None else None), True
        raise ClaimProblem(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
    raise ClaimProblem(
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pod_claim.get("name", "")}": '
        "none of the supported fields are set"
    )


def is_controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    return any(ref.get("controller") and ref.get("uid") == owner_uid for ref in meta(obj).get("ownerReferences") or ())


def check_for_pod(pod: Pod, claim: ClaimObject) -> None:
    """kube's resourceclaim.IsForPod (PodGroup owners are off with v1.37.2's default gates)."""
    namespace, name = namespace_of(claim), name_of(claim)
    if namespace != pod.namespace:
        raise ClaimProblem(
            f"ResourceClaim {namespace}/{name} is not in the same namespace as Pod {pod.namespace}/{pod.name}"
        )
    if not is_controlled_by(claim, pod.uid):
        raise ClaimProblem(
            f"ResourceClaim {namespace}/{name} was not created for Pod {pod.namespace}/{pod.name} (Pod is not owner)"
        )


def pod_resource_claims(pod: Pod, tracker: ClaimTracker) -> list[ClaimObject]:
    """Every claim of the pod that exists, in spec order (kube's foreachPodResourceClaim);
    raises ClaimProblem with kube's message for a missing, deleted or foreign claim."""
    claims = []
    for pod_claim in pod.spec.get("resourceClaims") or ():
        name, check_owner = pod_claim_name(pod, pod_claim)
        if name is None:
            continue
        claim = tracker.get(pod.namespace, name)
        if claim is None:
            raise ClaimProblem(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if meta(claim).get("deletionTimestamp"):
            raise ClaimProblem(f'resourceclaim "{name}" is being deleted')
        if check_owner:
            check_for_pod(pod, claim)
        claims.append(claim)
    return claims


def reserved_for_pod(pod: Pod, claim: ClaimObject) -> bool:
    return any(entry.get("uid") == pod.uid for entry in status_of(claim).get("reservedFor") or ())


def pod_reference(pod: Pod) -> dict[str, str]:
    """The reservedFor entry of a pod (resourceapi.ResourceClaimConsumerReference)."""
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def claim_ref(claim: ClaimObject) -> str:
    """klog.KObj's rendering."""
    return f"{namespace_of(claim)}/{name_of(claim)}"


@dataclass
class ClaimStore:
    """All claims of a pod, user claims first, then the special claim for extended resources if any.
    Instances are read-only informer objects; PreBind replaces them with what it wrote."""

    claims: list[ClaimObject] = field(default_factory=list)
    num_user: int = 0
    # The special claim's uid at PreFilter: its in-flight allocation stays under it after PreBind
    # created the claim (which the apiserver gives another uid).
    initial_extended_uid: str = ""

    @classmethod
    def of(cls, user_claims: list[ClaimObject], extended: ClaimObject | None) -> ClaimStore:
        claims = list(user_claims)
        if extended is not None:
            claims.append(extended)
        return cls(claims, len(user_claims), uid_of(extended) if extended is not None else "")

    def empty(self) -> bool:
        return not self.claims

    def __len__(self) -> int:
        return len(self.claims)

    def all(self) -> Iterator[tuple[int, ClaimObject]]:
        return iter(enumerate(self.claims))

    def user_claims(self) -> Iterator[tuple[int, ClaimObject]]:
        return iter(enumerate(self.claims[: self.num_user]))

    def to_allocate(self) -> Iterator[tuple[int, ClaimObject]]:
        return ((i, claim) for i, claim in enumerate(self.claims) if allocation_of(claim) is None)

    def extended_claim(self) -> ClaimObject | None:
        return self.claims[self.num_user] if len(self.claims) > self.num_user else None

    def is_extended(self, index: int) -> bool:
        return index >= self.num_user

    def no_user_claim(self) -> bool:
        return self.num_user == 0


def same_claim(a: ClaimObject, b: ClaimObject) -> bool:
    return uid_of(a) == uid_of(b)
