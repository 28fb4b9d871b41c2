"""Numbers and files from benchmark runs: statistics, JSON, the markdown table, PNG plots.

Owns: turning the raw observations of a run (when each pod was created and bound) into
scheduler_perf's statistics — throughput samples of 1 s, their average / p50 / p99, per-pod latency
percentiles, histogram quantiles from a scheduler's own metrics — and writing the results folder:
results.json, results.md (also copied to ../latest.md), a throughput-over-time PNG per workload
(matplotlib, the optional `bench` extra) and a summary of a py-spy profile.

Must never: start processes or talk to the API; plots are skipped (with a note) when matplotlib is
not installed, never faked.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

SAMPLE_SECONDS = 1.0


def percentile(values: Sequence[float], q: float) -> float:
    """scheduler_perf's percentile: the value at rank ceil(n·q) of the sorted values (0 if none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(len(ordered) * q), 1)
    return float(ordered[rank - 1])


def throughput_samples(bound_at: Sequence[float]) -> list[float]:
    """Pods bound per second in consecutive 1 s windows from the first binding.

    As scheduler_perf's throughput collector: windows start at the first pod seen bound, and the
    last, partial window is dropped — unless it is the only one (a run shorter than a second),
    which then gives one sample of pods over elapsed time.
    """
    if not bound_at:
        return []
    times = sorted(bound_at)
    first, last = times[0], times[-1]
    full_windows = int((last - first) // SAMPLE_SECONDS)
    if full_windows == 0:
        elapsed = max(last - first, 1e-3)
        return [len(times) / elapsed] if len(times) > 1 else [float(len(times))]
    counts = Counter(int((t - first) // SAMPLE_SECONDS) for t in times)
    return [counts.get(window, 0) / SAMPLE_SECONDS for window in range(full_windows)]


def timeline(bound_at: Sequence[float], until: float) -> list[int]:
    """Pods bound in each second since the measured pods' creation began (t = 0), up to `until`."""
    buckets = [0] * (int(max(until, 0.0) // SAMPLE_SECONDS) + 1)
    for t in bound_at:
        buckets[min(int(t // SAMPLE_SECONDS), len(buckets) - 1)] += 1
    return buckets


def histogram_buckets(metrics: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts of histogram `name` (le → count), summed over all label sets."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == f"{name}_bucket":
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
    return buckets


def counter_values(metrics: str, name: str, labels: Sequence[str]) -> dict[str, float]:
    """Counter `name` (without `_total`): its values keyed by the chosen labels' values joined with "/" (summed over the
    other labels), e.g. scheduler_queue_incoming_pods_total by queue and event."""
    return counters(metrics, {name: labels})[name]


def counters(metrics: str, wanted: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """counter_values of several counters (name -> labels to key by) from one parse of the text."""
    values: dict[str, dict[str, float]] = {name: {} for name in wanted}
    totals = {f"{name}_total": name for name in wanted}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            name = totals.get(sample.name)
            if name is not None:
                key = "/".join(sample.labels.get(label, "") for label in wanted[name])
                values[name][key] = values[name].get(key, 0.0) + sample.value
    return values


def counter_deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What each series of a counter gained between two readings; series that did not move left out."""
    gained = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return {key: value for key, value in sorted(gained.items()) if value}


def histogram_quantile(q: float, before: Mapping[float, float], after: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over the observations made between `before` and `after`:
    linear interpolation inside the bucket the rank falls in. None without observations."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # above the highest finite bucket: its bound, as Prometheus does
            inside = count - lower_count
            return lower_bound + (bound - lower_bound) * ((rank - lower_count) / inside if inside > 0 else 1.0)
        lower_bound, lower_count = bound, count
    return lower_bound


def summarize(bound_at: Sequence[float], latencies: Sequence[float]) -> dict[str, float]:
    """Throughput average / p50 / p99 of the 1 s samples, and per-pod latency p50 / p99 in ms."""
    samples = throughput_samples(bound_at)
    return {
        "throughput_avg": sum(samples) / len(samples) if samples else 0.0,
        "throughput_p50": percentile(samples, 0.50),
        "throughput_p99": percentile(samples, 0.99),
        "samples": len(samples),
        "latency_p50_ms": 1000 * percentile(latencies, 0.50),
        "latency_p99_ms": 1000 * percentile(latencies, 0.99),
    }


# ------------------------------------------------------------------------------ the machine


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = int(line.split()[1]) / 2**20
    except OSError:
        pass
    return {
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def git_revision(repo: Path) -> str:
    """HEAD's short hash, with "+dirty" when the work tree has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


# ------------------------------------------------------------------------------ the files


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def overall_throughput(run: Mapping[str, Any]) -> float | None:
    """Measured pods bound per second from the first create to the last binding: one number over
    the whole run, steadier than the 1 s samples when a run lasts only a few seconds."""
    return run["bound"] / run["last_bind_seconds"] if run.get("bound") and run.get("last_bind_seconds") else None


def cpu_per_pod_ms(run: Mapping[str, Any]) -> float | None:
    """The scheduler's CPU milliseconds per pod it bound in the measured phase."""
    return 1000 * run["cpu_seconds"] / run["bound"] if run.get("bound") else None


def ratios(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per workload: ours ÷ kube-scheduler and ours ÷ null binder (average throughput), and
    ours ÷ kube-scheduler peak RSS, for the pairs measured in this run."""
    by_workload: dict[str, dict[str, Mapping[str, Any]]] = {}
    for run in runs:
        if not run.get("error"):
            by_workload.setdefault(run["workload"], {})[run["scheduler"]] = run

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    rows = []
    for workload, measured in by_workload.items():
        ours, kube, null = measured.get("ours"), measured.get("kube"), measured.get("null")
        if ours is None:
            continue
        rows.append(
            {
                "workload": workload,
                "ours_vs_kube": ratio(ours["throughput_avg"], kube["throughput_avg"]) if kube else None,
                "ours_vs_null": ratio(ours["throughput_avg"], null["throughput_avg"]) if null else None,
                "overall_ours_vs_kube": ratio(overall_throughput(ours), overall_throughput(kube)) if kube else None,
                "overall_ours_vs_null": ratio(overall_throughput(ours), overall_throughput(null)) if null else None,
                "rss_ours_vs_kube": ratio(ours["peak_rss_mib"], kube["peak_rss_mib"]) if kube else None,
                "cpu_per_pod_ours_vs_kube": ratio(cpu_per_pod_ms(ours), cpu_per_pod_ms(kube)) if kube else None,
            }
        )
    return rows


def markdown(results: Mapping[str, Any]) -> str:
    info = results["machine"]
    lines = [
        f"# Scheduler benchmark {results['date']}",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; Linux {info['kernel']}, "
        f"Python {info['python']}. Control plane {results['kubernetes']} (etcd + kube-apiserver on the same "
        f"machine{', kwok' if results['kwok'] else ', no kwok'}). Commit {results['commit']}. "
        f"Sizes: {'--full' if results['full'] else 'default'}.",
        "",
        "Throughput in pods/s from 1 s samples (scheduler_perf's method; overall = bound pods over the seconds "
        "from the first create to the last binding); latency from the measured pod's "
        "create (POST answered) to its binding seen on a watch; attempt latency from the scheduler's "
        "`scheduler_scheduling_attempt_duration_seconds`; the scheduler's CPU seconds over the measured phase "
        "(s: from the first create to the last binding); peak RSS = VmHWM; other CPU = the machine's busy time "
        "not spent by the scheduler, apiserver, etcd or harness (anything else running skews the numbers).",
        "",
        "| workload | scheduler | nodes | pods | bound | s | thr avg | thr p50 | thr p99 | overall "
        "| lat p50 ms | lat p99 ms | attempt p50 ms | attempt p99 ms | CPU s | CPU ms/pod | peak RSS MiB "
        "| apiserver CPU s | other CPU s | violations |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for run in results["runs"]:
        if run.get("error"):
            lines.append(
                f"| {run['workload']} | {run['title']} | {run['nodes']} | {run['measured_pods']} | error: "
                f"{str(run['error']).splitlines()[0][:120].replace('|', '/')} |" + " |" * 15
            )
            continue
        bound = f"{run['bound']}/{run['fittable']}" + (" (timeout)" if run["timed_out"] else "")
        violations = "n/a" if run["violations"] is None else str(len(run["violations"]))
        lines.append(
            "| "
            + " | ".join(
                [
                    run["workload"],
                    run["title"],
                    str(run["nodes"]),
                    str(run["measured_pods"]),
                    bound,
                    _fmt(run["last_bind_seconds"], 1),
                    _fmt(run["throughput_avg"], 1),
                    _fmt(run["throughput_p50"], 1),
                    _fmt(run["throughput_p99"], 1),
                    _fmt(overall_throughput(run), 1),
                    _fmt(run["latency_p50_ms"]),
                    _fmt(run["latency_p99_ms"]),
                    _fmt(run["attempt_p50_ms"], 1),
                    _fmt(run["attempt_p99_ms"], 1),
                    _fmt(run["cpu_seconds"], 1),
                    _fmt(cpu_per_pod_ms(run), 2),
                    _fmt(run["peak_rss_mib"]),
                    _fmt(run["apiserver_cpu_seconds"], 1),
                    _fmt(run["other_cpu_seconds"], 1),
                    violations,
                ]
            )
            + " |"
        )
    lines += ["", "| workload | what the measured pods ask for |", "|---|---|"]
    lines += [f"| {name} | {what} |" for name, what in results.get("workloads", {}).items()]
    rows = results["ratios"]
    if rows:
        lines += [
            "",
            "| workload | thr avg ours ÷ kube-scheduler | thr avg ours ÷ null binder | overall ours ÷ kube-scheduler "
            "| overall ours ÷ null binder | peak RSS ours ÷ kube-scheduler | CPU per pod ours ÷ kube-scheduler |",
            "|---|--:|--:|--:|--:|--:|--:|",
        ]
        for row in rows:
            lines.append(
                f"| {row['workload']} | {_fmt(row['ours_vs_kube'], 2)} | {_fmt(row['ours_vs_null'], 2)} "
                f"| {_fmt(row['overall_ours_vs_kube'], 2)} | {_fmt(row['overall_ours_vs_null'], 2)} "
                f"| {_fmt(row['rss_ours_vs_kube'], 2)} | {_fmt(row['cpu_per_pod_ours_vs_kube'], 2)} |"
            )
    plots = [run["workload"] for run in results["runs"]]
    if results.get("plots"):
        lines += ["", *(f"![{name}]({name}.png)" for name in dict.fromkeys(plots) if name in results["plots"])]
    notes = list(results.get("notes", ()))
    commits = sorted({run["commit"] for run in results["runs"] if "commit" in run})
    if len(commits) > 1:
        notes.append(f"the work tree changed during the benchmark: runs span {', '.join(commits)} (see results.json)")
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def plot(results: Mapping[str, Any], out_dir: Path) -> list[str]:
    """A throughput-over-time PNG per workload, one line per scheduler; the workloads plotted
    (none when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    by_workload: dict[str, list[Mapping[str, Any]]] = {}
    for run in results["runs"]:
        if not run.get("error"):
            by_workload.setdefault(run["workload"], []).append(run)
    for workload, runs in by_workload.items():
        fig, (rate, cumulative) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
        for run in runs:
            bound = run["timeline"]
            line = rate.step(range(len(bound) + 1), [*bound, bound[-1]], where="post", label=run["title"])[0]
            cumulative.plot(range(len(bound) + 1), [0, *accumulate(bound)], color=line.get_color(), label=run["title"])
            created = run["created_timeline"]
            cumulative.plot(
                range(len(created) + 1), [0, *accumulate(created)], color=line.get_color(), linestyle=":", alpha=0.7
            )
        rate.set_title(f"{workload}: {runs[0]['nodes']} nodes, {runs[0]['measured_pods']} measured pods")
        rate.set_ylabel("pods bound per second")
        cumulative.set_ylabel("pods bound (dotted: created)")
        cumulative.set_xlabel("seconds since the measured pods' creation began")
        for ax in (rate, cumulative):
            ax.grid(alpha=0.3)
        rate.legend()
        fig.tight_layout()
        fig.savefig(out_dir / f"{workload}.png", dpi=100)
        plt.close(fig)
    return list(by_workload)


def write(results: dict[str, Any], out_dir: Path, latest: Path | None) -> str:
    """results.json, PNGs and results.md into `out_dir` (and results.md to `latest`); the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results["plots"] = plot(results, out_dir)
    if not results["plots"]:
        results.setdefault("notes", []).append("plots skipped: matplotlib is not installed (pip install -e '.[bench]')")
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    text = markdown(results)
    (out_dir / "results.md").write_text(text)
    if latest is not None:
        relative = out_dir.relative_to(latest.parent) if out_dir.is_relative_to(latest.parent) else out_dir
        latest.write_text(text.replace("](", f"]({relative}/"))
    return text


# ------------------------------------------------------------------------------ profiles


@dataclass
class ProfileCounts:
    """Samples of a py-spy profile: on top of the stack (self) by package and by function, and
    inside each of the project's own and kopf's functions (total, callees included)."""

    samples: int = 0
    by_package: Counter[str] = field(default_factory=Counter)
    own: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)


def profile_counts(collapsed: Iterable[str]) -> ProfileCounts:
    """Count py-spy's raw (collapsed stacks) output; functions are named `func (dir/module.py)`."""
    counts = ProfileCounts()
    for line in collapsed:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        counts.samples += count
        frames = [frame for frame in stack.split(";") if frame]
        if not frames:
            continue
        counts.by_package[_package(frames[-1])] += count
        counts.own[_frame_name(frames[-1])] += count
        for name in {_frame_name(frame) for frame in frames if _package(frame) in _INCLUSIVE_PACKAGES}:
            counts.total[name] += count
    return counts


def profile_summary(collapsed: Iterable[str], top: int = 30) -> str:
    """Markdown summary of py-spy's raw (collapsed stacks) output: samples on top of the stack
    (self time) by package and by function, and time spent inside each of the project's own and
    kopf's functions (total, callees included)."""
    counts = profile_counts(collapsed)
    samples, by_package, own, total = counts.samples, counts.by_package, counts.own, counts.total

    def table(title: str, counter: Counter[str]) -> list[str]:
        rows = [f"| {100 * n / max(samples, 1):.1f} | `{name}` |" for name, n in counter.most_common(top)]
        return ["", f"| {title} | |", "|--:|---|", *rows]

    lines = [f"{samples} samples of the scheduler's busy threads (py-spy, 100 Hz, idle time left out)."]
    lines += table("self % by package", by_package)
    lines += table("self % by function", own)
    lines += table("total % (with callees), ours and kopf", total)
    return "\n".join(lines) + "\n"


_INCLUSIVE_PACKAGES = {"scheduler", "plugins", "kopf"}


def _location(frame: str) -> str:
    """The file path of a py-spy frame `func (path:line)`."""
    where = frame.partition(" (")[2]
    return where.rstrip(")").rsplit(":", 1)[0]


def _package(frame: str) -> str:
    """Top-level package of a frame's file (`kopf`, `aiohttp`, `asyncio`, `scheduler`, `json`, ...);
    py-spy writes paths relative to the sys.path entry they were found under."""
    location = _location(frame)
    if location.startswith("<frozen "):
        return location.removeprefix("<frozen ").rstrip(">").split(".")[0]
    parts = Path(location).parts
    return parts[0].removesuffix(".py") if parts else "?"


def _frame_name(frame: str) -> str:
    """`func (path/to/module.py:123)` → `func (to/module.py)`: lines of one function add up."""
    name = frame.partition(" (")[0]
    path = _location(frame)
    short = "/".join(Path(path).parts[-2:]) if path else ""
    return f"{name} ({short})" if short else name
