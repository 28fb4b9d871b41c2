"""What NodeResourcesFit and NodeResourcesBalancedAllocation both read to score a node (the shared
half of kube's noderesources/resource_allocation.go): which resource names are scalar, and a
node's allocatable and requested amount of one resource. Reads a NodeInfo; never changes one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from scheduler.framework import signing
from scheduler.framework.dra import DraManager
from scheduler.framework.signing import SignFragment
from scheduler.framework.types import NodeInfo, Status
from scheduler.model.objects import CPU, EPHEMERAL_STORAGE, MEMORY, Pod, Resource


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: qualified, and not in any *kubernetes.io/ namespace."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, *kubernetes.io/-prefixed, attachable volumes."""
    return (
        is_extended_resource(name) or name.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in name
    )


def allocatable_and_requested(node_info: NodeInfo, name: str, pod_request: int, *, non_zero: bool) -> tuple[int, int]:
    """(allocatable, requested by the node's pods) of one resource; (0, 0) leaves it out of the score.

    `non_zero` counts containers without cpu or memory requests at the scheduler's defaults (Fit's
    scoring); BalancedAllocation reads the real requests. A scalar resource the pod does not ask
    for is left out, and so is any other name the node does not offer ("pods" among them).
    """
    if pod_request == 0 and is_scalar_resource(name):
        return 0, 0
    alloc = node_info.allocatable
    if name == CPU:
        return alloc.milli_cpu, node_info.non_zero_milli_cpu if non_zero else node_info.requested.milli_cpu
    if name == MEMORY:
        return alloc.memory, node_info.non_zero_memory if non_zero else node_info.requested.memory
    if name == EPHEMERAL_STORAGE:
        return alloc.ephemeral_storage, node_info.requested.ephemeral_storage
    if name in alloc.scalar:
        return alloc.scalar[name], node_info.requested.scalar.get(name, 0)
    return 0, 0


def never_delegated(name: str) -> bool:
    return False


def delegated_to_dra(dra: DraManager | None) -> Callable[[str], bool]:
    """Whether a DeviceClass backs an extended resource (kube's shouldDelegateResourceToDRA)."""
    if dra is None:
        return never_delegated
    return lambda name: dra.device_class_for_resource(name) is not None


def _flat(resource: Resource | None) -> Hashable:
    if resource is None:
        return None
    scalar = tuple(sorted(resource.scalar.items()))
    return resource.milli_cpu, resource.memory, resource.ephemeral_storage, resource.allowed_pods, scalar


def sign_requests(
    pod: Pod, delegated: Callable[[str], bool], plugin: str
) -> tuple[Sequence[SignFragment], Status | None]:
    """Both noderesources plugins' SignPod: every request form they filter or score with (kube signs
    the filtering requests alone; the scoring defaults for containers without requests and the
    in-place resize status can differ between pods with equal requests, so they are signed too).
    A pod asking for an extended resource that DynamicResources would allocate is not signed."""
    requests = pod.requests
    for name, amount in requests.scalar.items():
        if amount and delegated(name):
            return (), Status.unschedulable(
                "signature disabled when dra extended resources are used in the cluster", plugin=plugin
            )
    value = (
        _flat(requests),
        _flat(pod.spec_requests),
        _flat(pod.fit_scoring_requests),
        pod.non_zero_milli_cpu,
        pod.non_zero_memory,
        pod.fit_out_of_range,
    )
    return ((signing.RESOURCES, value),), None
