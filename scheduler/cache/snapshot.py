"""Snapshot: the read-only view of the cluster one scheduling cycle works on.

Updated incrementally from the cache: only NodeInfos whose generation moved are re-cloned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.framework.table import NodeTable
from scheduler.framework.types import NodeInfo


class Snapshot:
    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        self.position: dict[str, int] = {}  # node name -> index in node_info_list
        self.table = NodeTable()  # the same nodes as columns, row i = node_info_list[i]
        self.generation = 0
        # image name -> number of nodes that have it (ImageLocality spreads scores by this)
        self.image_num_nodes: Mapping[str, int] = {}

    def list(self) -> Sequence[NodeInfo]:
        return self.node_info_list

    def get(self, node_name: str) -> NodeInfo | None:
        return self.node_info_map.get(node_name)

    def __len__(self) -> int:
        return len(self.node_info_list)

    @classmethod
    def from_node_infos(cls, node_infos: Sequence[NodeInfo]) -> Snapshot:
        """A standalone snapshot (tests, explain, what-if runs)."""
        snap = cls()
        for info in node_infos:
            snap.node_info_map[info.name] = info
        snap.node_info_list = [i for i in node_infos if i.node is not None]
        snap.position = {info.name: i for i, info in enumerate(snap.node_info_list)}
        snap.table.rebuild(snap.node_info_list)
        counts: dict[str, int] = {}
        for info in snap.node_info_list:
            assert info.node is not None
            for image in info.node.images:
                counts[image] = counts.get(image, 0) + 1
        snap.image_num_nodes = counts
        return snap
