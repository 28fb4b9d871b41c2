"""ImageLocality: image sizes present on a node, scaled by how widespread each image is.

Cases ported from kube-scheduler v1.37.2 imagelocality/image_locality_test.go
(TestImageLocalityPriority, TestNormalizedImageName), plus the cache's one size per image name.
"""

from __future__ import annotations

import hashlib

import pytest

from plugins.imagelocality import ImageLocality, normalized_image_name
from scheduler.api.fake import FakeApiClient
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import FrameworkHandle
from scheduler.framework.types import CycleState
from scheduler.testing.builders import NodeBuilder, PodBuilder, make_handle, make_node, make_pod, node_info, run_score

MB = 1024 * 1024


def images(name: str, *entries: tuple[int, tuple[str, ...]]) -> NodeBuilder:
    node = make_node(name)
    for size_mb, names in entries:
        node.image(size_mb * MB, *names)
    return node


def pod_with(*images: str, init: tuple[str, ...] = ()) -> PodBuilder:
    pod = make_pod("p")
    for image in init:
        pod.init_container(image)
    for image in images:
        pod.container(image)
    return pod


N40_300_2000 = (
    (40, ("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1")),
    (300, ("gcr.io/300:latest", "gcr.io/300:v1")),
    (2000, ("gcr.io/2000:latest",)),
)
N250_10 = ((250, ("gcr.io/250:latest",)), (10, ("gcr.io/10:latest", "gcr.io/10:v1")))
N600_40_900 = ((600, ("gcr.io/600:latest",)), (40, ("gcr.io/40:latest",)), (900, ("gcr.io/900:latest",)))
N300_600_900 = ((300, ("gcr.io/300:latest",)), (600, ("gcr.io/600:latest",)), (900, ("gcr.io/900:latest",)))
N4000_30 = ((4000, ("gcr.io/4000:latest",)), (30, ("gcr.io/30:latest",)))
N20_30_40 = ((20, ("gcr.io/20:latest",)), (30, ("gcr.io/30:latest",)), (40, ("gcr.io/40:latest",)))


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        (  # 40M/2 is under the 23M floor; 100 * (250M/2 - 23M) / (2000M - 23M) = 5
            pod_with("gcr.io/40", "gcr.io/250"),
            [images("n1", *N40_300_2000), images("n2", *N250_10)],
            [0, 5],
        ),
        (pod_with("gcr.io/40", "gcr.io/300"), [images("n1", *N40_300_2000), images("n2", *N250_10)], [7, 0]),
        (pod_with("gcr.io/10", "gcr.io/4000"), [images("n1", *N4000_30), images("n2", *N250_10)], [100, 0]),
        (
            pod_with("gcr.io/10", "gcr.io/4000"),
            [images("n1", *N4000_30), images("n2", *N250_10), images("n3")],
            [66, 0, 0],
        ),
        (
            pod_with("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [images("n1", *N600_40_900), images("n2", *N300_600_900), images("n3")],
            [32, 36, 0],
        ),
        (pod_with("gcr.io/30", "gcr.io/40"), [images("n1", *N20_30_40), images("n2", *N4000_30)], [1, 0]),
        (  # init containers count too
            pod_with("gcr.io/30", init=("gcr.io/300",)),
            [images("n1", *N40_300_2000), images("n2", *N20_30_40)],
            [6, 0],
        ),
        (pod_with(), [images("n1", *N40_300_2000)], [0]),
        (  # pod with ImageVolume: the volume's image counts like a container's
            pod_with("gcr.io/30").spec(volumes=[{"name": "imageVolume", "image": {"reference": "gcr.io/300"}}]),
            [images("n1", *N300_600_900), images("n2", *N4000_30)],
            [6, 0],
        ),
        (  # same images as ImageVolume pod but as regular container images
            pod_with("gcr.io/30", "gcr.io/300"),
            [images("n1", *N300_600_900), images("n2", *N4000_30)],
            [6, 0],
        ),
        (  # names are only completed with :latest, never with a registry prefix
            pod_with("nginx"),
            [images("n1", (2000, ("docker.io/library/nginx:latest",)))],
            [0],
        ),
    ],
)
def test_score(pod: PodBuilder, nodes: list[NodeBuilder], want: list[int]) -> None:
    infos = [node_info(n) for n in nodes]
    plugin = ImageLocality(make_handle(*infos))
    assert run_score(plugin, CycleState(), pod.obj(), infos) == want


DIGEST = "sha256:" + hashlib.sha256(b"root").hexdigest()


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        (f"root@{DIGEST}", f"root@{DIGEST}"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


def scores_through_cache(cache: Cache, snap: Snapshot, pod: PodBuilder) -> dict[str, int]:
    cache.update_snapshot(snap)
    plugin = ImageLocality(FrameworkHandle(FakeApiClient(), snap))
    state = CycleState()
    target = pod.obj()
    per_node = {info.name: plugin.score(state, target, info)[0] for info in snap.list()}
    batch = plugin.score_batch(state, target, snap.table, snap.table.arange).tolist()
    assert batch == [per_node[info.name] for info in snap.list()]
    return per_node


def test_image_size_is_the_first_reported_per_image_name() -> None:
    # n1 reports nginx at 800 MiB first; n2's own 100 MiB figure is not used: both nodes score
    # 100 * (800M * 2/2 - 23M) / (1000M - 23M) = 79, where n2's own size would give 7.
    cache, snap = Cache(), Snapshot()
    cache.add_or_update_node(images("n1", (800, ("nginx:1",))).obj())
    cache.add_or_update_node(images("n2", (100, ("nginx:1",))).obj())
    assert scores_through_cache(cache, snap, pod_with("nginx:1")) == {"n1": 79, "n2": 79}
    # The first reporter goes; the image is still known, with the size it was first seen at.
    cache.remove_node("n1")
    assert scores_through_cache(cache, snap, pod_with("nginx:1")) == {"n2": 79}
    # The last holder reports a new size: the image is known afresh at that size (remove + add).
    cache.add_or_update_node(images("n2", (300, ("nginx:1",))).obj())
    assert scores_through_cache(cache, snap, pod_with("nginx:1")) == {"n2": 28}


def test_standalone_snapshot_takes_sizes_in_node_order() -> None:
    infos = [node_info(images("n1", (800, ("nginx:1",)))), node_info(images("n2", (100, ("nginx:1",))))]
    plugin = ImageLocality(make_handle(*infos))
    assert run_score(plugin, CycleState(), pod_with("nginx:1").obj(), infos) == [79, 79]


def test_a_node_listing_a_name_twice_reports_the_first_size() -> None:
    node = make_node("n").image(800 * MB, "nginx:1").image(100 * MB, "nginx:1").obj()
    assert node.images == {"nginx:1": 800 * MB}
