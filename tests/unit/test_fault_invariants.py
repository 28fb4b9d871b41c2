"""The fault suite's scheduled-attempts invariant follows kube-scheduler's metric: a Binding the
apiserver applied while its reply was lost is an `error` attempt, although the pod ends up bound."""

from __future__ import annotations

import json

from harness.faults import failed_binds_now_bound, scheduled_metric_problem


def _line(event: str, pod: str) -> str:
    return json.dumps({"event": event, "pod": pod, "node": "n1", "level": "info"})


def test_a_bind_whose_reply_was_lost_is_not_a_missing_scheduled_attempt() -> None:
    log = "\n".join(
        [
            _line("binding failed", "ns/p1"),  # the apiserver applied it, then died: p1 is bound
            _line("binding failed", "ns/p2"),  # really failed; p2 stayed pending and was reported
            _line("binding failed; pod is bound meanwhile", "ns/p3"),
            "not json: binding failed pod=ns/p4",
            _line("Successfully bound", "ns/p5"),
        ]
    )
    assert failed_binds_now_bound(log, {"ns/p1", "ns/p3", "ns/p4", "ns/p5"}) == 2
    assert scheduled_metric_problem(scheduled=489, bound=490, failed_but_bound=1) == ""
    assert scheduled_metric_problem(scheduled=488, bound=490, failed_but_bound=2) == ""


def test_a_missing_or_extra_scheduled_attempt_is_still_a_problem() -> None:
    assert "bound 490 pods (0 of them" in scheduled_metric_problem(scheduled=489, bound=490, failed_but_bound=0)
    assert "bound 490 pods (1 of them" in scheduled_metric_problem(scheduled=488, bound=490, failed_but_bound=1)
    assert "bound only 489" in scheduled_metric_problem(scheduled=490, bound=489, failed_but_bound=0)
