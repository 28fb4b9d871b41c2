"""Cache: every node and every pod assigned to one, plus pods assumed by our own cycles.

A pod is assumed on a node when its scheduling cycle picks that node, before the Binding
is written; the informer's view of the bound pod later confirms it. An assumed pod whose
binding finished but is never confirmed expires after a TTL; a failed binding forgets it.

Also keeps the pod-group state (scheduler.framework.podgroups) in step with every assume,
forget, confirmation and removal, as kube's cache keeps podgroupstate; the informers add the
unscheduled members and the group objects.

Owns cluster state for scheduling; never calls the API, never decides placement.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from scheduler.cache.snapshot import Snapshot
from scheduler.framework.podgroups import PodGroupStates
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import Node, Pod


class CacheError(Exception):
    """An inconsistency between the informer's view and the cache (a bug or a missed event)."""


@dataclass(slots=True)
class _PodState:
    pod: Pod
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


class Cache:
    def __init__(self, assumed_ttl: float = 900.0, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock or time.monotonic
        self._ttl = assumed_ttl
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._generation = itertools.count(1)
        self._dirty: set[str] = set()
        self._node_set_changed = True
        self._image_nodes: dict[str, set[str]] = {}
        # image name -> size in bytes as first reported by any node holding it (kube's imageStates)
        self._image_sizes: dict[str, int] = {}
        self._images_changed = False
        self._last_generation = 0
        # Pods a what-if took off their nodes (hide_pod), shown to the snapshot as hidden_pods.
        self._hidden: dict[str, Pod] = {}
        self._hidden_changed = False
        # priority -> how many pods of that priority the nodes hold: the snapshot's lowest one lets
        # preemption answer "no victims anywhere" without walking every node's pods.
        self._priorities: dict[int, int] = {}
        self._priorities_changed = True
        self.pod_groups = PodGroupStates()

    # ---- bookkeeping -------------------------------------------------------------------

    def _touch(self, name: str, info: NodeInfo) -> None:
        self._last_generation = info.generation = next(self._generation)
        self._dirty.add(name)

    def _node_info(self, name: str) -> NodeInfo:
        info = self._nodes.get(name)
        if info is None:
            # A pod may be seen before its node: keep a placeholder without a Node.
            info = self._nodes[name] = NodeInfo()
            self._node_set_changed = True
        return info

    def _add_to_node(self, pod: Pod) -> None:
        info = self._node_info(pod.node_name)
        info.add_pod(pod)
        self._touch(pod.node_name, info)
        priorities = self._priorities
        count = priorities.get(pod.priority, 0)
        priorities[pod.priority] = count + 1
        if not count:
            self._priorities_changed = True

    def _remove_from_node(self, pod: Pod) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            return
        if info.remove_pod(pod):
            left = self._priorities[pod.priority] - 1
            if left:
                self._priorities[pod.priority] = left
            else:
                del self._priorities[pod.priority]
                self._priorities_changed = True
        self._touch(pod.node_name, info)
        if info.node is None and not info.pods:
            del self._nodes[pod.node_name]
            self._node_set_changed = True

    # ---- pods --------------------------------------------------------------------------

    def assume_pod(self, pod: Pod) -> None:
        """Count `pod` (with node_name set) on its node before the binding is confirmed."""
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is already in the cache; cannot assume it")
        self._add_to_node(pod)
        self._pods[pod.uid] = _PodState(pod, assumed=True)
        self.pod_groups.assume_pod(pod)

    def finish_binding(self, pod: Pod) -> None:
        """The Binding was written; start the assumed pod's expiry clock."""
        state = self._pods.get(pod.uid)
        if state is not None and state.assumed:
            state.binding_finished = True
            state.deadline = self._clock() + self._ttl

    def forget_pod(self, pod: Pod) -> None:
        """Undo assume_pod (binding failed or the pod went away)."""
        state = self._pods.get(pod.uid)
        if state is None:
            return
        if not state.assumed:
            raise CacheError(f"pod {pod.key} was confirmed by the informer; it cannot be forgotten")
        self._remove_from_node(state.pod)
        del self._pods[pod.uid]
        self.pod_groups.forget_pod(state.pod)

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> None:
        """The informer saw a pod assigned to a node (confirms an assumed one)."""
        self.pod_groups.add_pod(pod)
        state = self._pods.get(pod.uid)
        if state is not None:
            if state.pod.node_name != pod.node_name or state.assumed:
                # Confirmation (possibly onto another node than we assumed): replace.
                self._remove_from_node(state.pod)
                self._add_to_node(pod)
            state.pod = pod
            state.assumed = False
            state.deadline = None
            return
        self._add_to_node(pod)
        self._pods[pod.uid] = _PodState(pod)

    def update_pod(self, pod: Pod) -> None:
        state = self._pods.get(pod.uid)
        if state is None or state.assumed:
            self.add_pod(pod)
            return
        self._remove_from_node(state.pod)
        self._add_to_node(pod)
        state.pod = pod
        self.pod_groups.add_pod(pod)

    def remove_pod(self, uid: str) -> None:
        state = self._pods.pop(uid, None)
        if state is not None:
            self._remove_from_node(state.pod)
            self.pod_groups.remove_pod(state.pod)
        if self._hidden.pop(uid, None) is not None:
            self._hidden_changed = True

    def hide_pod(self, uid: str) -> Pod | None:
        """Pod-group preemption's what-if (kube's MutableSnapshotSharedLister.RemovePod): the pod
        leaves its node's accounting while the cache still knows it (state, group counts untouched).
        The pod hidden, or None if the cache does not hold it. Undone by `unhide_pod`."""
        state = self._pods.get(uid)
        if state is None:
            return None
        self._remove_from_node(state.pod)
        self._hidden[uid] = state.pod
        self._hidden_changed = True
        return state.pod

    def unhide_pod(self, uid: str) -> None:
        """Count a pod `hide_pod` took off its node again."""
        state = self._pods.get(uid)
        if state is not None:
            self._add_to_node(state.pod)
        if self._hidden.pop(uid, None) is not None:
            self._hidden_changed = True

    def get_pod(self, uid: str) -> Pod | None:
        state = self._pods.get(uid)
        return state.pod if state else None

    def cleanup_expired_assumed_pods(self) -> list[Pod]:
        """Drop assumed pods whose binding finished long ago and was never confirmed."""
        if self._ttl <= 0:
            return []  # 0 disables expiry, as kube-scheduler >= 1.23 runs
        now = self._clock()
        expired = [
            s.pod
            for s in self._pods.values()
            if s.assumed and s.binding_finished and s.deadline is not None and now >= s.deadline
        ]
        for pod in expired:
            self.remove_pod(pod.uid)
        return expired

    # ---- nodes -------------------------------------------------------------------------

    def add_or_update_node(self, node: Node) -> None:
        info = self._node_info(node.name)
        old = info.node
        if old is None:
            self._node_set_changed = True
        if old is None or old.images != node.images:
            self._set_images(node.name, old.images.keys() if old else (), node.images)
        info.node = node
        self._touch(node.name, info)

    def remove_node(self, name: str) -> None:
        info = self._nodes.get(name)
        if info is None:
            return
        if info.node is not None:
            self._set_images(name, info.node.images.keys(), {})
        self._node_set_changed = True
        if info.pods:
            info.node = None  # pods still point at it; keep until they go
            self._touch(name, info)
        else:
            del self._nodes[name]
            self._dirty.add(name)

    def _set_images(self, node: str, old: Iterable[str], new: Mapping[str, int]) -> None:
        """Remove the node from its old images, then add it to the new ones (kube's remove+add).

        An image's size is the one reported by the node that made it known; it changes only once
        no node holds the image any more and another reports it afresh.
        """
        for image in old:
            holders = self._image_nodes.get(image)
            if holders is not None:
                holders.discard(node)
                if not holders:
                    del self._image_nodes[image]
                    del self._image_sizes[image]
        for image, size in new.items():
            holders = self._image_nodes.get(image)
            if holders is None:
                holders = self._image_nodes[image] = set()
                self._image_sizes[image] = size
            holders.add(node)
        self._images_changed = True

    def sizes(self) -> dict[str, int]:
        """For the scheduler_cache_size gauge, counted as kube's cache does: "pods" includes the
        assumed ones, "nodes" every node entry (a deleted node whose pods are still cached too)."""
        assumed = sum(1 for s in self._pods.values() if s.assumed)
        return {"nodes": len(self._nodes), "pods": len(self._pods), "assumed_pods": assumed}

    def get_node_info(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # ---- snapshot ----------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> int:
        """Bring `snapshot` up to date, copying only changed nodes. Returns how many were copied."""
        copied = 0
        rebuild = self._node_set_changed
        for name in self._dirty:
            info = self._nodes.get(name)
            if info is None:
                snapshot.node_info_map.pop(name, None)
                snapshot.forget_affinity(name)
                continue
            current = snapshot.node_info_map.get(name)
            if current is None or current.generation != info.generation:
                clone = snapshot.node_info_map[name] = info.clone()
                snapshot.track_affinity(clone)
                copied += 1
                position = snapshot.position.get(name)
                if not rebuild and position is not None:
                    snapshot.node_info_list[position] = clone
                    snapshot.table.update(position, clone)
        if rebuild:
            snapshot._affinity_lists = None
            snapshot.node_info_list = [snapshot.node_info_map[n] for n, i in self._nodes.items() if i.node is not None]
            snapshot.position = {info.name: i for i, info in enumerate(snapshot.node_info_list)}
            snapshot.table.rebuild(snapshot.node_info_list)
        if self._dirty:
            snapshot.generation = self._last_generation
        if self._hidden_changed:
            snapshot.hidden_pods = tuple(self._hidden.values())
            self._hidden_changed = False
        if self._priorities_changed:
            snapshot.lowest_pod_priority = min(self._priorities, default=None)
            snapshot.lowest_pod_priority_known = True
            self._priorities_changed = False
        if self._images_changed:
            snapshot.image_num_nodes = {image: len(nodes) for image, nodes in self._image_nodes.items()}
            snapshot.image_sizes = dict(self._image_sizes)
            self._images_changed = False
        self._dirty.clear()
        self._node_set_changed = False
        return copied
