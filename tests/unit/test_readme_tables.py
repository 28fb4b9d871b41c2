"""README.md's generated blocks against the result files (harness/readme.py).

The check runs over a copy of README.md and the result files taken when this module is collected,
before any test runs: `make test` runs the fault suite, which rewrites tests/faults/RESULTS.json and
PARTITION.md, so the files as the session found them are the ones the README must match.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harness import readme
from harness.readme import DASH, REPO_ROOT, ReadmeError, copy_inputs, differences, render

_COPY = tempfile.TemporaryDirectory(prefix="readme-inputs-")
atexit.register(_COPY.cleanup)
AS_FOUND = Path(_COPY.name)
copy_inputs(REPO_ROOT, AS_FOUND)


def test_readme_blocks_match_the_result_files() -> None:
    text = (AS_FOUND / "README.md").read_text()
    assert "<!-- BEGIN generated:bench-latest -->" in text
    problems = differences(text, AS_FOUND)
    assert not problems, "\n".join(problems) + "\nrun `make readme`"


def test_check_mode_exits_zero_on_the_readme_as_found() -> None:
    assert readme.main(["--check", "--root", str(AS_FOUND)]) == 0


def test_a_hand_edited_number_inside_a_block_is_caught() -> None:
    text = (AS_FOUND / "README.md").read_text()
    row = next(
        line for line in text.splitlines() if line.startswith("| PreemptionAsync/5000Nodes_AsyncPreemptionEnabled")
    )
    ours = row.split("|")[3]  # ours pods/s avg (p50/p99), whatever the latest run measured
    bumped = f" {int(ours.split()[0]) + 1} ({ours.split('(', 1)[1]}"
    edited = text.replace(row, row.replace(f"|{ours}|", f"|{bumped}|", 1), 1)
    assert edited != text
    problems = differences(edited, AS_FOUND)
    assert len(problems) == 1
    assert problems[0].startswith("block generated:bench-latest differs")
    assert bumped.strip() in problems[0]


def test_a_hand_edited_fault_row_is_caught_and_rewritten(tmp_path: Path) -> None:
    shutil.copytree(AS_FOUND / "tests" / "faults", tmp_path / "tests" / "faults")
    text = "intro\n<!-- BEGIN generated:faults -->\n<!-- END generated:faults -->\nrest\n"
    fresh = render(text, tmp_path)
    edited = fresh.replace("| 490 | 10 |", "| 491 | 9 |", 1)
    assert [p.splitlines()[0] for p in differences(edited, tmp_path)] == ["block generated:faults differs:"]
    assert render(edited, tmp_path) == fresh
    assert fresh.startswith("intro\n") and fresh.endswith("\nrest\n")


# ---- benchmark pairing -----------------------------------------------------------------------


def _row(workload: str, scheduler: str, pods_per_second: float, cpu: float = 1.0) -> dict[str, Any]:
    return {
        "workload": workload,
        "scheduler": scheduler,
        "threshold": 100.0,
        "commit": "c0ffee0",
        "phases": [{"scheduled": 1000}],
        "throughput_avg": pods_per_second,
        "throughput_p50": pods_per_second,
        "throughput_p99": pods_per_second,
        "scheduled": 1000,
        "cpu_ms_per_pod": cpu,
        "peak_rss_mib": 100.0,
        "attempt_p50_ms": 1.0,
        "attempt_p99_ms": 2.0,
        "a_field_added_later": [1, 2],
    }


def _bench(
    root: Path,
    name: str,
    started: str,
    rows: list[dict[str, Any]],
    commit: str = "c0ffee0",
    cpu: str = "AMD EPYC 7B13 64-Core Processor",
    config_dir: str | None = None,
) -> None:
    folder = root / "bench-results" / name
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "date": started[:10],
        "started": started,
        "machine": {"cpu": cpu, "cores": 2},
        "commit": commit,
        "scale": 1.0,
        "runs": rows,
        "skipped": [],
    }
    if config_dir is not None:
        data["config_dir"] = config_dir
    (folder / "results.json").write_text(json.dumps(data))


def _block(name: str, root: Path) -> str:
    """An empty generated block `name`, rendered from the files under `root`."""
    return render(f"<!-- BEGIN generated:{name} -->\n<!-- END generated:{name} -->\n", root)


W = "PreemptionAsync/5000Nodes"


def _first_run(root: Path) -> None:
    """The run most tests start from: W at 150 pods/s for ours, 200 for kube-scheduler, 2026-12-01 10:00."""
    _bench(root, "2026-12-01-upstream-full", "2026-12-01T10:00:00+00:00", [_row(W, "ours", 150), _row(W, "kube", 200)])


def _latest_rows(root: Path) -> list[str]:
    text = _block("bench-latest", root)
    return [line for line in text.splitlines() if line.startswith(f"| {W}")]


def test_a_rerun_of_ours_alone_is_never_paired_with_another_runs_kube_scheduler(tmp_path: Path) -> None:
    # The earlier run has both schedulers; the later one only ours (kube-scheduler failed): the
    # table keeps the earlier run's pair, never ours' later 400 over the earlier kube's 200.
    _first_run(tmp_path)
    failed = _row(W, "kube", 0) | {"error": "TimeoutError: no pods bound"}
    _bench(
        tmp_path, "2026-12-01-upstream-full-2", "2026-12-01T11:00:00+00:00", [_row(W, "ours", 400), failed], "bbbbbbb"
    )
    (row,) = _latest_rows(tmp_path)
    assert "| 150 (150/150) | 200 (200/200) |" in row
    assert "| 0.75 |" in row
    assert row.endswith("| c0ffee0 10:00 |")


def test_the_other_work_on_the_machine_is_shown_per_scheduler(tmp_path: Path) -> None:
    # Rows measured before other_busy_cores existed show a dash; later ones their cores.
    _first_run(tmp_path)
    (row,) = _latest_rows(tmp_path)
    assert row.endswith("| - / - | AMD EPYC 7B13 64-Core | c0ffee0 10:00 |")
    busy = [_row(W, "ours", 160) | {"other_busy_cores": 1.25}, _row(W, "kube", 100) | {"other_busy_cores": 0.04}]
    _bench(tmp_path, "2026-12-02-upstream-full", "2026-12-02T10:00:00+00:00", busy, "bbbbbbb")
    (row,) = _latest_rows(tmp_path)
    assert row.endswith("| 1.25 / 0.04 | AMD EPYC 7B13 64-Core | bbbbbbb 10:00 |")


def test_each_row_names_the_machine_its_pair_ran_on(tmp_path: Path) -> None:
    # Ratios move between machines (Python gains more than Go on some): the row and the summary say which.
    _first_run(tmp_path)
    other = "PreemptionBasic/500Nodes"
    _bench(
        tmp_path,
        "2026-12-02-upstream-full",
        "2026-12-02T10:00:00+00:00",
        [_row(other, "ours", 300), _row(other, "kube", 200)],
        cpu="Intel(R) Xeon(R) Processor",
    )
    (row,) = _latest_rows(tmp_path)
    assert row.endswith("| AMD EPYC 7B13 64-Core | c0ffee0 10:00 |")
    text = _block("bench-latest", tmp_path)
    (xeon,) = [line for line in text.splitlines() if line.startswith(f"| {other}")]
    assert xeon.endswith("| Intel Xeon | c0ffee0 10:00 |")
    summary = _block("bench-summary", tmp_path)
    assert "Measured on AMD EPYC 7B13 64-Core (1 pair), Intel Xeon (1 pair)" in summary


def test_a_file_without_its_machine_is_an_error(tmp_path: Path) -> None:
    _first_run(tmp_path)
    path = tmp_path / "bench-results" / "2026-12-01-upstream-full" / "results.json"
    data = json.loads(path.read_text())
    del data["machine"]
    path.write_text(json.dumps(data))
    with pytest.raises(ReadmeError, match="machine"):
        _block("bench-latest", tmp_path)


def test_a_run_too_short_for_a_throughput_sample_gives_no_row(tmp_path: Path) -> None:
    # Upstream's short workloads at their own size bind a handful of pods: no throughput sample,
    # so no ratio; the earlier measured pair keeps the row.
    _first_run(tmp_path)
    short = [_row(W, "ours", 0) | {"throughput_avg": None}, _row(W, "kube", 0) | {"throughput_avg": None}]
    _bench(tmp_path, "2026-12-02-upstream-short-full", "2026-12-02T10:00:00+00:00", short, "bbbbbbb")
    (row,) = _latest_rows(tmp_path)
    assert row.endswith("| c0ffee0 10:00 |")
    summary = _block("bench-summary", tmp_path)
    assert "ours ÷ kube-scheduler 0.75" in summary


def test_the_latest_run_with_both_schedulers_gives_the_row_and_its_ratio(tmp_path: Path) -> None:
    _bench(
        tmp_path, "2026-12-01-upstream-full", "2026-12-01T10:00:00+00:00", [_row(W, "ours", 150), _row(W, "kube", 290)]
    )
    _bench(
        tmp_path,
        "2026-12-01-upstream-full-2",
        "2026-12-01T12:00:00+00:00",
        [_row(W, "ours", 374), _row(W, "kube", 187)],
    )
    (row,) = _latest_rows(tmp_path)
    assert "| 374 (374/374) | 187 (187/187) |" in row
    assert "| 2.00 |" in row
    summary = _block("bench-summary", tmp_path)
    # The chosen pair is at one end of the runs, and the summary says so.
    assert (
        f"highest of its runs for PreemptionAsync (2.00 of 0.52{DASH}2.00, 2 runs, kube-scheduler's slowest run)"
        in summary
    )


def test_a_run_row_without_measurements_is_refused_naming_file_and_row(tmp_path: Path) -> None:
    copied = {"workload": W, "scheduler": "ours", "throughput_avg": 648.0, "cpu_ms_per_pod": 0.82, "source": "a log"}
    _bench(tmp_path, "2026-12-01-upstream-full", "2026-12-01T10:00:00+00:00", [copied, _row(W, "kube", 200)])
    with pytest.raises(
        ReadmeError, match=r"2026-12-01-upstream-full/results.json: PreemptionAsync/5000Nodes / ours: no field"
    ):
        _block("bench-latest", tmp_path)


def test_the_committed_scaling_run_holds_only_measured_rows() -> None:
    data = json.loads((AS_FOUND / "bench-results/2026-12-01-upstream-scaling/results.json").read_text())
    assert all("phases" in row for row in data["runs"])


# ---- faults, partition, agreement --------------------------------------------------------------


def test_fault_rows_show_problems_and_ignore_extra_fields(tmp_path: Path) -> None:
    (tmp_path / "tests" / "faults").mkdir(parents=True)
    row = {
        "fault": "etcd compacted",
        "pods": 500,
        "nodes": 50,
        "bound": 489,
        "unschedulable": 10,
        "lost": 1,
        "overcommitted": 0,
        "double_bound": 0,
        "recover_seconds": 6.8,
        "problems": ["pod ns/p1 neither bound nor reported"],
        "failed": True,
        "measured": "2026-12-02 09:00 UTC",
    }
    (tmp_path / "tests/faults/RESULTS.json").write_text(json.dumps([row]))
    text = _block("faults", tmp_path)
    assert "| etcd compacted | 500 | 50 | 489 | 10 | 1 | 0 | 0 | 1 | 6.8 | 2026-12-02 09:00 UTC |" in text
    del row["recover_seconds"]
    (tmp_path / "tests/faults/RESULTS.json").write_text(json.dumps([row]))
    with pytest.raises(ReadmeError, match=r"tests/faults/RESULTS.json: etcd compacted: no field 'recover_seconds'"):
        _block("faults", tmp_path)


def test_partition_table_reads_columns_by_name(tmp_path: Path) -> None:
    (tmp_path / "tests" / "faults").mkdir(parents=True)
    (tmp_path / "tests/faults/PARTITION.md").write_text(
        "# x\n\nmeasured 2026-12-02 09:00 UTC.\n\n"
        "| setup | pods | result | bound | nodes over-committed | cpu requested beyond allocatable | seconds |\n"
        "|---|--:|---|--:|--:|--:|--:|\n"
        "| shared | 80 | ok | 44 | 4 | 2000m | 0.7 |\n"
    )
    text = _block("partition", tmp_path)
    assert "| shared | 80 | 44 | 4 | 2000m | 0.7 |" in text
    assert "Measured 2026-12-02 09:00 UTC." in text


def test_agreement_counts_come_from_the_rows_and_name_what_does_not_agree(tmp_path: Path) -> None:
    (tmp_path / "tests/agreement/scenarios").mkdir(parents=True)
    for name in ("fit-cpu", "volume-zone", "not-run"):
        (tmp_path / f"tests/agreement/scenarios/{name}.yaml").write_text("{}\n")
    header = (
        "| scenario | pods | verdicts agree | messages agree | ours in kube's top set "
        "| both in our replayed top set | post-filter | result |"
    )
    (tmp_path / "tests/agreement/RESULTS.md").write_text(
        "Run 2026-12-02 09:00 UTC at commit abc1234, wall time 99 s, by ...\n\n"
        f"{header}\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"
        "| fit-cpu | 3 | 3/3 | 2/3 | 2/2 | 2/2 | 1 | disagree |\n"
        "| volume-zone | 2 | 2/2 | 2/2 | 1/1 | 1/1 | 0 | agree |\n"
        "| gen-137-0 | 1 | 1/1 | 1/1 | 1/1 | 1/1 | 0 | agree |\n"
    )
    text = render("<!-- BEGIN generated:agreement match=volume -->\n<!-- END generated:agreement -->\n", tmp_path)
    assert "**3 scenarios (2 of the 3 hand-written, 1 generated), 2 agree**" in text
    assert "verdicts 6/6, messages 5/6," in text
    assert "Not agreeing: fit-cpu (disagree)." in text
    assert "Hand-written scenarios not in the run: not-run." in text
    assert "The 1 volume scenarios (volume-zone): 2 pods" in text


def test_an_unknown_block_is_an_error() -> None:
    with pytest.raises(ReadmeError, match="unknown block generated:nope"):
        _block("nope", AS_FOUND)


def test_a_pair_behind_kube_needs_a_note_and_shows_it(tmp_path: Path) -> None:
    ahead, behind, costly = "SchedulingBasic/5000Nodes_10000Pods", W, "TopologySpreading/5000Nodes_5000Pods"
    rows = [
        _row(ahead, "ours", 300, cpu=1.0),
        _row(ahead, "kube", 200, cpu=2.0),
        _row(behind, "ours", 100, cpu=1.0),
        _row(behind, "kube", 200, cpu=2.0),
        _row(costly, "ours", 300, cpu=3.0),
        _row(costly, "kube", 200, cpu=2.0),
    ]
    _bench(tmp_path, "2026-12-01-upstream-full", "2026-12-01T10:00:00+00:00", rows)
    block = "<!-- BEGIN generated:bench-behind -->\n<!-- END generated:bench-behind -->\n"
    with pytest.raises(ReadmeError, match=f"no note .* for {re.escape(behind)}, {re.escape(costly)}"):
        render(block, tmp_path)
    notes = {behind: {"profile": "P1", "next": "N1"}, "TopologySpreading": {"profile": "P2", "next": "N2"}}
    (tmp_path / "bench-results" / "behind.json").write_text(json.dumps(notes))
    rendered = render(block, tmp_path)
    assert f"| {behind} | 0.50 | 1.00 / 2.00 | P1 | N1 |" in rendered
    assert f"| {costly} | 1.50 | 3.00 / 2.00 | P2 | N2 |" in rendered
    assert ahead not in rendered


def test_rows_are_dated_by_their_own_time_not_their_files_start(tmp_path: Path) -> None:
    # A run started at 09:00, measured W at 09:30, was interrupted and resumed at 12:00 (the file keeps
    # its start), and measured W2 at 12:30; another run started at 10:00 measured both at 10:30.
    # Its W (10:30) beats the resumed file's kept W (09:30); the resumed file's W2 (12:30) beats its W2.
    w2 = "SchedulingBasic/5000Nodes_10000Pods"

    def at(row: dict[str, Any], time: str, commit: str) -> dict[str, Any]:
        return row | {"measured_at": f"2026-12-01T{time}:00+01:00", "commit": commit}

    resumed = [
        at(_row(W, "ours", 100), "09:20", "aaaaaaa"),
        at(_row(W, "kube", 200), "09:30", "aaaaaaa"),
        at(_row(w2, "ours", 300), "12:20", "ccccccc"),
        at(_row(w2, "kube", 200), "12:30", "ccccccc"),
    ]
    _bench(tmp_path, "2026-12-01-upstream-full", "2026-12-01T09:00:00+01:00", resumed, "aaaaaaa")
    folder = tmp_path / "bench-results" / "2026-12-01-upstream-full"
    data = json.loads((folder / "results.json").read_text())
    (folder / "results.json").write_text(json.dumps(data | {"resumed": ["2026-12-01T12:00:00+01:00"]}))
    between = [at(_row(w, s, tp), "10:30", "bbbbbbb") for w in (W, w2) for s, tp in (("ours", 150), ("kube", 200))]
    _bench(tmp_path, "2026-12-01-upstream-full-2", "2026-12-01T10:00:00+01:00", between, "bbbbbbb")

    text = _block("bench-latest", tmp_path)
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ") and "/" in line}
    assert "| 150 (150/150) |" in rows[W] and rows[W].endswith("| bbbbbbb 09:30 |")
    assert "| 300 (300/300) |" in rows[w2] and rows[w2].endswith("| ccccccc 11:30 |")
    assert (
        "Runs: ccccccc 11:30 UTC = `bench-results/2026-12-01-upstream-full/results.json` (rows measured at"
        " aaaaaaa, ccccccc); bbbbbbb 09:30 UTC = `bench-results/2026-12-01-upstream-full-2/results.json`." in text
    )


def test_a_rows_run_label_shows_its_own_commit_and_time(tmp_path: Path) -> None:
    kept = _row(W, "ours", 100) | {"measured_at": "2026-12-01T09:30:00+00:00", "commit": "aaaaaaa"}
    variant = _row(W, "ours-x", 120) | {"measured_at": "2026-12-01T12:45:00+00:00", "commit": "bbbbbbb"}
    old = _row(W, "kube", 200)  # written before rows had a time: the run's label
    _bench(tmp_path, "2026-12-01-upstream-ab", "2026-12-01T09:00:00+00:00", [kept, variant, old], "aaaaaaa")
    text = render(
        "<!-- BEGIN generated:bench-ab sources=2026-12-01-upstream-ab -->\n<!-- END generated:bench-ab -->\n", tmp_path
    )
    labels = [line.split(" | ")[0] for line in text.splitlines() if W in line]
    assert labels == ["| aaaaaaa 09:30", "| bbbbbbb 12:45", "| aaaaaaa 09:00"]


def test_a_run_of_an_operators_own_configs_stays_out_of_the_upstream_tables(tmp_path: Path) -> None:
    _first_run(tmp_path)
    mine = "PeersWaiting/10Nodes"
    rows = [_row(mine, "ours", 90), _row(mine, "ours-old", 80), _row(mine, "kube", 60)]
    _bench(tmp_path, "2026-12-02-upstream-ab-peers-full", "2026-12-02T10:00:00+00:00", rows, config_dir="peers")
    assert mine not in _block("bench-latest", tmp_path)
    assert mine not in _block("bench-summary", tmp_path)
    text = render(
        "<!-- BEGIN generated:bench-ab sources=2026-12-02-upstream-ab-peers-full -->\n"
        "<!-- END generated:bench-ab -->\n",
        tmp_path,
    )
    assert [line.split(" | ")[2] for line in text.splitlines() if mine in line] == ["`ours`", "`ours-old`", "`kube`"]
    # Without the mark the same file is an upstream run like any other.
    _bench(tmp_path, "2026-12-02-upstream-ab-peers-full", "2026-12-02T10:00:00+00:00", rows)
    assert mine in _block("bench-latest", tmp_path)


def _unmeasured(root: Path) -> str:
    return _block("bench-unmeasured", root)


def test_a_later_failure_of_ours_is_listed_though_an_older_pair_keeps_the_row(tmp_path: Path) -> None:
    _first_run(tmp_path)
    failed = {"workload": W, "scheduler": "ours", "commit": "bbbbbbb", "error": "AssertionError: did not stop\nlog: x"}
    _bench(tmp_path, "2026-12-02-upstream-full", "2026-12-02T10:00:00+00:00", [failed, _row(W, "kube", 30)], "bbbbbbb")
    (row,) = _latest_rows(tmp_path)
    assert row.endswith("| c0ffee0 10:00 |")  # the pair table still shows the last pair
    with pytest.raises(ReadmeError, match=f"no note .* for {re.escape(W)}"):
        _unmeasured(tmp_path)
    notes = {W: {"profile": "held the loop", "next": "yield"}}
    (tmp_path / "bench-results" / "behind.json").write_text(json.dumps(notes))
    (listed,) = [line for line in _unmeasured(tmp_path).splitlines() if line.startswith(f"| {W}")]
    assert listed.startswith(f"| {W} | **failed**: AssertionError: did not stop | 30 pods/s, 1.00 ms CPU/pod |")
    assert listed.endswith("| held the loop | yield |")


def test_runs_too_short_for_either_scheduler_are_listed_without_a_note(tmp_path: Path) -> None:
    short = [_row(W, "ours", 0) | {"throughput_avg": None}, _row(W, "kube", 0) | {"throughput_avg": None}]
    _bench(tmp_path, "2026-12-02-upstream-short-full", "2026-12-02T10:00:00+00:00", short)
    (listed,) = [line for line in _unmeasured(tmp_path).splitlines() if line.startswith(f"| {W}")]
    assert "| no throughput sample (1000 pods, 1.00 ms CPU/pod) | no throughput sample (1000 pods, 1.00 ms" in listed
    assert "nothing to compare" in listed
    _bench(
        tmp_path, "2026-12-03-upstream-full", "2026-12-03T10:00:00+00:00", [_row(W, "ours", 150), _row(W, "kube", 200)]
    )
    assert W not in _unmeasured(tmp_path)  # measured since


def test_a_workload_ours_measured_without_kube_scheduler_is_listed(tmp_path: Path) -> None:
    failed = {"workload": W, "scheduler": "ours", "commit": "c0ffee0", "error": "AssertionError: did not stop"}
    _bench(tmp_path, "2026-12-01-upstream-full", "2026-12-01T10:00:00+00:00", [failed, _row(W, "kube", 30)])
    _bench(tmp_path, "2026-12-02-upstream-full", "2026-12-02T10:00:00+00:00", [_row(W, "ours", 200)], "bbbbbbb")
    assert _latest_rows(tmp_path) == []  # no run has both
    (listed,) = [line for line in _unmeasured(tmp_path).splitlines() if line.startswith(f"| {W}")]
    assert f"| {W} | 200 pods/s, 1.00 ms CPU/pod | not run |" in listed
    assert "no run beside kube-scheduler yet" in listed
