"""VolumeZone: kube's volume_zone_test.go (TestSingleZone, TestMultiZone, TestWithBinding, hints)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins import volumezone
from plugins.volumezone import BETA_REGION, BETA_ZONE, ERR_REASON_CONFLICT, REGION, ZONE
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, QueueingHint, Status
from scheduler.framework.volumes import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS, VolumeStore
from scheduler.model.objects import Pod
from scheduler.testing.builders import make_node, make_pod

Raw = dict[str, Any]


def pv(name: str, **labels: str) -> Raw:
    return {"metadata": {"name": name, "labels": labels}}


def pvc(name: str, volume: str = "", storage_class: str | None = None) -> Raw:
    spec: Raw = {"volumeName": volume} if volume else {}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


PVS = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", **{ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pv("Vol_Multi_1", **{BETA_ZONE: "us-west1-a__us-west1-b"}),
    pv("Vol_Multi_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Multi_3", **{BETA_REGION: "us-west1"}),
]
PVCS = [
    pvc("PVC_1", "Vol_1"),
    pvc("PVC_2", "Vol_2"),
    pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"),
    pvc("PVC_Stable_3", "Vol_Stable_3"),
    pvc("PVC_Multi_1", "Vol_Multi_1"),
    pvc("PVC_NoSC", storage_class="Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
]
CLASSES: list[Raw] = [
    {"metadata": {"name": "Class_Immediate"}},
    {"metadata": {"name": "Class_Wait"}, "volumeBindingMode": "WaitForFirstConsumer"},
]


def pod_with(claim: str | None) -> Pod:
    volumes = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return make_pod("pod_1").spec(volumes=volumes).obj()


def run(pod: Pod, labels: Raw) -> tuple[Status | None, Status | None]:
    store = VolumeStore(
        [(PERSISTENT_VOLUME, o) for o in PVS]
        + [(PERSISTENT_VOLUME_CLAIM, o) for o in PVCS]
        + [(STORAGE_CLASS, o) for o in CLASSES]
    )
    plugin = volumezone.new({}, FrameworkHandle(FakeApiClient(), Snapshot(), volumes=store))
    info = NodeInfo(make_node("host1").labels(labels).obj())
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, [info])
    return pre, plugin.filter(state, pod, info)


def U(message: str) -> Status:
    return Status.unresolvable(message, plugin="VolumeZone")


CONFLICT = U(ERR_REASON_CONFLICT)
SKIP = Status(Code.SKIP, plugin="VolumeZone")

CASES = [
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, SKIP, None),
    ("node without labels", "PVC_1", {}, None, None),
    ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, None, None),
    ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1"}, None, CONFLICT),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a"}, None, CONFLICT),
    ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a"}, None, None),
    ("region label matched", "PVC_Stable_2", {REGION: "us-west1"}, None, None),
    ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1"}, None, CONFLICT),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a"}, None, CONFLICT),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv with beta label,node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"}, None, None),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {ZONE: "us-west1-b"}, None, CONFLICT),
    ("multi zone: node in one of them", "PVC_Multi_1", {BETA_ZONE: "us-west1-b"}, None, None),
    ("multi zone: node in neither", "PVC_Multi_1", {BETA_ZONE: "us-west1-c"}, None, CONFLICT),
    (
        "pv not found",
        "PVC_4",
        {},
        U('persistentvolume "Vol_not_exist" not found'),
        U('persistentvolume "Vol_not_exist" not found'),
    ),
    (
        "pvc not found",
        "PVC_X",
        {},
        U('persistentvolumeclaim "PVC_X" not found'),
        U('persistentvolumeclaim "PVC_X" not found'),
    ),
    # With binding (TestWithBinding). Upstream's fake lister says "storageclasses"; the real one,
    # which the scheduler uses, says "storageclass".
    ("label zone failure domain matched", "PVC_1", {BETA_ZONE: "us-west1-a"}, None, None),
    (
        "unbound volume empty storage class",
        "PVC_EmptySC",
        {BETA_ZONE: "us-west1-a"},
        U("PersistentVolumeClaim had no pv name and storageClass name"),
        U("PersistentVolumeClaim had no pv name and storageClass name"),
    ),
    (
        "unbound volume no storage class",
        "PVC_NoSC",
        {BETA_ZONE: "us-west1-a"},
        U('storageclass.storage.k8s.io "Class_0" not found'),
        U('storageclass.storage.k8s.io "Class_0" not found'),
    ),
    (
        "unbound volume immediate binding mode",
        "PVC_ImmediateSC",
        {BETA_ZONE: "us-west1-a"},
        U('VolumeBindingMode not set for StorageClass "Class_Immediate"'),
        U('VolumeBindingMode not set for StorageClass "Class_Immediate"'),
    ),
    ("unbound volume wait binding mode", "PVC_WaitSC", {BETA_ZONE: "us-west1-a"}, SKIP, None),
]


@pytest.mark.parametrize(("claim", "labels", "pre", "verdict"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_volume_zone(claim: str | None, labels: Raw, pre: Status | None, verdict: Status | None) -> None:
    assert run(pod_with(claim), labels) == (pre, verdict)


def test_hints() -> None:
    plugin = volumezone.new({}, FrameworkHandle(FakeApiClient(), Snapshot()))
    hints = {e.event.resource.value: e.hint for e in plugin.events_to_register()}
    pod = pod_with("PVC_1")
    claim_hint, class_hint, pv_hint = (
        hints["PersistentVolumeClaim"],
        hints["storage.k8s.io/StorageClass"],
        hints["PersistentVolume"],
    )
    assert claim_hint is not None and class_hint is not None and pv_hint is not None
    assert claim_hint(pod, None, pvc("PVC_1")) == QueueingHint.QUEUE
    assert claim_hint(pod, None, pvc("PVC_2")) == QueueingHint.SKIP
    assert class_hint(pod, None, CLASSES[1]) == QueueingHint.QUEUE
    assert class_hint(pod, None, CLASSES[0]) == QueueingHint.SKIP
    assert pv_hint(pod, None, PVS[0]) == QueueingHint.QUEUE
    assert pv_hint(pod, PVS[0], pv("Vol_1", **{BETA_ZONE: "us-west1-a"}, other="x")) == QueueingHint.SKIP
    assert pv_hint(pod, PVS[0], pv("Vol_1", **{BETA_ZONE: "us-west1-b"})) == QueueingHint.QUEUE
