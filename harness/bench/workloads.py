"""scheduler_perf-style workloads, each a small declarative definition.

Owns: what a workload's cluster looks like at each size — the nodes and their labels, the initial
pods (created already bound, round-robin, so that setting them up costs no scheduler time), the
measured pods and which of them can never fit — and how to count placements that break the
workload's own constraints (node capacity for every workload, plus its affinity / spreading rule).

Must never: talk to the API or know which scheduler runs (runner.py turns a Workload into objects
and measures). Adding a workload is one `Workload(...)` entry in WORKLOADS; a Preemption workload
(low-priority initial pods filling the nodes, high-priority measured pods) fits the same shape once
the scheduler preempts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.objects import Resource

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

Labels = Callable[[int], Mapping[str, str]]
SpecExtra = Callable[[int], Mapping[str, Any]]


def _no_labels(_index: int) -> Mapping[str, str]:
    return {}


def _no_spec(_index: int) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class Size:
    """How many nodes, pods created already bound before the scheduler starts, and measured pods."""

    nodes: int
    measured_pods: int
    initial_pods: int = 0


@dataclass(frozen=True)
class NodeTemplate:
    """scheduler_perf's default node (4 CPU, 32Gi, 110 pods); labels may depend on the node index."""

    cpu: str = "4"
    memory: str = "32Gi"
    pods: str = "110"
    labels: Labels = _no_labels

    def manifest(self, name: str, index: int) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            # Every node carries the hostname label a kubelet would set: topologyKey hostname
            # (anti-affinity, spreading) ignores nodes without it.
            "metadata": {"name": name, "labels": {HOSTNAME: name, **self.labels(index)}},
            "spec": {},
            "status": {"capacity": capacity, "allocatable": capacity},
        }

    def allocatable(self) -> Resource:
        return Resource.from_list({"cpu": self.cpu, "memory": self.memory, "pods": self.pods}, "node template")


@dataclass(frozen=True)
class PodTemplate:
    """scheduler_perf's default pod (100m CPU, 500Mi); labels and extra spec fields (affinity,
    topologySpreadConstraints, ...) may depend on the pod index."""

    cpu: str = "100m"
    memory: str = "500Mi"
    labels: Labels = _no_labels
    spec: SpecExtra = _no_spec

    def manifest(self, name: str, index: int, scheduler_name: str, node_name: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pause",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}},
                }
            ],
            **self.spec(index),
        }
        if node_name is not None:
            spec["nodeName"] = node_name
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": dict(self.labels(index))},
            "spec": spec,
        }

    def requests(self) -> Resource:
        requested = Resource.from_list({"cpu": self.cpu, "memory": self.memory}, "pod template")
        requested.allowed_pods = 1
        return requested


@dataclass(frozen=True)
class Placement:
    """Where every pod of one run ended up: the nodes (name → labels) and (template, index, node
    name) per bound pod, initial and measured alike."""

    nodes: Mapping[str, Mapping[str, str]]
    node_template: NodeTemplate
    pods: Sequence[tuple[PodTemplate, int, str]]


Check = Callable[[Placement], list[str]]


def capacity_violations(placement: Placement) -> list[str]:
    """Nodes whose bound pods ask for more cpu, memory or pod slots than the node offers."""
    allocatable = placement.node_template.allocatable()
    used: dict[str, Resource] = defaultdict(Resource)
    for template, _index, node in placement.pods:
        used[node].add(template.requests())
    problems = []
    for node, total in sorted(used.items()):
        if (
            total.milli_cpu > allocatable.milli_cpu
            or total.memory > allocatable.memory
            or total.allowed_pods > allocatable.allowed_pods
        ):
            problems.append(
                f"{node}: {total.allowed_pods} pods, {total.milli_cpu}m cpu, {total.memory} B memory "
                f"over {allocatable.allowed_pods} / {allocatable.milli_cpu}m / {allocatable.memory} B"
            )
    return problems


@dataclass(frozen=True)
class Workload:
    """One scheduler_perf-style workload at a default and a --full size.

    Every `unfit_every`-th measured pod (when set) is made from `unfit` and can never be placed: the
    run waits for its PodScheduled=False condition instead of a binding. `check` counts placements
    that break the workload's constraint (capacity is always checked).
    """

    name: str
    default: Size
    full: Size
    description: str
    node: NodeTemplate = field(default_factory=NodeTemplate)
    measured: PodTemplate = field(default_factory=PodTemplate)
    initial: PodTemplate = field(default_factory=PodTemplate)
    unfit: PodTemplate | None = None
    unfit_every: int = 0
    check: Check | None = None

    def fits(self, index: int) -> bool:
        """Whether measured pod `index` can be placed at all."""
        return self.unfit is None or self.unfit_every <= 0 or index % self.unfit_every != self.unfit_every - 1

    def measured_template(self, index: int) -> PodTemplate:
        if not self.fits(index) and self.unfit is not None:
            return self.unfit
        return self.measured

    def violations(self, placement: Placement) -> list[str]:
        problems = capacity_violations(placement)
        if self.check is not None:
            problems += self.check(placement)
        return problems


# ------------------------------------------------------------------------------ the workloads

SPREAD_LABELS = {"color": "blue"}
ANTI_AFFINITY_GROUPS = 10
NODE_POOL = "bench.example.com/pool"


def _zone(index: int) -> Mapping[str, str]:
    return {ZONE: f"zone-{index % 3}"}


def _spread_constraint(_index: int) -> Mapping[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": SPREAD_LABELS},
            }
        ]
    }


def _spread_labels(_index: int) -> Mapping[str, str]:
    return SPREAD_LABELS


def _spread_violations(placement: Placement) -> list[str]:
    """Final skew of the spread pods over the zones above maxSkew 1."""
    per_zone: Counter[str] = Counter({placement.nodes[name][ZONE]: 0 for name in placement.nodes})
    for template, index, node in placement.pods:
        if template.labels(index) == SPREAD_LABELS:
            per_zone[placement.nodes[node][ZONE]] += 1
    skew = max(per_zone.values()) - min(per_zone.values()) if per_zone else 0
    return [f"zone skew {skew} > 1: {dict(sorted(per_zone.items()))}"] if skew > 1 else []


def _group(index: int) -> Mapping[str, str]:
    return {"group": f"g{index % ANTI_AFFINITY_GROUPS}"}


def _anti_affinity(index: int) -> Mapping[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(_group(index))}, "topologyKey": HOSTNAME}
                ]
            }
        }
    }


def _anti_affinity_violations(placement: Placement) -> list[str]:
    """Two pods of one group on one node."""
    together: Counter[tuple[str, str]] = Counter()
    for template, index, node in placement.pods:
        group = template.labels(index).get("group")
        if group is not None:
            together[group, node] += 1
    return [f"{count} pods of {group} on {node}" for (group, node), count in sorted(together.items()) if count > 1]


def _pool(index: int) -> Mapping[str, str]:
    return {NODE_POOL: "a" if index % 2 == 0 else "b"}


def _require_pool_a(_index: int) -> Mapping[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": NODE_POOL, "operator": "In", "values": ["a"]}]}]
                }
            }
        }
    }


def _node_affinity_violations(placement: Placement) -> list[str]:
    """Measured pods (the ones requiring pool a) on a node of another pool."""
    return [
        f"measured pod {index} on {node} (pool {placement.nodes[node].get(NODE_POOL)})"
        for template, index, node in placement.pods
        if template.spec(index) and placement.nodes[node].get(NODE_POOL) != "a"
    ]


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "SchedulingBasic",
        default=Size(nodes=500, initial_pods=500, measured_pods=2000),
        full=Size(nodes=5000, initial_pods=1000, measured_pods=2000),
        description="default nodes and pods, no constraints",
    ),
    Workload(
        "TopologySpreading",
        default=Size(nodes=500, initial_pods=500, measured_pods=1000),
        full=Size(nodes=5000, initial_pods=1000, measured_pods=2000),
        description="zone spread (maxSkew 1, DoNotSchedule) over 3 zones",
        node=NodeTemplate(labels=_zone),
        measured=PodTemplate(labels=_spread_labels, spec=_spread_constraint),
        check=_spread_violations,
    ),
    Workload(
        "PodAntiAffinity",
        default=Size(nodes=200, initial_pods=200, measured_pods=500),
        full=Size(nodes=5000, initial_pods=1000, measured_pods=1000),
        description=f"required anti-affinity on hostname within {ANTI_AFFINITY_GROUPS} groups",
        measured=PodTemplate(labels=_group, spec=_anti_affinity),
        initial=PodTemplate(labels=_group, spec=_anti_affinity),
        check=_anti_affinity_violations,
    ),
    Workload(
        "NodeAffinity",
        default=Size(nodes=500, measured_pods=1000),
        full=Size(nodes=5000, measured_pods=2000),
        description="required nodeAffinity on a pool label half the nodes carry",
        node=NodeTemplate(labels=_pool),
        measured=PodTemplate(spec=_require_pool_a),
        check=_node_affinity_violations,
    ),
    Workload(
        "Unschedulable",
        default=Size(nodes=500, measured_pods=1000),
        full=Size(nodes=5000, measured_pods=2000),
        description="every 5th pod asks for 1000 CPUs and never fits",
        unfit=PodTemplate(cpu="1000"),
        unfit_every=5,
    ),
)
