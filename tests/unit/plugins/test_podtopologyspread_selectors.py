"""PodTopologySpread's labelSelector edge cases as kube 1.37 reads them (common.go, metav1).

`labelSelector: {}` is labels.Everything(), and kube's countPodsMatchSelector returns 0 for an empty
selector: no existing pod counts, while the incoming pod matches itself (checked against
kube-scheduler 1.37.2: tests/agreement/scenarios/spread-empty-selector.yaml). A missing labelSelector
selects none (labels.Nothing), and matchLabelKeys cannot change that: kube's
mergeLabelSetWithSelector returns a Nothing selector unchanged (the apiserver refuses matchLabelKeys
without a labelSelector anyway).
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.podtopologyspread.filtering import ERR_REASON_CONSTRAINTS_NOT_MATCH
from scheduler.framework.types import Code
from scheduler.testing.builders import label_selector
from tests.unit.plugins.test_podtopologyspread import HARD, cluster, incoming, on, plugin, pre_filter, zn

NODES = [zn("node-a", "zone1"), zn("node-b", "zone2")]
# Two pods in zone1 with unrelated labels, one in another namespace (never counted).
EXISTING = [on("node-a", app="web"), on("node-a", tier="x"), on("node-b", namespace="other", app="web")]


@pytest.mark.parametrize(
    ("max_skew", "selector", "match_label_keys", "rejected"),
    [
        # zone1 would count 2 + the pod itself if an empty selector counted existing pods
        pytest.param(1, label_selector(), (), set(), id="empty selector counts no existing pod"),
        pytest.param(1, None, (), set(), id="missing selector counts no pod"),
        pytest.param(1, None, ("app",), set(), id="matchLabelKeys do not turn a missing selector into one"),
        # matchLabelKeys make the selector non-empty: zone1 counts the app=web pod + the pod itself
        pytest.param(1, label_selector(), ("app",), {"node-a"}, id="matchLabelKeys make an empty selector count"),
    ],
)
def test_label_selector_edge_cases(
    max_skew: int, selector: Any, match_label_keys: tuple[str, ...], rejected: set[str]
) -> None:
    infos = cluster(NODES, EXISTING)
    constrained = incoming(app="web").spread_constraint(
        max_skew, "zone", HARD, selector, match_label_keys=match_label_keys
    )
    pod = constrained.obj()
    pl = plugin(infos)
    state, status = pre_filter(pl, pod, infos)
    assert status is None
    verdicts = {info.name: pl.filter(state, pod, info) for info in infos}
    assert {name for name, s in verdicts.items() if s is not None} == rejected
    for name in rejected:
        status = verdicts[name]
        assert status is not None
        assert status.code == Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
