"""TopologyPlacementGenerator: one placement per topology domain for a PodGroup with a topology
constraint (kube-scheduler v1.37.2's topologyaware plugin, TopologyAwareWorkloadScheduling).

The first `spec.schedulingConstraints.topology[].key` names the domains: every value of that node
label is a placement of the nodes carrying it; nodes without the label are in none. Members
already assumed or bound pin the group to their domain. A group without a constraint keeps the
whole cluster as its one placement. Reads the snapshot and the pod-group state; writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import PodGroupState
from scheduler.framework.types import NodeInfo, Placement, Status
from scheduler.model.podgroups import PodGroup

NAME = "TopologyPlacementGenerator"


class TopologyPlacementGenerator:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def _scheduled_domain(self, group: PodGroupState, key: str) -> tuple[str | None, Status | None]:
        domain: str | None = None
        for pod in group.scheduled_pods():
            info = self.handle.snapshot.get(pod.node_name)
            if info is None or info.node is None:
                problem = f'getting node for pod {pod.key}: nodeinfo not found for node name "{pod.node_name}"'
            elif key not in info.node.labels:
                problem = f"no topology domain found for pod {pod.key}"
            elif domain is not None and domain != info.node.labels[key]:
                problem = f"more than 1 domain found for pod group: {domain}, {info.node.labels[key]}"
            else:
                domain = info.node.labels[key]
                continue
            error = LookupError(f"cannot determine domain for already scheduled pods: {problem}")
            return None, Status.as_error(error, NAME)
        return domain, None

    def generate_placements(self, group: PodGroupState, parent: Placement) -> tuple[list[Placement], Status | None]:
        pod_group = group.group
        if not isinstance(pod_group, PodGroup) or not pod_group.topology_keys:
            return [parent], None
        key = pod_group.topology_keys[0]
        required, status = self._scheduled_domain(group, key)
        if status is not None:
            return [], status
        by_domain: dict[str, list[NodeInfo]] = {}
        for info in parent.nodes:
            domain = info.node.labels.get(key) if info.node is not None else None
            if domain is None or (required is not None and domain != required):
                continue
            by_domain.setdefault(domain, []).append(info)
        # kube iterates a Go map here (any order); sorted, the first placement tried is stable.
        return [Placement(domain, tuple(nodes)) for domain, nodes in sorted(by_domain.items())], None


def new(args: Mapping[str, Any], handle: Handle) -> TopologyPlacementGenerator:
    return TopologyPlacementGenerator(handle)
