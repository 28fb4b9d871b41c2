"""Cache: assume → finish binding → confirm / forget / expire; incremental snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.cache import Cache, CacheError, PlacementNodes, Snapshot
from scheduler.model.objects import Node, Pod


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def pod(name: str, node: str = "", cpu: str = "1") -> Pod:
    return Pod.from_raw(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }
    )


def node(name: str, cpu: str = "4", images: tuple[str, ...] = ()) -> Node:
    return Node.from_raw(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "status": {
                "allocatable": {"cpu": cpu, "pods": "110"},
                "images": [{"names": [i], "sizeBytes": 100} for i in images],
            },
        }
    )


def test_assume_then_confirm() -> None:
    cache = Cache()
    cache.add_or_update_node(node("n1"))
    assumed = dataclasses.replace(pod("p"), node_name="n1")
    cache.assume_pod(assumed)
    assert cache.is_assumed("p")
    info = cache.get_node_info("n1")
    assert info is not None
    assert info.requested.milli_cpu == 1000
    cache.finish_binding(assumed)
    cache.add_pod(pod("p", node="n1"))
    assert not cache.is_assumed("p")
    assert info.requested.milli_cpu == 1000  # counted once
    with pytest.raises(CacheError):
        cache.forget_pod(assumed)


def test_confirmation_on_another_node_moves_the_pod() -> None:
    cache = Cache()
    cache.add_or_update_node(node("n1"))
    cache.add_or_update_node(node("n2"))
    cache.assume_pod(dataclasses.replace(pod("p"), node_name="n1"))
    cache.add_pod(pod("p", node="n2"))
    n1, n2 = cache.get_node_info("n1"), cache.get_node_info("n2")
    assert n1 is not None
    assert n2 is not None
    assert n1.requested.milli_cpu == 0
    assert n2.requested.milli_cpu == 1000


def test_forget_releases_resources_and_double_assume_fails() -> None:
    cache = Cache()
    cache.add_or_update_node(node("n1"))
    assumed = dataclasses.replace(pod("p"), node_name="n1")
    cache.assume_pod(assumed)
    with pytest.raises(CacheError, match="already in the cache"):
        cache.assume_pod(assumed)
    cache.forget_pod(assumed)
    info = cache.get_node_info("n1")
    assert info is not None
    assert info.requested.milli_cpu == 0
    assert not cache.is_assumed("p")


def test_assumed_pod_expires_only_after_binding_finished() -> None:
    clock = Clock()
    cache = Cache(assumed_ttl=30, clock=clock)
    cache.add_or_update_node(node("n1"))
    assumed = dataclasses.replace(pod("p"), node_name="n1")
    cache.assume_pod(assumed)
    clock.t = 1000
    assert cache.cleanup_expired_assumed_pods() == []  # binding still in flight
    cache.finish_binding(assumed)
    clock.t += 29
    assert cache.cleanup_expired_assumed_pods() == []
    clock.t += 2
    assert [p.name for p in cache.cleanup_expired_assumed_pods()] == ["p"]
    assert cache.get_pod("p") is None


def test_pod_seen_before_its_node_and_node_removed_with_pods() -> None:
    cache = Cache()
    cache.add_pod(pod("p", node="later"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert len(snap) == 0  # placeholder without a Node is not schedulable
    cache.add_or_update_node(node("later"))
    cache.update_snapshot(snap)
    assert [n.name for n in snap.list()] == ["later"]
    cache.remove_node("later")
    cache.update_snapshot(snap)
    assert len(snap) == 0
    cache.remove_pod("p")
    assert cache.get_node_info("later") is None


def test_snapshot_copies_only_changed_nodes() -> None:
    cache = Cache()
    for i in range(5):
        cache.add_or_update_node(node(f"n{i}"))
    snap = Snapshot()
    assert cache.update_snapshot(snap) == 5
    before = {n.name: n for n in snap.list()}
    cache.add_pod(pod("p", node="n3"))
    assert cache.update_snapshot(snap) == 1
    after = {n.name: n for n in snap.list()}
    assert after["n3"] is not before["n3"]
    assert all(after[n] is before[n] for n in after if n != "n3")
    assert after["n3"].requested.milli_cpu == 1000
    assert before["n3"].requested.milli_cpu == 0  # the old snapshot copy was not mutated
    assert cache.update_snapshot(snap) == 0


def test_placement_nodes_follow_the_snapshot() -> None:
    """A placement's nodes read from the snapshot are the ones a scan of its list would give, in
    its order, as the current clones, through pod changes and node adds and removes."""
    cache = Cache()
    for i in (5, 1, 7, 3, 9, 0):
        cache.add_or_update_node(node(f"n{i}"))
    snap = Snapshot()
    placement = PlacementNodes(frozenset({"n3", "n9", "n1", "gone"}))

    def scanned() -> list[str]:
        return [info.name for info in snap.list() if info.name in placement]

    cache.update_snapshot(snap)
    assert [info.name for info in placement.infos(snap)] == scanned() == ["n1", "n3", "n9"]
    assert placement.rows(snap).tolist() == [snap.position[n] for n in scanned()]
    cache.add_pod(pod("p", node="n3"))
    cache.update_snapshot(snap)
    infos = placement.infos(snap)
    assert infos[1] is snap.get("n3") and infos[1].requested.milli_cpu == 1000
    cache.add_or_update_node(node("gone"))
    cache.remove_node("n1")
    cache.update_snapshot(snap)
    assert [info.name for info in placement.infos(snap)] == scanned()
    assert sorted(scanned()) == ["gone", "n3", "n9"]
    current = [i for i in snap.list() if i.name in placement]
    assert all(a is b for a, b in zip(placement.infos(snap), current, strict=True))


def test_image_spread_counts() -> None:
    cache = Cache()
    cache.add_or_update_node(node("a", images=("nginx:1",)))
    cache.add_or_update_node(node("b", images=("nginx:1", "redis:7")))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert snap.image_num_nodes == {"nginx:1": 2, "redis:7": 1}
    cache.remove_node("b")
    cache.update_snapshot(snap)
    assert snap.image_num_nodes == {"nginx:1": 1}


def test_snapshot_tracks_nodes_with_affinity_pods() -> None:
    cache = Cache()
    for name in ("a", "b", "c"):
        cache.add_or_update_node(node(name))
    anti = Pod.from_raw(
        {
            "metadata": {"name": "anti", "namespace": "ns", "uid": "anti"},
            "spec": {
                "nodeName": "b",
                "containers": [],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}
                        ]
                    }
                },
            },
        }
    )
    cache.add_pod(anti)
    cache.add_pod(pod("plain", node="c"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert [i.name for i in snap.have_pods_with_affinity()] == ["b"]
    assert [i.name for i in snap.have_pods_with_required_anti_affinity()] == ["b"]
    cache.add_pod(pod("another", node="b"))
    cache.update_snapshot(snap)
    (info,) = snap.have_pods_with_affinity()
    assert info is snap.get("b")  # the list follows the current clone
    assert len(info.pods) == 2
    cache.remove_pod("anti")
    cache.update_snapshot(snap)
    assert list(snap.have_pods_with_affinity()) == []


def _affinity_pod(name: str, node_name: str, kind: str) -> Pod:
    term = {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}
    affinity = (
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        if kind == "anti"
        else {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]}
        }
    )
    return Pod.from_raw(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": node_name, "containers": [], "affinity": affinity},
        }
    )


def test_affinity_lists_kept_node_by_node_equal_a_fresh_build() -> None:
    """The lists follow each snapshot update in place (no rebuild per cycle); after every random
    step they equal the lists a fresh snapshot builds, in node order, with the current clones."""
    import random

    rng = random.Random(11)
    cache = Cache()
    names = [f"n{i:02d}" for i in range(40)]
    for name in names:
        cache.add_or_update_node(node(name))
    snap = Snapshot()
    cache.update_snapshot(snap)
    pods: list[str] = []
    for step in range(600):
        roll = rng.random()
        if roll < 0.45 or not pods:
            name = f"p{step}"
            target = rng.choice(names)
            kind = rng.choice(["anti", "preferred", "plain"])
            cache.add_pod(pod(name, node=target) if kind == "plain" else _affinity_pod(name, target, kind))
            pods.append(name)
        elif roll < 0.85:
            cache.remove_pod(pods.pop(rng.randrange(len(pods))))
        elif roll < 0.95:
            extra = f"x{step}"
            cache.add_or_update_node(node(extra))  # the node set changes: positions move
            names.append(extra)
        else:
            gone = names.pop(rng.randrange(len(names)))
            cache.remove_node(gone)
            pods = [p for p in pods if (cached := cache.get_pod(p)) is not None and cached.node_name != gone]
        cache.update_snapshot(snap)
        if rng.random() < 0.7:  # read (and so build) the lists in most cycles, not all
            fresh = Snapshot.from_node_infos(snap.node_info_list)
            assert [i.name for i in snap.have_pods_with_affinity()] == [i.name for i in fresh.have_pods_with_affinity()]
            assert [i.name for i in snap.have_pods_with_required_anti_affinity()] == [
                i.name for i in fresh.have_pods_with_required_anti_affinity()
            ]
            assert all(i is snap.get(i.name) for i in snap.have_pods_with_affinity())
            assert snap.any_pods_with_affinity() or not fresh.have_pods_with_affinity()
