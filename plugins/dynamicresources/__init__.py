"""DynamicResources — not implemented: pods with resource claims are refused, never placed.

kube-scheduler 1.37 runs DynamicResources (DRA, GA) in its default profile, weight 2, before
DefaultPreemption. This scheduler does not allocate ResourceClaims yet, so this stand-in takes
the plugin's place in the profile and only does what is safe: a pod without
`spec.resourceClaims` is skipped (as upstream's PreFilter skips it), a pod with claims gets
UnschedulableAndUnresolvable at PreFilter naming the missing support. It must never let such
a pod through: placing it as if it had no claims would start it without its devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, Status
from scheduler.model.objects import Pod

NAME = "DynamicResources"
# A stand-in that refuses what it does not implement: no agreement scenario can be about it.
STAND_IN = True


def claim_names(pod: Pod) -> list[str]:
    return [str(claim.get("name") or "") for claim in pod.spec.get("resourceClaims") or ()]


def not_implemented_message(names: Sequence[str]) -> str:
    quoted = ", ".join(f'"{name}"' for name in names)
    return (
        f"pod has resource claims (spec.resourceClaims: {quoted}), "
        "but this scheduler does not implement DynamicResources (DRA) yet"
    )


class DynamicResources:
    name = NAME

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        names = claim_names(pod)
        if not names:
            return None, Status(Code.SKIP, plugin=NAME)
        return None, Status.unresolvable(not_implemented_message(names), plugin=NAME)

    def pre_filter_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> DynamicResources:
    return DynamicResources()
