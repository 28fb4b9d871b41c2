"""README.md's tables and result figures, generated from the committed result files.

Owns: every block of README.md between `<!-- BEGIN generated:NAME key=value ... -->` and
`<!-- END generated:NAME -->`. The text in between is rendered from result files and nothing else:
the upstream benchmark runs (bench-results/*-upstream-*/results*.json), a py-spy profile
(bench-results/…/profile-*.txt), the fault suite (tests/faults/RESULTS.json, PARTITION.md) and the
agreement run (tests/agreement/RESULTS.md). `python -m harness.readme` rewrites the
blocks (`make readme`); `--check` names each block that differs and exits 1
(tests/unit/test_readme_tables.py runs it over the committed README).

Must never: put a number in a block that is not in a result file; divide one scheduler's run by
another run's (every ours ÷ kube-scheduler is a pair from one result file); fill in what a file
lacks — a run row without measurements, a missing column or a missing file is an error naming the
file and the field. Extra fields and columns in a result file are ignored.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import difflib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench import report

REPO_ROOT = Path(__file__).resolve().parents[1]
README = "README.md"

_BLOCK = re.compile(
    r"(?P<begin><!-- BEGIN generated:(?P<name>[\w-]+)(?P<args>[^>]*?) -->\n)"
    r"(?P<body>.*?)(?P<end><!-- END generated:(?P=name) -->)",
    re.DOTALL,
)
DASH = "\u2013"  # the README's range sign, the en dash


class ReadmeError(Exception):
    """A result file lacks what a block needs (the message names the file and the field)."""


# ---------------------------------------------------------------------------------- numbers


def _f(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _field(row: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in row:
        raise ReadmeError(f"{where}: no field {key!r}")
    return row[key]


# ---------------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class BenchFile:
    """One upstream benchmark result file: one run of the harness, whatever it measured."""

    path: str  # relative to the repository root
    started: datetime.datetime
    commit: str
    scale: float
    runs: dict[str, dict[str, Mapping[str, Any]]]  # workload -> scheduler -> row, in file order
    machine: str  # the processor, shortened ("AMD EPYC", "Intel Xeon"): ratios move from one to another
    config_dir: str = ""  # set for a run of an operator's own configs (--config-dir), not upstream's

    @property
    def label(self) -> str:
        return f"{self.commit} {self.started:%H:%M}"

    def pair(self, workload: str) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any] | None] | None:
        """(ours, kube-scheduler, null binder or None) of this run, when ours and kube both measured it."""
        rows = self.runs.get(workload, {})
        ours, kube, null = rows.get("ours"), rows.get("kube"), rows.get("null")
        if ours is None or kube is None or ours.get("error") or kube.get("error"):
            return None
        # A run too short for one throughput sample (a handful of pods) has no ratio to show.
        if any(row.get(key) is None for row in (ours, kube) for key in ("throughput_avg", "cpu_ms_per_pod")):
            return None
        return ours, kube, None if null is None or null.get("error") else null

    def measured(self, row: Mapping[str, Any]) -> datetime.datetime:
        """When a row finished: its own `measured_at` (a resumed run keeps its earlier rows' times),
        or the run's start for files written before rows had one."""
        at = row.get("measured_at")
        if at is None:
            return self.started
        try:
            return datetime.datetime.fromisoformat(at).astimezone(datetime.UTC)
        except (TypeError, ValueError) as err:
            raise ReadmeError(f"{self.path}: {row['workload']} / {row['scheduler']}: measured_at {at!r}") from err

    def row_label(self, row: Mapping[str, Any]) -> str:
        """A row's commit and time; the run's label for rows without a time of their own."""
        if "measured_at" not in row:
            return self.label
        return f"{row.get('commit', self.commit)} {self.measured(row):%H:%M}"

    def pair_measured(self, workload: str) -> datetime.datetime:
        """When this run's ours/kube-scheduler pair of `workload` was complete: the later row's time."""
        ours, kube, _ = self.pair(workload) or _never()
        return max(self.measured(ours), self.measured(kube))

    def pair_label(self, workload: str) -> str:
        """Ours' commit (kube-scheduler's binary is pinned) and the time the pair was complete."""
        ours, kube, _ = self.pair(workload) or _never()
        if "measured_at" not in ours and "measured_at" not in kube:
            return self.label
        return f"{ours.get('commit', self.commit)} {self.pair_measured(workload):%H:%M}"


_MEASURED = ("throughput_avg", "throughput_p50", "throughput_p99", "cpu_ms_per_pod", "peak_rss_mib", "phases")


def load_bench_file(root: Path, path: Path) -> BenchFile:
    where = str(path.relative_to(root))
    data = json.loads(path.read_text())
    runs: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in _field(data, "runs", where):
        workload, scheduler = _field(row, "workload", where), _field(row, "scheduler", where)
        if not row.get("error"):
            for key in _MEASURED:
                _field(row, key, f"{where}: {workload} / {scheduler}")
        runs.setdefault(workload, {})[scheduler] = row
    started = datetime.datetime.fromisoformat(_field(data, "started", where)).astimezone(datetime.UTC)
    machine = machine_name(_field(_field(data, "machine", where), "cpu", f"{where}: machine"))
    commit, scale = _field(data, "commit", where), float(_field(data, "scale", where))
    return BenchFile(where, started, commit, scale, runs, machine, str(data.get("config_dir") or ""))


def machine_name(cpu: str) -> str:
    """A processor's model name without its trademarks and filler words: "Intel(R) Xeon(R) Processor"
    is "Intel Xeon"."""
    words = re.sub(r"\((R|TM|tm|r)\)", " ", cpu).split()
    return " ".join(w for w in words if w not in ("Processor", "CPU", "@")) or cpu


def bench_files(root: Path) -> list[BenchFile]:
    """Every upstream benchmark result file, oldest run first (runs of an operator's own configs are
    not upstream workloads: only an A/B block that names them shows them)."""
    paths = sorted((root / "bench-results").glob("*-upstream-*/results*.json"))
    files = (load_bench_file(root, p) for p in paths)
    return sorted((f for f in files if not f.config_dir), key=lambda f: f.started)


def _full_size(files: Sequence[BenchFile]) -> list[BenchFile]:
    return [f for f in files if f.scale == 1.0]


def _workloads(files: Sequence[BenchFile], match: Sequence[str]) -> list[str]:
    """Workloads with an ours/kube pair at full size, in the order the runs first measured them."""
    seen: dict[str, None] = {}
    for f in files:
        for workload in f.runs:
            if "@" not in workload and f.pair(workload) and (not match or workload.split("/")[0] in match):
                seen.setdefault(workload)
    return list(seen)


def _legend(files: Iterable[BenchFile], labels: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Which file each run label stands for (`labels`: file path -> the labels shown for its rows, when
    not the file's own), and the commits its rows carry when the work tree moved during the run (a
    row records the commit it was measured at)."""

    def one(f: BenchFile) -> str:
        commits = sorted({str(row.get("commit", f.commit)) for rows in f.runs.values() for row in rows.values()})
        moved = f" (rows measured at {', '.join(commits)})" if commits != [f.commit] else ""
        shown = ", ".join((labels or {}).get(f.path) or [f.label])
        return f"{shown} UTC = `{f.path}`{moved}"

    return ["", "Runs: " + "; ".join(one(f) for f in files) + "."]


def latest_pairs(files: Sequence[BenchFile], match: Sequence[str] = ()) -> list[tuple[str, BenchFile]]:
    """Per workload, the full-size run whose pair of ours and kube-scheduler was measured last, by the
    rows' own times (a resumed run's file started before the rows it measured after resuming); of
    pairs measured at the same time, the later file's."""
    full = _full_size(files)
    return [
        (workload, max((f for f in reversed(full) if f.pair(workload)), key=lambda f: f.pair_measured(workload)))
        for workload in _workloads(full, match)
    ]


def block_bench_latest(root: Path, args: Mapping[str, str]) -> str:
    files = bench_files(root)
    pairs = latest_pairs(files, _split(args.get("workloads", "")))
    lines = [
        "| upstream workload | threshold | ours pods/s | kube-scheduler pods/s | null binder | ours ÷ kube "
        "| ours ÷ null | CPU ms/pod ours / kube | peak RSS MiB ours / kube | attempt p50/p99 ms ours · kube "
        "| other work, cores ours / kube | machine | run |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    labels: dict[str, list[str]] = {}
    for workload, f in pairs:
        ours, kube, null = f.pair(workload) or _never()
        null_tp = null["throughput_avg"] if null else None
        label = f.pair_label(workload)
        if label not in labels.setdefault(f.path, []):
            labels[f.path].append(label)

        def tp(row: Mapping[str, Any]) -> str:
            return f"{_f(row['throughput_avg'])} ({_f(row['throughput_p50'])}/{_f(row['throughput_p99'])})"

        def attempts(row: Mapping[str, Any]) -> str:
            return f"{_f(row.get('attempt_p50_ms'))} / {_f(row.get('attempt_p99_ms'))}"

        lines.append(
            f"| {workload} | {_f(ours.get('threshold'))} | {tp(ours)} | {tp(kube)} | {_f(null_tp)} "
            f"| {_f(_ratio(ours['throughput_avg'], kube['throughput_avg']), 2)} "
            f"| {_f(_ratio(ours['throughput_avg'], null_tp), 2)} "
            f"| {_f(ours['cpu_ms_per_pod'], 2)} / {_f(kube['cpu_ms_per_pod'], 2)} "
            f"| {_f(ours['peak_rss_mib'])} / {_f(kube['peak_rss_mib'])} "
            f"| {attempts(ours)} · {attempts(kube)} "
            f"| {_f(ours.get('other_busy_cores'), 2)} / {_f(kube.get('other_busy_cores'), 2)} | {f.machine} | {label} |"
        )
    used = [f for f in files if any(f is g for _, g in pairs)]
    return "\n".join(lines + _legend(used, labels))


def block_bench_summary(root: Path, args: Mapping[str, str]) -> str:
    """One sentence over the latest pairs: where ours is ahead and behind, per measure."""
    files = bench_files(root)
    latest = latest_pairs(files, _split(args.get("workloads", "")))
    pairs = [(w, f.pair(w) or _never()) for w, f in latest]
    if not pairs:
        raise ReadmeError("bench-results: no full-size run measured both ours and kube-scheduler")

    def measure(what: str, key: str, ahead_when_lower: bool) -> str:
        ratios = {w: ours[key] / kube[key] for w, (ours, kube, _) in pairs}
        ahead = [w for w, r in ratios.items() if (r < 1 if ahead_when_lower else r > 1)]
        behind = sorted(set(ratios) - set(ahead))
        text = f"{what} ours ÷ kube-scheduler {min(ratios.values()):.2f}{DASH}{max(ratios.values()):.2f}, "
        text += f"ours {'lower' if ahead_when_lower else 'higher'} on {len(ahead)} of {len(ratios)}"
        if behind:
            text += " (not on " + ", ".join(f"{w.split('/')[0]} {ratios[w]:.2f}" for w in behind) + ")"
        return text

    text = (
        "In these pairs: "
        + "; ".join(
            [
                measure("throughput", "throughput_avg", ahead_when_lower=False),
                measure("CPU per pod", "cpu_ms_per_pod", ahead_when_lower=True),
                measure("peak RSS", "peak_rss_mib", ahead_when_lower=True),
            ]
        )
        + "."
    )
    machines = collections.Counter(chosen.machine for _, chosen in latest)
    shown = [f"{name} ({count} pair{'s' if count != 1 else ''})" for name, count in sorted(machines.items())]
    text += f" Measured on {', '.join(shown)}, as the machine column shows: the same code's ratio differs"
    text += " from one machine to another."
    full = _full_size(files)
    ends: dict[str, list[str]] = {"highest": [], "lowest": []}
    for workload, chosen in latest:
        end = _extreme(workload, chosen, full)
        if end:
            ends[end[0]].append(end[1])
    said = [f"the {which} of its runs for " + ", ".join(items) for which, items in ends.items() if items]
    if said:
        text += " Against every run in the next table, the ratio shown is " + "; ".join(said) + "."
    return text


BENCH_NOTES = "bench-results/behind.json"


def block_bench_behind(root: Path, args: Mapping[str, str]) -> str:
    """Every latest full-size pair where ours trails kube-scheduler (throughput below it or CPU per
    pod above it), with where the time goes and the next step from bench-results/behind.json
    (workload or case -> {"profile": ..., "next": ...}); a pair behind without a note is an error."""
    notes_path = root / BENCH_NOTES
    notes: Mapping[str, Mapping[str, str]] = json.loads(notes_path.read_text()) if notes_path.exists() else {}
    lines = [
        "| upstream workload | ours ÷ kube pods/s | CPU ms/pod ours / kube | where the time goes | next step |",
        "|---|--:|--:|---|---|",
    ]
    missing = []
    for workload, f in latest_pairs(bench_files(root), _split(args.get("workloads", ""))):
        ours, kube, _ = f.pair(workload) or _never()
        ratio = ours["throughput_avg"] / kube["throughput_avg"]
        if ratio >= 1 and ours["cpu_ms_per_pod"] <= kube["cpu_ms_per_pod"]:
            continue
        note = notes.get(workload) or notes.get(workload.split("/", maxsplit=1)[0])
        if note is None:
            missing.append(workload)
            continue
        lines.append(
            f"| {workload} | {ratio:.2f} | {ours['cpu_ms_per_pod']:.2f} / {kube['cpu_ms_per_pod']:.2f} "
            f"| {note['profile']} | {note['next']} |"
        )
    if missing:
        raise ReadmeError(f"{BENCH_NOTES}: no note (profile, next step) for {', '.join(missing)}")
    return "\n".join(lines)


def _outcome(row: Mapping[str, Any] | None) -> str:
    """What one scheduler's row of a run says, in a table cell."""
    if row is None:
        return "not run"
    error = row.get("error")
    if error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "error"
        return "**failed**: " + (first if len(first) <= 160 else first[:157] + "...").replace("|", "\\|")
    if row.get("throughput_avg") is None:
        cpu = row.get("cpu_ms_per_pod")
        cpu_text = f", {cpu:.2f} ms CPU/pod" if cpu is not None else ""
        return f"no throughput sample ({row.get('scheduled', 0)} pods{cpu_text})"
    return f"{_f(row['throughput_avg'])} pods/s, {row['cpu_ms_per_pod']:.2f} ms CPU/pod"


def block_bench_unmeasured(root: Path, args: Mapping[str, str]) -> str:
    """Every full-size workload whose latest run of ours measured nothing (it failed, or bound too
    few pods for a throughput sample), or that no run measured beside kube-scheduler, with
    kube-scheduler in the same run: the latest-pair table cannot show these, and a failure must not
    drop out of sight behind an older pair. A failure of ours, or ours without a sample where
    kube-scheduler had one, needs a note in behind.json."""
    notes_path = root / BENCH_NOTES
    notes: Mapping[str, Mapping[str, str]] = json.loads(notes_path.read_text()) if notes_path.exists() else {}
    match = _split(args.get("workloads", ""))
    latest: dict[str, tuple[datetime.datetime, BenchFile, Mapping[str, Any]]] = {}
    full = _full_size(bench_files(root))
    for f in full:
        for workload, rows in f.runs.items():
            ours = rows.get("ours")
            if ours is None or "@" in workload or (match and workload.split("/")[0] not in match):
                continue
            at = f.measured(ours)
            if workload not in latest or at >= latest[workload][0]:
                latest[workload] = (at, f, ours)
    lines = [
        "| upstream workload | ours | kube-scheduler, same run | run | where it stands | next step |",
        "|---|---|---|---|---|---|",
    ]
    missing = []
    for workload, (_, f, ours) in latest.items():
        measured = not ours.get("error") and ours.get("throughput_avg") is not None
        if measured and any(g.pair(workload) for g in full):
            continue  # the latest-pair table has it
        kube = f.runs[workload].get("kube")
        kube_sampled = kube is not None and not kube.get("error") and kube.get("throughput_avg") is not None
        where = (
            "no run beside kube-scheduler yet" if measured else "nothing to compare: no sample from either scheduler"
        )
        step = ""
        if ours.get("error") or kube_sampled:
            note = notes.get(workload) or notes.get(workload.split("/", maxsplit=1)[0])
            if note is None:
                missing.append(workload)
                continue
            where, step = note["profile"], note["next"]
        lines.append(
            f"| {workload} | {_outcome(ours)} | {_outcome(kube)} | {f.row_label(ours)} `{f.path}` | {where} | {step} |"
        )
    if missing:
        raise ReadmeError(f"{BENCH_NOTES}: no note (profile, next step) for {', '.join(missing)}")
    return "\n".join(lines)


def _extreme(workload: str, chosen: BenchFile, files: Sequence[BenchFile]) -> tuple[str, str] | None:
    """("highest" | "lowest", description) when the chosen run's ours ÷ kube-scheduler is at one end
    of all the full-size pairs of `workload` (two runs or more), naming kube-scheduler's slowest or
    fastest run when it is that."""
    pairs = [p for f in files if (p := f.pair(workload))]
    if len(pairs) < 2:
        return None
    ours, kube, _ = chosen.pair(workload) or _never()
    ratio = ours["throughput_avg"] / kube["throughput_avg"]
    ratios = sorted(o["throughput_avg"] / k["throughput_avg"] for o, k, _ in pairs)
    if ratio not in (ratios[0], ratios[-1]):
        return None
    kube_runs = sorted(k["throughput_avg"] for _, k, _ in pairs)
    note = ""
    if kube["throughput_avg"] in (kube_runs[0], kube_runs[-1]):
        which = "slowest" if kube["throughput_avg"] == kube_runs[0] else "fastest"
        note = f", kube-scheduler's {which} run"
    case = workload.split("/", maxsplit=1)[0]
    text = f"{case} ({ratio:.2f} of {ratios[0]:.2f}{DASH}{ratios[-1]:.2f}, {len(ratios)} runs{note})"
    return ("highest" if ratio == ratios[-1] else "lowest"), text


def block_bench_runs(root: Path, args: Mapping[str, str]) -> str:
    """Every full-size ours/kube pair of every run: pods/s, one column per run."""
    full = _full_size(bench_files(root))
    workloads = _workloads(full, _split(args.get("workloads", "")))
    used = [f for f in full if any(f.pair(w) for w in workloads)]
    lines = [
        "| upstream workload | " + " | ".join(f.label for f in used) + f" | ours ÷ kube, lowest{DASH}highest |",
        "|---|" + "--:|" * len(used) + "--:|",
    ]
    for workload in workloads:
        cells, ratios = [], []
        for f in used:
            pair = f.pair(workload)
            if pair is None:
                cells.append("")
                continue
            ours, kube, _ = pair
            cells.append(f"{_f(ours['throughput_avg'])} / {_f(kube['throughput_avg'])}")
            ratios.append(ours["throughput_avg"] / kube["throughput_avg"])
        lines.append(f"| {workload} | " + " | ".join(cells) + f" | {min(ratios):.2f}{DASH}{max(ratios):.2f} |")
    return "\n".join(lines + _legend(used))


def block_bench_ab(root: Path, args: Mapping[str, str]) -> str:
    """Ours, its variants (`--ours-variant`) and kube-scheduler where the run measured it, in the runs
    named by `sources` (directories)."""
    lines = [
        "| run | workload | scheduler | pods/s | CPU ms/pod | peak RSS MiB |",
        "|---|---|---|--:|--:|--:|",
    ]
    for directory in _split(_required(args, "sources", "bench-ab")):
        f = load_bench_file(root, root / "bench-results" / directory / "results.json")
        variants = 0
        for workload, rows in f.runs.items():
            for key, row in rows.items():
                if (key in ("ours", "kube") or key.startswith("ours-")) and not row.get("error"):
                    variants += key != "ours"
                    lines.append(
                        f"| {f.row_label(row)} | {workload} | `{key}` | {_f(row['throughput_avg'])} "
                        f"| {row['cpu_ms_per_pod']:.2f} | {_f(row['peak_rss_mib'])} |"
                    )
        if not variants:
            raise ReadmeError(f"{f.path}: no variant of ours to compare with")
    return "\n".join(lines)


def block_scaling(root: Path, args: Mapping[str, str]) -> str:
    """CPU ms per pod of one case by node count, from a --scaling run."""
    source = _required(args, "source", "scaling")
    case = _required(args, "case", "scaling")
    f = load_bench_file(root, root / source)
    by_nodes: dict[int, dict[str, Mapping[str, Any]]] = {}
    for workload, rows in f.runs.items():
        base, _, nodes = workload.partition("@")
        if base == case and nodes:
            by_nodes[int(nodes.removesuffix("Nodes"))] = rows
    if not by_nodes:
        raise ReadmeError(f"{source}: no run of {case} at any node count")
    lines = [
        "| nodes | measured pods | CPU ms/pod ours | kube-scheduler | ours ÷ kube | commit |",
        "|--:|--:|--:|--:|--:|---|",
    ]
    for size in sorted(by_nodes):
        rows = by_nodes[size]
        ours, kube = rows.get("ours"), rows.get("kube")
        if ours is None or kube is None or ours.get("error") or kube.get("error"):
            raise ReadmeError(f"{source}: {case}@{size}Nodes lacks an ours/kube pair")
        commits = sorted({str(ours.get("commit", f.commit)), str(kube.get("commit", f.commit))})
        lines.append(
            f"| {size} | {ours['scheduled']} | {ours['cpu_ms_per_pod']:.2f} | {kube['cpu_ms_per_pod']:.2f} "
            f"| {ours['cpu_ms_per_pod'] / kube['cpu_ms_per_pod']:.2f} | {', '.join(commits)} |"
        )
    return "\n".join([*lines, "", f"Run started {f.started:%Y-%m-%d %H:%M} UTC, `{source}`."])


# Inclusive shares of these functions (`func (dir/module.py)`, as report.profile_counts names them).
PROFILE_FRAMES = (
    ("Scheduler.schedule_one (scheduler/schedule_one.py)", "the scheduling cycle"),
    ("Scheduler.find_nodes_that_fit (scheduler/schedule_one.py)", "… PreFilter and Filter"),
    ("Scheduler._find_batch (scheduler/schedule_one.py)", "… … the batch Filter forms over the node table"),
    ("Scheduler.prioritize_nodes (scheduler/schedule_one.py)", "… PreScore and Score"),
    ("Cache.update_snapshot (cache/cache.py)", "… the snapshot update"),
    ("binding_cycle (scheduler/binding.py)", "the binding cycle"),
    ("HttpApiClient.bind (api/http.py)", "… the Binding POST"),
    ("Reflector.run (api/watch.py)", "the watches: reading, decoding, dispatch"),
    ("Informers.on_pod (scheduler/informers.py)", "… the informer's pod handling"),
)
# Self time (on top of the stack) of these packages.
PROFILE_PACKAGES = (
    (("asyncio", "selectors", "aiohttp", "ssl", "yarl"), "the event loop and aiohttp's machinery (self time)"),
    (("prometheus_client",), "Prometheus metric updates (self time)"),
)


def block_profile(root: Path, args: Mapping[str, str]) -> str:
    source = _required(args, "source", "profile")
    path = root / source
    if not path.exists():
        raise ReadmeError(f"{source}: missing")
    with path.open() as collapsed:
        counts = report.profile_counts(collapsed)
    if not counts.samples:
        raise ReadmeError(f"{source}: no samples")
    run = load_bench_file(root, path.parent / "results.json")
    rows = [row.get("ours") for row in run.runs.values() if row.get("ours")]
    if len(rows) != 1 or rows[0] is None:
        raise ReadmeError(f"{run.path}: expected one run of ours beside the profile, found {len(rows)}")
    ours = rows[0]
    lines = [
        f"{ours['workload']}, commit {ours.get('commit', run.commit)}, {_f(ours['throughput_avg'])} pods/s, "
        f"{ours['cpu_ms_per_pod']:.2f} CPU ms/pod with the profiler attached; {counts.samples} samples "
        f"(`{source}`):",
        "",
        "| share of busy samples | where |",
        "|--:|---|",
    ]
    for frame, what in PROFILE_FRAMES:
        if frame not in counts.total:
            raise ReadmeError(f"{source}: no samples in {frame}")
        lines.append(f"| {100 * counts.total[frame] / counts.samples:.0f} % | {what} (`{frame.split(' ')[0]}`) |")
    for packages, what in PROFILE_PACKAGES:
        share = sum(counts.by_package[p] for p in packages) / counts.samples
        lines.append(f"| {100 * share:.0f} % | {what}: {', '.join(packages)} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- faults


FAULTS_JSON = "tests/faults/RESULTS.json"
PARTITION_MD = "tests/faults/PARTITION.md"


def block_faults(root: Path, _args: Mapping[str, str]) -> str:
    path = root / FAULTS_JSON
    if not path.exists():
        raise ReadmeError(f"{FAULTS_JSON}: missing")
    lines = [
        "| fault | pods | nodes | bound | unschedulable | lost | overcommitted | double-bound | problems "
        "| seconds to recover | measured |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row in json.loads(path.read_text()):
        where = f"{FAULTS_JSON}: {row.get('fault', '?')}"
        problems = _field(row, "problems", where)
        recover = float(_field(row, "recover_seconds", where))
        lines.append(
            "| "
            + " | ".join(
                [
                    str(_field(row, key, where))
                    for key in ("fault", "pods", "nodes", "bound", "unschedulable", "lost", "overcommitted")
                ]
                + [
                    str(_field(row, "double_bound", where)),
                    str(len(problems) if isinstance(problems, list) else problems),
                    f"{recover:g}" if recover >= 1 else "< 1",
                    str(_field(row, "measured", where)),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def markdown_table(text: str, where: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the first markdown table whose first header cell is `first_column`, by header."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = _cells(line)
        if cells and cells[0] == first_column:
            rows = []
            for body in lines[i + 2 :]:
                if not body.startswith("|"):
                    break
                values = _cells(body)
                if len(values) != len(cells):
                    raise ReadmeError(f"{where}: row {values[0]!r} has {len(values)} cells, the header {len(cells)}")
                rows.append(dict(zip(cells, values, strict=True)))
            return rows
    raise ReadmeError(f"{where}: no table with a {first_column!r} column")


def _cells(line: str) -> list[str]:
    line = line.strip()
    if not line.startswith("|"):
        return []
    return [cell.strip() for cell in line.strip("|").split("|")]


PARTITION_COLUMNS = (
    "setup",
    "pods",
    "bound",
    "nodes over-committed",
    "cpu requested beyond allocatable",
    "seconds",
)


def block_partition(root: Path, _args: Mapping[str, str]) -> str:
    path = root / PARTITION_MD
    if not path.exists():
        raise ReadmeError(f"{PARTITION_MD}: missing")
    text = path.read_text()
    measured = re.search(r"measured (\d{4}-\d\d-\d\d \d\d:\d\d UTC)", text)
    if measured is None:
        raise ReadmeError(f"{PARTITION_MD}: no 'measured YYYY-MM-DD HH:MM UTC'")
    rows = markdown_table(text, PARTITION_MD, "setup")
    lines = ["| " + " | ".join(PARTITION_COLUMNS) + " |", "|---|" + "--:|" * (len(PARTITION_COLUMNS) - 1)]
    for row in rows:
        lines.append(
            "| " + " | ".join(_field(row, c, f"{PARTITION_MD}: {row['setup']}") for c in PARTITION_COLUMNS) + " |"
        )
    return "\n".join([*lines, "", f"Measured {measured.group(1)}."])


# ---------------------------------------------------------------------------------- agreement


AGREEMENT_MD = "tests/agreement/RESULTS.md"
AGREEMENT_SCENARIOS = "tests/agreement/scenarios"
_AGREEMENT_FRACTIONS = (
    ("verdicts agree", "verdicts"),
    ("messages agree", "messages"),
    ("ours in kube's top set", "our node in kube-scheduler's own top-scored set"),
    ("both in our replayed top set", "both nodes in our replayed top set"),
)


def _fraction(cell: str, where: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", cell)
    if match is None:
        raise ReadmeError(f"{where}: {cell!r} is not a count a/b")
    return int(match.group(1)), int(match.group(2))


def _agreement_counts(rows: Sequence[Mapping[str, str]], where: str) -> str:
    pods = sum(int(_field(r, "pods", where)) for r in rows)
    parts = [f"{pods} pods"]
    for column, what in _AGREEMENT_FRACTIONS:
        agree = total = 0
        for row in rows:
            a, b = _fraction(_field(row, column, f"{where}: {row['scenario']}"), f"{where}: {row['scenario']}")
            agree, total = agree + a, total + b
        parts.append(f"{what} {agree}/{total}")
    return ", ".join(parts)


def block_agreement(root: Path, args: Mapping[str, str]) -> str:
    path = root / AGREEMENT_MD
    if not path.exists():
        raise ReadmeError(f"{AGREEMENT_MD}: missing")
    text = path.read_text()
    run = re.search(r"Run (\d{4}-\d\d-\d\d \d\d:\d\d UTC) at commit (\w+), wall time (\d+) s", text)
    if run is None:
        raise ReadmeError(f"{AGREEMENT_MD}: no 'Run <date> at commit <c>, wall time <n> s' line")
    rows = markdown_table(text, AGREEMENT_MD, "scenario")
    files = sorted(p.stem for p in (root / AGREEMENT_SCENARIOS).glob("*.yaml"))
    hand = [r for r in rows if r["scenario"] in files]
    generated = [r for r in rows if r["scenario"].startswith("gen-")]
    others = [r["scenario"] for r in rows if r not in hand and r not in generated]
    if others:
        raise ReadmeError(f"{AGREEMENT_MD}: scenarios neither in {AGREEMENT_SCENARIOS} nor generated: {others}")
    not_run = sorted(set(files) - {r["scenario"] for r in hand})
    results = [_field(r, "result", f"{AGREEMENT_MD}: {r['scenario']}") for r in rows]
    failing = [r["scenario"] + f" ({r['result']})" for r in rows if r["result"] != "agree"]
    lines = [
        f"Last run, {run.group(1)}, commit {run.group(2)} ({run.group(3)} s): **{len(rows)} scenarios "
        f"({'the' if len(hand) == len(files) else f'{len(hand)} of the'} {len(files)} hand-written, "
        f"{len(generated)} generated), "
        f"{results.count('agree')} agree** — {_agreement_counts(rows, AGREEMENT_MD)}."
    ]
    if failing:
        lines.append("Not agreeing: " + ", ".join(failing) + ".")
    if not_run:
        lines.append("Hand-written scenarios not in the run: " + ", ".join(not_run) + ".")
    match = args.get("match")
    if match:
        group = [r for r in hand if match in r["scenario"]]
        if not group:
            raise ReadmeError(f"{AGREEMENT_MD}: no hand-written scenario named *{match}*")
        lines.append(
            f"The {len(group)} {match} scenarios ({', '.join(r['scenario'] for r in group)}): "
            f"{_agreement_counts(group, AGREEMENT_MD)}."
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- the file


# Everything the blocks read, as globs under the repository root.
INPUTS = (
    README,
    "bench-results/*-upstream-*/results*.json",
    "bench-results/*-upstream-*/profile-*.txt",
    BENCH_NOTES,
    FAULTS_JSON,
    PARTITION_MD,
    AGREEMENT_MD,
    f"{AGREEMENT_SCENARIOS}/*.yaml",
)


def copy_inputs(root: Path, dest: Path) -> None:
    """Copy README.md and every result file the blocks read from `root` to `dest` (same paths):
    a check against the copy sees the files as they were when copied, whatever rewrites them later
    (the fault suite rewrites its own results in every run)."""
    for pattern in INPUTS:
        for source in root.glob(pattern):
            target = dest / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


BLOCKS: dict[str, Callable[[Path, Mapping[str, str]], str]] = {
    "bench-latest": block_bench_latest,
    "bench-summary": block_bench_summary,
    "bench-runs": block_bench_runs,
    "bench-behind": block_bench_behind,
    "bench-unmeasured": block_bench_unmeasured,
    "bench-ab": block_bench_ab,
    "scaling": block_scaling,
    "profile": block_profile,
    "faults": block_faults,
    "partition": block_partition,
    "agreement": block_agreement,
}


def _split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def _required(args: Mapping[str, str], key: str, block: str) -> str:
    if key not in args:
        raise ReadmeError(f"{README}: block {block} needs {key}=…")
    return args[key]


def _never() -> Any:
    raise AssertionError("unreachable: chosen for having a pair")


def _parse_args(text: str, name: str) -> dict[str, str]:
    args = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep:
            raise ReadmeError(f"{README}: block {name}: argument {token!r} is not key=value")
        args[key] = value
    return args


def render(text: str, root: Path) -> str:
    """README text with every generated block rendered afresh from the result files under `root`."""

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in BLOCKS:
            raise ReadmeError(f"{README}: unknown block generated:{name} (known: {', '.join(BLOCKS)})")
        body = BLOCKS[name](root, _parse_args(match.group("args"), name))
        return f"{match.group('begin')}{body.rstrip()}\n{match.group('end')}"

    return _BLOCK.sub(replace, text)


def differences(text: str, root: Path) -> list[str]:
    """One message per block whose text differs from what the result files give, with the diff."""
    fresh = {m.group("begin"): m.group("body") for m in _BLOCK.finditer(render(text, root))}
    problems = []
    for match in _BLOCK.finditer(text):
        want = fresh[match.group("begin")]
        if match.group("body") != want:
            diff = difflib.unified_diff(
                match.group("body").splitlines(), want.splitlines(), "README.md", "result files", lineterm="", n=0
            )
            problems.append(f"block generated:{match.group('name')} differs:\n" + "\n".join(diff))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.readme", description="Regenerate README.md's tables from the result files."
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block differs")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the repository (README.md and result files)")
    args = parser.parse_args(argv)
    path = args.root / README
    text = path.read_text()
    try:
        if args.check:
            problems = differences(text, args.root)
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                print("README.md is out of date with the result files: run `make readme`", file=sys.stderr)
            return 1 if problems else 0
        fresh = render(text, args.root)
    except ReadmeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if fresh != text:
        path.write_text(fresh)
        print("README.md: generated blocks rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
