"""What PodTopologySpread's filtering, scoring and queueing hints share: the plugin's name, the
constraints a pod is held to (its own or the defaults), and counting a node's matching pods once
per selector.

Never reads or writes CycleState, never changes a NodeInfo, never calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from plugins.podtopologyspread.constraints import SpreadConstraint, count_matching, parse_constraints
from plugins.podtopologyspread.defaults import WorkloadLister, default_selector
from scheduler.framework.types import NodeInfo
from scheduler.model.objects import Pod
from scheduler.model.selectors import LabelSelector

NAME = "PodTopologySpread"


def pod_constraints(
    pod: Pod,
    action: str,
    default_constraints: Sequence[Mapping[str, Any]],
    workloads: WorkloadLister | None,
    parsed_defaults: Sequence[SpreadConstraint] | None = None,
) -> list[SpreadConstraint]:
    """The pod's own constraints with this whenUnsatisfiable, or the defaults when it declares none.

    Defaults apply only with a workload lister and when some Service or controller selects
    the pod (their selectors replace the constraints' own). `parsed_defaults`: the defaults with
    this whenUnsatisfiable already parsed (they read no pod label: no matchLabelKeys). Raises
    SelectorError.
    """
    own: Sequence[Mapping[str, Any]] = pod.spec.get("topologySpreadConstraints") or ()
    if own:
        return parse_constraints(own, pod.labels, action)
    if not default_constraints or workloads is None:
        return []
    defaults: Sequence[SpreadConstraint]
    if parsed_defaults is not None:
        defaults = parsed_defaults
    else:
        defaults = parse_constraints(default_constraints, pod.labels, action)
    if not defaults:
        return []
    selector = default_selector(pod, workloads)
    if selector.empty:
        return []
    return [replace(c, selector=selector) for c in defaults]


class MatchingPods:
    """Counts of a node's pods per selector, so constraints sharing a selector scan the pods once."""

    __slots__ = ("_counts", "_info", "_namespace")

    def __init__(self, info: NodeInfo, namespace: str) -> None:
        self._info = info
        self._namespace = namespace
        self._counts: dict[LabelSelector, int] = {}

    def count(self, selector: LabelSelector) -> int:
        counted = self._counts.get(selector)
        if counted is None:
            counted = self._counts[selector] = count_matching(self._info.pods.values(), selector, self._namespace)
        return counted
