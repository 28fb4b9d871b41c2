"""ImageLocality: prefer nodes that already have the pod's container images.

Each image the node has adds its size scaled by how widespread it is (nodes having it /
all nodes), so an image present everywhere does not pull pods onto one node. The sum is
clamped between 23 MiB and 1000 MiB per container and mapped linearly onto 0..100.
Image references without a tag get `:latest`, exactly as upstream does (no registry or
`library/` prefix is added: the node's reported names must match the pod's as written).
Images are those of init containers, containers and image volumes (`volumes[].image`).

An image's size is the one kube-scheduler's cache keeps per image name: the size reported by
the node that first made the image known (the snapshot's `image_sizes`), not each node's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework import signing
from scheduler.framework.interface import Handle, SnapshotLister
from scheduler.framework.signing import SignFragment
from scheduler.framework.table import IntArray, NodeTable
from scheduler.framework.types import MAX_NODE_SCORE, CycleState, NodeInfo, Status
from scheduler.model.objects import Pod

NAME = "ImageLocality"

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """Add the implicit `:latest` tag when the reference has none."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _pod_images(pod: Pod) -> list[str]:
    """Init container, container and image volume references, each one counting once."""
    spec = pod.spec
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    references = [c.get("image") or "" for c in containers]
    references += [v["image"].get("reference") or "" for v in spec.get("volumes") or () if v.get("image") is not None]
    return [normalized_image_name(reference) for reference in references]


def _nodes_having(snapshot: SnapshotLister, image: str) -> int:
    """How many nodes report the image; the cache's snapshot keeps these counts ready."""
    counts: Mapping[str, int] | None = getattr(snapshot, "image_num_nodes", None)
    if counts is not None:
        return counts.get(image, 0)
    return sum(1 for info in snapshot.list() if info.node is not None and image in info.node.images)


def _image_size(snapshot: SnapshotLister, image: str, reported: int) -> int:
    """The cache's size for the image (first reported by any node); `reported` without a cache."""
    sizes: Mapping[str, int] | None = getattr(snapshot, "image_sizes", None)
    if sizes is not None:
        return sizes.get(image, reported)
    return reported


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment], Status | None]:
        return ((signing.IMAGE_NAMES, tuple(sorted(set(_pod_images(pod))))),), None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        snapshot = self.handle.snapshot
        total_nodes = len(snapshot.list())
        images = _pod_images(pod)
        node_images = node_info.node.images if node_info.node is not None else {}
        total = 0
        for image in images:
            reported = node_images.get(image)
            if reported is not None:
                size = _image_size(snapshot, image, reported)
                total += scaled_image_score(size, _nodes_having(snapshot, image), total_nodes)
        return calculate_priority(total, len(images)), None

    def score_batch(self, state: CycleState, pod: Pod, table: NodeTable, rows: IntArray) -> IntArray:
        # Depends on the node's images and cluster-wide image spread: both change only with nodes.
        values = table.node_values(
            (NAME, tuple(_pod_images(pod))), lambda node: self.score(state, pod, NodeInfo(node))[0]
        )
        return values[rows]

    def score_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
