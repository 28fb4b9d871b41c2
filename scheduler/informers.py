"""Informer handlers: raw watch events (from kopf) → compact structs → cache, queue, nominator.

Each raw object is converted once. Pods: assigned ones go to the cache (whichever scheduler
placed them), unassigned ones whose schedulerName is one of our profiles go to the queue,
everything else is ignored. Nodes go to the cache. Every change is also offered to the
queue as a cluster event so that the right unschedulable pods are retried.

Writes nothing to the API except reporting a pod that cannot be parsed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import structlog

from scheduler import metrics
from scheduler.features import GENERIC_WORKLOAD
from scheduler.framework.dra import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DraManager,
)
from scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    POD_GROUP_ADD,
    POD_GROUP_DELETE,
    POD_GROUP_UPDATE,
    UNSCHEDULED_POD_ADD,
    UNSCHEDULED_POD_UPDATE,
    node_scheduling_properties_change,
    pod_scheduling_properties_change,
)
from scheduler.framework.podgroups import POD_GROUP_API, SCHEDULER_PLUGINS_POD_GROUP_API, GroupKey
from scheduler.framework.runtime import PdbStore, WorkloadStore
from scheduler.framework.types import ActionType, ClusterEvent, EventResource
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
    VolumeStore,
)
from scheduler.model.objects import InvalidObject, Node, Pod, PodDisruptionBudget, Resource
from scheduler.model.podgroups import PodGroup
from scheduler.schedule_one import Scheduler

log = structlog.get_logger("informers")

DELETED = "DELETED"
# Labels of kube's handlers that are no queue event (scheduler_event_handling_duration_seconds only).
UNSCHEDULED_DEL = "UnscheduledPodDelete"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"

_VOLUME_EVENT_RESOURCES = {
    STORAGE_CLASS: EventResource.STORAGE_CLASS,
    PERSISTENT_VOLUME: EventResource.PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM: EventResource.PERSISTENT_VOLUME_CLAIM,
    CSI_NODE: EventResource.CSI_NODE,
    CSI_DRIVER: EventResource.CSI_DRIVER,
    CSI_STORAGE_CAPACITY: EventResource.CSI_STORAGE_CAPACITY,
    VOLUME_ATTACHMENT: EventResource.VOLUME_ATTACHMENT,
}
# Labelled as kube's (PersistentVolumeClaimAdd, storage.k8s.io/StorageClassUpdate, ...).
VOLUME_EVENTS = {
    (kind, action): ClusterEvent(resource, action)
    for kind, resource in _VOLUME_EVENT_RESOURCES.items()
    for action in (ActionType.ADD, ActionType.UPDATE, ActionType.DELETE)
}

# kube's scheduler has no event for DeviceTaintRules: its slice tracker reports the slices a rule
# taints as updated ResourceSlices, which is what a rule change becomes here too.
_DRA_EVENT_RESOURCES = {
    RESOURCE_CLAIM: EventResource.RESOURCE_CLAIM,
    RESOURCE_SLICE: EventResource.RESOURCE_SLICE,
    DEVICE_CLASS: EventResource.DEVICE_CLASS,
    DEVICE_TAINT_RULE: EventResource.RESOURCE_SLICE,
}


class Informers:
    """Feeds one Scheduler from watch events."""

    def __init__(
        self,
        scheduler: Scheduler,
        namespaces: dict[str, Mapping[str, str]] | None = None,
        workloads: WorkloadStore | None = None,
    ) -> None:
        self.sched = scheduler
        self.namespaces = namespaces if namespaces is not None else {}
        # Every profile shares the one handle build_scheduler made: feed its stores.
        handles = {id(fw.handle): fw.handle for fw in scheduler.frameworks.values()}
        shared = next(iter(handles.values())) if len(handles) == 1 else None
        if workloads is None:
            workloads = shared.workloads if shared is not None else WorkloadStore()
        self.workloads = workloads
        self.pdbs = shared.pdbs if shared is not None else PdbStore()
        # The volume plugins' listers read the one handle's store (a fresh one for several handles).
        self.volumes = shared.volumes if shared is not None else VolumeStore()
        self.dra = shared.dra if shared is not None else DraManager()
        # Claims change under the scheduler's own writes too (assume, restore): every change of
        # the claims' view is a ResourceClaim event for the queue, as kube's assume cache emits.
        self.dra.claims.listeners.append(self._on_claim_view_change)
        # Objects that cannot be parsed, by kind/uid (pods) or kind/name (nodes), with the error last
        # reported: each is reported once (again only if the error changes), forgotten when deleted.
        self._reported_invalid: dict[str, str] = {}
        # Objects with quantities beyond int64, by kind/namespace/name, and what was last reported:
        # each is logged once (again only if its fields change), however often it is updated.
        self._reported_out_of_range: dict[str, tuple[str, ...]] = {}
        # The last version of each node seen, which update events are computed against (the cache
        # keeps an older one when only heartbeats or conditions changed).
        self._nodes: dict[str, Node] = {}
        # The last PodGroup objects seen, which update events (minCount changes) are computed against.
        self._pod_groups: dict[GroupKey, Mapping[str, Any]] = {}
        # kube sends UnscheduledPodAdd to the unschedulable pods only with GenericWorkload on (for any
        # new pod, member or not); a Coscheduling member without the gate sends nothing.
        self._generic_workload = any(
            fw.handle.feature_gates.enabled(GENERIC_WORKLOAD) for fw in scheduler.frameworks.values()
        )

    # ---- pods ----------------------------------------------------------------------------

    def on_pod(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        sched = self.sched
        meta = raw.get("metadata") or {}
        uid = meta.get("uid", "")
        try:
            pod = Pod.from_raw(raw)
        except InvalidObject as exc:
            self._invalid_pod(event_type, raw, exc)
            return
        self._report_out_of_range("Pod", pod.namespace, pod.name, () if event_type == DELETED else pod.out_of_range)
        cache = sched.cache
        known = cache.get_pod(uid)
        if event_type == DELETED or pod.terminal:
            cache.pod_groups.remove_pod(pod)
            sched.pending_pods.pop(uid, None)
            sched.nominator.delete(uid)
            sched.queue.delete(uid)
            for fw in sched.frameworks.values():
                fw.handle.reject_waiting_pod(uid, "", "pod was deleted")
            if known is not None and not cache.is_assumed(uid):
                cache.remove_pod(uid)
                sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, known, None)
            if pod.node_name or pod.scheduler_name in sched.frameworks:  # kube's handlers see only these
                metrics.observe_event_handling(ASSIGNED_POD_DELETE.label if pod.node_name else UNSCHEDULED_DEL, started)
            return
        if pod.node_name:
            if sched.pending_pods.pop(uid, None) is not None:  # kube's unscheduled-pod handler sees a delete
                metrics.observe_event_handling(UNSCHEDULED_DEL, started)
            sched.nominator.delete(uid)
            sched.queue.delete(uid)
            if known is None or cache.is_assumed(uid):
                cache.add_pod(pod)
                sched.queue.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, pod)
                metrics.observe_event_handling(ASSIGNED_POD_ADD.label, started)
            else:
                cache.update_pod(pod)
                # A status-only update is a general AssignedPod/Update, which no in-tree plugin registers.
                for event in pod_scheduling_properties_change(pod, known, is_target=False):
                    sched.queue.move_all_to_active_or_backoff(event, known, pod)
                    metrics.observe_event_handling(event.label, started)
                metrics.observe_event_handling(ASSIGNED_POD_UPDATE, started)
            return
        if pod.scheduler_name not in sched.frameworks:
            return
        previous = sched.pending_pods.get(uid)
        if previous is not None and previous.resource_version == pod.resource_version:
            return  # the same object again (a relist): nothing changed
        label = (UNSCHEDULED_POD_ADD if previous is None else UNSCHEDULED_POD_UPDATE).label
        sched.pending_pods[uid] = pod
        if cache.is_assumed(uid):
            # Our binding is in flight; the bound pod will confirm it. The assume dropped its
            # nomination (the cache counts it on its node), so the informer must not re-add it.
            return
        sched.nominator.update(previous, pod)
        # Counted in its group before PreEnqueue runs (GangScheduling counts every member).
        cache.pod_groups.add_pod(pod)
        if pod.deleting:
            sched.queue.delete(uid)
            return
        sched.queue.add(pod, previous)
        if previous is None and self._generic_workload:
            # A new member may complete its gang (GangScheduling's hint decides).
            sched.queue.move_all_to_active_or_backoff(UNSCHEDULED_POD_ADD, None, pod)
        metrics.observe_event_handling(label, started)

    def _first_report(self, key: str, event_type: str | None, error: InvalidObject) -> bool:
        """Whether this unparseable object's error is new (and so to be reported); a delete forgets it."""
        if event_type == DELETED:
            self._reported_invalid.pop(key, None)
            return False
        if self._reported_invalid.get(key) == str(error):
            return False
        self._reported_invalid[key] = str(error)
        return True

    def _invalid_pod(self, event_type: str | None, raw: Mapping[str, Any], error: InvalidObject) -> None:
        spec = raw.get("spec") or {}
        meta = raw.get("metadata") or {}
        uid = meta.get("uid", "")
        if not self._first_report(f"Pod/{uid}", event_type, error):
            return
        if spec.get("nodeName") or (spec.get("schedulerName") or "default-scheduler") not in self.sched.frameworks:
            log.warning("ignoring unparseable pod", error=str(error))
            return
        log.error("pod cannot be scheduled", error=str(error))
        # Report it once, with the raw identity (no struct could be built).
        pod = Pod(
            uid=uid,
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            node_name="",
            scheduler_name=spec.get("schedulerName", ""),
            priority=0,
            created=0.0,
            resource_version=meta.get("resourceVersion", ""),
            labels={},
            phase="Pending",
            deleting=False,
            scheduling_gates=(),
            requests=Resource(),
            non_zero_milli_cpu=0,
            non_zero_memory=0,
            raw=raw,
        )
        self.sched.status_writes.report(pod, "SchedulerError", str(error), None)

    def _report_out_of_range(self, kind: str, namespace: str, name: str, fields: tuple[str, ...]) -> None:
        """One log line per object whose quantities are beyond int64 (counted as kube-scheduler
        counts them, see scheduler.model.quantity); forgotten when the object is fixed or gone."""
        if not fields and not self._reported_out_of_range:
            return  # the common case: nothing odd anywhere
        key = f"{kind}/{namespace}/{name}"
        if not fields:
            self._reported_out_of_range.pop(key, None)
            return
        if self._reported_out_of_range.get(key) == fields:
            return
        self._reported_out_of_range[key] = fields
        log.error(
            "quantity beyond int64, counted as kube-scheduler counts it",
            kind=kind,
            namespace=namespace,
            name=name,
            field="; ".join(fields),
        )

    # ---- nodes ---------------------------------------------------------------------------

    def on_node(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        sched = self.sched
        name = (raw.get("metadata") or {}).get("name", "")
        cached_info = sched.cache.get_node_info(name)
        cached = cached_info.node if cached_info is not None else None
        old = self._nodes.get(name) or cached
        if event_type == DELETED:
            self._reported_invalid.pop(f"Node/{name}", None)
            self._report_out_of_range("Node", "", name, ())
            self._nodes.pop(name, None)
            sched.cache.remove_node(name)
            sched.queue.move_all_to_active_or_backoff(NODE_DELETE, old, None)
            metrics.observe_event_handling(NODE_DELETE.label, started)
            return
        try:
            node = Node.from_raw(raw)
        except InvalidObject as exc:
            if self._first_report(f"Node/{name}", event_type, exc):
                log.error("ignoring node that cannot be parsed", node=name, error=str(exc))
            return
        self._report_out_of_range("Node", "", name, node.out_of_range)
        if old is not None and old.resource_version == node.resource_version:
            return
        self._nodes[name] = node
        events = [NODE_ADD] if old is None else node_scheduling_properties_change(node, old)
        # Heartbeats and condition updates change nothing a plugin reads: the cached node stays, so
        # snapshots and derived columns stay valid; the queue still hears of conditions.
        only_conditions = all(event.action == ActionType.UPDATE_NODE_CONDITION for event in events)
        if cached is None or not (only_conditions and cached.same_scheduling_properties(node)):
            sched.cache.add_or_update_node(node)
        for event in events:
            sched.queue.move_all_to_active_or_backoff(event, old, node)
            metrics.observe_event_handling(event.label, started)  # as kube: once per fine-grained event

    # ---- PodGroups (scheduling.k8s.io/v1beta1, GenericWorkload) -------------------------

    def on_pod_group(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        meta = raw.get("metadata") or {}
        key = GroupKey(POD_GROUP_API, meta.get("namespace", ""), meta.get("name", ""))
        old = self._pod_groups.get(key)
        groups = self.sched.cache.pod_groups
        if event_type == DELETED:
            self._reported_invalid.pop(f"PodGroup/{key}", None)
            self._pod_groups.pop(key, None)
            groups.remove_group(key)
            self.sched.queue.move_all_to_active_or_backoff(POD_GROUP_DELETE, old, None)
            metrics.observe_event_handling(POD_GROUP_DELETE.label, started)
            return
        try:
            pod_group = PodGroup.from_raw(raw)
        except InvalidObject as exc:
            # Its members wait as if it did not exist; nothing else is affected.
            if self._first_report(f"PodGroup/{key}", event_type, exc):
                log.error("ignoring PodGroup that cannot be parsed", podGroup=str(key), error=str(exc))
            self._pod_groups.pop(key, None)
            groups.remove_group(key)
            return
        if old is not None and (old.get("metadata") or {}).get("resourceVersion") == pod_group.resource_version:
            return  # a relist repeating what we have
        self._pod_groups[key] = raw
        groups.set_group(key, pod_group)
        event = POD_GROUP_ADD if old is None else POD_GROUP_UPDATE
        self.sched.queue.move_all_to_active_or_backoff(event, old, raw)
        metrics.observe_event_handling(event.label, started)

    # ---- scheduler-plugins' PodGroups (scheduling.x-k8s.io/v1alpha1, Coscheduling) ---------

    def on_scheduler_plugins_pod_group(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        """Kept as the API sent it: Coscheduling reads its fields (and reports one it cannot use)."""
        meta = raw.get("metadata") or {}
        key = GroupKey(SCHEDULER_PLUGINS_POD_GROUP_API, meta.get("namespace", ""), meta.get("name", ""))
        groups = self.sched.cache.pod_groups
        state = groups.get(key)
        old = state.group if state is not None and isinstance(state.group, Mapping) else None
        resource = EventResource.SCHEDULER_PLUGINS_POD_GROUP
        if event_type == DELETED:
            groups.remove_group(key)
            self.sched.queue.move_all_to_active_or_backoff(ClusterEvent(resource, ActionType.DELETE), old, None)
            return
        if old is not None and (old.get("metadata") or {}).get("resourceVersion") == meta.get("resourceVersion"):
            return  # a relist repeating what we have
        groups.set_group(key, raw)
        action = ActionType.ADD if old is None else ActionType.UPDATE
        self.sched.queue.move_all_to_active_or_backoff(ClusterEvent(resource, action), old, raw)

    # ---- workloads (selectors for default topology spreading) -----------------------------

    def on_workload(self, api_version: str, kind: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        # List items carry no apiVersion/kind; the lister is keyed by them.
        obj = {**raw, "apiVersion": api_version, "kind": kind}
        if event_type == DELETED:
            self.workloads.delete(obj)
        else:
            self.workloads.upsert(obj)

    # ---- PodDisruptionBudgets (preemption counts violations from them) --------------------

    def on_pdb(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if event_type == DELETED:
            self.pdbs.delete(key)
            return
        try:
            pdb = PodDisruptionBudget.from_raw(raw)
        except InvalidObject as exc:
            log.error("ignoring PodDisruptionBudget that cannot be parsed", error=str(exc))
            self.pdbs.delete(key)
            return
        self.pdbs.upsert(pdb)

    # ---- storage (the volume plugins' listers) -------------------------------------------

    def on_volume_object(self, kind: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        if event_type == DELETED:
            old, new, action = self.volumes.delete(kind, raw), None, ActionType.DELETE
        else:
            old = self.volumes.upsert(kind, raw)
            new, action = raw, ActionType.ADD if old is None else ActionType.UPDATE
        if (
            old is not None
            and new is not None
            and old.get("metadata", {}).get("resourceVersion") == (new.get("metadata") or {}).get("resourceVersion")
        ):
            return  # a relist repeating what we have
        self.sched.queue.move_all_to_active_or_backoff(VOLUME_EVENTS[(kind, action)], old, new)

    # ---- resource.k8s.io (DynamicResources' listers) --------------------------------------

    def on_dra_object(self, kind: str, event_type: str | None, raw: Mapping[str, Any]) -> None:
        if event_type == DELETED:
            old, new, action = self.dra.delete(kind, raw), None, ActionType.DELETE
        else:
            old = self.dra.upsert(kind, raw)
            new, action = raw, ActionType.ADD if old is None else ActionType.UPDATE
        if kind == RESOURCE_CLAIM:
            return  # the claim tracker's listener reports what changed in its view
        if old is not None and new is not None and _same_version(old, new):
            return
        if kind == DEVICE_TAINT_RULE:
            old = new = None  # the slices it taints changed; no ResourceSlice object to hand over
            action = ActionType.UPDATE
        self.sched.queue.move_all_to_active_or_backoff(ClusterEvent(_DRA_EVENT_RESOURCES[kind], action), old, new)

    def _on_claim_view_change(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if old is not None and new is not None and _same_version(old, new):
            return
        action = ActionType.DELETE if new is None else ActionType.ADD if old is None else ActionType.UPDATE
        self.sched.queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.RESOURCE_CLAIM, action), old, new)

    # ---- namespaces ----------------------------------------------------------------------

    def on_namespace(self, event_type: str | None, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        name = meta.get("name", "")
        if event_type == DELETED:
            self.namespaces.pop(name, None)
        else:
            self.namespaces[name] = dict(meta.get("labels") or {})


def _same_version(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A relist repeating what we have."""
    return bool(
        (old.get("metadata") or {}).get("resourceVersion") == (new.get("metadata") or {}).get("resourceVersion")
    )
