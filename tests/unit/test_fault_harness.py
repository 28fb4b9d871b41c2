"""The fault suite's bookkeeping (harness/faults.py) without a cluster: every problem a run
finds ends up in its row, in RESULTS.json and RESULTS.md alike, and fails the test; a process that
outlives SIGTERM is a problem, not something passed over."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.faults import FaultRun, Outcome, Process, fault_run, record, replicas
from harness.workload import wait_for

# A child that ignores SIGTERM, as a replica hanging in shutdown would.
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
OBEDIENT = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"


def _process(tmp_path: Path, label: str, script: str) -> Process:
    process = Process(label, [sys.executable, "-c", script], tmp_path / f"{label}.log", stop_grace=0.5)
    process.start()
    wait_for(lambda: "ready" in process.log_text(), timeout=30, what=f"{label} started")
    return process


def _md(results: Path) -> str:
    return results.with_suffix(".md").read_text()


def test_a_run_with_a_problem_writes_a_failing_row_and_fails(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.json"
    record(Outcome("clean fault", pods=500, nodes=50, bound=490, unschedulable=10), results)
    failed = pytest.raises(AssertionError, match="pod ns/p neither bound nor reported")
    with failed, fault_run("broken fault", results) as run:
        run.outcome = Outcome("broken fault", pods=500, nodes=50, bound=489, unschedulable=10, lost=1)
        run.outcome.problems.append("pod ns/p neither bound nor reported")
        run.check(False, "no watch relisted after the compaction")
        run.check(True, "never shown")
    rows = {row["fault"]: row for row in json.loads(results.read_text())}
    assert rows["clean fault"]["problems"] == []
    assert rows["broken fault"]["problems"] == [
        "pod ns/p neither bound nor reported",
        "no watch relisted after the compaction",
    ]
    table = _md(results)
    assert "| clean fault | 500 | 50 | 490 | 10 | 0 | 0 | 0 | < 1 | 0 |" in table
    assert "| broken fault | 500 | 50 | 489 | 10 | 1 | 0 | 0 | < 1 | **2 (FAILED)** |" in table
    assert "### broken fault" in table and "no watch relisted after the compaction" in table
    assert "never shown" not in table


def test_a_run_that_stops_on_an_exception_still_writes_its_row(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.json"
    with pytest.raises(RuntimeError, match="apiserver gone"), fault_run("crashed fault", results):
        raise RuntimeError("apiserver gone")
    (row,) = json.loads(results.read_text())
    assert row["problems"] == ["the test stopped early: RuntimeError: apiserver gone"]
    assert "**1 (FAILED)**" in _md(results)


def test_a_clean_run_writes_a_clean_row(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.json"
    with fault_run("clean fault", results) as run:
        run.outcome = Outcome("clean fault", pods=500, nodes=50, bound=490, unschedulable=10)
    assert "## Problems" not in _md(results)


def test_a_replica_hanging_on_sigterm_is_a_problem_in_the_row(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.json"
    stubborn = _process(tmp_path, "stubborn", STUBBORN)
    obedient = _process(tmp_path, "obedient", OBEDIENT)
    began = time.monotonic()
    failed = pytest.raises(AssertionError, match=r"replica stubborn did not stop within 0.5 s of SIGTERM \(killed\)")
    with failed, fault_run("hanging replica", results) as run, run.replicas(stubborn, obedient):
        run.outcome = Outcome("hanging replica", pods=1, nodes=1, bound=1)
    assert time.monotonic() - began < 10
    assert not stubborn.alive() and not obedient.alive()  # both stopped, the hang notwithstanding
    (row,) = json.loads(results.read_text())
    assert len(row["problems"]) == 1 and "replica stubborn did not stop" in row["problems"][0]
    assert "**1 (FAILED)**" in _md(results)


def test_a_replica_hanging_on_sigterm_fails_the_plain_context_too(tmp_path: Path) -> None:
    stubborn = _process(tmp_path, "stubborn", STUBBORN)
    with pytest.raises(AssertionError, match="replica stubborn did not stop"), replicas(stubborn):
        pass
    assert not stubborn.alive()


def test_a_traceback_in_a_replica_log_is_a_problem(tmp_path: Path) -> None:
    process = Process(
        "a", [sys.executable, "-c", "raise SystemExit('Traceback (most recent call last):')"], tmp_path / "a.log"
    )
    process.start()
    assert process.wait_exit(30) == 1
    run = FaultRun("f")
    run.no_traceback(process)
    assert len(run.problems) == 1 and "replica a logged an exception" in run.problems[0]
