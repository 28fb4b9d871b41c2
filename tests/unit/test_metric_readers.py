"""The harness's metric readers fail on a series that does not exist; they never read it as zero."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from harness.workload import registry_value


def _registry() -> tuple[CollectorRegistry, Counter, Histogram]:
    registry = CollectorRegistry()
    counter = Counter("demo_attempts", "attempts", ["result"], registry=registry)
    histogram = Histogram("demo_duration_seconds", "durations", ["profile"], registry=registry)
    return registry, counter, histogram


def test_a_registered_family_without_children_reads_zero() -> None:
    registry, _, _ = _registry()
    assert registry_value(registry, "demo_attempts_total", result="scheduled") == 0.0
    assert registry_value(registry, "demo_duration_seconds_count", profile="p") == 0.0


def test_children_are_summed_over_the_labels_given() -> None:
    registry, counter, histogram = _registry()
    counter.labels("scheduled").inc(2)
    counter.labels("error").inc()
    histogram.labels("p").observe(0.5)
    assert registry_value(registry, "demo_attempts_total", result="scheduled") == 2.0
    assert registry_value(registry, "demo_attempts_total") == 3.0
    assert registry_value(registry, "demo_attempts_total", result="unschedulable") == 0.0
    assert registry_value(registry, "demo_duration_seconds_count", profile="p") == 1.0


@pytest.mark.parametrize("name", ["demo_attempt_total", "scheduler_not_exported_total", "demo_attempts_bucket_x"])
def test_a_name_no_family_carries_fails_instead_of_reading_zero(name: str) -> None:
    registry, _, _ = _registry()
    with pytest.raises(AssertionError, match="no metric family"):
        registry_value(registry, name)
