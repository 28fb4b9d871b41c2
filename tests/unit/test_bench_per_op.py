"""The upstream bench's --per-op breakdown: counters read from a scheduler's /metrics text (as
kube-scheduler and ours expose them), what each op added, and the results.md table."""

from __future__ import annotations

from prometheus_client import generate_latest

from harness.bench import report
from harness.bench.upstream_run import OpReading, op_breakdown, ops_markdown
from scheduler import metrics

KUBE_STYLE = """\
# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="a",result="scheduled"} 10
scheduler_schedule_attempts_total{profile="b",result="scheduled"} 5
scheduler_schedule_attempts_total{profile="a",result="unschedulable"} 7
# HELP scheduler_queue_incoming_pods_total [STABLE] Number of pods added to scheduling queues by event and queue type.
# TYPE scheduler_queue_incoming_pods_total counter
scheduler_queue_incoming_pods_total{event="NodeUpdate",queue="active"} 3
scheduler_queue_incoming_pods_total{event="NodeUpdate",queue="backoff"} 4
scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 0
# HELP scheduler_pending_pods [STABLE] Number of pending pods.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 9
"""


def test_counter_values_key_by_the_chosen_labels_and_sum_the_rest() -> None:
    assert report.counter_values(KUBE_STYLE, "scheduler_schedule_attempts", ("result",)) == {
        "scheduled": 15.0,
        "unschedulable": 7.0,
    }
    assert report.counter_values(KUBE_STYLE, "scheduler_queue_incoming_pods", ("queue", "event")) == {
        "active/NodeUpdate": 3.0,
        "backoff/NodeUpdate": 4.0,
        "active/PodAdd": 0.0,
    }
    assert report.counter_values(KUBE_STYLE, "scheduler_pending_pods", ("queue",)) == {}


def test_counters_read_several_counters_from_one_parse() -> None:
    wanted = {"scheduler_schedule_attempts": ("result",), "scheduler_queue_incoming_pods": ("queue", "event")}
    assert report.counters(KUBE_STYLE, wanted) == {
        name: report.counter_values(KUBE_STYLE, name, labels) for name, labels in wanted.items()
    }
    assert report.counters(KUBE_STYLE, {"rest_client_requests": ("method", "code")}) == {"rest_client_requests": {}}


def test_counter_deltas_keep_only_series_that_moved() -> None:
    before = {"a": 1.0, "b": 2.0}
    after = {"a": 1.0, "b": 5.0, "c": 2.0}
    assert report.counter_deltas(before, after) == {"b": 3.0, "c": 2.0}
    assert report.counter_deltas(after, after) == {}


def test_ours_exposition_reads_the_same_way() -> None:
    text = generate_latest(metrics.REGISTRY).decode()
    before = report.counter_values(text, "scheduler_queue_incoming_pods", ("queue", "event"))
    metrics.child(metrics.queue_incoming_pods, "backoff", "PerOpProbe").inc(2)
    after = report.counter_values(
        generate_latest(metrics.REGISTRY).decode(), "scheduler_queue_incoming_pods", ("queue", "event")
    )
    assert report.counter_deltas(before, after) == {"backoff/PerOpProbe": 2.0}


def test_op_breakdown_and_its_table() -> None:
    before = OpReading(100.0, 3.0, {"unschedulable": 1.0}, {"active/NodeUpdate": 2.0}, {"PATCH/200": 1.0})
    after = OpReading(
        102.5, 4.25, {"unschedulable": 4.0, "scheduled": 6.0}, {"active/NodeUpdate": 9.0}, {"PATCH/200": 4.0}
    )
    op = op_breakdown(9, "updateAny", before, after)
    assert op == {
        "op": "09-updateAny",
        "seconds": 2.5,
        "cpu_seconds": 1.25,
        "attempts": {"scheduled": 6.0, "unschedulable": 3.0},
        "incoming": {"active/NodeUpdate": 7.0},
        "requests": {"PATCH/200": 3.0},
    }
    results = {
        "runs": [
            {"workload": "W/x", "title": "secondary-scheduler", "ops": [op]},
            {"workload": "W/x", "title": "kube-scheduler"},
        ]
    }
    text = ops_markdown(results)
    assert "## W/x / secondary-scheduler, per op" in text
    assert "| 09-updateAny | 2.50 | 1.25 | scheduled 6, unschedulable 3 | active/NodeUpdate 7 | PATCH/200 3 |" in text
    assert "kube-scheduler" not in text
    assert ops_markdown({"runs": [{"workload": "W/x", "title": "kube-scheduler"}]}) == ""
