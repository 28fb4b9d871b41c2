"""Storage rules over raw API objects: PVs, PVCs, StorageClasses (component-helpers/storage/volume).

Pure functions, one home for the rules the volume plugins share: a claim's class, its size, a
PV's node affinity, the matching PV for a claim, the claimRef a bind writes. Never talks to the
API and never mutates an object it is given (binding returns a copy).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from scheduler.model.objects import Node, Pod
from scheduler.model.quantity import QuantityError, parse_quantity
from scheduler.model.selectors import label_selector, parse_node_selector

Raw = Mapping[str, Any]

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def meta(obj: Raw) -> Raw:
    value: Raw = obj.get("metadata") or {}
    return value


def spec(obj: Raw) -> Raw:
    value: Raw = obj.get("spec") or {}
    return value


def annotations_of(obj: Raw) -> Mapping[str, str]:
    value: Mapping[str, str] = meta(obj).get("annotations") or {}
    return value


def name_of(obj: Raw) -> str:
    return str(meta(obj).get("name") or "")


def key_of(obj: Raw) -> str:
    """namespace/name for namespaced objects, name for cluster-scoped ones."""
    namespace = meta(obj).get("namespace") or ""
    return f"{namespace}/{name_of(obj)}" if namespace else name_of(obj)


def resource_version(obj: Raw) -> int:
    """The resourceVersion as a number (etcd revisions are integers); 0 when absent."""
    try:
        return int(meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


def claim_name(pod: Pod, volume: Raw) -> str | None:
    """The PVC a pod volume uses (a generic ephemeral volume's is <pod>-<volume>), or None."""
    source = volume.get("persistentVolumeClaim")
    if source is not None:
        return str(source.get("claimName") or "")
    if volume.get("ephemeral") is not None:
        return f"{pod.name}-{volume.get('name', '')}"
    return None


def pod_volumes(pod: Pod) -> tuple[Raw, ...]:
    return tuple(pod.spec.get("volumes") or ())


def pod_pvc_names(pod: Pod) -> list[str]:
    """The claimName of every persistentVolumeClaim volume (generic ephemeral ones not included)."""
    return [
        str(v["persistentVolumeClaim"].get("claimName") or "")
        for v in pod_volumes(pod)
        if v.get("persistentVolumeClaim") is not None
    ]


def pod_claim_names(pod: Pod) -> list[tuple[str, bool]]:
    """(claim name, is generic ephemeral) for every pod volume backed by a PVC."""
    claims = []
    for volume in pod_volumes(pod):
        name = claim_name(pod, volume)
        if name is not None:
            claims.append((name, volume.get("ephemeral") is not None))
    return claims


def ephemeral_owner_error(pod: Pod, pvc: Raw) -> str | None:
    """Why a generic ephemeral volume's PVC is not the pod's own (ephemeral.VolumeIsForPod), or None."""
    for ref in meta(pvc).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid") == pod.uid:
            return None
    return f"PVC {key_of(pvc)} was not created for pod {pod.key} (pod is not owner)"


def claim_class(pvc: Raw) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation first, then spec.storageClassName."""
    ann = annotations_of(pvc)
    if BETA_STORAGE_CLASS_ANNOTATION in ann:
        return ann[BETA_STORAGE_CLASS_ANNOTATION]
    return str(spec(pvc).get("storageClassName") or "")


def volume_class(pv: Raw) -> str:
    ann = annotations_of(pv)
    if BETA_STORAGE_CLASS_ANNOTATION in ann:
        return ann[BETA_STORAGE_CLASS_ANNOTATION]
    return str(spec(pv).get("storageClassName") or "")


def _storage(value: Any, where: str) -> Decimal:
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(f"{where}: {exc}") from None


def claim_request(pvc: Raw) -> Decimal:
    """spec.resources.requests.storage in bytes (0 when absent)."""
    requests = (spec(pvc).get("resources") or {}).get("requests") or {}
    return _storage(requests.get("storage"), f"persistentvolumeclaim {key_of(pvc)}: spec.resources.requests.storage")


def claim_has_request(pvc: Raw) -> bool:
    return "storage" in ((spec(pvc).get("resources") or {}).get("requests") or {})


def volume_capacity(pv: Raw) -> Decimal:
    capacity = spec(pv).get("capacity") or {}
    return _storage(capacity.get("storage"), f"persistentvolume {name_of(pv)}: spec.capacity.storage")


def is_claim_fully_bound(pvc: Raw) -> bool:
    return bool(spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


def check_node_affinity(pv: Raw, node: Node) -> bool:
    """Whether the node satisfies the PV's required node affinity (CheckNodeAffinity)."""
    required = (spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return parse_node_selector(required).matches(node)


def is_volume_bound_to_claim(pv: Raw, pvc: Raw) -> bool:
    ref = spec(pv).get("claimRef")
    if not ref:
        return False
    if ref.get("name") != name_of(pvc) or ref.get("namespace") != meta(pvc).get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta(pvc).get("uid")


def _volume_mode(obj: Raw) -> str:
    return str(spec(obj).get("volumeMode") or "Filesystem")


def _access_modes_fit(pvc: Raw, pv: Raw) -> bool:
    offered = set(spec(pv).get("accessModes") or ())
    return all(mode in offered for mode in spec(pvc).get("accessModes") or ())


def find_matching_volume(pvc: Raw, volumes: Iterable[Raw], node: Node, excluded: set[str]) -> Raw | None:
    """The PV the scheduler would bind the claim to on this node (FindMatchingVolume, scheduler path).

    A PV pre-bound to the claim wins (or, when its affinity rejects the node, nothing does);
    otherwise the smallest Available PV of the claim's class, size, mode, selector, access
    modes and node affinity.
    """
    requested = claim_request(pvc)
    requested_class = claim_class(pvc)
    selector_raw = spec(pvc).get("selector")
    selector = label_selector(selector_raw) if selector_raw is not None else None
    claim_vac = spec(pvc).get("volumeAttributesClassName") or ""
    smallest: Raw | None = None
    smallest_size = Decimal(0)
    for pv in volumes:
        name = name_of(pv)
        if name in excluded:
            continue
        bound_to_claim = is_volume_bound_to_claim(pv, pvc)
        if spec(pv).get("claimRef") and not bound_to_claim:
            continue
        size = volume_capacity(pv)
        if size < requested or _volume_mode(pvc) != _volume_mode(pv):
            continue
        if claim_vac != (spec(pv).get("volumeAttributesClassName") or ""):
            continue
        if meta(pv).get("deletionTimestamp"):
            continue
        affinity_ok = check_node_affinity(pv, node)
        if bound_to_claim:
            return pv if affinity_ok else None
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(meta(pv).get("labels") or {}):
            continue
        if volume_class(pv) != requested_class or not affinity_ok or not _access_modes_fit(pvc, pv):
            continue
        if smallest is None or size < smallest_size:
            smallest, smallest_size = pv, size
    return smallest


def bind_volume_to_claim(pv: Raw, pvc: Raw) -> tuple[dict[str, Any], bool]:
    """A copy of the PV bound to the claim (claimRef, bound-by-controller) and whether it changed."""
    already_bound = is_volume_bound_to_claim(pv, pvc)
    bound: dict[str, Any] = copy.deepcopy(dict(pv))
    changed = False
    ref = spec(pv).get("claimRef") or {}
    claim_meta = meta(pvc)
    if (
        ref.get("name") != claim_meta.get("name")
        or ref.get("namespace") != claim_meta.get("namespace")
        or ref.get("uid") != claim_meta.get("uid")
    ):
        bound.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim_meta.get("namespace"),
            "name": claim_meta.get("name"),
            "uid": claim_meta.get("uid"),
            "resourceVersion": claim_meta.get("resourceVersion"),
        }
        changed = True
    ann = bound.setdefault("metadata", {}).setdefault("annotations", {})
    if not already_bound and ANN_BOUND_BY_CONTROLLER not in ann:
        ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        changed = True
    return bound, changed


def with_selected_node(pvc: Raw, node_name: str) -> dict[str, Any]:
    """A copy of the claim carrying the selected-node annotation (asks for provisioning)."""
    annotated: dict[str, Any] = copy.deepcopy(dict(pvc))
    annotated.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
    return annotated
