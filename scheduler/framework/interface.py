"""Extension points as Protocols. A plugin implements any subset; mypy checks conformance.

Plugins are pure functions of (pod, node info, cycle state) plus the handle's listers.
They never mutate a NodeInfo and never call the API except through the handle in
PostFilter/PreBind/Bind.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.features import FeatureGates
from scheduler.framework.podgroups import PodGroupState, PodGroupStates
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import BoolArray, FilterVerdicts, IntArray, NodeTable
from scheduler.framework.types import (
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    NodeScore,
    NodeToStatus,
    Placement,
    PlacementProgress,
    PreFilterResult,
    ProposedAssignment,
    QueuedPodInfo,
    Status,
)
from scheduler.model.objects import Pod, PodDisruptionBudget
from scheduler.model.podgroups import PodGroup

if TYPE_CHECKING:
    from scheduler.api.client import ApiClient
    from scheduler.framework.dra import DraManager


class SnapshotLister(Protocol):
    def list(self) -> Sequence[NodeInfo]: ...
    def get(self, node_name: str) -> NodeInfo | None: ...
    def have_pods_with_affinity(self) -> Sequence[NodeInfo]: ...
    def have_pods_with_required_anti_affinity(self) -> Sequence[NodeInfo]: ...
    def any_pods_with_affinity(self) -> bool: ...
    def may_hold_pod_below(self, priority: int) -> bool:
        """False only when no node holds a pod of lower priority than `priority`."""
        ...


class NamespaceLister(Protocol):
    def labels(self, name: str) -> Mapping[str, str] | None:
        """The namespace's labels, or None if no such namespace is known."""
        ...

    def names(self) -> Sequence[str]: ...


class WorkloadLister(Protocol):
    """Services, ReplicationControllers, ReplicaSets and StatefulSets as raw API JSON: what
    PodTopologySpread's system default constraints derive a pod's selector from."""

    def services(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def controller(self, api_version: str, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """A ReplicationController, ReplicaSet or StatefulSet, or None if unknown."""
        ...


class VolumeLister(Protocol):
    """StorageClasses, PVs, PVCs, CSINodes, CSIDrivers, CSIStorageCapacities as raw API JSON."""

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None: ...
    def list(self, kind: str) -> Iterable[Mapping[str, Any]]: ...


class PodNominator(Protocol):
    """Pods nominated to nodes by preemption (status.nominatedNodeName), not yet bound."""

    def pods_for_node(self, node_name: str) -> list[Pod]: ...


class PdbLister(Protocol):
    """policy/v1 PodDisruptionBudgets as the informer last saw them."""

    def list(self) -> Sequence[PodDisruptionBudget]: ...


class PreemptionFramework(Protocol):
    """The part of a profile's framework a PostFilter plugin runs for its what-if (dry) runs."""

    def run_filter_with_nominated(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, first: str = ""
    ) -> Status | None: ...
    def run_pre_filter_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None: ...
    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None: ...
    def has_pre_filter_extensions(self, state: CycleState) -> bool: ...


class EventSink(Protocol):
    """A profile's event recorder (events.k8s.io/v1, best effort: queues and never raises)."""

    def eventf(
        self,
        regarding: Pod | PodGroup,
        related: Pod | PodGroup | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None: ...


class Handle(Protocol):
    """What a plugin may reach besides its arguments."""

    @property
    def activate(self) -> Callable[[Sequence[str]], None]:
        """Move these pods to activeQ now (running PreEnqueue again)."""
        ...

    @property
    def spawn(self) -> Callable[[Coroutine[Any, Any, None]], object]:
        """Run a coroutine beside the scheduling loop (API calls off the cycle); drained at shutdown."""
        ...

    @property
    def pod_exists(self) -> Callable[[Pod], bool]:
        """Whether the informers still have this pod (kube's pod lister); False once it was deleted."""
        ...

    @property
    def snapshot(self) -> SnapshotLister: ...
    @property
    def namespaces(self) -> NamespaceLister: ...
    @property
    def workloads(self) -> WorkloadLister: ...
    @property
    def volumes(self) -> VolumeLister: ...
    @property
    def dra(self) -> DraManager:
        """ResourceClaims (with in-flight allocations), ResourceSlices, DeviceClasses, DeviceTaintRules."""
        ...

    @property
    def client(self) -> ApiClient: ...
    @property
    def feature_gates(self) -> FeatureGates:
        """The gates in force (kube's feature.Features handed to plugin factories)."""
        ...

    @property
    def pod_groups(self) -> PodGroupStates:
        """Pod-group state (kube's PodGroupManager): members, assumed and bound counts, group objects."""
        ...

    @property
    def nominator(self) -> PodNominator: ...
    @property
    def pdbs(self) -> PdbLister: ...
    def framework(self, profile_name: str) -> PreemptionFramework: ...
    def event_recorder(self, profile_name: str) -> EventSink: ...
    def allow_waiting_pod(self, uid: str, plugin: str) -> None: ...
    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        """True when the pod was waiting at Permit (and is now rejected)."""
        ...


@runtime_checkable
class Plugin(Protocol):
    name: str


class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Pod) -> Status | None: ...


class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]: ...


class PreFilterExtensions(Protocol):
    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None: ...
    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None: ...


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]: ...
    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None: ...


class BatchFilterPlugin(Plugin, Protocol):
    """Optional array form of Filter: the same verdicts for every row of the node table at once."""

    def filter_batch(self, state: CycleState, pod: Pod, table: NodeTable) -> BoolArray | FilterVerdicts | None:
        """Verdicts over table rows with their statuses, or a bare mask (True = passes), or None
        when this pod needs the per-node form.

        Must agree with filter() on every node, statuses included. After a bare mask the scheduler
        asks filter() why each rejected node (that this plugin is first to reject) failed.
        """
        ...


class BatchScorePlugin(Plugin, Protocol):
    """Optional array form of Score (before NormalizeScore)."""

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray | None:
        """Raw scores for the given table rows, or None when this pod needs the per-node form."""
        ...


class BatchNormalizePlugin(Protocol):
    def normalize_batch(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray | None:
        """NormalizeScore over the scores' array, or None when this cycle needs the per-node form."""
        ...


class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: Pod, node_to_status: NodeToStatus
    ) -> tuple[str | None, Status | None]:
        """Returns the nominated node name and a status.

        The name None leaves the pod's nomination as it is; "" clears it.
        """
        ...


class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None: ...


class ScoreExtensions(Protocol):
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]: ...
    def score_extensions(self) -> ScoreExtensions | None: ...


class SignPlugin(Plugin, Protocol):
    """A PreFilter, Filter, PreScore or Score plugin that can say which parts of a pod its verdicts
    and scores depend on (OpportunisticBatching: a profile batches only if all of them can)."""

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        """The pod's fragments for this plugin; a non-success status when this pod cannot be signed."""
        ...


class NodeLocalPlugin(Plugin, Protocol):
    """A Filter, PreFilter-with-extensions or Reserve plugin that can say its effects stay on one node
    (pod-group preemption then re-checks only the members on the nodes a victim leaves or rejoins).
    A plugin without this method counts as not node-local."""

    def node_local(self, state: CycleState) -> bool:
        """For the pod this cycle state belongs to: True when this plugin's Filter verdict on a node
        reads nothing but that node's NodeInfo and the state, its AddPod/RemovePod of a pod on another
        node cannot change that verdict, and its Reserve/Unreserve change nothing another node's
        verdict reads."""
        ...


class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...
    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Must be idempotent: it may run for a pod whose reserve never ran or failed."""
        ...


class PlacementFeasiblePlugin(Plugin, Protocol):
    def placement_feasible(self, group: PodGroupState, progress: PlacementProgress) -> Status | None:
        """During a pod-group cycle: None when the group's constraints are met, Wait while they may
        still be, Unschedulable once they cannot be (the cycle stops early)."""
        ...


class PlacementGeneratePlugin(Plugin, Protocol):
    def generate_placements(self, group: PodGroupState, parent: Placement) -> tuple[list[Placement], Status | None]:
        """The placements (node subsets) of `parent` to try the group on (TopologyAwareWorkloadScheduling)."""
        ...


class PlacementScorePlugin(Plugin, Protocol):
    def score_placement(
        self, group: PodGroupState, placement: Placement, assignments: Sequence[tuple[Pod, str]]
    ) -> tuple[int, Status | None]:
        """A score for a feasible placement, from the members placed in it ((pod, node) pairs)."""
        ...

    def normalize_placement_scores(self, group: PodGroupState, scores: list[int]) -> Status | None:
        """Rewrite the scores in place to 0-100 (kube's NormalizePlacementScore)."""
        ...


class PodGroupSimulation(Protocol):
    """What a PodGroupPostFilter plugin may do to the cycle's cluster view for its what-ifs (kube's
    PodGroupSchedulingFunc plus the mutable snapshot and the framework runs upstream's evaluator
    calls). Every change it makes must be undone by the plugin before it returns."""

    def schedule(self) -> tuple[list[ProposedAssignment], Status | None]:
        """Run the group's scheduling algorithm on the current view; every assume is reverted after."""
        ...

    def remove_pod(self, pod: Pod) -> None:
        """Take an assigned pod off its node in the view."""
        ...

    def add_pod(self, pod: Pod) -> None:
        """Put a pod `remove_pod` took back on its node."""
        ...

    def node_info(self, node_name: str) -> NodeInfo | None:
        """The node as the view has it now."""
        ...

    def fits(self, assignment: ProposedAssignment) -> Status | None:
        """Filter (with nominated pods) the assigned member on its node as the view has it now."""
        ...

    def assume(self, assignment: ProposedAssignment) -> Callable[[], None]:
        """Place the member on its node and run Reserve; returns the undo (Unreserve, forget)."""
        ...

    def pre_filter_add_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        """PreFilterExtensions.AddPod for the member's cycle state after `pod` came back."""
        ...

    def pre_filter_remove_pod(self, assignment: ProposedAssignment, pod: Pod) -> Status | None:
        """PreFilterExtensions.RemovePod for the member's cycle state after `pod` left."""
        ...

    def extends_pre_filter(self, assignment: ProposedAssignment) -> bool:
        """Whether some PreFilter plugin with extensions ran for the member: pre_filter_add_pod and
        pre_filter_remove_pod do nothing for it otherwise."""
        ...

    def node_local(self, placed: Sequence[ProposedAssignment]) -> bool:
        """Whether a pod added to or removed from a node can change, among the placed members filtered
        in order (each assumed once it fits), only the verdicts of members assigned to that node:
        every member's plugins are node-local in its cycle state, and no member's assume moves a
        nomination off another node."""
        ...


class PodGroupPostFilterPlugin(Plugin, Protocol):
    def pod_group_post_filter(
        self, group: PodGroupState, members: Sequence[Pod], simulation: PodGroupSimulation
    ) -> tuple[Mapping[str, str], Status | None]:
        """After an Unschedulable pod-group cycle: make room for the group (preemption), or say why not.
        Returns the members' nominated nodes by pod UID (empty when nothing is nominated) and a status:
        success when room is being made."""
        ...


class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """Returns a status (Wait to hold the pod) and, for Wait, the timeout in seconds."""
        ...


class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """A Skip status passes the pod to the next bind plugin."""
        ...


class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


class PluginFactory(Protocol):
    def __call__(self, args: Mapping[str, Any], handle: Handle) -> Plugin: ...
