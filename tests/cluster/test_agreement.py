"""Agreement with the real kube-scheduler (the pinned v1.37.2) over every scenario in
tests/agreement/scenarios plus a fixed 100 generated ones (seed DEFAULT_SEED).

One run of the harness (harness/agreement/: one control plane per scheduler, both
schedulers side by side) serves every test here; each scenario is a test of its own that fails
with the per-pod diff: verdict (bound / unschedulable / gated), the FailedScheduling message
without kube-scheduler's PostFilter part, whether our node is among kube-scheduler's top-scored
nodes by its own log, whether each chosen node is in our replayed top-score set, in DRA scenarios
(tests/agreement/scenarios/dra-*.yaml, kube-controller-manager's resourceclaim controller running)
claim by claim the devices allocated and reservedFor, and whether kube-scheduler did what the
scenario's `expect:` says.
`make agreement` runs the same files with 300 generated (the committed tests/agreement/RESULTS.md);
`python -m harness.agreement` prints the table.
"""

from __future__ import annotations

import pytest

from harness.agreement.report import AgreementReport
from harness.agreement.run import run_agreement
from harness.agreement.scenarios import DEFAULT_SEED, generated_scenarios, load_scenarios
from plugins.registry import IN_TREE
from scheduler.config import DEFAULT_MULTI_POINT

GENERATED_IN_TEST = 100
SCENARIOS = load_scenarios() + generated_scenarios(DEFAULT_SEED, GENERATED_IN_TEST)


@pytest.fixture(scope="module")
def report() -> AgreementReport:
    return run_agreement(SCENARIOS)


@pytest.mark.cluster
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("scenario", [s.name for s in SCENARIOS])
def test_agrees_with_kube_scheduler(report: AgreementReport, scenario: str) -> None:
    """Every scenario must be run on both sides and agree: a disagreement, an error in either run or
    a scenario naming a plugin we do not register fails here, with nothing excused."""
    result = report.result(scenario)
    assert result.agrees, "disagreement with kube-scheduler:\n" + result.diff()


@pytest.mark.cluster
def test_kube_scheduler_scores_were_read(report: AgreementReport) -> None:
    """The top-set check rests on kube-scheduler's own -v=10 score lines: some pods that were bound
    with several feasible nodes must have them (a changed log line would make every check vacuous)."""
    checks = sum(1 for result in report.compared for pod in result.pods if pod.kube_top is not None)
    assert checks >= 100, f"only {checks} top-set checks"
    assert report.kube_scored_pods >= 50, f"kube-scheduler's score lines found for {report.kube_scored_pods} pods"


def test_scenarios_cover_every_default_plugin() -> None:
    """Every plugin of the default profile that we ship is what some scenario is about."""
    ours = {module.NAME for module in IN_TREE}
    covered = {plugin for scenario in SCENARIOS for plugin in scenario.plugins}
    expected = {name for name, _ in DEFAULT_MULTI_POINT if name in ours}
    assert expected <= covered, f"no scenario covers {sorted(expected - covered)}"
    assert len([s for s in SCENARIOS if not s.generated]) >= 40
    assert len(SCENARIOS) >= 140
