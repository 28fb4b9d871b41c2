"""Snapshot: the read-only view of the cluster one scheduling cycle works on.

Updated incrementally from the cache: only NodeInfos whose generation moved are re-cloned.
"""

from __future__ import annotations

import bisect
import builtins
from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import Pod


class Snapshot:
    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        self.position: dict[str, int] = {}  # node name -> index in node_info_list
        self.table = NodeTable()  # the same nodes as columns, row i = node_info_list[i]
        # Names of nodes with pods that have (anti-)affinity, and the derived lists (built on demand).
        self.affinity_nodes: set[str] = set()
        self.anti_affinity_nodes: set[str] = set()
        # Both in node_info_list order; kept in step node by node (see track_affinity).
        self._affinity_lists: tuple[builtins.list[NodeInfo], builtins.list[NodeInfo]] | None = None
        self.generation = 0
        # Pods a pod-group preemption what-if took off their nodes for now (Cache.hide_pod): not in
        # any NodeInfo, yet they come back; a plugin judging its own reach must count them too.
        self.hidden_pods: tuple[Pod, ...] = ()
        # image name -> number of nodes that have it (ImageLocality spreads scores by this)
        self.image_num_nodes: Mapping[str, int] = {}
        # image name -> size as kube's cache keeps it: the size first reported by any node
        self.image_sizes: Mapping[str, int] = {}
        # The lowest priority of any pod on any node (None: no pods), kept by the cache; a standalone
        # snapshot (from_node_infos) does not know it, since its NodeInfos may change after it is made.
        self.lowest_pod_priority: int | None = None
        self.lowest_pod_priority_known = False

    def list(self) -> Sequence[NodeInfo]:
        return self.node_info_list

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)

    def have_pods_with_affinity(self) -> Sequence[NodeInfo]:
        """Nodes with at least one pod that has pod affinity or anti-affinity."""
        return self._lists()[0]

    def have_pods_with_required_anti_affinity(self) -> Sequence[NodeInfo]:
        return self._lists()[1]

    def any_pods_with_affinity(self) -> bool:
        """Whether have_pods_with_affinity() could be non-empty, without building it."""
        return bool(self.affinity_nodes)

    def _lists(self) -> tuple[Sequence[NodeInfo], Sequence[NodeInfo]]:
        if self._affinity_lists is None:
            if len(self.affinity_nodes) * 8 >= len(self.node_info_list):
                with_node = [i for i in self.node_info_list if i.name in self.affinity_nodes]
            else:
                with_node = [i for n in self.affinity_nodes if (i := self.node_info_map.get(n)) and i.node is not None]
                with_node.sort(key=lambda i: self.position.get(i.name, 0))
            self._affinity_lists = (
                with_node,
                [i for i in with_node if i.name in self.anti_affinity_nodes],
            )
        return self._affinity_lists

    def _place(self, items: builtins.list[NodeInfo], info: NodeInfo, member: bool, was: bool) -> bool:
        """Put `info` into (or take its node out of) a position-ordered list; False if it cannot."""
        position = self.position.get(info.name)
        if position is None or self.node_info_list[position].name != info.name:
            return False
        key = self._position_of
        i = bisect.bisect_left(items, position, key=key)
        present = i < len(items) and items[i].name == info.name
        if present != was:
            return False
        if member and present:
            items[i] = info
        elif member:
            items.insert(i, info)
        elif present:
            del items[i]
        return True

    def _position_of(self, info: NodeInfo) -> int:
        return self.position.get(info.name, -1)

    def track_affinity(self, info: NodeInfo) -> None:
        """Keep the affinity sets (and, node by node, the lists built from them) in step with an
        updated node (called by the cache, before it rebuilds positions when the node set changed)."""
        name = info.name
        was = name in self.affinity_nodes
        was_anti = name in self.anti_affinity_nodes
        member = bool(info.pods_with_affinity)
        member_anti = bool(info.pods_with_required_anti_affinity)
        if member:
            self.affinity_nodes.add(name)
        else:
            self.affinity_nodes.discard(name)
        if member_anti:
            self.anti_affinity_nodes.add(name)
        else:
            self.anti_affinity_nodes.discard(name)
        lists = self._affinity_lists
        if lists is None or not (was or member):
            return
        if info.node is None or not (
            self._place(lists[0], info, member, was) and self._place(lists[1], info, member_anti, was_anti)
        ):
            self._affinity_lists = None

    def forget_affinity(self, name: str) -> None:
        if name in self.affinity_nodes:
            self.affinity_nodes.discard(name)
            self.anti_affinity_nodes.discard(name)
            self._affinity_lists = None

    def __len__(self) -> int:
        return len(self.node_info_list)

    def may_hold_pod_below(self, priority: int) -> bool:
        """False only when no node holds a pod of lower priority than `priority` (then preemption
        has no victim anywhere); True when it may, or when this snapshot does not know."""
        lowest = self.lowest_pod_priority
        return not self.lowest_pod_priority_known or (lowest is not None and lowest < priority)

    @classmethod
    def from_node_infos(cls, node_infos: Sequence[NodeInfo]) -> Snapshot:
        """A standalone snapshot (tests, explain, what-if runs)."""
        snap = cls()
        for info in node_infos:
            snap.node_info_map[info.name] = info
        snap.node_info_list = [i for i in node_infos if i.node is not None]
        snap.position = {info.name: i for i, info in enumerate(snap.node_info_list)}
        snap.table.rebuild(snap.node_info_list)
        for info in snap.node_info_list:
            snap.track_affinity(info)
        counts: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for info in snap.node_info_list:
            assert info.node is not None
            for image, size in info.node.images.items():
                counts[image] = counts.get(image, 0) + 1
                sizes.setdefault(image, size)  # as if the nodes had been added in this order
        snap.image_num_nodes = counts
        snap.image_sizes = sizes
        return snap


class PlacementNodes:
    """The nodes of a pod-group placement as its member cycles read them: a set of names, and their
    rows in the snapshot's table (ascending, so the snapshot's order), found again only when the
    snapshot's node set changed (its position map replaced), not on every member's cycle."""

    __slots__ = ("_position", "_rows", "names")

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self._position: dict[str, int] | None = None
        self._rows: IntArray = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def rows(self, snapshot: Snapshot) -> IntArray:
        position = snapshot.position
        if self._position is not position:
            found = sorted(row for name in self.names if (row := position.get(name)) is not None)
            self._rows = np.array(found, np.int64)
            self._position = position
        return self._rows

    def infos(self, snapshot: Snapshot) -> builtins.list[NodeInfo]:
        """The placement's NodeInfos of this snapshot, in its order."""
        node_list = snapshot.node_info_list
        return [node_list[row] for row in self.rows(snapshot).tolist()]
