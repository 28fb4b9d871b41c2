"""PodMap's copies are independent (copy on write), and NodeInfo reads the same pods whether it
holds a dict or a PodMap, across the thresholds where it switches, for the cache's node and for
snapshot copies held while the cache goes on changing."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework import podmap
from scheduler.framework.podmap import PodMap
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import Pod

KEYS = [f"uid-{i}" for i in range(40)]

op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 7), st.sampled_from(KEYS), st.integers(0, 3)),
    st.tuples(st.just("pop"), st.integers(0, 7), st.sampled_from(KEYS), st.just(0)),
    st.tuples(st.just("copy"), st.integers(0, 7), st.just(""), st.just(0)),
)


def same(got: PodMap[int], want: dict[str, int]) -> None:
    assert len(got) == len(want)
    assert bool(got) == bool(want)
    assert dict(got.items()) == want
    assert sorted(got) == sorted(want) == sorted(got.keys())
    assert sorted(got.values()) == sorted(want.values())
    for key in KEYS:
        assert (key in got) == (key in want)
        assert got.get(key) == want.get(key)


@settings(max_examples=300, deadline=None)
@given(start=st.dictionaries(st.sampled_from(KEYS), st.integers(0, 3)), ops=st.lists(op, max_size=60))
def test_copies_never_see_each_others_writes(start: dict[str, int], ops: list[tuple[str, int, str, int]]) -> None:
    maps = [PodMap.split(start)]
    models = [dict(start)]
    for name, which, key, value in ops:
        i = which % len(maps)
        if name == "put":
            maps[i].put(key, value)
            models[i][key] = value
        elif name == "pop":
            assert maps[i].pop(key) == models[i].pop(key, None)
        else:
            maps.append(maps[i].copy())
            models.append(dict(models[i]))
        for got, want in zip(maps, models, strict=True):
            same(got, want)
    for got, want in zip(maps, models, strict=True):
        assert got.merged() == want


def pod(i: int, affinity: bool) -> Pod:
    spec: dict[str, Any] = {
        "nodeName": "n1",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}],
    }
    if affinity:
        term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return Pod.from_raw({"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"}, "spec": spec})


def view(info: NodeInfo) -> tuple[Any, ...]:
    return (
        {uid: p.uid for uid, p in info.pods.items()},
        sorted(p.uid for p in info.pods_with_affinity.values()),
        sorted(info.pods_with_required_anti_affinity),
        info.requested.milli_cpu,
        info.requested.memory,
        info.non_zero_milli_cpu,
        len(info.pods),
    )


def reference(pods: dict[str, Pod]) -> tuple[Any, ...]:
    anti = sorted(uid for uid, p in pods.items() if p.has_required_anti_affinity)
    return (
        {uid: uid for uid in pods},
        sorted(uid for uid, p in pods.items() if p.has_pod_affinity),
        anti,
        10 * len(pods),
        (1 << 20) * len(pods),
        10 * len(pods),
        len(pods),
    )


def test_node_info_across_the_thresholds_with_copies_held() -> None:
    rng = random.Random(7)
    pool = [pod(i, affinity=i % 3 == 0) for i in range(2 * podmap.SPLIT_AT)]
    info = NodeInfo()
    on: dict[str, Pod] = {}
    held: list[tuple[NodeInfo, tuple[Any, ...]]] = []
    kinds: set[str] = set()
    # Grow past SPLIT_AT, shrink below MERGE_AT, grow again: the map changes form each way.
    for target in (podmap.SPLIT_AT + 200, podmap.MERGE_AT - 50, podmap.SPLIT_AT + 50):
        while len(on) != target:
            grow = len(on) < target
            if rng.random() < 0.2:
                grow = not grow
            if grow:
                p = rng.choice([p for p in pool[: len(on) + 50] if p.uid not in on] or pool)
                if p.uid in on:
                    continue
                info.add_pod(p)
                on[p.uid] = p
            elif on:
                p = on.pop(rng.choice(list(on)))
                assert info.remove_pod(p)
            if rng.random() < 0.05:
                copy = info.clone()
                held.append((copy, reference(on)))
            kinds.add(type(info.pods).__name__)
        assert view(info) == reference(on)
        for copy, want in held:
            assert view(copy) == want
    assert kinds == {"dict", "PodMap"}
    absent = next(p for p in pool if p.uid not in on)
    assert not info.remove_pod(absent)
    assert view(info) == reference(on)


def test_a_copy_changed_like_preemptions_what_if_leaves_the_original_alone() -> None:
    info = NodeInfo()
    pods = [pod(i, affinity=i % 2 == 0) for i in range(podmap.SPLIT_AT + 10)]
    for p in pods:
        info.add_pod(p)
    assert isinstance(info.pods, PodMap) and isinstance(info.pods_with_affinity, dict)
    before = view(info)
    what_if = info.clone()
    for p in pods[:600]:
        assert what_if.remove_pod(p)
    assert view(info) == before
    assert len(what_if.pods) == len(pods) - 600 and isinstance(what_if.pods, PodMap)
    assert view(what_if) == reference({p.uid: p for p in pods[600:]})
