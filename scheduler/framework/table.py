"""NodeTable: the snapshot's nodes as columns (numpy), for the batch forms of Filter/Score plugins.

Row i describes snapshot.node_info_list[i]. Resource columns are refreshed row by row when a
node's pods change; masks and values derived from Node objects alone (node_mask/node_values,
keyed by what the pod contributes) are built on first use and dropped whenever any node object
changes — node changes are rare next to pod binds. Read-only for plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.framework.types import NodeInfo, Status
from scheduler.model.objects import BIND_ALL_HOST_IP, HostPort, Node

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MAX_DERIVED = 4096

# A rejection key of FilterVerdicts: rejected, with the status the plugin's per-node form gives.
PER_NODE = -1

_NO_PORTS: frozenset[HostPort] = frozenset()


class FilterVerdicts:
    """A batch Filter's verdicts, and why each rejected row failed, so the scheduler need not ask
    the per-node form: `passes` per row; `keys_of(rows)` gives rejected rows a key each, any
    positive key naming one way to fail, described by status_for(key), and PER_NODE leaving the
    row to the per-node form (rows a plugin does not describe in arrays).

    Reasons are worked out only for the rejected rows the scheduler reaches, when it reaches them:
    a cycle where every node passes pays for the mask alone. keys_of None: every rejected row
    fails the one way status_for(1) describes.
    """

    # A plain class rather than a frozen dataclass: built by several plugins in every cycle, and
    # a frozen dataclass's construction costs twice as much. Read-only by convention.
    __slots__ = ("keys_of", "passes", "status_for")

    def __init__(
        self, passes: BoolArray, keys_of: Callable[[IntArray], IntArray] | None, status_for: Callable[[int], Status]
    ) -> None:
        self.passes = passes
        self.keys_of = keys_of
        self.status_for = status_for

    @classmethod
    def from_mask(cls, mask: BoolArray, status: Status) -> FilterVerdicts:
        """One reason for every rejected row."""
        return cls(mask, None, lambda _key: status)

    @classmethod
    def from_keys(cls, keys: IntArray, status_for: Callable[[int], Status]) -> FilterVerdicts:
        """Keys already worked out for every row (0 passes)."""
        passes: BoolArray = keys == 0
        return cls(passes, keys.__getitem__, status_for)

    def statuses(self, rows: IntArray) -> list[Status | None]:
        """The statuses of these rejected rows (None: PER_NODE), one status per distinct key
        however many rows share it."""
        if self.keys_of is None:
            return [self.status_for(1)] * len(rows)
        described: dict[int, Status | None] = {PER_NODE: None}
        out: list[Status | None] = []
        for key in self.keys_of(rows).tolist():
            if key not in described:
                described[key] = self.status_for(key)
            out.append(described[key])
        return out


_RESOURCE_COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "pod_count",
    "nz_cpu",
    "nz_mem",
)


class NodeTable:
    def __init__(self) -> None:
        self.size = 0
        self.infos: list[NodeInfo] = []
        self._nodes: list[Node | None] = []
        self.alloc_cpu: IntArray = np.zeros(0, np.int64)
        self.alloc_mem: IntArray = np.zeros(0, np.int64)
        self.alloc_eph: IntArray = np.zeros(0, np.int64)
        self.alloc_pods: IntArray = np.zeros(0, np.int64)
        self.req_cpu: IntArray = np.zeros(0, np.int64)
        self.req_mem: IntArray = np.zeros(0, np.int64)
        self.req_eph: IntArray = np.zeros(0, np.int64)
        self.pod_count: IntArray = np.zeros(0, np.int64)
        self.nz_cpu: IntArray = np.zeros(0, np.int64)
        self.nz_mem: IntArray = np.zeros(0, np.int64)
        self.unschedulable: BoolArray = np.zeros(0, np.bool_)
        self.has_scalar_requests: BoolArray = np.zeros(0, np.bool_)
        self.arange: IntArray = np.zeros(0, np.int64)
        # Per row, the NodeInfo generation it was filled from: a row changed since a plugin last
        # looked iff its generation differs (for plugins that keep their own incremental state).
        self.generation: IntArray = np.zeros(0, np.int64)
        # Replaced whenever rows are re-laid (node added or removed): row numbers change meaning.
        self.layout: object = object()
        self._derived: dict[object, object] = {}
        # Requested amounts of the extended resources some pod asked about, kept row by row.
        self._req_scalar: dict[str, IntArray] = {}
        # Host ports in use: (protocol, port) -> hostIP -> rows; and each row's keys, to diff.
        self._port_rows: dict[tuple[str, int], dict[str, set[int]]] = {}
        self._row_ports: list[frozenset[HostPort]] = []

    # ---- maintenance (cache/snapshot only) ---------------------------------------------

    def rebuild(self, infos: Sequence[NodeInfo]) -> None:
        n = len(infos)
        self.size = n
        self.infos = list(infos)
        self._nodes = [None] * n
        for column in _RESOURCE_COLUMNS:
            setattr(self, column, np.zeros(n, np.int64))
        self.unschedulable = np.zeros(n, np.bool_)
        self.has_scalar_requests = np.zeros(n, np.bool_)
        self.arange = np.arange(n, dtype=np.int64)
        self.generation = np.zeros(n, np.int64)
        self.layout = object()
        self._req_scalar = {}
        self._port_rows = {}
        self._row_ports = [_NO_PORTS] * n
        for row, info in enumerate(infos):
            self.update(row, info)
        self._derived.clear()

    def update(self, row: int, info: NodeInfo) -> None:
        self.infos[row] = info
        node = info.node
        if node is not self._nodes[row]:
            self._nodes[row] = node
            alloc = info.allocatable
            self.alloc_cpu[row] = alloc.milli_cpu
            self.alloc_mem[row] = alloc.memory
            self.alloc_eph[row] = alloc.ephemeral_storage
            self.alloc_pods[row] = alloc.allowed_pods
            self.unschedulable[row] = bool(node and node.unschedulable)
            self._derived.clear()
        self.generation[row] = info.generation
        req = info.requested
        self.req_cpu[row] = req.milli_cpu
        self.req_mem[row] = req.memory
        self.req_eph[row] = req.ephemeral_storage
        self.pod_count[row] = len(info.pods)
        self.nz_cpu[row] = info.non_zero_milli_cpu
        self.nz_mem[row] = info.non_zero_memory
        self.has_scalar_requests[row] = any(req.scalar.values())
        for name, column in self._req_scalar.items():
            column[row] = req.scalar.get(name, 0)
        if info.used_ports or self._row_ports[row]:
            self._index_ports(row, frozenset(info.used_ports))

    def _index_ports(self, row: int, ports: frozenset[HostPort]) -> None:
        before = self._row_ports[row]
        if ports == before:
            return
        for ip, protocol, port in before - ports:
            by_ip = self._port_rows[(protocol, port)]
            rows = by_ip[ip]
            rows.discard(row)
            if not rows:
                del by_ip[ip]
                if not by_ip:
                    del self._port_rows[(protocol, port)]
        for ip, protocol, port in ports - before:
            self._port_rows.setdefault((protocol, port), {}).setdefault(ip, set()).add(row)
        self._row_ports[row] = ports

    def host_port_rows(self, wanted: Sequence[HostPort]) -> set[int]:
        """Rows whose pods bind a host port conflicting with one of `wanted` (kube's
        HostPortInfo.CheckConflict: 0.0.0.0 conflicts with the same protocol and port on any IP)."""
        rows: set[int] = set()
        for ip, protocol, port in wanted:
            by_ip = self._port_rows.get((protocol, port))
            if not by_ip:
                continue
            if ip == BIND_ALL_HOST_IP:
                for users in by_ip.values():
                    rows |= users
            else:
                rows |= by_ip.get(BIND_ALL_HOST_IP, set())
                rows |= by_ip.get(ip, set())
        return rows

    # ---- derived columns ---------------------------------------------------------------

    def _remember(self, key: object, value: object) -> None:
        if len(self._derived) >= MAX_DERIVED:
            self._derived.clear()  # many distinct pod shapes: start over rather than grow
        self._derived[key] = value

    def node_mask(self, key: Hashable, predicate: Callable[[Node], bool]) -> BoolArray:
        """predicate(node) for every row, computed once per `key` until a node changes.

        For verdicts that depend only on the Node object and a pod property summed up by `key`
        (its tolerations, its node selector...): pods alike share one evaluation.
        """
        cache_key = ("mask", key)
        cached = self._derived.get(cache_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        mask = np.fromiter((node is not None and predicate(node) for node in self._nodes), np.bool_, self.size)
        self._remember(cache_key, mask)
        return mask

    def alloc_scalar(self, name: str) -> IntArray:
        """Allocatable of an extended resource per row (0 where the node offers none)."""
        return self.node_values(("alloc scalar", name), lambda node: node.allocatable.scalar.get(name, 0))

    def req_scalar(self, name: str) -> IntArray:
        """Requested amount of an extended resource per row, kept up to date from then on."""
        column = self._req_scalar.get(name)
        if column is None:
            column = self._req_scalar[name] = np.fromiter(
                (info.requested.scalar.get(name, 0) for info in self.infos), np.int64, self.size
            )
        return column

    def has_node(self) -> BoolArray:
        """Rows whose NodeInfo has its Node (a row kept for pods of a deleted node has none)."""
        return self.node_mask("has node", _always)

    def node_values(self, key: Hashable, value: Callable[[Node], int]) -> IntArray:
        """value(node) for every row (0 for a missing node), cached like node_mask."""
        cache_key = ("values", key)
        cached = self._derived.get(cache_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        values = np.fromiter((value(node) if node is not None else 0 for node in self._nodes), np.int64, self.size)
        self._remember(cache_key, values)
        return values

    def node_verdicts(
        self, key: Hashable, rejection: Callable[[Node], int], status_for: Callable[[int], Status]
    ) -> FilterVerdicts:
        """FilterVerdicts.from_keys over rejection(node) for every row (0 for a missing node),
        cached like node_mask (mask included: pods alike share it)."""
        cache_key = ("verdicts", key)
        cached = self._derived.get(cache_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        verdicts = FilterVerdicts.from_keys(self.node_values(key, rejection), status_for)
        self._remember(cache_key, verdicts)
        return verdicts

    def label_codes(self, key: str) -> tuple[IntArray, Mapping[str, int]]:
        """A topology column: per row a code for the node's value of label `key` (-1 when the node
        lacks the label or is missing), and the code of each value; cached like node_mask.

        Counts kept per (key, value) become arrays over codes, so a per-node lookup in them is
        one fancy index over the table (index -1 reads an extra last slot the caller leaves empty).
        """
        cache_key = ("labels", key)
        cached = self._derived.get(cache_key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        codes: dict[str, int] = {}
        column = np.fromiter(
            (
                codes.setdefault(value, len(codes))
                if node is not None and (value := node.labels.get(key)) is not None
                else -1
                for node in self._nodes
            ),
            np.int64,
            self.size,
        )
        self._remember(cache_key, (column, codes))
        return column, codes

    def values_unique(self, key: str) -> bool:
        """Whether no two nodes carry the same value of label `key` (nodes without it aside): a
        topology domain of that key is then a single node."""
        column, codes = self.label_codes(key)
        return len(codes) == int(np.count_nonzero(column >= 0))


def _always(node: Node) -> bool:
    return True
