"""The volume binder: VolumeBinding's domain core (kube's SchedulerVolumeBinder).

Sorts a pod's claims into bound, unbound WaitForFirstConsumer and unbound Immediate ones;
finds, per node, the PVs the unbound ones would bind to or the provisioning they need; assumes
that choice in the PV/PVC assume caches at Reserve; at PreBind writes it to the API (PV
claimRef, PVC selected-node annotation) through the ApiClient and waits for the PV controller
to finish the binding. A bound in-tree PV whose plugin the node's CSINode says is migrated has
its node affinity checked as translated to CSI (csi_translation). Reads the cluster only through
the VolumeLister and node lookups; its only writes are those two updates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import structlog

from plugins.volumebinding.assume_cache import AssumeCache
from scheduler import metrics
from scheduler.framework.interface import VolumeLister
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
)
from scheduler.model.csi_translation import (
    MIGRATION_ON,
    TranslationError,
    migrated_on_node,
    plugin_of,
    translate_pv_topology,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.quantity import parse_quantity
from scheduler.model.selectors import SelectorError, label_selector
from scheduler.model.volumes import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    bind_volume_to_claim,
    check_node_affinity,
    claim_class,
    claim_has_request,
    claim_request,
    ephemeral_owner_error,
    find_matching_volume,
    is_claim_fully_bound,
    key_of,
    meta,
    name_of,
    pod_claim_names,
    resource_version,
    spec,
    volume_class,
    with_selected_node,
)

if TYPE_CHECKING:
    from scheduler.api.client import ApiClient

log = structlog.get_logger("volumebinding")

Raw = Mapping[str, Any]

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

BIND_POLL_INTERVAL = 1.0
MIN_TRANSLATIONS_KEPT = 1024


@contextlib.contextmanager
def _stage_errors(operation: str) -> Iterator[None]:
    """Count a failure of the stage in scheduler_volume_scheduling_stage_error_total, as kube does."""
    try:
        yield
    except Exception:
        metrics.child(metrics.volume_scheduling_stage_errors, operation).inc()
        raise


class BinderError(Exception):
    """A binder failure that makes the pod's scheduling attempt an error (retried with backoff)."""


@dataclass
class PodVolumeClaims:
    bound: list[Raw] = field(default_factory=list)
    unbound_delay_binding: list[Raw] = field(default_factory=list)
    unbound_immediate: list[Raw] = field(default_factory=list)
    # storage class -> the PVs of that class, for the delay-binding claims
    unbound_volumes: dict[str, list[Raw]] = field(default_factory=dict)


@dataclass
class BindingInfo:
    pv: Raw
    pvc: Raw


@dataclass
class DynamicProvision:
    pvc: Raw
    node_capacity: Raw | None = None


@dataclass
class PodVolumes:
    """What one node needs for the pod: PVs to bind (static) and claims to provision (dynamic)."""

    static_bindings: list[BindingInfo] = field(default_factory=list)
    dynamic_provisions: list[DynamicProvision] = field(default_factory=list)


def _match_topology(terms: Sequence[Raw] | None, node: Node) -> bool:
    """MatchTopologySelectorTerms: no terms match every node; else any term whose keys all match."""
    if not terms:
        return True
    for term in terms:
        if all(
            expr.get("key") in node.labels and node.labels[expr.get("key", "")] in (expr.get("values") or ())
            for expr in term.get("matchLabelExpressions") or ()
        ):
            return True
    return False


def volume_limit(capacity: Raw) -> Decimal | None:
    """maximumVolumeSize when set (more precise), else capacity."""
    value = capacity.get("maximumVolumeSize")
    if value is None:
        value = capacity.get("capacity")
    return parse_quantity(value) if value is not None else None


class VolumeBinder:
    def __init__(
        self,
        volumes: VolumeLister,
        client: ApiClient,
        node_lookup: Callable[[str], Node | None],
        bind_timeout: float,
        pod_exists: Callable[[Pod], bool],
    ) -> None:
        self.volumes = volumes
        self.client = client
        self.node_lookup = node_lookup
        self.pod_exists = pod_exists
        self.bind_timeout = bind_timeout
        self.pv_cache = AssumeCache(volumes, PERSISTENT_VOLUME)
        self.pvc_cache = AssumeCache(volumes, PERSISTENT_VOLUME_CLAIM)
        # PV name -> (the PV object, its translation or the translation's error). Stores and the
        # assume cache replace PV objects and never mutate them, so the object itself is the key.
        self._translations: dict[str, tuple[Raw, Raw | str]] = {}
        self._prune_translations_at = MIN_TRANSLATIONS_KEPT

    # ---- CSI migration -----------------------------------------------------------------

    def _translated(self, pv: Raw) -> Raw:
        """translate_pv_topology(pv), worked out once per PV object; BinderError as kube words it."""
        entry = self._translations.get(name_of(pv))
        if entry is None or entry[0] is not pv:
            try:
                result: Raw | str = translate_pv_topology(pv)
            except TranslationError as exc:
                result = f"could not translate pv: {exc}"
            entry = (pv, result)
            self._translations[name_of(pv)] = entry
            if len(self._translations) > self._prune_translations_at:
                self._prune_translations()
        if isinstance(entry[1], str):
            raise BinderError(entry[1])
        return entry[1]

    def _prune_translations(self) -> None:
        """Forget the translations of PVs that are gone or replaced (the threshold doubles, so
        pruning costs O(1) per translation however many PVs stay)."""
        self._translations = {
            name: entry
            for name, entry in self._translations.items()
            if entry[0] is self.pv_cache.get(name) or entry[0] is self.pv_cache.get_api_obj(name)
        }
        self._prune_translations_at = max(MIN_TRANSLATIONS_KEPT, 2 * len(self._translations))

    def pv_on_node(self, pv: Raw, node_name: str) -> Raw:
        """The PV whose node affinity counts on the node (tryTranslatePVToCSI): translated when its
        in-tree plugin's migration is on and the node's CSINode names the plugin as migrated."""
        plugin = plugin_of(spec(pv))
        if plugin is None or plugin.name not in MIGRATION_ON:
            return pv
        if not migrated_on_node(plugin.name, self.volumes.get(CSI_NODE, node_name)):
            return pv
        return self._translated(pv)

    def translation_may_differ(self, pv: Raw) -> bool:
        """Whether some node could see this PV's node affinity differently (or fail to translate it)."""
        plugin = plugin_of(spec(pv))
        if plugin is None or plugin.name not in MIGRATION_ON:
            return False
        try:
            return self._translated(pv) is not pv
        except BinderError:
            return True

    # ---- PreFilter ---------------------------------------------------------------------

    def pod_claims_problem(self, pod: Pod) -> tuple[bool, str | None]:
        """(has PVCs, why the pod cannot use them) from the API's view of the claims (podHasPVCs)."""
        claims = pod_claim_names(pod)
        for name, ephemeral in claims:
            pvc = self.volumes.get(PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{name}")
            if pvc is None:
                if ephemeral:
                    return True, f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                return True, f'persistentvolumeclaim "{name}" not found'
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return True, (
                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{spec(pvc).get("volumeName") or ""}"'
                )
            if meta(pvc).get("deletionTimestamp"):
                return True, f'persistentvolumeclaim "{name}" is being deleted'
            if ephemeral:
                problem = ephemeral_owner_error(pod, pvc)
                if problem:
                    return True, problem
        return bool(claims), None

    def _is_delay_binding(self, pvc: Raw) -> bool:
        class_name = claim_class(pvc)
        if not class_name:
            return False
        storage_class = self.volumes.get(STORAGE_CLASS, class_name)
        if storage_class is None:
            return False
        mode = storage_class.get("volumeBindingMode")
        if mode is None:
            raise BinderError(f'VolumeBindingMode not set for StorageClass "{class_name}"')
        return bool(mode == WAIT_FOR_FIRST_CONSUMER)

    def get_pod_volume_claims(self, pod: Pod) -> PodVolumeClaims:
        claims = PodVolumeClaims()
        for name, ephemeral in pod_claim_names(pod):
            key = f"{pod.namespace}/{name}"
            pvc = self.pvc_cache.get(key)
            if pvc is None:
                raise BinderError(f'error getting PVC "{key}": persistentvolumeclaim "{name}" not found')
            if ephemeral:
                problem = ephemeral_owner_error(pod, pvc)
                if problem:
                    raise BinderError(problem)
            if is_claim_fully_bound(pvc):
                claims.bound.append(pvc)
            elif self._is_delay_binding(pvc) and not spec(pvc).get("volumeName"):
                claims.unbound_delay_binding.append(pvc)
            else:
                claims.unbound_immediate.append(pvc)
        for pvc in claims.unbound_delay_binding:
            class_name = claim_class(pvc)
            if class_name not in claims.unbound_volumes:
                claims.unbound_volumes[class_name] = [
                    pv for pv in self.pv_cache.list() if volume_class(pv) == class_name
                ]
        return claims

    # ---- Filter ------------------------------------------------------------------------

    def find_pod_volumes(self, pod: Pod, claims: PodVolumeClaims, node: Node) -> tuple[PodVolumes, list[str]]:
        """The node's PodVolumes and, when it does not fit, upstream's conflict reasons."""
        with _stage_errors("predicate"):
            return self._find_pod_volumes(claims, node)

    def _find_pod_volumes(self, claims: PodVolumeClaims, node: Node) -> tuple[PodVolumes, list[str]]:
        volumes = PodVolumes()
        bound_ok, bound_found = self._check_bound_claims(claims.bound, node)
        unbound_ok, enough_storage = True, True
        if claims.unbound_delay_binding:
            unbound_ok, enough_storage = self._find_unbound(claims, node, volumes)
        reasons = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not enough_storage:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not bound_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return volumes, reasons

    def _check_bound_claims(self, claims: list[Raw], node: Node) -> tuple[bool, bool]:
        for pvc in claims:
            pv = self.pv_cache.get(str(spec(pvc).get("volumeName") or ""))
            if pv is None:
                return True, False
            if not check_node_affinity(self.pv_on_node(pv, node.name), node):
                return False, True
        return True, True

    def _find_unbound(self, claims: PodVolumeClaims, node: Node, volumes: PodVolumes) -> tuple[bool, bool]:
        to_match: list[Raw] = []
        to_provision: list[Raw] = []
        for pvc in claims.unbound_delay_binding:
            selected = annotations_of(pvc).get(ANN_SELECTED_NODE)
            if selected is not None:
                if selected != node.name:
                    return False, True
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        found = True
        if to_match:
            chosen: set[str] = set()
            for pvc in sorted(to_match, key=claim_request):
                try:
                    pv = find_matching_volume(pvc, claims.unbound_volumes.get(claim_class(pvc), ()), node, chosen)
                except SelectorError as exc:
                    raise BinderError(
                        f"error creating internal label selector for claim: {key_of(pvc)}: {exc}"
                    ) from None
                if pv is None:
                    to_provision.append(pvc)
                    found = False
                    continue
                chosen.add(name_of(pv))
                volumes.static_bindings.append(BindingInfo(pv, pvc))
        if to_provision:
            return self._check_provisions(to_provision, node, volumes)
        return found, True

    def _check_provisions(self, claims: list[Raw], node: Node, volumes: PodVolumes) -> tuple[bool, bool]:
        provisions: list[DynamicProvision] = []
        for pvc in claims:
            class_name = claim_class(pvc)
            if not class_name:
                raise BinderError(f'no class for claim "{key_of(pvc)}"')
            storage_class = self.volumes.get(STORAGE_CLASS, class_name)
            if storage_class is None:
                raise BinderError(f'failed to find storage class "{class_name}"')
            provisioner = str(storage_class.get("provisioner") or "")
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True
            if not _match_topology(storage_class.get("allowedTopologies"), node):
                return False, True
            sufficient, capacity = self._has_enough_capacity(provisioner, pvc, class_name, node)
            if not sufficient:
                return True, False
            provisions.append(DynamicProvision(pvc, capacity))
        volumes.dynamic_provisions = provisions
        return True, True

    def _has_enough_capacity(self, provisioner: str, pvc: Raw, class_name: str, node: Node) -> tuple[bool, Raw | None]:
        if not claim_has_request(pvc):
            return True, None
        driver = self.volumes.get(CSI_DRIVER, provisioner)
        if driver is None or not spec(driver).get("storageCapacity"):
            return True, None
        size = claim_request(pvc)
        for capacity in self.volumes.list(CSI_STORAGE_CAPACITY):
            if capacity.get("storageClassName") != class_name:
                continue
            limit = volume_limit(capacity)
            if limit is None or limit < size:
                continue
            topology = capacity.get("nodeTopology")
            if topology is None:
                continue
            try:
                if label_selector(topology).matches(node.labels):
                    return True, capacity
            except SelectorError as exc:
                log.error(
                    "ignoring CSIStorageCapacity with a bad nodeTopology", capacity=key_of(capacity), error=str(exc)
                )
        return False, None

    # ---- Reserve / Unreserve -----------------------------------------------------------

    def _all_bound(self, pod: Pod) -> bool:
        for name, _ in pod_claim_names(pod):
            pvc = self.pvc_cache.get(f"{pod.namespace}/{name}")
            if pvc is None or not is_claim_fully_bound(pvc):
                return False
        return True

    def assume_pod_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes) -> bool:
        """Lay the node's choice over the caches; True when every claim is already bound."""
        with _stage_errors("assume"):
            return self._assume_pod_volumes(pod, node_name, volumes)

    def _assume_pod_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes) -> bool:
        if self._all_bound(pod):
            return True
        bindings: list[BindingInfo] = []
        for binding in volumes.static_bindings:
            pv, changed = bind_volume_to_claim(binding.pv, binding.pvc)
            if changed:
                try:
                    self.pv_cache.assume(pv)
                except Exception:
                    self._revert_pvs(bindings)
                    raise
            bindings.append(BindingInfo(pv, binding.pvc))
        provisions: list[DynamicProvision] = []
        for provision in volumes.dynamic_provisions:
            pvc = with_selected_node(provision.pvc, node_name)
            try:
                self.pvc_cache.assume(pvc)
            except Exception:
                self._revert_pvs(bindings)
                self._revert_pvcs([p.pvc for p in provisions])
                raise
            provisions.append(DynamicProvision(pvc))
        volumes.static_bindings = bindings
        volumes.dynamic_provisions = provisions
        return False

    def _revert_pvs(self, bindings: Sequence[BindingInfo]) -> None:
        for binding in bindings:
            self.pv_cache.restore(key_of(binding.pv))

    def _revert_pvcs(self, claims: Sequence[Raw]) -> None:
        for pvc in claims:
            self.pvc_cache.restore(key_of(pvc))

    def revert_assumed_pod_volumes(self, volumes: PodVolumes) -> None:
        self._revert_pvs(volumes.static_bindings)
        self._revert_pvcs([p.pvc for p in volumes.dynamic_provisions])

    # ---- PreBind -----------------------------------------------------------------------

    async def bind_pod_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes) -> None:
        """Write the assumed bindings and wait for the PV controller; raises BinderError or ApiError."""
        with _stage_errors("bind"):
            await self._bind_pod_volumes(pod, node_name, volumes)

    async def _bind_pod_volumes(self, pod: Pod, node_name: str, volumes: PodVolumes) -> None:
        await self._bind_api_update(volumes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_timeout
        while True:
            # Like wait.PollUntilContextTimeout(immediate=false): the first check after one interval.
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise BinderError("binding volumes: context deadline exceeded")
            await asyncio.sleep(min(BIND_POLL_INTERVAL, remaining))
            try:
                if self.check_bindings(pod, node_name, volumes):
                    return
            except BinderError as exc:
                raise BinderError(f"binding volumes: {exc}") from None

    async def _bind_api_update(self, volumes: PodVolumes) -> None:
        done_bindings = 0
        done_provisions = 0
        try:
            for binding in volumes.static_bindings:
                binding.pv = await self.client.update_persistent_volume(binding.pv)
                done_bindings += 1
            for provision in volumes.dynamic_provisions:
                provision.pvc = await self.client.update_persistent_volume_claim(provision.pvc)
                done_provisions += 1
        finally:
            # What the API refused (or never saw) is no longer assumed; what it accepted stays
            # until the informers deliver it.
            self._revert_pvs(volumes.static_bindings[done_bindings:])
            self._revert_pvcs([p.pvc for p in volumes.dynamic_provisions[done_provisions:]])

    def check_bindings(self, pod: Pod, node_name: str, volumes: PodVolumes) -> bool:
        """Whether the PV controller has finished every binding, from the informers' (API) view."""
        node = self.node_lookup(node_name)
        if node is None:
            raise BinderError(f'failed to get node "{node_name}": node "{node_name}" not found')
        if not self.pod_exists(pod):
            # Deleted while we waited: its bindings no longer matter (kube stops polling too).
            raise BinderError(f'pod does not exist any more: pod "{pod.name}" not found')
        for binding in volumes.static_bindings:
            pv = self.pv_cache.get_api_obj(key_of(binding.pv))
            if pv is None:
                raise BinderError(f'failed to check binding: persistentvolume "{name_of(binding.pv)}" not found')
            pvc = self.pvc_cache.get_api_obj(key_of(binding.pvc))
            if pvc is None:
                raise BinderError(f'failed to check binding: persistentvolumeclaim "{name_of(binding.pvc)}" not found')
            if resource_version(binding.pv) > resource_version(pv):
                return False
            try:
                seen = self.pv_on_node(pv, node_name)
            except BinderError as exc:
                raise BinderError(f"failed to translate pv to csi: {exc}") from None
            if not check_node_affinity(seen, node):
                raise BinderError(
                    f'pv "{name_of(pv)}" node affinity doesn\'t match node "{node_name}": no matching NodeSelectorTerms'
                )
            ref = spec(pv).get("claimRef") or {}
            if not ref.get("uid"):
                raise BinderError(f'ClaimRef got reset for pv "{name_of(pv)}"')
            if not is_claim_fully_bound(pvc):
                return False
        for provision in volumes.dynamic_provisions:
            pvc = self.pvc_cache.get_api_obj(key_of(provision.pvc))
            if pvc is None:
                raise BinderError(
                    f'failed to check provisioning pvc: persistentvolumeclaim "{name_of(provision.pvc)}" not found'
                )
            if resource_version(provision.pvc) > resource_version(pvc):
                return False
            ann = meta(pvc).get("annotations")
            if ann is None:
                raise BinderError(f'selectedNode annotation reset for PVC "{name_of(pvc)}"')
            if ann.get(ANN_SELECTED_NODE) != node_name:
                raise BinderError(f'provisioning failed for PVC "{name_of(pvc)}"')
            volume_name = str(spec(pvc).get("volumeName") or "")
            if volume_name:
                pv = self.pv_cache.get_api_obj(volume_name)
                if pv is None:
                    return False
                if not check_node_affinity(self.pv_on_node(pv, node.name), node):
                    raise BinderError(
                        f'pv "{volume_name}" node affinity doesn\'t match node "{node_name}": '
                        "no matching NodeSelectorTerms"
                    )
            if not is_claim_fully_bound(pvc):
                return False
        return True
