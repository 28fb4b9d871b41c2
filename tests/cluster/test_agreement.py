"""Agreement with the real kube-scheduler v1.34.4 over every scenario in tests/agreement/scenarios.

One run of the harness (scheduler/testing/agreement.py: one control plane per scheduler, both
schedulers side by side, ~2.5 min on 2 cores) serves every test here; each scenario is a test of
its own that fails with the per-pod diff: verdict (bound / unschedulable / gated), the
FailedScheduling message without kube-scheduler's PostFilter part, and whether each chosen node is
in our top-score set. `python -m scheduler.testing.agreement` prints the same as a table.
"""

from __future__ import annotations

import pytest

from plugins.registry import IN_TREE
from scheduler.config import DEFAULT_MULTI_POINT
from scheduler.testing.agreement import AgreementReport, load_scenarios, run_agreement

SCENARIOS = load_scenarios()

# Scenarios that fail because of a bug on our side: they stay in the suite, marked, until the owner
# fixes the cause (strict: a fixed bug fails here until its mark goes).
OUR_BUGS: dict[str, str] = {}


def _param(name: str) -> object:
    if name in OUR_BUGS:
        return pytest.param(name, marks=pytest.mark.xfail(reason=OUR_BUGS[name], strict=True))
    return name


@pytest.fixture(scope="module")
def report() -> AgreementReport:
    return run_agreement(SCENARIOS)


@pytest.mark.cluster
@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", [_param(s.name) for s in SCENARIOS])
def test_agrees_with_kube_scheduler(report: AgreementReport, scenario: str) -> None:
    result = report.result(scenario)
    if result.status == "pending":
        missing = ", ".join(result.scenario.pending_plugins(report.registered))
        pytest.skip(f"pending: {missing} not registered yet")
    assert result.status == "compared", result.error
    assert result.agrees, "disagreement with kube-scheduler:\n" + result.diff()


def test_scenarios_cover_every_default_plugin() -> None:
    """Every plugin of the default profile that we ship is what some scenario is about."""
    ours = {module.NAME for module in IN_TREE if not getattr(module, "STAND_IN", False)}
    covered = {plugin for scenario in SCENARIOS for plugin in scenario.plugins}
    expected = {name for name, _ in DEFAULT_MULTI_POINT if name in ours}
    assert expected <= covered, f"no scenario covers {sorted(expected - covered)}"
    assert len(SCENARIOS) >= 40
