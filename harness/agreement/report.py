"""Agreement report: the table (stdout and tests/agreement/RESULTS.md) and the verdict of a run:
any disagreement, error or scenario not run is a failure and a non-zero exit."""

from __future__ import annotations

import datetime
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agreement.compare import QUEUE_RACE_ATTEMPTS, Counts, ScenarioResult
from harness.controlplane import REPO_ROOT, pinned_versions

Raw = dict[str, Any]


# --------------------------------------------------------------------------- running it all


@dataclass(frozen=True)
class RunInfo:
    """Where a report comes from: the date, the commit, the generator's seed and count."""

    date: str
    commit: str
    seed: int | None = None
    generated: int = 0

    @staticmethod
    def now(seed: int | None = None, generated: int = 0) -> RunInfo:
        date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        return RunInfo(date, _commit(), seed, generated)


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{' (with uncommitted changes)' if dirty else ''}"


TABLE_HEADER = (
    "scenario",
    "pods",
    "verdicts agree",
    "messages agree",
    "ours in kube's top set",
    "both in our replayed top set",
    "claims agree",
    "kube as the scenario expects",
    "post-filter",
    "groups agree",
    "result",
)
_EMPTY_CELLS = len(TABLE_HEADER) - 2  # a row with neither counts nor result: name, dashes, status


@dataclass
class AgreementReport:
    results: list[ScenarioResult]
    seconds: float
    registered: tuple[str, ...]
    info: RunInfo = field(default_factory=RunInfo.now)

    @property
    def compared(self) -> list[ScenarioResult]:
        return [r for r in self.results if r.status != "pending"]

    @property
    def kube_scored_pods(self) -> int:
        """Pods for which kube-scheduler's own per-node final scores were read from its log."""
        return sum(p.kube_scored for r in self.compared for p in r.pods)

    @property
    def failures(self) -> list[ScenarioResult]:
        """Every scenario that did not agree: a disagreement, an error in either run, or a scenario
        not run at all (pending). Any of them fails the run; nothing is excused."""
        return [r for r in self.results if not r.agrees]

    def result(self, scenario: str) -> ScenarioResult:
        for result in self.results:
            if result.scenario.name == scenario:
                return result
        raise KeyError(scenario)

    def table_rows(self) -> list[list[str]]:
        rows = []
        for result in self.results:
            if result.status == "pending":
                missing = ", ".join(result.scenario.pending_plugins(self.registered))
                rows.append([result.scenario.name, *"-" * _EMPTY_CELLS, f"pending ({missing} not registered)"])
                continue
            if result.status == "error":
                rows.append([result.scenario.name, *"-" * _EMPTY_CELLS, "ERROR"])
                continue
            c = result.counts()
            verdict = "agree" if result.agrees else "DISAGREE"
            rows.append(
                [
                    result.scenario.name,
                    str(c.pods),
                    f"{c.verdicts}/{c.pods}",
                    f"{c.messages}/{c.pods}",
                    f"{c.kube_top}/{c.kube_top_checks}",
                    f"{c.replay_top}/{c.replay_checks}",
                    f"{c.claims}/{c.claim_checks}",
                    f"{c.as_expected}/{c.expectations}",
                    str(c.post_filter),
                    f"{c.groups_agreeing}/{c.groups}" if c.groups else "-",
                    verdict,
                ]
            )
        return rows

    def totals(self, generated: bool | None = None) -> Counts:
        """Counts over compared scenarios (only generated ones, only hand-written, or all)."""
        total = Counts()
        for result in self.compared:
            if generated is None or result.scenario.generated == generated:
                total = total + result.counts()
        return total

    def _summary(self, generated: bool | None = None) -> str:
        scenarios = [r for r in self.compared if generated is None or r.scenario.generated == generated]
        agreeing = sum(r.agrees for r in scenarios)
        c = self.totals(generated)
        return (
            f"{len(scenarios)} scenarios ({agreeing} agree), {c.pods} pods; verdicts {c.verdicts}/{c.pods}, "
            f"messages {c.messages}/{c.pods}, our node in kube-scheduler's top set {c.kube_top}/{c.kube_top_checks}, "
            f"both nodes in our replayed top set {c.replay_top}/{c.replay_checks}, claims {c.claims}/{c.claim_checks}, "
            f"kube-scheduler as the scenario expects {c.as_expected}/{c.expectations}; {c.post_filter} messages had a "
            f"PostFilter part; kube-scheduler's final scores equal our replay's {c.scores_equal}/{c.scores_checks}"
            + (f"; pod groups agreeing {c.groups_agreeing}/{c.groups}" if c.groups else "")
        )

    def _diffs(self) -> list[str]:
        out = []
        for result in self.results:
            if not result.agrees:
                out.append(result.diff())
        return out

    def text(self) -> str:
        rows = [list(TABLE_HEADER), *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEADER))]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"total: {self._summary()}; {self.seconds:.0f} s")
        diffs = self._diffs()
        if diffs:
            lines += ["", "disagreements and errors:", *diffs]
        reruns = self._reruns()
        if reruns:
            lines += ["", "kube-scheduler runs played again:", *reruns]
        return "\n".join(lines)

    def _reruns(self) -> list[str]:
        lines = []
        for result in self.results:
            lines += [f"{result.scenario.name}: {reason}" for reason in result.reruns]
            if result.raced:
                lines.append(f"{result.scenario.name}: compared although this run raced too: {result.raced}")
        return lines

    def markdown(self) -> str:
        version = pinned_versions()["K8S_VERSION"]
        info = self.info
        generated = ""
        if info.generated:
            generated = (
                f" plus {info.generated} generated ones (harness/generator.py, `--seed {info.seed} "
                f"--generated {info.generated}`)"
            )
        out = [
            f"# Agreement with kube-scheduler {version}",
            "",
            f"Run {info.date} at commit {info.commit}, wall time {self.seconds:.0f} s, by `python -m "
            f"harness.agreement` (harness/agreement/) over tests/agreement/scenarios/"
            f"{generated}.",
            "",
            "Per pod: the verdict (bound / unschedulable / gated); the FailedScheduling message's Filter part",
            "(the PostFilter part, DefaultPreemption's `preemption: …`, is cut off here and compared, with the",
            "victims, by tests/cluster/test_preemption_agreement.py; the *post-filter* column counts the pods",
            "whose message had one); whether our",
            "node is among kube-scheduler's top-scored nodes, read from kube-scheduler's own `-v=10` log",
            '("Calculated node\'s final score for pod"; a pod it did not score, having one feasible node or a',
            "batching hint, has its own node as the top set); whether both schedulers' nodes are in our",
            "top-score set replayed over the cluster the pod met in that scheduler's run; in DRA scenarios, claim",
            "by claim, whether it was allocated, the devices (request, driver/pool/device, admin access, consumed",
            "capacity) and reservedFor (harness/agreement/compare.py `compare_claims` says when a pool is",
            "compared as the node's own); and whether kube-scheduler did what the scenario's `expect:` says.",
            "Per pod group (scheduling.k8s.io/v1beta1 PodGroups, the gang-* scenarios, run with GenericWorkload",
            "on both sides): the verdict (bound, partly bound, unschedulable, pending), which members are bound,",
            "the PodGroup's conditions (messages without their pod-group preemption part) and, with topology",
            "constraints, that our members share one domain; its members are compared as pods too.",
            "",
            f"**Total**: {self._summary()}.",
        ]
        if info.generated:
            out += [
                "",
                f"- hand-written: {self._summary(generated=False)}.",
                f"- generated: {self._summary(generated=True)}.",
            ]
        out += [
            "",
            "| " + " | ".join(TABLE_HEADER) + " |",
            "| --- |" + " ---: |" * (len(TABLE_HEADER) - 2) + " --- |",
        ]
        out += ["| " + " | ".join(row) + " |" for row in self.table_rows()]
        diffs = self._diffs()
        if diffs:
            out += ["", "## Disagreements and errors", ""]
            out += ["```", *diffs, "```"]
        compared_scores = [p for r in self.compared for p in r.pods if p.scores_equal is not None]
        if compared_scores:
            equal = sum(1 for p in compared_scores if p.scores_equal)
            by_plugin = Counter(plugin for p in compared_scores for plugin in p.plugins_differing)
            out += ["", "## Scores (informational)", ""]
            out += [
                f"kube-scheduler's logged final scores equal our replay's over the same cluster for {equal} of "
                f"{len(compared_scores)} pods both scored. Pods where a plugin's weighted score differs on some "
                "node, by plugin:",
                "",
            ]
            out += [f"- {plugin}: {count}" for plugin, count in sorted(by_plugin.items())] or ["- none"]
        reruns = self._reruns()
        if reruns:
            out += ["", "## kube-scheduler runs played again", ""]
            out += [
                "A run of kube-scheduler in which its queue began a pod group's cycle before all the members it",
                "already held had joined (harness/agreement/run.py `queue_race`) is played again, up to "
                f"{QUEUE_RACE_ATTEMPTS} runs;",
                "the last run is the one compared, raced or not, so a scenario whose outcome hangs on the race",
                "still fails when every run raced, and one whose outcome does not still agrees.",
                "",
            ]
            out += [f"- {line}" for line in reruns]
        post_filter = sorted({p.post_filter for r in self.compared for p in r.pods if p.post_filter})
        if post_filter:
            out += ["", "## kube-scheduler's PostFilter parts (not compared)", ""]
            out += [f"- `{text}`" for text in post_filter]
        out += ["", "## Scenarios", ""]
        for result in self.results:
            scenario = result.scenario
            about = ", ".join(scenario.plugins)
            profile = "" if scenario.profile == "default" else f" (profile {scenario.profile})"
            if scenario.generated:
                out.append(f"- **{scenario.name}**{profile}: {scenario.description}")
            else:
                out.append(f"- **{scenario.name}** [{about}]{profile}: {' '.join(scenario.description.split())}")
        return "\n".join(out) + "\n"


def publish(report: AgreementReport, results: Path | None) -> int:
    """Print the table (and write it to `results`); the exit status: 1 when any scenario failed."""
    print(report.text())
    if results is not None:
        results.write_text(report.markdown())
        print(f"wrote {results}")
    failures = report.failures
    if failures:
        names = ", ".join(r.scenario.name for r in failures)
        print(f"{len(failures)} of {len(report.results)} scenarios failed: {names}", file=sys.stderr)
        return 1
    return 0
