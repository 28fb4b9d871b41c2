"""Property test: PodTopologySpread's kept counts give the verdicts and scores of a plain recount.

Random clusters fed through the informers into a real Scheduler (so the node table and the
counts kept across cycles are in play), changed between pods (pods bound and deleted, nodes
relabelled or losing their zone), pods selected by several Services and owned by a ReplicaSet,
and only a subset of the nodes scored (as with percentageOfNodesToScore below 100). Checked:
- System defaults: raw and normalised scores equal a direct count over the snapshot done here,
  the way kube-scheduler's PreScore/Score/NormalizeScore count;
- List defaults (the system ones, optionally with a DoNotSchedule one): a pod without
  constraints and the same pod with the equivalent explicit constraints get the same Filter
  verdicts and scores, and share the kept counts;
- in both, the array forms (score_batch over the scored nodes' table rows, normalize_batch) give
  the per-node forms' raw and normalised scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.podtopologyspread import PodTopologySpread
from plugins.podtopologyspread.defaults import default_selector
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import SchedulerConfig, default_config, parse_config
from scheduler.framework.types import Code, CycleState, NodeInfo, NodeScore
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.model.selectors import EQUALS, IN, LabelSelector, required_node_affinity
from scheduler.schedule_one import Scheduler

NAME = "secondary-scheduler"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SOFT, HARD = "ScheduleAnyway", "DoNotSchedule"
SYSTEM = ((HOSTNAME, 3), (ZONE, 5))
LABELS = {"app": ["web", "db"], "tier": ["fe", "be"], "track": ["stable"]}
NAMESPACES = ["default", "other"]

label_sets = st.dictionaries(st.sampled_from(sorted(LABELS)), st.sampled_from(["web", "db", "fe", "be", "stable"]))


def _labels(draw: Any) -> dict[str, str]:
    return {k: draw(st.sampled_from(v)) for k, v in LABELS.items() if draw(st.booleans())}


@st.composite
def node_labels(draw: Any, i: int) -> dict[str, str]:
    labels = {} if draw(st.integers(0, 9)) == 0 else {HOSTNAME: f"n{i}"}
    zone = draw(st.sampled_from(["a", "b", "c", None]))
    if zone is not None:
        labels[ZONE] = zone
    return labels


def node_raw(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": dict(labels)},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


@st.composite
def bound_pod(draw: Any, name: str, nodes: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "namespace": draw(st.sampled_from(NAMESPACES)),
        "labels": _labels(draw),
    }
    if draw(st.integers(0, 7)) == 0:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": f"n{draw(st.integers(0, nodes - 1))}", "schedulerName": NAME, "containers": [{}]},
        "status": {"phase": "Running"},
    }


@st.composite
def workloads(draw: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """Services (some selecting the same pods, one maybe without a selector) and one ReplicaSet."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for i in range(draw(st.integers(0, 3))):
        spec = {} if draw(st.integers(0, 5)) == 0 else {"selector": draw(label_sets)}
        namespace = draw(st.sampled_from(NAMESPACES))
        out.append(("v1", "Service", {"metadata": {"name": f"s{i}", "namespace": namespace}, "spec": spec}))
    selector: dict[str, Any] = {"matchLabels": draw(label_sets)}
    if draw(st.booleans()):
        selector["matchExpressions"] = [{"key": "track", "operator": draw(st.sampled_from(["Exists", "DoesNotExist"]))}]
    out.append(
        ("apps/v1", "ReplicaSet", {"metadata": {"name": "rs", "namespace": "default"}, "spec": {"selector": selector}})
    )
    return out


@st.composite
def incoming(draw: Any, i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"in{i}", "uid": f"uid-in{i}", "namespace": "default", "labels": _labels(draw)}
    if draw(st.booleans()):
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
        ]
    spec: dict[str, Any] = {"schedulerName": NAME, "containers": [{}]}
    if draw(st.integers(0, 4)) == 0:
        spec["nodeSelector"] = {ZONE: draw(st.sampled_from(["a", "b"]))}
    return {"metadata": meta, "spec": spec}


@st.composite
def change(draw: Any, step: int, nodes: int) -> tuple[str, Any]:
    """Between pods: a pod bound or deleted, or a node's zone moved or removed."""
    kind = draw(st.sampled_from(["bind", "bind", "delete", "relabel"]))
    if kind == "bind":
        return kind, draw(bound_pod(f"b{step}", nodes))
    if kind == "delete":
        return kind, draw(st.integers(0, 10**6))
    return kind, (draw(st.integers(0, nodes - 1)), draw(st.sampled_from(["a", "b", "c", None])))


@st.composite
def scenario(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 8))
    steps = draw(st.integers(1, 4))
    return {
        "nodes": [draw(node_labels(i)) for i in range(n)],
        "existing": [draw(bound_pod(f"e{i}", n)) for i in range(draw(st.integers(0, 14)))],
        "workloads": draw(workloads()),
        "steps": [
            (
                [draw(change(s * 10 + k, n)) for k in range(draw(st.integers(0, 3)))],
                draw(incoming(s)),
                draw(st.lists(st.booleans(), min_size=n, max_size=n)),  # which nodes "passed Filter"
            )
            for s in range(steps)
        ],
        "hard_default": draw(st.booleans()),
    }


def list_config(hard: bool) -> SchedulerConfig:
    constraints = [{"topologyKey": k, "maxSkew": skew, "whenUnsatisfiable": SOFT} for k, skew in SYSTEM]
    if hard:
        constraints.append({"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": HARD})
    args = {"defaultingType": "List", "defaultConstraints": constraints}
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": NAME, "pluginConfig": [{"name": "PodTopologySpread", "args": args}]}],
        }
    )


class Cluster:
    """A Scheduler fed by its informers, with the cluster's raw objects kept to change them."""

    def __init__(self, config: SchedulerConfig, data: Mapping[str, Any]) -> None:
        self.sched: Scheduler = build_scheduler(config, full_registry(), FakeApiClient(), {"default": {}})
        self.informers = Informers(self.sched)
        self.nodes = [node_raw(f"n{i}", labels) for i, labels in enumerate(data["nodes"])]
        self.pods: list[dict[str, Any]] = []
        for raw in self.nodes:
            self.informers.on_node("ADDED", raw)
        for api_version, kind, raw in data["workloads"]:
            self.informers.on_workload(api_version, kind, "ADDED", raw)
        for raw in data["existing"]:
            self.bind(raw)
        self.sched.cache.update_snapshot(self.sched.snapshot)
        fw = self.sched.frameworks[NAME]
        self.plugin = next(p for p in fw.score_plugins if isinstance(p, PodTopologySpread))

    def bind(self, raw: dict[str, Any]) -> None:
        self.pods.append(raw)
        self.informers.on_pod("ADDED", raw)

    def apply(self, kind: str, what: Any) -> None:
        if kind == "bind":
            self.bind(what)
        elif kind == "delete" and self.pods:
            self.informers.on_pod("DELETED", self.pods.pop(what % len(self.pods)))
        elif kind == "relabel":
            index, zone = what
            old = self.nodes[index]
            labels = {k: v for k, v in old["metadata"]["labels"].items() if k != ZONE}
            if zone is not None:
                labels[ZONE] = zone
            self.nodes[index] = node_raw(old["metadata"]["name"], labels)
            self.informers.on_node("MODIFIED", self.nodes[index])
        self.sched.cache.update_snapshot(self.sched.snapshot)

    def scores(self, pod: Pod, filtered: Sequence[NodeInfo]) -> tuple[list[int], list[int]] | None:
        """Raw and normalised scores of the filtered nodes, or None when PreScore skips."""
        state = CycleState()
        status = self.plugin.pre_score(state, pod, filtered)
        if status is not None:
            assert status.code == Code.SKIP, status
            return None
        raw = []
        for info in filtered:
            value, status = self.plugin.score(state, pod, info)
            assert status is None, status
            raw.append(value)
        normalized = [NodeScore(info.name, v) for info, v in zip(filtered, raw, strict=True)]
        assert self.plugin.normalize_score(state, pod, normalized) is None
        expected = [s.score for s in normalized]
        # The array forms over the scored nodes' rows of the node table.
        table = self.sched.snapshot.table
        position = {info.name: row for row, info in enumerate(table.infos)}
        rows = np.array([position[info.name] for info in filtered], np.int64)
        batch = self.plugin.score_batch(state, pod, table, rows)
        assert batch is not None
        assert batch.tolist() == raw
        batch_normalized = self.plugin.normalize_batch(state, pod, batch)
        assert batch_normalized is not None
        assert batch_normalized.tolist() == expected
        # Scores the per-node form produced: normalised by the array form unless nodes are ignored.
        from_nodes = self.plugin.normalize_batch(state, pod, np.array(raw, np.int64))
        assert from_nodes is None or from_nodes.tolist() == expected
        return raw, expected

    def verdicts(self, pod: Pod) -> list[str] | None:
        state = CycleState()
        infos = self.sched.snapshot.list()
        _, status = self.plugin.pre_filter(state, pod, infos)
        if status is not None:
            assert status.code == Code.SKIP, status
            return None
        out = []
        for info in infos:
            verdict = self.plugin.filter(state, pod, info)
            out.append("" if verdict is None else f"{verdict.code}:{verdict.reasons}")
        return out


def _count(info: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    if selector.empty:
        return 0
    return sum(
        1 for p in info.pods.values() if p.namespace == namespace and not p.deleting and selector.matches(p.labels)
    )


def reference_scores(
    pod: Pod, selector: LabelSelector, all_nodes: Sequence[NodeInfo], filtered: Sequence[NodeInfo]
) -> tuple[list[int], list[int]]:
    """kube's scoring with System defaults, recounted from the pods: a node lacking the zone label
    is still scored (by hostname); only nodes matching the pod's node affinity are counted."""
    affinity = required_node_affinity(pod)
    pairs: dict[tuple[str, str], int] = {}
    for info in filtered:
        assert info.node is not None
        pairs.setdefault((ZONE, info.node.labels.get(ZONE, "")), 0)
    for info in all_nodes:
        node = info.node
        assert node is not None
        pair = (ZONE, node.labels.get(ZONE, ""))
        if affinity.matches(node) and pair in pairs:
            pairs[pair] += _count(info, selector, pod.namespace)
    weights = {HOSTNAME: math.log(len(filtered) + 2), ZONE: math.log(len(pairs) + 2)}
    raw = []
    for info in filtered:
        node = info.node
        assert node is not None
        total = 0.0
        for key, skew in SYSTEM:
            if key not in node.labels:
                continue
            count = _count(info, selector, pod.namespace) if key == HOSTNAME else pairs[(key, node.labels[key])]
            total += count * weights[key] + skew - 1
        raw.append(math.floor(total + 0.5))  # scores are >= 0: Go's math.Round
    highest, lowest = max(raw, default=0), min(raw, default=0)
    normalized = [100 if highest == 0 else 100 * (highest + lowest - s) // highest for s in raw]
    return raw, normalized


def explicit(raw: Mapping[str, Any], selector: LabelSelector, hard: bool) -> Pod:
    """The pod with the List defaults written out as its own constraints, selecting what they select."""
    expressions = [
        {
            "key": r.key,
            "operator": IN if r.operator == EQUALS else r.operator,
            **({"values": sorted(r.values)} if r.values else {}),
        }
        for r in selector.requirements
    ]
    label_selector = {"matchExpressions": expressions}
    own = [
        {"topologyKey": k, "maxSkew": skew, "whenUnsatisfiable": SOFT, "labelSelector": label_selector}
        for k, skew in SYSTEM
    ]
    if hard:
        own.append({"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": HARD, "labelSelector": label_selector})
    return Pod.from_raw({**raw, "spec": {**raw["spec"], "topologySpreadConstraints": own}})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_kept_counts_agree_with_a_recount_and_with_explicit_constraints(data: dict[str, Any]) -> None:
    system = Cluster(default_config(NAME), data)
    listed = Cluster(list_config(data["hard_default"]), data)
    for changes, raw_pod, passed in data["steps"]:
        for kind, what in changes:
            system.apply(kind, what)
            listed.apply(kind, what)
        pod = Pod.from_raw(raw_pod)
        all_nodes = system.sched.snapshot.list()
        filtered = [info for info, ok in zip(all_nodes, passed, strict=True) if ok]
        selector = default_selector(pod, system.informers.workloads)
        got = system.scores(pod, filtered)
        if selector.empty:
            assert got is None
        else:
            assert got == reference_scores(pod, selector, all_nodes, filtered)

        if selector.empty:
            continue
        own = explicit(raw_pod, selector, data["hard_default"])
        listed_filtered = [i for i, ok in zip(listed.sched.snapshot.list(), passed, strict=True) if ok]
        # The explicit constraints read what the defaults read: one kept entry serves both.
        kept = len(listed.plugin._filtering._counts._entries)
        assert listed.verdicts(pod) == listed.verdicts(own)
        assert len(listed.plugin._filtering._counts._entries) <= kept + 1
        kept = len(listed.plugin._scoring._counts._entries)
        assert listed.scores(pod, listed_filtered) == listed.scores(own, listed_filtered)
        assert len(listed.plugin._scoring._counts._entries) <= kept + 1
