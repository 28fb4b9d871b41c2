"""The scheduler's lock-free Counter, Gauge and Histogram expose exactly what prometheus_client's
own classes expose for the same writes (the text format is what dashboards and alerts read)."""

from __future__ import annotations

import math

import prometheus_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from scheduler import metrics

BOUNDS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.5, 1.0, 10.0)

amounts = st.one_of(
    st.sampled_from([*BOUNDS, 0.0, -1.0, 1e9, math.inf, -math.inf]),
    st.floats(min_value=-1.0, max_value=20.0, allow_nan=False),
)


def exposition(histogram_cls: type, counter_cls: type, gauge_cls: type, writes: list[tuple[str, float]]) -> bytes:
    registry = CollectorRegistry()
    histogram = histogram_cls("h_seconds", "h", ["a"], buckets=BOUNDS, registry=registry)
    counter = counter_cls("c", "c", ["a"], registry=registry)
    gauge = gauge_cls("g", "g", ["a"], registry=registry)
    for op, amount in writes:
        label = "x" if amount < 1 else "y"
        if op == "observe":
            histogram.labels(label).observe(amount)
        elif op == "inc":
            counter.labels(label).inc(abs(amount) if math.isfinite(amount) else 1)
        elif op == "gauge_inc":
            gauge.labels(label).inc(amount)
        elif op == "gauge_dec":
            gauge.labels(label).dec(amount)
        else:
            gauge.labels(label).set(amount)
    return generate_latest(registry)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["observe", "inc", "gauge_inc", "gauge_dec", "set"]), amounts), max_size=40))
def test_same_exposition_as_prometheus_client(writes: list[tuple[str, float]]) -> None:
    ours = exposition(metrics.Histogram, metrics.Counter, metrics.Gauge, writes)
    theirs = exposition(prometheus_client.Histogram, prometheus_client.Counter, prometheus_client.Gauge, writes)
    assert ours == theirs


def test_an_amount_equal_to_a_bound_counts_in_that_bound_and_nan_in_none() -> None:
    registry = CollectorRegistry()
    histogram = metrics.Histogram("h2_seconds", "h", buckets=(1.0, 2.0), registry=registry)
    histogram.observe(1.0)
    histogram.observe(float("nan"))
    assert registry.get_sample_value("h2_seconds_bucket", {"le": "1.0"}) == 1.0
    assert registry.get_sample_value("h2_seconds_count") == 1.0
    total = registry.get_sample_value("h2_seconds_sum")
    assert total is not None and math.isnan(total)


def test_a_negative_counter_increment_and_exemplars_are_refused() -> None:
    counter = metrics.Counter("c2", "c", registry=CollectorRegistry())
    with pytest.raises(ValueError):
        counter.inc(-1)
    with pytest.raises(ValueError):
        counter.inc(1, exemplar={"trace": "t"})
    histogram = metrics.Histogram("h3_seconds", "h", registry=CollectorRegistry())
    with pytest.raises(ValueError):
        histogram.observe(1.0, exemplar={"trace": "t"})


def test_every_family_of_the_scheduler_uses_the_lock_free_classes() -> None:
    families = [
        value for value in vars(metrics).values() if isinstance(value, prometheus_client.metrics.MetricWrapperBase)
    ]
    assert families
    assert all(type(family) in (metrics.Counter, metrics.Gauge, metrics.Histogram) for family in families), [
        family._name for family in families if type(family) not in (metrics.Counter, metrics.Gauge, metrics.Histogram)
    ]
