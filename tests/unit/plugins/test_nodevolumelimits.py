"""NodeVolumeLimits: cases of kube's csi_test.go (TestCSILimits) with its fixtures: PVs and PVCs
named csi-<driver>-<i>, a StorageClass csi-sc of the first driver, a CSINode with each driver's limit."""

from __future__ import annotations

from typing import Any

import pytest

from plugins import nodevolumelimits
from plugins.nodevolumelimits.filtering import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, QueueingHint, Status
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
    VolumeStore,
)
from scheduler.model.objects import Pod
from scheduler.testing.builders import make_node, make_pod

Raw = dict[str, Any]
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
IN_TREE_EBS = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"
NODE = "node-for-max-pd-test-1"


def fixtures(drivers: list[str], va_count: int) -> list[tuple[str, Raw]]:
    objects: list[tuple[str, Raw]] = []
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            if driver == IN_TREE_EBS:
                source: Raw = {"awsElasticBlockStore": {"volumeID": name}}
            elif driver == HOSTPATH:
                source = {"hostPath": {"path": "/tmp"}}
            else:
                source = {"csi": {"driver": driver, "volumeHandle": name}}
            objects.append((PERSISTENT_VOLUME, {"metadata": {"name": name}, "spec": source}))
            objects.append(
                (
                    PERSISTENT_VOLUME_CLAIM,
                    {"metadata": {"name": name, "namespace": "default"}, "spec": {"volumeName": name}},
                )
            )
        for j in range(va_count):
            objects.append(
                (
                    VOLUME_ATTACHMENT,
                    {
                        "metadata": {"name": f"va-{driver}-{j}"},
                        "spec": {
                            "nodeName": NODE,
                            "attacher": driver,
                            "source": {"persistentVolumeName": f"csi-{driver}-{j}"},
                        },
                    },
                )
            )
    claims = [
        {"metadata": {"name": "csi-4", "namespace": "default"}, "spec": {"storageClassName": "csi-sc"}},
        {"metadata": {"name": "csi-5", "namespace": "default"}, "spec": {}},
        {
            "metadata": {"name": "csi-6", "namespace": "default"},
            "spec": {"storageClassName": "csi-sc", "volumeName": "missing-in-action"},
        },
    ]
    objects += [(PERSISTENT_VOLUME_CLAIM, c) for c in claims]
    objects.append((STORAGE_CLASS, {"metadata": {"name": "csi-sc"}, "provisioner": drivers[0]}))
    return objects


def csi_node(drivers: list[str], limit: int | None) -> Raw:
    entries = []
    for driver in drivers:
        entry: Raw = {"name": driver, "nodeID": NODE}
        if limit is not None:
            entry["allocatable"] = {"count": limit}
        entries.append(entry)
    return {"metadata": {"name": NODE}, "spec": {"drivers": entries}}


def pvc_pod(*claims: str, name: str = "p") -> Pod:
    return (
        make_pod(name)
        .uid(name)
        .spec(volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])
        .obj()
    )


def volume_pod(*volumes: Raw, name: str = "p", namespace: str = "default", uid: str = "") -> Pod:
    return make_pod(name, namespace).uid(uid or name).spec(volumes=list(volumes)).obj()


RUNNING = pvc_pod(f"csi-{EBS}-3", name="running")
PENDING = pvc_pod("csi-4", name="pending")
UNBOUND2 = pvc_pod("csi-4", name="unbound2")
MISSING_PV = pvc_pod("csi-6", name="missing-pv")
NO_SC = pvc_pod("csi-5", name="no-sc")
GCE_TWO = pvc_pod(f"csi-{GCE}-1", f"csi-{GCE}-2", name="gce-two")
IN_TREE_TWO = pvc_pod(f"csi-{IN_TREE_EBS}-1", f"csi-{IN_TREE_EBS}-2", name="in-tree-two")
EBS_ONE = pvc_pod(f"csi-{EBS}-0", name="ebs-one")
EBS_TWO = pvc_pod(f"csi-{EBS}-1", f"csi-{EBS}-2", name="ebs-two")
INLINE_EBS = volume_pod({"name": "v", "awsElasticBlockStore": {"volumeID": "aws-inline1"}}, name="inline")
CONFIG_ONLY = volume_pod({"name": "c", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y"}})
EPHEMERAL = volume_pod({"name": "xyz", "ephemeral": {}}, name="abc", namespace="test", uid="12345")
EXCEEDED = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin="NodeVolumeLimits")

# (name, new pod, existing pods, upstream's maxVols, drivers, VolumeAttachments per driver,
#  CSINode allocatable count or None for drivers without limits, want)
CASES = [
    ("should count VolumeAttachments towards volume limit when no pods exist", EBS_ONE, [], 2, [EBS], 2, 2, EXCEEDED),
    ("should schedule pod when VolumeAttachments count does not exceed limit", EBS_ONE, [], 2, [EBS], 1, 2, None),
    ("fits when node volume limit >= new pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], 4, [EBS], 0, 4, None),
    ("doesn't when node volume limit <= pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], 2, [EBS], 0, 2, EXCEEDED),
    ("should when driver does not support volume limits", EBS_ONE, [RUNNING, EBS_TWO], 2, [EBS], 0, None, None),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        EBS_ONE,
        [PENDING, EBS_TWO],
        2,
        [EBS],
        0,
        2,
        EXCEEDED,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        EBS_ONE,
        [PENDING, UNBOUND2, EBS_TWO],
        4,
        [EBS],
        0,
        4,
        None,
    ),
    ("should count PVCs with invalid PV name but valid SC", EBS_ONE, [MISSING_PV, EBS_TWO], 2, [EBS], 0, 2, EXCEEDED),
    ("don't count pvcs with missing SC towards volume limit", EBS_ONE, [RUNNING, NO_SC], 2, [EBS], 0, 2, None),
    ("count pvcs with the same type towards volume limit", EBS_ONE, [GCE_TWO, EBS_TWO], 2, [EBS, GCE], 0, 2, EXCEEDED),
    (
        "don't count pvcs with different type towards volume limit",
        GCE_TWO,
        [EBS_TWO, RUNNING],
        2,
        [EBS, GCE],
        0,
        2,
        None,
    ),
    (
        "don't skip Filter when the pod has inline migratable volumes",
        INLINE_EBS,
        [IN_TREE_TWO],
        2,
        [IN_TREE_EBS, EBS],
        0,
        2,
        EXCEEDED,
    ),
]


@pytest.mark.parametrize(
    ("new_pod", "existing", "drivers", "va_count", "limit", "want"),
    [(c[1], c[2], *c[4:]) for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_csi_limits(
    new_pod: Pod,
    existing: list[Pod],
    drivers: list[str],
    va_count: int,
    limit: int | None,
    want: Status | None,
) -> None:
    assert run(new_pod, existing, drivers, va_count, limit) == (None, want)


def run(
    new_pod: Pod,
    existing: list[Pod],
    drivers: list[str],
    va_count: int,
    limit: int | None,
    extra: list[tuple[str, Raw]] = (),  # type: ignore[assignment]
) -> tuple[Status | None, Status | None]:
    store = VolumeStore([*fixtures(drivers, va_count), (CSI_NODE, csi_node(drivers, limit)), *extra])
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), Snapshot(), volumes=store))
    info = NodeInfo(make_node(NODE).obj())
    for pod in existing:
        info.add_pod(pod)
    state = CycleState()
    _, pre = plugin.pre_filter(state, new_pod, [info])
    if pre is not None:
        return pre, None
    return pre, plugin.filter(state, new_pod, info)


def test_skip_pods_with_only_secrets_and_config_maps() -> None:
    assert run(CONFIG_ONLY, [], [EBS], 0, 2) == (Status(Code.SKIP, plugin="NodeVolumeLimits"), None)


def test_missing_ephemeral_claim() -> None:
    assert run(EPHEMERAL, [], [EBS], 0, None) == (
        None,
        Status.unresolvable(
            'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found', plugin="NodeVolumeLimits"
        ),
    )


def test_ephemeral_claims_count() -> None:
    claim = {
        "metadata": {
            "name": "abc-xyz",
            "namespace": "test",
            "ownerReferences": [{"kind": "Pod", "name": "abc", "uid": "12345", "controller": True}],
        },
        "spec": {"storageClassName": "csi-sc"},
    }
    extra = [(PERSISTENT_VOLUME_CLAIM, claim)]
    assert run(EBS_ONE, [RUNNING, EPHEMERAL, EBS_TWO], [EBS], 0, 3, extra) == (None, EXCEEDED)
    assert run(EBS_ONE, [RUNNING, EPHEMERAL, EBS_TWO], [EBS], 0, 5, extra) == (None, None)


def test_driver_that_must_be_installed() -> None:
    driver: Raw = {"metadata": {"name": "other.csi"}, "spec": {"preventPodSchedulingIfMissing": True}}
    pv: Raw = {"metadata": {"name": "other-pv"}, "spec": {"csi": {"driver": "other.csi", "volumeHandle": "h"}}}
    claim: Raw = {"metadata": {"name": "other", "namespace": "default"}, "spec": {"volumeName": "other-pv"}}
    extra: list[tuple[str, Raw]] = [(CSI_DRIVER, driver), (PERSISTENT_VOLUME, pv), (PERSISTENT_VOLUME_CLAIM, claim)]
    assert run(pvc_pod("other"), [], [EBS], 0, 2, extra) == (
        None,
        Status.unschedulable("other.csi CSI driver is not installed on the node", plugin="NodeVolumeLimits"),
    )


def test_csi_node_update_hint() -> None:
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), Snapshot()))
    hint = next(
        e.hint for e in plugin.events_to_register() if e.event.resource.value == "storage.k8s.io/CSINode" and e.hint
    )
    assert hint(EBS_ONE, csi_node([EBS], 2), csi_node([EBS], 3)) == QueueingHint.QUEUE
    assert hint(EBS_ONE, csi_node([EBS], 3), csi_node([EBS], 2)) == QueueingHint.SKIP


def test_an_existing_pods_remembered_volumes_follow_its_pv() -> None:
    """Filter remembers what a bound pod attaches (per pod and per node), but never past a deletion
    or replacement of one of its claims or PVs (their sources are immutable otherwise)."""

    def pv(name: str, handle: str, version: str) -> tuple[str, Raw]:
        return PERSISTENT_VOLUME, {
            "metadata": {"name": name, "resourceVersion": version},
            "spec": {"csi": {"driver": EBS, "volumeHandle": handle}},
        }

    def claim(name: str) -> tuple[str, Raw]:
        meta: Raw = {"name": name, "namespace": "default", "resourceVersion": "1"}
        return PERSISTENT_VOLUME_CLAIM, {"metadata": meta, "spec": {"volumeName": name}}

    def bound(*claims: str, name: str) -> Pod:
        raw = pvc_pod(*claims, name=name).raw
        return Pod.from_raw({**raw, "metadata": {**raw["metadata"], "resourceVersion": "7"}})

    store = VolumeStore(
        [pv(n, f"h-{n}", "1") for n in "abce"] + [claim(n) for n in "abce"] + [(CSI_NODE, csi_node([EBS], 3))]
    )
    info = NodeInfo(make_node(NODE).obj())
    info.add_pod(bound("a", name="pa"))
    info.add_pod(bound("b", name="pb"))
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), in_snapshot(info), volumes=store))
    incoming = pvc_pod("c", "e", name="new")
    assert plugin.filter(CycleState(), incoming, info) == Status.unschedulable(
        ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=nodevolumelimits.NAME
    )  # 2 attached + 2 new > 3
    assert plugin.filter(CycleState(), incoming, info) is not None  # the remembered answer, same verdict
    store.upsert(*pv("a", "h-a", "2"))  # a status change of the PV: what it attaches stays
    assert plugin.filter(CycleState(), incoming, info) is not None
    # The PV deleted and made again under its name, now naming pb's volume: one attachment between them.
    kind, old = pv("a", "h-a", "2")
    store.delete(kind, old)
    store.upsert(*pv("a", "h-b", "3"))
    assert plugin.filter(CycleState(), incoming, info) is None


def in_snapshot(*infos: NodeInfo) -> Snapshot:
    snapshot = Snapshot()
    for info in infos:
        snapshot.node_info_map[info.name] = info
        snapshot.node_info_list.append(info)
    return snapshot


def test_a_copy_changed_in_place_is_never_answered_from_memory() -> None:
    """Preemption removes and re-adds victims on one NodeInfo copy, filtering after each change, all
    under the snapshot's generation: only the snapshot's own NodeInfo may be remembered."""
    store = VolumeStore([*fixtures([EBS], 0), (CSI_NODE, csi_node([EBS], 2))])
    info = NodeInfo(make_node(NODE).obj())
    victim = pvc_pod(f"csi-{EBS}-0", name="victim")
    info.add_pod(victim)
    info.add_pod(pvc_pod(f"csi-{EBS}-1", name="other"))
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), in_snapshot(info), volumes=store))
    incoming = pvc_pod(f"csi-{EBS}-2", name="new")
    state = CycleState()
    assert plugin.pre_filter(state, incoming, [info]) == (None, None)
    assert plugin.filter(state, incoming, info) is not None  # 2 attached + 1 > 2, remembered
    copy = info.clone()
    assert plugin.filter(state, incoming, copy) is not None
    copy.remove_pod(victim)
    assert plugin.filter(state, incoming, copy) is None
    copy.add_pod(victim)
    assert plugin.filter(state, incoming, copy) is not None
    copy.remove_pod(victim)
    assert plugin.filter(state, incoming, copy) is None
    assert plugin.filter(state, incoming, info) is not None  # the snapshot's node is unchanged


def test_one_cycle_reads_the_incoming_pods_volumes_once_per_csinode_presence() -> None:
    """The new pod's volumes depend on the node only through whether it has a CSINode; a claim
    deleted during the cycle is read again."""
    store = VolumeStore([*fixtures([EBS], 0), (CSI_NODE, csi_node([EBS], 1))])
    nodes = [NodeInfo(make_node(NODE).obj()), NodeInfo(make_node("node-without-csinode").obj())]
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), in_snapshot(*nodes), volumes=store))
    calls: list[bool] = []
    real = plugin._filtering.attachable_volumes

    def counting(pod: Pod, csi_node: Raw | None, new_pod: bool, sources: Any = None) -> dict[str, str]:
        if new_pod:
            calls.append(csi_node is not None)
        return real(pod, csi_node, new_pod, sources)

    plugin._filtering.attachable_volumes = counting  # type: ignore[method-assign,assignment]
    incoming = pvc_pod(f"csi-{EBS}-0", f"csi-{EBS}-1", name="new")
    state = CycleState()
    assert plugin.pre_filter(state, incoming, nodes) == (None, None)
    for _ in range(3):
        assert plugin.filter(state, incoming, nodes[0]) == EXCEEDED  # 2 new > 1
        assert plugin.filter(state, incoming, nodes[1]) is None  # no CSINode: no limits
    assert calls == [True, False]
    store.delete(PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": f"csi-{EBS}-1", "namespace": "default"}})
    assert plugin.filter(state, incoming, nodes[0]) == Status.unresolvable(
        f'looking up PVC default/csi-{EBS}-1: persistentvolumeclaim "csi-{EBS}-1" not found', plugin="NodeVolumeLimits"
    )
    assert calls == [True, False, True]


def test_volume_attachments_count_only_on_their_node() -> None:
    store = VolumeStore([*fixtures([EBS], 2), (CSI_NODE, csi_node([EBS], 2))])
    other = {"metadata": {"name": "other-node"}, "spec": {"drivers": [{"name": EBS, "allocatable": {"count": 2}}]}}
    store.upsert(CSI_NODE, other)
    nodes = [NodeInfo(make_node(NODE).obj()), NodeInfo(make_node("other-node").obj())]
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), in_snapshot(*nodes), volumes=store))
    incoming = pvc_pod(f"csi-{EBS}-2", name="new")
    state = CycleState()
    assert plugin.pre_filter(state, incoming, nodes) == (None, None)
    assert plugin.filter(state, incoming, nodes[0]) == EXCEEDED  # 2 attachments + 1 > 2
    assert plugin.filter(state, incoming, nodes[1]) is None


def test_a_copy_of_the_node_with_a_pod_removed_is_counted_again() -> None:
    """Preemption filters a NodeInfo copy without its victims, under the same generation."""
    store = VolumeStore([*fixtures([EBS], 0), (CSI_NODE, csi_node([EBS], 2))])
    plugin = nodevolumelimits.new({}, FrameworkHandle(FakeApiClient(), Snapshot(), volumes=store))
    info = NodeInfo(make_node(NODE).obj())
    victim = pvc_pod(f"csi-{EBS}-0", name="victim")
    info.add_pod(victim)
    info.add_pod(pvc_pod(f"csi-{EBS}-1", name="other"))
    incoming = pvc_pod(f"csi-{EBS}-2", name="new")
    assert plugin.filter(CycleState(), incoming, info) is not None  # 2 attached + 1 > 2
    without = info.clone()
    without.remove_pod(victim)
    assert without.generation == info.generation
    assert plugin.filter(CycleState(), incoming, without) is None
