"""PodTopologySpread's labelSelector edge cases as kube 1.37 reads them (common.go, metav1).

`labelSelector: {}` selects every pod of the namespace (labels.Everything); a missing labelSelector
selects none (labels.Nothing), and matchLabelKeys cannot change that: kube's
mergeLabelSetWithSelector returns a Nothing selector unchanged, and the apiserver leaves a nil
selector alone when it merges matchLabelKeys.
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.podtopologyspread import ERR_REASON_CONSTRAINTS_NOT_MATCH
from scheduler.framework.types import Code
from tests.builders import label_selector
from tests.unit.plugins.test_podtopologyspread import HARD, cluster, incoming, on, plugin, pre_filter, zn

NODES = [zn("node-a", "zone1"), zn("node-b", "zone2")]
# Two pods in zone1 with unrelated labels, one in another namespace (never counted).
EXISTING = [on("node-a", app="web"), on("node-a", tier="x"), on("node-b", namespace="other", app="web")]


@pytest.mark.parametrize(
    ("max_skew", "selector", "match_label_keys", "rejected"),
    [
        # zone1 counts 2 + the pod itself, zone2 none
        pytest.param(2, label_selector(), (), {"node-a"}, id="empty selector counts every pod of the namespace"),
        pytest.param(1, None, (), set(), id="missing selector counts no pod"),
        pytest.param(1, None, ("app",), set(), id="matchLabelKeys do not turn a missing selector into one"),
        # zone1 counts the app=web pod + the pod itself
        pytest.param(2, label_selector(), ("app",), set(), id="matchLabelKeys narrow an empty selector"),
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
