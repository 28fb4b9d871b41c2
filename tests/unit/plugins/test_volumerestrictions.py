"""VolumeRestrictions: kube's volume_restrictions_test.go tables (disk conflicts, access modes)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins import volumerestrictions
from plugins.volumerestrictions import ERR_REASON_DISK_CONFLICT, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, QueueingHint, Status
from scheduler.framework.volumes import PERSISTENT_VOLUME_CLAIM, VolumeStore
from scheduler.model.objects import Pod
from scheduler.testing.builders import make_node, make_pod

Raw = dict[str, Any]


def pod(name: str = "p", *volumes: Raw, claims: tuple[str, ...] = (), node: str = "") -> Pod:
    vols = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    vols += [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    builder = make_pod(name).uid(name).spec(volumes=vols)
    if node:
        builder = builder.node(node)
    return builder.obj()


def claim(name: str, mode: str) -> Raw:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"accessModes": [mode]}}


def run(
    incoming: Pod,
    existing: list[Pod],
    claims: list[Raw] = (),  # type: ignore[assignment]
) -> tuple[Status | None, Status | None]:
    info = NodeInfo(make_node("node-1").obj())
    for other in existing:
        info.add_pod(other)
    snapshot = Snapshot()
    snapshot.node_info_map["node-1"] = info
    snapshot.node_info_list.append(info)
    store = VolumeStore([(PERSISTENT_VOLUME_CLAIM, c) for c in claims])
    plugin = volumerestrictions.new({}, FrameworkHandle(FakeApiClient(), snapshot, volumes=store))
    state = CycleState()
    _, pre = plugin.pre_filter(state, incoming, [info])
    if pre is not None:
        return pre, None
    return pre, plugin.filter(state, incoming, info)


SKIP = Status(Code.SKIP, plugin="VolumeRestrictions")
DISK = Status.unschedulable(ERR_REASON_DISK_CONFLICT, plugin="VolumeRestrictions")

GCE = {"gcePersistentDisk": {"pdName": "foo"}}
GCE2 = {"gcePersistentDisk": {"pdName": "bar"}}
AWS = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS2 = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}
ISCSI2 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}}


@pytest.mark.parametrize(("same", "different"), [(GCE, GCE2), (AWS, AWS2), (RBD, RBD2), (ISCSI, ISCSI2)])
def test_disk_conflicts(same: Raw, different: Raw) -> None:
    assert run(pod(), []) == (SKIP, None)  # nothing
    assert run(pod(), [pod("e", same)]) == (SKIP, None)  # one state
    assert run(pod("p", same), [pod("e", same)]) == (None, DISK)  # same state
    assert run(pod("p", different), [pod("e", same)]) == (None, None)  # different state
    assert run(pod("p", {"emptyDir": {}}), []) == (SKIP, None)  # no restrictions


def test_read_only_gce_disks_share() -> None:
    read_only = {"gcePersistentDisk": {"pdName": "foo", "readOnly": True}}
    assert run(pod("p", read_only), [pod("e", read_only)]) == (None, None)
    assert run(pod("p", read_only), [pod("e", GCE)]) == (None, DISK)


RWOP1, RWOP2, RWX = (
    claim("claim-with-rwop-1", "ReadWriteOncePod"),
    claim("claim-with-rwop-2", "ReadWriteOncePod"),
    claim("claim-with-rwx", "ReadWriteMany"),
)
RWOP_CONFLICT = Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, plugin="VolumeRestrictions")


def test_access_mode_conflicts() -> None:
    one = pod("pod-with-one-pvc", claims=("claim-with-rwop-1",), node="node-1")
    two = pod("pod-with-two-pvcs", claims=("claim-with-rwop-1", "claim-with-rwop-2"), node="node-1")
    rwx = pod("pod-with-rwx", claims=("claim-with-rwx",), node="node-1")
    assert run(pod(), []) == (SKIP, None)
    assert run(one, []) == (
        Status.unresolvable('persistentvolumeclaim "claim-with-rwop-1" not found', plugin="VolumeRestrictions"),
        None,
    )
    assert run(one, [rwx], [RWOP1, RWX]) == (SKIP, None)
    conflict = pod("pod-with-one-conflict", claims=("claim-with-rwop-1",))
    assert run(conflict, [one, rwx], [RWOP1, RWX]) == (None, RWOP_CONFLICT)
    two_conflicts = pod("pod-with-two-conflicts", claims=("claim-with-rwop-1", "claim-with-rwop-2"))
    assert run(two_conflicts, [two, rwx], [RWOP1, RWOP2, RWX]) == (None, RWOP_CONFLICT)


def test_hints() -> None:
    plugin = volumerestrictions.new({}, FrameworkHandle(FakeApiClient(), Snapshot()))
    hints = {e.event.resource.value: e.hint for e in plugin.events_to_register()}
    deleted, added = hints["AssignedPod"], hints["PersistentVolumeClaim"]
    assert deleted is not None and added is not None
    target = pod("t", GCE, claims=("c",))
    assert deleted(target, pod("e", GCE), None) == QueueingHint.QUEUE
    assert deleted(target, pod("e", claims=("c",)), None) == QueueingHint.QUEUE
    assert deleted(target, pod("e", GCE2), None) == QueueingHint.SKIP
    assert added(target, None, claim("c", "ReadWriteOnce")) == QueueingHint.QUEUE
    assert added(target, None, claim("other", "ReadWriteOnce")) == QueueingHint.SKIP
