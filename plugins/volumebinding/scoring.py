"""VolumeBinding's Score: how full the node's storage would be, per storage class, through the shape.

Owns the arithmetic of kube's scorer.go: the requested and available bytes per storage class of
the volumes Filter chose for a node (static bindings, or dynamic provisions with a known
CSIStorageCapacity), each class's utilisation mapped through the configured shape, averaged.
Pure functions: never reads CycleState, never calls the API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plugins.helper.shape_score import MAX_CUSTOM_SCORE, MAX_UTILIZATION, broken_linear
from plugins.volumebinding.binder import PodVolumes
from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.model.quantity import parse_quantity
from scheduler.model.volumes import claim_request, spec, volume_capacity


def build_scorer(shape: Sequence[tuple[int, int]]) -> Callable[[PodVolumes], int]:
    """The node's score for the volumes Filter chose there, under this (utilization, score) shape."""
    shape_score = broken_linear([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for u, s in shape])

    def score(volumes: PodVolumes) -> int:
        # storage class -> [requested, capacity]
        by_class: dict[str, list[int]] = {}
        if volumes.static_bindings:
            for binding in volumes.static_bindings:
                entry = by_class.setdefault(str(spec(binding.pv).get("storageClassName") or ""), [0, 0])
                entry[0] += int(claim_request(binding.pvc))
                entry[1] += int(volume_capacity(binding.pv))
        else:
            for provision in volumes.dynamic_provisions:
                if provision.node_capacity is None:
                    continue
                entry = by_class.setdefault(str(spec(provision.pvc).get("storageClassName") or ""), [0, 0])
                entry[1] = int(volume_limit_capacity(provision.node_capacity))
                entry[0] += int(claim_request(provision.pvc))
        if not by_class:
            return 0
        total = 0
        for requested, capacity in by_class.values():
            if capacity == 0 or requested > capacity:
                total += shape_score(MAX_UTILIZATION)
            else:
                total += shape_score(requested * MAX_UTILIZATION // capacity)
        return int(total / len(by_class) + 0.5)

    return score


def volume_limit_capacity(capacity: Mapping[str, Any]) -> int:
    """CSIStorageCapacity.capacity in bytes (Score reads the capacity, not the volume limit)."""
    value = capacity.get("capacity")
    return int(parse_quantity(value)) if value is not None else 0
