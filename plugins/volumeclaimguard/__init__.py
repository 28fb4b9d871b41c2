"""VolumeClaimGuard — INTERIM, until VolumeBinding is implemented: refuse pods with claims.

A pod whose volumes need PersistentVolumeClaims (a `persistentVolumeClaim` volume, or an
`ephemeral` volume, whose claim is `<pod>-<volume>`) cannot be placed correctly without
VolumeBinding: the claim may not exist, may be bound to a volume another node cannot reach,
or may wait for the first consumer. This guard rejects such a pod at PreFilter,
UnschedulableAndUnresolvable, naming the claims. It stands in VolumeBinding's place in the
default profile only while no VolumeBinding plugin is registered (scheduler/profile.py), and
the whole package is to be deleted in the commit that brings VolumeBinding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import Code, CycleState, NodeInfo, PreFilterResult, Status
from scheduler.model.objects import Pod

NAME = "VolumeClaimGuard"
STANDS_IN_FOR = "VolumeBinding"
# A stand-in that refuses what it does not implement: no agreement scenario can be about it.
STAND_IN = True


def claim_names(pod: Pod) -> list[str]:
    """The PVC names the pod's volumes use, in volume order."""
    names: list[str] = []
    for volume in pod.spec.get("volumes") or ():
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            names.append(str(claim.get("claimName") or ""))
        elif volume.get("ephemeral") is not None:
            names.append(f"{pod.name}-{volume.get('name', '')}")
    return names


def not_implemented_message(names: Sequence[str]) -> str:
    quoted = ", ".join(f'"{name}"' for name in names)
    return (
        f"pod uses persistentvolumeclaim {quoted}, "
        "but this scheduler does not implement volume binding (VolumeBinding) yet"
    )


class VolumeClaimGuard:
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


def new(args: Mapping[str, Any], handle: Handle) -> VolumeClaimGuard:
    return VolumeClaimGuard()
