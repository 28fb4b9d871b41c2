"""VolumeBinding: cases ported from kube's volume_binding_test.go (TestVolumeBinding) plus the
assume cache, Reserve/Unreserve and PreBind against the fake client."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from harness.workload import registry_value
from plugins import volumebinding
from plugins.volumebinding import STATE_KEY, VolumeBinding, parse_args
from plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import FrameworkHandle, Wiring
from scheduler.framework.types import Code, CycleState, NodeInfo, QueueingHint, Status
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VolumeStore,
)
from scheduler.model.objects import Node, Pod
from scheduler.model.volumes import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from scheduler.testing.builders import make_node, make_pod

Raw = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
GCE_ZONE = "topology.gke.io/zone"
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"


def storage_class(name: str, mode: str | None = "WaitForFirstConsumer", provisioner: str = "") -> Raw:
    sc: Raw = {"metadata": {"name": name, "resourceVersion": "1"}, "provisioner": provisioner}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    return sc


IMMEDIATE_SC = storage_class("immediate-sc", "Immediate")
WAIT_SC = storage_class("wait-sc")
WAIT_SC_CAPACITY = storage_class("wait-sc-with-storage-capacity", provisioner="driver-with-storage-capacity")
DRIVER_CAPACITY: Raw = {"metadata": {"name": "driver-with-storage-capacity"}, "spec": {"storageCapacity": True}}


def pvc(
    name: str, sc: str, bound_pv: str = "", request: str = "", phase: str = "", annotations: Raw | None = None
) -> Raw:
    obj: Raw = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "annotations": dict(annotations or {}),
        },
        "spec": {"storageClassName": sc, "accessModes": ["ReadWriteOnce"]},
    }
    if bound_pv:
        obj["spec"]["volumeName"] = bound_pv
        obj["metadata"]["annotations"][ANN_BIND_COMPLETED] = "true"
    if request:
        obj["spec"]["resources"] = {"requests": {"storage": request}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def pv(name: str, sc: str, phase: str = "Available", capacity: str = "", affinity: Raw | None = None) -> Raw:
    obj: Raw = {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"storageClassName": sc, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": phase},
    }
    if capacity:
        obj["spec"]["capacity"] = {"storage": capacity}
    if affinity:
        terms = [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]
        obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": terms}]}}
    return obj


def gce_pv(name: str, affinity: Raw | None = None, labels: Raw | None = None) -> Raw:
    """A bound in-tree GCE PD PV (its plugin's CSI migration is on)."""
    obj = pv(name, "wait-sc", "Bound", affinity=affinity)
    obj["spec"]["gcePersistentDisk"] = {"pdName": name}
    obj["metadata"]["labels"] = dict(labels or {})
    return obj


def csi_node(name: str, migrated: str | None = None) -> Raw:
    obj: Raw = {"metadata": {"name": name, "resourceVersion": "1"}, "spec": {"drivers": []}}
    if migrated is not None:
        obj["metadata"]["annotations"] = {MIGRATED_PLUGINS: migrated}
    return obj


def capacity(name: str, sc: str, amount: str, node_labels: Raw) -> Raw:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "storageClassName": sc,
        "capacity": amount,
        "nodeTopology": {"matchLabels": node_labels},
    }


def pod_with_claims(*claims: str, name: str = "pod-a") -> Pod:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return make_pod(name).uid(f"uid-{name}").spec(volumes=volumes).obj()


def node(name: str, **labels: str) -> Node:
    return make_node(name).labels({HOSTNAME: name, **labels}).obj()


class World:
    """A store, a fake client, a snapshot and the plugin over them."""

    def __init__(
        self,
        nodes: Sequence[Node],
        objects: Sequence[tuple[str, Raw]] = (),
        args: dict[str, Any] | None = None,
    ) -> None:
        self.store = VolumeStore([(STORAGE_CLASS, sc) for sc in (IMMEDIATE_SC, WAIT_SC, WAIT_SC_CAPACITY)])
        self.store.upsert(CSI_DRIVER, DRIVER_CAPACITY)
        for kind, obj in objects:
            self.store.upsert(kind, obj)
        snapshot = Snapshot()
        for n in nodes:
            info = NodeInfo(n)
            snapshot.node_info_map[n.name] = info
            snapshot.node_info_list.append(info)
        self.nodes = [snapshot.node_info_map[n.name] for n in nodes]
        self.client = FakeApiClient()
        self.handle = FrameworkHandle(self.client, snapshot, volumes=self.store)
        self.handle.wire(Wiring.standalone(snapshot))
        self.plugin: VolumeBinding = volumebinding.new(args or {}, self.handle)

    def run(self, pod: Pod) -> tuple[Status | None, list[Status | None], list[int], CycleState]:
        state = CycleState()
        _, pre = self.plugin.pre_filter(state, pod, self.nodes)
        if pre is not None:
            return pre, [], [], state
        filters = [self.plugin.filter(state, pod, info) for info in self.nodes]
        scores = [self.plugin.score(state, pod, info)[0] for info in self.nodes]
        return None, filters, scores, state


def unresolvable(*reasons: str) -> Status:
    return Status.unresolvable(*reasons, plugin="VolumeBinding")


CASES: list[tuple[str, Pod, list[Node], list[tuple[str, Raw]], Status | None, list[Status | None], list[int]]] = [
    (
        "all bound",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, pv("pv-a", "wait-sc")),
        ],
        None,
        [None],
        [0],
    ),
    (
        "PVC does not exist",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [],
        unresolvable('persistentvolumeclaim "pvc-a" not found'),
        [],
        [],
    ),
    (
        "Part of PVCs do not exist",
        pod_with_claims("pvc-a", "pvc-b"),
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a"))],
        unresolvable('persistentvolumeclaim "pvc-b" not found'),
        [],
        [],
    ),
    (
        "immediate claims not bound",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "immediate-sc"))],
        unresolvable("pod has unbound immediate PersistentVolumeClaims"),
        [],
        [],
    ),
    (
        "unbound claims no matches",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc"))],
        None,
        [unresolvable(ERR_REASON_BIND_CONFLICT)],
        [0],
    ),
    (
        "bound and unbound unsatisfied",
        pod_with_claims("pvc-a", "pvc-b"),
        [node("node-a", foo="barbar")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-b", "wait-sc")),
            (PERSISTENT_VOLUME, pv("pv-a", "wait-sc", affinity={"foo": ["bar"]})),
        ],
        None,
        [unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)],
        [0],
    ),
    (
        "pv not found",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a"))],
        None,
        [unresolvable(ERR_REASON_PV_NOT_EXIST)],
        [0],
    ),
    (
        "pv not found claim lost",
        pod_with_claims("pvc-a"),
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a", phase="Lost"))],
        unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'),
        [],
        [],
    ),
    (
        "local volumes with close capacity are preferred",
        pod_with_claims("pvc-a"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", request="50Gi")),
            (PERSISTENT_VOLUME, pv("pv-a-0", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-a-1", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-b-0", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
            (PERSISTENT_VOLUME, pv("pv-b-1", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
        ],
        None,
        [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)],
        [75, 50, 0],
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        pod_with_claims("pvc-0", "pvc-1"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-0", "wait-sc", request="50Gi")),
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-1", "wait-hdd-sc", request="100Gi")),
            (STORAGE_CLASS, storage_class("wait-hdd-sc")),
            (PERSISTENT_VOLUME, pv("pv-a-0", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-a-1", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-a-2", "wait-hdd-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-a-3", "wait-hdd-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]})),
            (PERSISTENT_VOLUME, pv("pv-b-0", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
            (PERSISTENT_VOLUME, pv("pv-b-1", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
            (PERSISTENT_VOLUME, pv("pv-b-2", "wait-hdd-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
            (PERSISTENT_VOLUME, pv("pv-b-3", "wait-hdd-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]})),
        ],
        None,
        [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)],
        [63, 25, 0],
    ),
    (
        "storage capacity score",
        pod_with_claims("pvc-dynamic"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-dynamic", "wait-sc-with-storage-capacity", request="10Gi")),
            (CSI_STORAGE_CAPACITY, capacity("node-a", "wait-sc-with-storage-capacity", "100Gi", {HOSTNAME: "node-a"})),
            (CSI_STORAGE_CAPACITY, capacity("node-b", "wait-sc-with-storage-capacity", "50Gi", {HOSTNAME: "node-b"})),
            (CSI_STORAGE_CAPACITY, capacity("node-c", "wait-sc-with-storage-capacity", "10Gi", {HOSTNAME: "node-c"})),
        ],
        None,
        [None, None, None],
        [90, 80, 0],
    ),
    (
        "dynamic provisioning: not enough capacity",
        pod_with_claims("pvc-dynamic"),
        [node("node-a")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-dynamic", "wait-sc-with-storage-capacity", request="10Gi")),
            (CSI_STORAGE_CAPACITY, capacity("node-a", "wait-sc-with-storage-capacity", "5Gi", {HOSTNAME: "node-a"})),
        ],
        None,
        [unresolvable(ERR_REASON_NOT_ENOUGH_SPACE)],
        [0],
    ),
    # CSI migration (tryTranslatePVToCSI): on a node whose CSINode names kubernetes.io/gce-pd as
    # migrated, a GCE PD PV's zone topology is checked under the PD CSI driver's key.
    (
        "migrated in-tree PV: node affinity checked under the CSI topology key",
        pod_with_claims("pvc-a"),
        [node("node-csi", **{GCE_ZONE: "z1"}), node("node-in-tree", **{ZONE: "z1"})],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, gce_pv("pv-a", affinity={ZONE: ["z1"]})),
            (CSI_NODE, csi_node("node-csi", "kubernetes.io/aws-ebs,kubernetes.io/gce-pd")),
            (CSI_NODE, csi_node("node-in-tree", "kubernetes.io/gce-pd")),
        ],
        None,
        [None, unresolvable(ERR_REASON_NODE_CONFLICT)],
        [0, 0],
    ),
    (
        "in-tree PV not migrated on the node: node affinity checked as written",
        pod_with_claims("pvc-a"),
        [
            node("node-csi", **{GCE_ZONE: "z1"}),
            node("node-in-tree", **{ZONE: "z1"}),
            node("no-csinode", **{ZONE: "z1"}),
        ],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, gce_pv("pv-a", affinity={ZONE: ["z1"]})),
            (CSI_NODE, csi_node("node-csi", "kubernetes.io/aws-ebs")),
            (CSI_NODE, csi_node("node-in-tree")),
        ],
        None,
        [unresolvable(ERR_REASON_NODE_CONFLICT), None, None],
        [0, 0, 0],
    ),
    (
        "migrated in-tree PV without zone label or affinity fits every node (batch Filter answers)",
        pod_with_claims("pvc-a"),
        [node("migrated", **{ZONE: "z1"}), node("not-migrated")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, gce_pv("pv-a")),
            (CSI_NODE, csi_node("migrated", "kubernetes.io/gce-pd")),
        ],
        None,
        [None, None],
        [0, 0],
    ),
    (
        "migrated in-tree PV with a zone label only gains the CSI zone term",
        pod_with_claims("pvc-a"),
        [
            node("csi-z1", **{GCE_ZONE: "us-east1-a"}),
            node("csi-z2", **{GCE_ZONE: "us-east1-b"}),
            node("in-tree-z1", **{ZONE: "us-east1-a"}),
            node("not-migrated", **{ZONE: "z9"}),
        ],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, gce_pv("pv-a", labels={ZONE: "us-east1-a__us-east1-c"})),
            (CSI_NODE, csi_node("csi-z1", "kubernetes.io/gce-pd")),
            (CSI_NODE, csi_node("csi-z2", "kubernetes.io/gce-pd")),
            (CSI_NODE, csi_node("in-tree-z1", "kubernetes.io/gce-pd")),
        ],
        None,
        [None, unresolvable(ERR_REASON_NODE_CONFLICT), unresolvable(ERR_REASON_NODE_CONFLICT), None],
        [0, 0, 0, 0],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "objects", "pre", "filters", "scores"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_volume_binding(
    pod: Pod,
    nodes: list[Node],
    objects: list[tuple[str, Raw]],
    pre: Status | None,
    filters: list[Status | None],
    scores: list[int],
) -> None:
    world = World(nodes, objects)
    got_pre, got_filters, got_scores, _ = world.run(pod)
    assert got_pre == pre
    assert got_filters == filters
    assert got_scores == scores
    _batch_agrees(World(nodes, objects), pod, filters, scores)


def test_pod_without_claims_is_skipped() -> None:
    world = World([node("node-a")])
    state = CycleState()
    _, status = world.plugin.pre_filter(state, make_pod("plain").obj(), world.nodes)
    assert status is not None and status.code == Code.SKIP
    assert world.plugin.pre_score(state, make_pod("plain").obj(), world.nodes) is not None


def test_smallest_fitting_pv_is_chosen() -> None:
    world = World(
        [node("node-a")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", request="5Gi")),
            (PERSISTENT_VOLUME, pv("pv-big", "wait-sc", capacity="50Gi")),
            (PERSISTENT_VOLUME, pv("pv-small", "wait-sc", capacity="10Gi")),
            (PERSISTENT_VOLUME, pv("pv-too-small", "wait-sc", capacity="1Gi")),
        ],
    )
    _, filters, _, state = world.run(pod_with_claims("pvc-a"))
    assert filters == [None]
    chosen = state.read(STATE_KEY).volumes_by_node["node-a"].static_bindings
    assert [b.pv["metadata"]["name"] for b in chosen] == ["pv-small"]


def test_access_modes_must_fit() -> None:
    rwx = pv("pv-rwo", "wait-sc", capacity="10Gi")
    claim = pvc("pvc-a", "wait-sc", request="1Gi")
    claim["spec"]["accessModes"] = ["ReadWriteMany"]
    world = World([node("node-a")], [(PERSISTENT_VOLUME_CLAIM, claim), (PERSISTENT_VOLUME, rwx)])
    _, filters, _, _ = world.run(pod_with_claims("pvc-a"))
    assert filters == [unresolvable(ERR_REASON_BIND_CONFLICT)]


def test_two_pods_never_take_the_same_pv() -> None:
    """Reserve assumes the PV bound: the next pod's cycle no longer sees it; Unreserve gives it back."""
    world = World(
        [node("node-a")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("claim-1", "wait-sc", request="1Gi")),
            (PERSISTENT_VOLUME_CLAIM, pvc("claim-2", "wait-sc", request="1Gi")),
            (PERSISTENT_VOLUME, pv("only-pv", "wait-sc", capacity="1Gi", affinity={HOSTNAME: ["node-a"]})),
        ],
    )
    first, second = pod_with_claims("claim-1", name="first"), pod_with_claims("claim-2", name="second")
    _, filters, _, state = world.run(first)
    assert filters == [None]
    assert world.plugin.reserve(state, first, "node-a") is None
    _, filters_second, _, _ = world.run(second)
    assert filters_second == [unresolvable(ERR_REASON_BIND_CONFLICT)]
    world.plugin.unreserve(state, first, "node-a")
    world.plugin.unreserve(state, first, "node-a")  # idempotent
    _, filters_second, _, _ = world.run(second)
    assert filters_second == [None]


def test_provisioning_annotates_the_claim_with_the_selected_node() -> None:
    sc = storage_class("fast", provisioner="example.com/provisioner")
    world = World(
        [node("node-a"), node("node-b")], [(STORAGE_CLASS, sc), (PERSISTENT_VOLUME_CLAIM, pvc("data", "fast"))]
    )
    pod = pod_with_claims("data")
    _, filters, _, state = world.run(pod)
    assert filters == [None, None]
    assert world.plugin.reserve(state, pod, "node-b") is None
    assumed = world.plugin.binder.pvc_cache.get("default/data")
    assert assumed is not None and assumed["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"
    # A claim already selected for another node does not fit elsewhere.
    other = pod_with_claims("data", name="other")
    _, filters, _, _ = world.run(other)
    assert filters == [unresolvable(ERR_REASON_BIND_CONFLICT), None]


async def test_pre_bind_writes_claim_ref_and_waits_for_the_pv_controller() -> None:
    claim = pvc("claim", "wait-sc", request="1Gi")
    volume = pv("local", "wait-sc", capacity="1Gi", affinity={HOSTNAME: ["node-a"]})
    world = World(
        [node("node-a")], [(PERSISTENT_VOLUME_CLAIM, claim), (PERSISTENT_VOLUME, volume)], {"bindTimeoutSeconds": 5}
    )
    pod = pod_with_claims("claim")
    _, _, _, state = world.run(pod)
    assert world.plugin.reserve(state, pod, "node-a") is None

    import asyncio

    async def pv_controller() -> None:
        while "local" not in world.client.persistent_volumes:  # noqa: ASYNC110 - the fake has no write hook
            await asyncio.sleep(0.05)
        written = world.client.persistent_volumes["local"]
        assert written["spec"]["claimRef"]["name"] == "claim"
        world.store.upsert(PERSISTENT_VOLUME, {**written, "status": {"phase": "Bound"}})
        bound = pvc("claim", "wait-sc", bound_pv="local", request="1Gi")
        bound["metadata"]["resourceVersion"] = "2"
        world.store.upsert(PERSISTENT_VOLUME_CLAIM, bound)

    controller = asyncio.create_task(pv_controller())
    status = await world.plugin.pre_bind(state, pod, "node-a")
    await controller
    assert status is None


async def test_pre_bind_times_out_and_unreserve_reverts() -> None:
    claim = pvc("claim", "wait-sc", request="1Gi")
    volume = pv("local", "wait-sc", capacity="1Gi")
    world = World(
        [node("node-a")], [(PERSISTENT_VOLUME_CLAIM, claim), (PERSISTENT_VOLUME, volume)], {"bindTimeoutSeconds": 0}
    )
    pod = pod_with_claims("claim")
    _, _, _, state = world.run(pod)
    assert world.plugin.reserve(state, pod, "node-a") is None
    status = await world.plugin.pre_bind(state, pod, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert status.message == "binding volumes: context deadline exceeded"
    world.plugin.unreserve(state, pod, "node-a")
    assert "claimRef" not in world.plugin.binder.pv_cache.get("local")["spec"]  # type: ignore[index]


def stage_errors(operation: str) -> float:
    return registry_value(metrics.REGISTRY, "scheduler_volume_scheduling_stage_error_total", operation=operation)


async def test_pre_bind_stops_when_the_pod_was_deleted() -> None:
    claim = pvc("claim", "wait-sc", request="1Gi")
    world = World(
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, claim), (PERSISTENT_VOLUME, pv("local", "wait-sc", capacity="1Gi"))],
        {"bindTimeoutSeconds": 30},
    )
    pod = pod_with_claims("claim")
    gone: set[str] = set()
    world.handle.wire(dataclasses.replace(world.handle.wiring, pod_exists=lambda p: p.uid not in gone))
    _, _, _, state = world.run(pod)
    assert world.plugin.reserve(state, pod, "node-a") is None
    gone.add(pod.uid)
    before = stage_errors("bind")
    status = await world.plugin.pre_bind(state, pod, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert status.message == 'binding volumes: pod does not exist any more: pod "pod-a" not found'
    assert stage_errors("bind") == before + 1


def test_stage_errors_are_counted_for_filter_and_reserve() -> None:
    claim = pvc("claim", "no-such-class", request="1Gi")
    world = World([node("node-a")], [(PERSISTENT_VOLUME_CLAIM, claim)])
    world.store.upsert(STORAGE_CLASS, storage_class("no-such-class", provisioner="p"))
    pod = pod_with_claims("claim")
    state = CycleState()
    _, pre = world.plugin.pre_filter(state, pod, world.nodes)
    assert pre is None
    world.store.delete(STORAGE_CLASS, storage_class("no-such-class"))
    before = stage_errors("predicate")
    status = world.plugin.filter(state, pod, world.nodes[0])
    assert status is not None and status.code == Code.ERROR
    assert status.message == 'failed to find storage class "no-such-class"'
    assert stage_errors("predicate") == before + 1

    bound_claim = pvc("c2", "wait-sc", request="1Gi")
    world = World(
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, bound_claim), (PERSISTENT_VOLUME, pv("pv2", "wait-sc", capacity="1Gi"))],
    )
    pod = pod_with_claims("c2")
    _, filters, _, state = world.run(pod)
    assert filters == [None]
    world.store.delete(PERSISTENT_VOLUME, pv("pv2", "wait-sc"))  # gone before Reserve assumes it
    before = stage_errors("assume")
    status = world.plugin.reserve(state, pod, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert stage_errors("assume") == before + 1


async def test_pre_bind_api_conflict_reverts_the_assumption() -> None:
    claim = pvc("claim", "wait-sc", request="1Gi")
    world = World(
        [node("node-a")],
        [(PERSISTENT_VOLUME_CLAIM, claim), (PERSISTENT_VOLUME, pv("local", "wait-sc", capacity="1Gi"))],
    )
    world.client.volume_update_errors["local"] = ApiError(409, "the object has been modified", "Conflict")
    pod = pod_with_claims("claim")
    _, _, _, state = world.run(pod)
    assert world.plugin.reserve(state, pod, "node-a") is None
    status = await world.plugin.pre_bind(state, pod, "node-a")
    assert status is not None and status.code == Code.ERROR and "Conflict" in status.message
    assert "claimRef" not in world.plugin.binder.pv_cache.get("local")["spec"]  # type: ignore[index]


def test_assumption_gives_way_to_a_newer_api_object() -> None:
    world = World([node("node-a")], [(PERSISTENT_VOLUME, pv("local", "wait-sc"))])
    cache = world.plugin.binder.pv_cache
    assumed = {**pv("local", "wait-sc"), "spec": {"claimRef": {"name": "x"}}}
    cache.assume(assumed)
    assert cache.get("local") is assumed
    newer = pv("local", "wait-sc", phase="Released")
    newer["metadata"]["resourceVersion"] = "2"
    world.store.upsert(PERSISTENT_VOLUME, newer)
    assert cache.get("local") is newer


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds: Invalid value: -1"),
        ({"shape": [{"utilization": 101, "score": 1}]}, "shape[0].utilization"),
        ({"shape": [{"utilization": 50, "score": 11}]}, "shape[0].score"),
        ({"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 1}]}, "must be sorted"),
        ({"bindTimeout": 1}, "unknown field"),
    ],
)
def test_bad_args(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_args(args)


def test_default_args() -> None:
    args = parse_args({})
    assert args.bind_timeout_seconds == 600
    assert args.shape == ((0, 10), (100, 0))


def test_queueing_hints() -> None:
    hints = {e.event.resource.value: e.hint for e in World([]).plugin.events_to_register()}
    pod = pod_with_claims("data")
    claim_hint = hints["PersistentVolumeClaim"]
    assert claim_hint is not None
    assert claim_hint(pod, None, pvc("data", "x")) == QueueingHint.QUEUE
    assert claim_hint(pod, None, pvc("other", "x")) == QueueingHint.SKIP
    sc_hint = hints["storage.k8s.io/StorageClass"]
    assert sc_hint is not None
    assert sc_hint(pod, None, WAIT_SC) == QueueingHint.QUEUE
    assert sc_hint(pod, WAIT_SC, {**WAIT_SC, "parameters": {"a": "b"}}) == QueueingHint.SKIP
    assert sc_hint(pod, WAIT_SC, {**WAIT_SC, "allowedTopologies": [{}]}) == QueueingHint.QUEUE
    csinode_hint = hints["storage.k8s.io/CSINode"]
    assert csinode_hint is not None
    plain = {"metadata": {"name": "n"}}
    migrated = {"metadata": {"name": "n", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "x"}}}
    assert csinode_hint(pod, plain, plain) == QueueingHint.SKIP
    assert csinode_hint(pod, plain, migrated) == QueueingHint.QUEUE
    assert csinode_hint(pod, migrated, plain) == QueueingHint.QUEUE
    assert csinode_hint(pod, None, plain) == QueueingHint.QUEUE
    empty = {"metadata": {"name": "n", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": ""}}}
    assert csinode_hint(pod, plain, empty) == QueueingHint.SKIP  # kube reads a missing annotation as ""


def _batch_agrees(world: World, pod: Pod, filters: list[Status | None], scores: list[int]) -> None:
    """Where the batch Filter answers, it answers as the per-node Filters did; without per-node
    PodVolumes, Score and Reserve behave as they do after per-node Filters."""
    state = CycleState()
    _, got_pre = world.plugin.pre_filter(state, pod, world.nodes)
    if got_pre is not None:
        return
    mask = world.plugin.filter_batch(state, pod, _table_of(world.nodes))
    if mask is None:
        return  # answered per node
    assert mask.tolist() == [f is None for f in filters]
    assert [world.plugin.score(state, pod, info)[0] for info in world.nodes] == scores
    assert world.plugin.reserve(state, pod, world.nodes[0].name) is None


def _table_of(infos: Sequence[NodeInfo]) -> Any:
    from scheduler.cache.snapshot import Snapshot

    return Snapshot.from_node_infos(list(infos)).table


def test_batch_filter_answers_for_bound_claims_without_node_affinity_only() -> None:
    bound = [
        (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
        (PERSISTENT_VOLUME, pv("pv-a", "wait-sc", "Bound")),
    ]
    pinned = [
        (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
        (PERSISTENT_VOLUME, pv("pv-a", "wait-sc", "Bound", affinity={HOSTNAME: ["node-a"]})),
    ]
    unbound = [(PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc")), (PERSISTENT_VOLUME, pv("pv-a", "wait-sc"))]
    for objects, answers in ((bound, True), (pinned, False), (unbound, False)):
        world = World([node("node-a"), node("node-b")], objects)
        state = CycleState()
        pod = pod_with_claims("pvc-a")
        assert world.plugin.pre_filter(state, pod, world.nodes)[1] is None
        mask = world.plugin.filter_batch(state, pod, _table_of(world.nodes))
        assert (mask is not None) == answers


def test_batch_filter_goes_per_node_for_migratable_pvs_that_gain_topology_or_fail() -> None:
    """A bound in-tree PV without node affinity keeps the all-nodes answer unless translating it
    adds topology (a zone label) or fails; upstream's SchedulingMigratedInTreePVs PVs (EBS, bare
    volume id, no labels) keep it."""
    ebs = pv("pv-a", "wait-sc", "Bound")
    ebs["spec"]["awsElasticBlockStore"] = {"volumeID": "vol-1"}
    bad_ebs = pv("pv-a", "wait-sc", "Bound")
    bad_ebs["spec"]["awsElasticBlockStore"] = {"volumeID": "aws://zone/not-a-volume"}
    labelled_file = pv("pv-a", "wait-sc", "Bound")
    labelled_file["spec"]["azureFile"] = {"shareName": "s", "secretName": "x"}  # migration off
    labelled_file["metadata"]["labels"] = {ZONE: "z1"}
    for volume, answers in (
        (ebs, True),
        (labelled_file, True),
        (gce_pv("pv-a"), True),
        (gce_pv("pv-a", labels={ZONE: "z1"}), False),
        (bad_ebs, False),
    ):
        world = World(
            [node("node-a", **{ZONE: "z1"}), node("node-b")],
            [
                (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
                (PERSISTENT_VOLUME, volume),
                (CSI_NODE, csi_node("node-a", "kubernetes.io/aws-ebs,kubernetes.io/gce-pd")),
            ],
        )
        state = CycleState()
        pod = pod_with_claims("pvc-a")
        assert world.plugin.pre_filter(state, pod, world.nodes)[1] is None
        mask = world.plugin.filter_batch(state, pod, _table_of(world.nodes))
        assert (mask is not None) == answers, volume


def test_translation_error_is_a_filter_error_on_migrated_nodes_only() -> None:
    bad = pv("pv-a", "wait-sc", "Bound")
    bad["spec"]["awsElasticBlockStore"] = {"volumeID": "aws://us-west-2a/02399794d890f9375"}
    world = World(
        [node("migrated"), node("not-migrated")],
        [
            (PERSISTENT_VOLUME_CLAIM, pvc("pvc-a", "wait-sc", bound_pv="pv-a")),
            (PERSISTENT_VOLUME, bad),
            (CSI_NODE, csi_node("migrated", "kubernetes.io/aws-ebs")),
        ],
    )
    _, filters, _, _ = world.run(pod_with_claims("pvc-a"))
    assert filters[1] is None
    status = filters[0]
    assert status is not None and status.code == Code.ERROR
    assert status.message == (
        "could not translate pv: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://us-west-2a/02399794d890f9375)"
    )


def test_check_bindings_translates_migrated_pvs() -> None:
    """PreBind's wait checks the bound PV's node affinity as translated on the chosen node."""
    from plugins.volumebinding.binder import BinderError, BindingInfo, PodVolumes

    claim = pvc("pvc-a", "wait-sc", bound_pv="pv-a")
    volume = gce_pv("pv-a", affinity={ZONE: ["z1"]})
    volume["spec"]["claimRef"] = {"name": "pvc-a", "namespace": "default", "uid": "uid-pvc-a"}
    bad = gce_pv("pv-b", labels={ZONE: "us-central1-a__us-east1-b"})
    bad["spec"]["claimRef"] = {"name": "pvc-a", "namespace": "default", "uid": "uid-pvc-a"}
    world = World(
        [node("node-csi", **{GCE_ZONE: "z1"}), node("node-in-tree", **{ZONE: "z1"})],
        [
            (PERSISTENT_VOLUME_CLAIM, claim),
            (PERSISTENT_VOLUME, volume),
            (PERSISTENT_VOLUME, bad),
            (CSI_NODE, csi_node("node-csi", "kubernetes.io/gce-pd")),
            (CSI_NODE, csi_node("node-in-tree", "kubernetes.io/gce-pd")),
        ],
    )
    binder = world.plugin.binder
    pod = pod_with_claims("pvc-a")
    assert binder.check_bindings(pod, "node-csi", PodVolumes([BindingInfo(volume, claim)])) is True
    with pytest.raises(BinderError, match='pv "pv-a" node affinity doesn\'t match node "node-in-tree"'):
        binder.check_bindings(pod, "node-in-tree", PodVolumes([BindingInfo(volume, claim)]))
    with pytest.raises(BinderError) as exc:
        binder.check_bindings(pod, "node-csi", PodVolumes([BindingInfo(bad, claim)]))
    assert str(exc.value) == (
        "failed to translate pv to csi: could not translate pv: failed to get region from zones: "
        "multiple or no regions gotten from zones, got: map[us-central1:{} us-east1:{}]"
    )


def test_translations_of_deleted_pvs_are_forgotten() -> None:
    from plugins.volumebinding import binder as binder_module

    world = World([node("n")], [(PERSISTENT_VOLUME, gce_pv(f"pv-{i}")) for i in range(3)])
    binder = world.plugin.binder
    for i in range(3):
        binder.translation_may_differ(world.store.get(PERSISTENT_VOLUME, f"pv-{i}"))  # type: ignore[arg-type]
    world.store.delete(PERSISTENT_VOLUME, gce_pv("pv-0"))
    world.store.upsert(PERSISTENT_VOLUME, {**gce_pv("pv-1"), "metadata": {"name": "pv-1", "resourceVersion": "2"}})
    binder._prune_translations()
    assert sorted(binder._translations) == ["pv-2"]
    assert binder._prune_translations_at == binder_module.MIN_TRANSLATIONS_KEPT


def test_missing_claim_is_reported_through_the_scheduling_cycle() -> None:
    """A pod whose PVC does not exist gets VolumeBinding's message as its FailedScheduling event and
    PodScheduled condition, never a binding (the real cycle, fake API client)."""
    import asyncio

    from scheduler.app import build_scheduler, full_registry
    from scheduler.config import default_config
    from scheduler.informers import Informers
    from scheduler.testing.builders import make_pod

    client = FakeApiClient()
    sched = build_scheduler(default_config("secondary-scheduler"), full_registry(), client, {"default": {}})
    informers = Informers(sched)
    for i in range(2):
        informers.on_node(
            "ADDED",
            {
                "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1"},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            },
        )
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}
    informers.on_pod(
        "ADDED", make_pod("p").container(cpu="100m").spec(schedulerName="secondary-scheduler", volumes=[volume]).raw
    )

    async def drain() -> None:
        while (info := sched.queue.pop_nowait()) is not None:
            sched.schedule_one(info)
            await asyncio.sleep(0)
        await sched.drain()

    asyncio.run(drain())
    # VolumeBinding's PreFilter rejects before DynamicResources' runs, whose PostFilter then finds no
    # state of its own: kube-scheduler v1.37.2 ends the message with that error, "not found".
    message = '0/2 nodes are available: persistentvolumeclaim "data-claim" not found. not found'

    assert client.bindings == {}
    condition = client.conditions["default/p"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)
    assert [(e.reason, e.message) for e in client.events] == [("FailedScheduling", message)]
