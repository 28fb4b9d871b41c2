"""The score shape of RequestedToCapacityRatio and VolumeBinding's capacity scoring (kube's
plugins/helper/shape_score.go): a piecewise-linear function of utilisation, built once per plugin."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.model.quantity import go_div

MAX_UTILIZATION = 100
MAX_CUSTOM_SCORE = 10


def broken_linear(scaled: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """helper.BuildBrokenLinearFunction: piecewise-linear utilisation -> score over (utilization, score) points."""

    def fn(utilization: int) -> int:
        for i, (u, s) in enumerate(scaled):
            if utilization <= u:
                if i == 0:
                    return s
                pu, ps = scaled[i - 1]
                return ps + go_div((s - ps) * (utilization - pu), u - pu)
        return scaled[-1][1]

    return fn
