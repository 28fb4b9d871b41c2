"""PodGroupPodsCount: prefer the placement that holds the most members of the group (kube-scheduler
v1.37.2's PlacementScore plugin, weight 1 in the default profile with TopologyAwareWorkloadScheduling).

A placement scores the members already assumed or bound plus those the cycle placed in it;
scores are normalized to 0-100 against the best. Reads the pod-group state; writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import PodGroupState
from scheduler.framework.types import MAX_NODE_SCORE, MIN_NODE_SCORE, Placement, Status
from scheduler.model.objects import Pod

NAME = "PodGroupPodsCount"


class PodGroupPodsCount:
    name = NAME

    def score_placement(
        self, group: PodGroupState, placement: Placement, assignments: Sequence[tuple[Pod, str]]
    ) -> tuple[int, Status | None]:
        return group.scheduled_pods_count() + len(assignments), None

    def normalize_placement_scores(self, group: PodGroupState, scores: list[int]) -> Status | None:
        best = max(scores, default=0)
        if best == 0:
            error = ValueError("no pods from pod group are assigned to any of the candidate placements")
            return Status.as_error(error, NAME)
        for i, score in enumerate(scores):
            scores[i] = MIN_NODE_SCORE + score * (MAX_NODE_SCORE - MIN_NODE_SCORE) // best
        return None


def new(args: Mapping[str, Any], handle: Handle) -> PodGroupPodsCount:
    return PodGroupPodsCount()
