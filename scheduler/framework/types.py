"""Core framework types: Code, Status, CycleState, NodeInfo, ClusterEvent.

A Status of None means success everywhere. NodeInfo is owned by the cache; plugins must
never mutate one (preemption's what-ifs work on clones).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from scheduler.framework import podmap
from scheduler.framework.podgroups import GroupKey
from scheduler.framework.signing import Signature
from scheduler.model.objects import HostPort, Node, Pod, Resource
from scheduler.model.quantity import go_add

# A node's pods by uid (see scheduler.framework.podmap).
PodsByUid = dict[str, Pod] | podmap.PodMap[Pod]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    """Result of running a plugin; None stands for Success."""

    code: Code
    reasons: tuple[str, ...] = ()
    error: BaseException | None = None
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin=plugin)

    @classmethod
    def as_error(cls, error: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, (str(error),), error=error, plugin=plugin)

    @property
    def is_rejection(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (kube's IsRejected)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin else Status(self.code, self.reasons, self.error, plugin)


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


class StateData(Protocol):
    """Anything stored in CycleState can copy itself for preemption's what-if runs."""

    def clone(self) -> StateData: ...


T = TypeVar("T", bound=StateData)


class StateKey(Generic[T]):
    """A typed key into CycleState (one per plugin datum)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """Per scheduling cycle scratch space shared by the plugins of one pod's cycle."""

    __slots__ = ("_data", "record_plugin_metrics", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # One cycle in ten records scheduler_plugin_execution_duration_seconds (as upstream).
        self.record_plugin_metrics = False

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            value: T = self._data[key.name]
        except KeyError:
            raise KeyError(f"{key.name} not found in cycle state") from None
        return value

    def get(self, key: StateKey[T]) -> T | None:
        value: T | None = self._data.get(key.name)
        return value

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key.name, None)

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = {k: v.clone() for k, v in self._data.items()}
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        copy.record_plugin_metrics = self.record_plugin_metrics
        return copy


class NodeInfo:
    """A node plus the pods on it and their summed requests. Cache-owned; clone before changing."""

    __slots__ = (
        "_node",
        "generation",
        "name",
        "non_zero_memory",
        "non_zero_milli_cpu",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "used_ports",
    )

    def __init__(self, node: Node | None = None) -> None:
        self.node = node
        # uid -> pod: a dict while the node is small, a PodMap (copied in constant time) past
        # podmap.SPLIT_AT pods. Read them as mappings; only add_pod and remove_pod write.
        self.pods: PodsByUid = {}
        # Subsets of pods that InterPodAffinity must look at (kube-scheduler keeps the same lists).
        self.pods_with_affinity: PodsByUid = {}
        self.pods_with_required_anti_affinity: PodsByUid = {}
        self.requested = Resource()
        self.non_zero_milli_cpu = 0
        self.non_zero_memory = 0
        self.generation = 0
        # (hostIP, protocol, port) -> how many of the node's pods bind it (kube's UsedPorts).
        self.used_ports: dict[HostPort, int] = {}

    @property
    def node(self) -> Node | None:
        return self._node

    @node.setter
    def node(self, value: Node | None) -> None:
        self._node = value
        # A plain attribute: the name is read millions of times per second on the hot path.
        self.name = value.name if value is not None else ""

    @property
    def allocatable(self) -> Resource:
        return self.node.allocatable if self.node else Resource()

    def add_pod(self, pod: Pod) -> None:
        self.pods = podmap.put(self.pods, pod.uid, pod)
        if pod.has_pod_affinity:
            self.pods_with_affinity = podmap.put(self.pods_with_affinity, pod.uid, pod)
            if pod.has_required_anti_affinity:
                self.pods_with_required_anti_affinity = podmap.put(self.pods_with_required_anti_affinity, pod.uid, pod)
        self.requested.add(pod.requests)
        self.non_zero_milli_cpu = go_add(self.non_zero_milli_cpu, pod.non_zero_milli_cpu)
        self.non_zero_memory = go_add(self.non_zero_memory, pod.non_zero_memory)
        if pod.host_ports:
            used = self.used_ports
            for port in pod.host_ports:
                used[port] = used.get(port, 0) + 1

    def remove_pod(self, pod: Pod) -> bool:
        old, self.pods = podmap.pop(self.pods, pod.uid)
        if old is None:
            return False
        if old.has_pod_affinity:
            _, self.pods_with_affinity = podmap.pop(self.pods_with_affinity, pod.uid)
            _, self.pods_with_required_anti_affinity = podmap.pop(self.pods_with_required_anti_affinity, pod.uid)
        self.requested.sub(old.requests)
        self.non_zero_milli_cpu = go_add(self.non_zero_milli_cpu, -old.non_zero_milli_cpu)
        self.non_zero_memory = go_add(self.non_zero_memory, -old.non_zero_memory)
        if old.host_ports:
            used = self.used_ports
            for port in old.host_ports:
                left = used.get(port, 0) - 1
                if left > 0:
                    used[port] = left
                else:
                    used.pop(port, None)
        return True

    def clone(self) -> NodeInfo:
        copy = NodeInfo(self.node)
        copy.pods = self.pods.copy()
        if self.pods_with_affinity:
            copy.pods_with_affinity = self.pods_with_affinity.copy()
            copy.pods_with_required_anti_affinity = self.pods_with_required_anti_affinity.copy()
        copy.requested = self.requested.copy()
        copy.non_zero_milli_cpu = self.non_zero_milli_cpu
        copy.non_zero_memory = self.non_zero_memory
        copy.generation = self.generation
        if self.used_ports:
            copy.used_ports = dict(self.used_ports)
        return copy

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self.pods)}, generation={self.generation})"


class EventResource(enum.StrEnum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    # The unscheduled pod itself, as seen by the plugins that rejected it.
    TARGET_POD = "TargetPod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"
    RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
    RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
    DEVICE_CLASS = "resource.k8s.io/DeviceClass"
    POD_GROUP = "scheduling.k8s.io/PodGroup"
    # A custom resource is named <plural>.<version>.<group> (kube's convention for out-of-tree
    # plugins' events): scheduler-plugins' PodGroup, which Coscheduling registers for.
    SCHEDULER_PLUGINS_POD_GROUP = "podgroups.v1alpha1.scheduling.x-k8s.io"
    WILDCARD = "*"


class ActionType(enum.IntFlag):
    """kube's ActionType bits, in kube's order; UPDATE is every fine-grained update together."""

    ADD = 1
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4  # also spec.unschedulable turning false
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_NODE_DECLARED_FEATURE = 1 << 7
    UPDATE_NODE_PREEMPTION_POLICY = 1 << 8
    UPDATE_POD_LABEL = 1 << 9
    UPDATE_POD_SCALE_DOWN = 1 << 10
    UPDATE_POD_SCALE_UP = 1 << 11
    UPDATE_POD_TOLERATION = 1 << 12
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 13
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 1 << 14
    ALL = (1 << 15) - 1
    UPDATE = ALL & ~(ADD | DELETE)

    @property
    def kube_name(self) -> str:
        """kube's ActionType.String(): a single bit's name, Update, All, or "" for other unions."""
        if self == ActionType.UPDATE:
            return "Update"
        if self == ActionType.ALL:
            return "All"
        name = self.name
        if name is None or "|" in name:
            return ""
        return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action: ActionType
    custom_label: str = ""
    # kube's ClusterEvent.Label(): the metric and log name (e.g. NodeAdd, NodeUpdateNodeTaint),
    # worked out once: every queueing hint's duration sample is labelled with it.
    label: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.custom_label or f"{self.resource}{self.action.kube_name}")

    @property
    def is_wildcard(self) -> bool:
        return self.resource == EventResource.WILDCARD and self.action == ActionType.ALL

    def matches(self, other: ClusterEvent) -> bool:
        """Whether this registered event covers the incoming event `other` (kube's MatchClusterEvents).

        The incoming event must be the same as or more specific than the registered one: a general
        Node/Update (nothing more specific could be told) does not match Node/UpdateNodeLabel.
        """
        if self.is_wildcard:
            return True
        resource_ok = self.resource in (EventResource.WILDCARD, other.resource) or (
            self.resource == EventResource.POD
            and other.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD, EventResource.TARGET_POD)
        )
        return resource_ok and bool(self.action & other.action) and other.action <= self.action


class QueueingHint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


# What a cluster event carries: model Pods and Nodes, the storage objects (PVCs, PVs, StorageClasses,
# CSINodes, CSIDrivers, CSIStorageCapacities, VolumeAttachments) as the API sends them.
ApiObject = Mapping[str, Any]
EventObject = Pod | Node | ApiObject

# hint(pod, old object, new object) -> QUEUE or SKIP; old is None for an add, new for a delete.
QueueingHintFn = Callable[[Pod, EventObject | None, EventObject | None], QueueingHint]


# A waiting pod's keys, and an event's (old, new) keys or None (the event may concern any pod).
PodKeysFn = Callable[[Pod], Iterable[Hashable]]
EventKeysFn = Callable[[EventObject | None, EventObject | None], Iterable[Hashable] | None]


@dataclass(frozen=True, slots=True)
class EventScope:
    """Which waiting pods an event can concern, for a hint that queues only the pods an object names.

    The promise: when `event_keys(old, new)` gives keys, the registration's hint answers SKIP, without
    raising, for every pod none of whose `pod_keys` is among them. The queue keeps its waiting pods
    indexed by `pod_keys`, so such an event visits only the pods it names instead of every one.
    """

    pod_keys: PodKeysFn
    event_keys: EventKeysFn


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None
    scope: EventScope | None = None


@dataclass(slots=True)
class PreFilterResult:
    """Restricts filtering to a set of node names (None means all nodes)."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(slots=True)
class NodeScore:
    name: str
    score: int


class NodeToStatus:
    """Per-node statuses, plus one status for every node not listed (kube's NodeToStatus).

    What PostFilter plugins read: nodes a PreFilter rejected (or left out) all at once are not
    listed one by one, their status is the absent-nodes status.
    """

    __slots__ = ("absent", "statuses")

    def __init__(self, statuses: Mapping[str, Status] | None = None, absent: Status | None = None) -> None:
        self.statuses: dict[str, Status] = dict(statuses or {})
        self.absent = absent if absent is not None else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def get(self, node_name: str) -> Status:
        return self.statuses.get(node_name, self.absent)

    def __len__(self) -> int:
        return len(self.statuses)

    def nodes_for_code(self, nodes: Sequence[NodeInfo], code: Code) -> list[NodeInfo]:
        """The nodes (in the given order) whose status, listed or absent, has this code."""
        return [info for info in nodes if self.get(info.name).code == code]


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fit nowhere: per-node statuses and the plugins that rejected it."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # Status of every node not listed in node_to_status (PreFilter rejected them all at once).
    absent_status: Status | None = None

    def add_plugin_status(self, status: Status) -> None:
        """kube's AddPluginStatus: a rejecting plugin is unschedulable; a Pending one is pending too."""
        if not status.plugin:
            return
        if status.is_rejection:
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)

    def status_of(self, node_name: str) -> Status | None:
        return self.node_to_status.get(node_name, self.absent_status)

    def node_statuses(self) -> NodeToStatus:
        return NodeToStatus(self.node_to_status, self.absent_status)


class FitError(Exception):
    """The pod fits on no node; str() is kube-scheduler's FailedScheduling message."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    @classmethod
    def single_node(cls, pod: Pod, node_name: str, status: Status) -> FitError:
        """kube's FitError for a rejection at Reserve, Permit or WaitOnPermit: one node, the chosen one."""
        diagnosis = Diagnosis(node_to_status={node_name: status})
        diagnosis.add_plugin_status(status)
        return cls(pod, 1, diagnosis)

    def __str__(self) -> str:
        diagnosis = self.diagnosis
        counts: dict[str, int] = {}
        for status in diagnosis.node_to_status.values():
            for reason in status.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        absent = self.num_all_nodes - len(diagnosis.node_to_status)
        if diagnosis.absent_status is not None and not diagnosis.pre_filter_msg and absent > 0:
            # Nodes a PreFilter result left out are reported with that plugin's status.
            for reason in diagnosis.absent_status.reasons:
                counts[reason] = counts.get(reason, 0) + absent
        message = f"0/{self.num_all_nodes} nodes are available:"
        if diagnosis.pre_filter_msg:
            message += f" {diagnosis.pre_filter_msg}."
        if counts:
            message += " " + ", ".join(sorted(f"{n} {r}" for r, n in counts.items())) + "."
        if self.diagnosis.post_filter_msg:
            # As upstream: the PostFilter part carries its own punctuation.
            message += f" {self.diagnosis.post_filter_msg}"
        return message


NO_NODES_AVAILABLE = "no nodes available to schedule pods"


class NoNodesAvailable(Exception):
    """The snapshot has no node at all (kube's ErrNoNodesAvailable)."""

    def __str__(self) -> str:
        return NO_NODES_AVAILABLE


class PluginError(RuntimeError):
    """A plugin answered with an Error status (often a pod field it cannot parse): its message says
    what is wrong, so it is logged as one line, not with a traceback."""


def plugin_list(names: Iterable[str]) -> str:
    """Plugin names as kube-scheduler prints a Go string slice: [A B]."""
    return "[" + " ".join(sorted(names)) + "]"


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue plus its scheduling history."""

    pod: Pod
    timestamp: float  # when it was last added to a queue
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    gating_plugin: str = ""
    # Backing off after an error (not a rejection): such a pod waits its backoff out in full.
    error_backoff: bool = False
    # Moved out of the unschedulable pool by the leftover flush (scheduler_pod_scheduled_after_flush_total).
    was_flushed_from_unschedulable: bool = False
    # OpportunisticBatching: the profile's signature of `pod`, made whenever the queue takes the pod in.
    signature: Signature | None = None


def pod_group_member_order(info: QueuedPodInfo) -> tuple[int, int, float, str]:
    """kube's PodGroupMemberPodsOrderingFunc as a sort key: higher priority first, then more
    attempts (older members), then the earlier queue timestamp, then the name."""
    return (-info.pod.priority, -info.attempts, info.timestamp, info.pod.name)


@dataclass(slots=True)
class QueuedPodGroupInfo:
    """A pod group popped as one entity: the group's key and its queued members in kube's order."""

    key: GroupKey
    members: list[QueuedPodInfo]


@dataclass(frozen=True, slots=True)
class PlacementProgress:
    """Where a pod-group cycle stands (kube's framework.PlacementProgress): members still to try, and
    members scheduled (already assumed or bound before the cycle, plus those placed in it)."""

    remaining: int
    scheduled: int


@dataclass(frozen=True, slots=True)
class Placement:
    """A set of nodes a pod group is tried on as if they were the whole cluster (kube's fwk.Placement);
    the name is the topology domain (empty for the whole cluster)."""

    name: str
    nodes: tuple[NodeInfo, ...]


@dataclass(frozen=True, slots=True)
class ProposedAssignment:
    """One member placed by a pod-group simulation (kube's fwk.ProposedAssignment): the node it went
    to and the cycle state it was filtered with (earlier members already assumed)."""

    pod: Pod
    node_name: str
    state: CycleState
