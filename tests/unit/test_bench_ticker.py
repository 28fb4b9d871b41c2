"""The upstream bench paces updateAny, deletePods and churn as scheduler_perf does, with Go's
time.Ticker: steps start on the period's grid whatever the step's own work takes, and a step that
overruns is followed at once by the next (the one tick the ticker kept), never by a burst."""

from __future__ import annotations

import pytest

from harness.bench.upstream_run import tick_at

PERIOD = 0.010


def starts(work: float, steps: int, period: float = PERIOD) -> list[float]:
    """When each of `steps` steps of `work` seconds begins, the ticker made at 0."""
    out = []
    now, due = 0.0, period
    for _ in range(steps):
        fires, due = tick_at(now, due, period)
        out.append(fires)
        now = fires + work
    return out


def test_short_work_keeps_the_grid() -> None:
    """3 ms of work per 10 ms tick: the steps start at 10, 20, 30 ms. A sleep of one period before
    each step (what the bench did) starts them 13 ms apart, and 100 updates at 100/s take 1.3 s."""
    assert starts(0.003, 4) == pytest.approx([0.010, 0.020, 0.030, 0.040])


def test_overrunning_work_goes_on_at_once_and_drops_the_missed_ticks() -> None:
    """25 ms of work per 10 ms tick: each step starts when the last ends (a tick is waiting), and the
    ticks missed meanwhile are not made up in a burst."""
    assert starts(0.025, 4) == pytest.approx([0.010, 0.035, 0.060, 0.085])


def test_a_late_receiver_takes_the_kept_tick_then_waits_for_the_grid() -> None:
    fires, due = tick_at(0.035, 0.020, PERIOD)
    assert (fires, due) == pytest.approx((0.035, 0.040))
    fires, due = tick_at(0.036, due, PERIOD)
    assert (fires, due) == pytest.approx((0.040, 0.050))
    assert tick_at(0.020, 0.020, PERIOD) == pytest.approx((0.020, 0.030))
