"""Preemption in a cluster of peers: when no node holds a pod of lower priority than the preemptor,
DefaultPreemption answers "no victims" for every node at once instead of walking every node's pods.
The snapshot's lowest pod priority (kept by the cache) must always match its NodeInfos, and the
shortcut must give the dry run's verdict and message."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cache import Cache, Snapshot
from scheduler.framework.types import Code, NodeToStatus, Status
from scheduler.model.objects import Node, Pod
from tests.unit.plugins.test_defaultpreemption import PROFILE, framework_over, prefiltered
from tests.unit.test_preemption import running, with_removal
from tests.unit.test_schedule_one import raw_node, raw_pod, run_queue

NODES = ("n1", "n2", "n3")
PRIORITIES = st.integers(-3, 3)


def pod(uid: str, node: str, priority: int) -> Pod:
    return Pod.from_raw(
        {
            "metadata": {"name": uid, "namespace": "ns", "uid": uid},
            "spec": {"nodeName": node, "priority": priority, "containers": [{"name": "c"}]},
        }
    )


def node(name: str) -> Node:
    return Node.from_raw({"metadata": {"name": name, "resourceVersion": "1"}, "status": {"allocatable": {"pods": "9"}}})


def lower_pod_held(snapshot: Snapshot, priority: int) -> bool:
    """The reference: walk every NodeInfo the snapshot has (placeholder nodes included)."""
    return any(p.priority < priority for info in snapshot.node_info_map.values() for p in info.pods.values())


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5), st.sampled_from(NODES), PRIORITIES),
        st.tuples(st.just("assume"), st.integers(0, 5), st.sampled_from(NODES), PRIORITIES),
        st.tuples(st.just("forget"), st.integers(0, 5)),
        st.tuples(st.just("move"), st.integers(0, 5), st.sampled_from(NODES)),
        st.tuples(st.just("remove"), st.integers(0, 5)),
        st.tuples(st.just("hide"), st.integers(0, 5)),
        st.tuples(st.just("unhide"), st.integers(0, 5)),
        st.tuples(st.just("node"), st.sampled_from(NODES)),
        st.tuples(st.just("drop-node"), st.sampled_from(NODES)),
        st.tuples(st.just("snapshot")),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_the_snapshots_lowest_priority_matches_its_node_infos(ops: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    snapshot = Snapshot()
    for op in ops:
        kind, uid = op[0], f"p{op[1]}" if len(op) > 1 and isinstance(op[1], int) else ""
        known = cache.get_pod(uid) if uid else None
        if kind in ("add", "assume") and known is None:
            placed = pod(uid, op[2], op[3])
            cache.add_pod(placed) if kind == "add" else cache.assume_pod(placed)
        elif kind == "forget" and known is not None and cache.is_assumed(uid):
            cache.forget_pod(known)
        elif kind == "move" and known is not None:
            cache.update_pod(dataclasses.replace(known, node_name=op[2]))
        elif kind == "remove":
            cache.remove_pod(uid)
        elif kind == "hide":
            cache.hide_pod(uid)
        elif kind == "unhide" and uid in {p.uid for p in snapshot.hidden_pods}:
            cache.unhide_pod(uid)
        elif kind == "node":
            cache.add_or_update_node(node(op[1]))
        elif kind == "drop-node":
            cache.remove_node(op[1])
        cache.update_snapshot(snapshot)
        for priority in range(-4, 5):
            assert snapshot.may_hold_pod_below(priority) == lower_pod_held(snapshot, priority), (op, priority)


def test_a_standalone_snapshot_never_claims_to_know() -> None:
    assert Snapshot.from_node_infos([]).may_hold_pod_below(-(2**31))


def post_filter_over(snap: Snapshot, preemptor: Pod) -> tuple[str | None, Code, str]:
    """DefaultPreemption's PostFilter for `preemptor` over `snap`, every node having failed Filter
    with Insufficient cpu, as the scheduling cycle calls it."""
    fw, plugin = framework_over(snap)
    infos = list(snap.node_info_map.values())
    state = prefiltered(fw, preemptor, infos)
    failed = {info.name: Status.unschedulable("Insufficient cpu") for info in infos}
    nominated, status = plugin.post_filter(
        state, preemptor, NodeToStatus(failed, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
    )
    assert status is not None
    return nominated, status.code, status.message


def test_among_peers_the_shortcut_gives_the_dry_runs_verdict_and_message() -> None:
    """Two full nodes of priority-0 pods, a priority-0 preemptor: over the cache's snapshot (which
    knows no node holds a lower-priority pod: the shortcut) and over the same NodeInfos as a
    standalone snapshot (which never claims to know: the dry run over every node) PostFilter gives
    the same verdict and message."""
    cache = Cache()
    for name in ("n1", "n2"):
        cache.add_or_update_node(Node.from_raw(raw_node(name, cpu="2")))
        cache.add_pod(Pod.from_raw(running(f"peer-{name}", name, "2", 0)))
    known = Snapshot()
    cache.update_snapshot(known)
    standalone = Snapshot.from_node_infos([info.clone() for info in known.node_info_map.values()])
    assert known.may_hold_pod_below(0) is False and standalone.may_hold_pod_below(0) is True
    preemptor = Pod.from_raw(raw_pod("peer", cpu="2", scheduler=PROFILE, priority=0))
    expected = (
        "",
        Code.UNSCHEDULABLE,
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    )
    assert post_filter_over(known, preemptor) == post_filter_over(standalone, preemptor) == expected


async def test_a_higher_priority_preemptor_still_preempts_among_peers() -> None:
    sched, inf, client = with_removal("delete")
    for name in ("n1", "n2"):
        inf.on_node("ADDED", raw_node(name, cpu="2"))
        inf.on_pod("ADDED", running(f"peer-{name}", name, "2", 0))
    inf.on_pod("ADDED", raw_pod("vip", cpu="2", priority=1))
    await run_queue(sched)
    assert len(client.deleted) == 1 and set(client.nominations) == {"ns/vip"}
