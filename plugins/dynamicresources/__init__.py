"""DynamicResources — not implemented: pods with resource claims are refused, never placed.

kube-scheduler 1.37 runs DynamicResources (DRA, GA) in its default profile, weight 2, before
DefaultPreemption. This scheduler does not allocate ResourceClaims yet, so this stand-in takes
the plugin's place in the profile and only does what is safe: a pod without
`spec.resourceClaims` is skipped (as upstream's PreFilter skips it), a pod with claims gets
UnschedulableAndUnresolvable at PreFilter naming the missing support. So does a pod asking for
an implicit DRA extended resource (`deviceclass.resource.kubernetes.io/<class>`, which 1.37's
GA DRAExtendedResource hands to DRA). It must never let such a pod through: placing it as if
it had no claims would start it without its devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, Status
from scheduler.model.objects import Pod

NAME = "DynamicResources"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
# A stand-in that refuses what it does not implement: no agreement scenario can be about it.
STAND_IN = True


def claim_names(pod: Pod) -> list[str]:
    return [str(claim.get("name") or "") for claim in pod.spec.get("resourceClaims") or ()]


def device_class_resources(pod: Pod) -> list[str]:
    """Implicit extended resources of a DeviceClass that the pod requests."""
    return sorted(
        name for name, amount in pod.requests.scalar.items() if amount and name.startswith(DEVICE_CLASS_PREFIX)
    )


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def not_implemented_message(names: Sequence[str]) -> str:
    return (
        f"pod has resource claims (spec.resourceClaims: {_quoted(names)}), "
        "but this scheduler does not implement DynamicResources (DRA) yet"
    )


def extended_resources_message(names: Sequence[str]) -> str:
    return (
        f"pod requests extended resources backed by DRA ({_quoted(names)}), "
        "but this scheduler does not implement DynamicResources (DRA) yet"
    )


class DynamicResources:
    name = NAME

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        names = claim_names(pod)
        if names:
            return None, Status.unresolvable(not_implemented_message(names), plugin=NAME)
        resources = device_class_resources(pod)
        if resources:
            return None, Status.unresolvable(extended_resources_message(resources), plugin=NAME)
        return None, Status(Code.SKIP, plugin=NAME)

    def pre_filter_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> DynamicResources:
    return DynamicResources()
