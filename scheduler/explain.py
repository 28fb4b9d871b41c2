"""`secondary-scheduler explain POD`: why is this pod pending (or where would it go)?

Reads the cluster once (nodes, pods, namespaces, workloads, PodDisruptionBudgets), rebuilds the scheduler's view
in-process and runs one dry scheduling cycle for the pod against *every* node with the
per-node plugin forms: the verdict and reason per node, the plugin that rejected it, the
scores of the nodes that fit, and kube-scheduler's FailedScheduling message, with what
preemption would do. Writes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.fake import FakeApiClient
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.app import (
    VOLUME_KINDS,
    WORKLOAD_KINDS,
    Options,
    build_scheduler,
    collection_path,
    full_registry,
    load_scheduler_config,
)
from scheduler.framework.types import CycleState, Diagnosis, FitError, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod


@dataclass
class NodeVerdict:
    node: str
    status: Status | None
    scores: dict[str, int] = field(default_factory=dict)
    total: int = 0


@dataclass
class Explanation:
    pod: str
    profile: str
    bound_to: str
    pre_filter: Status | None
    verdicts: list[NodeVerdict]
    message: str

    @property
    def feasible(self) -> list[NodeVerdict]:
        return [v for v in self.verdicts if v.status is None]

    def render(self) -> str:
        lines = [f"pod {self.pod} (profile {self.profile})"]
        if self.bound_to:
            lines.append(f"already bound to {self.bound_to}")
        if self.pre_filter is not None:
            lines.append(f"rejected before filtering by {self.pre_filter.plugin}: {self.pre_filter.message}")
        rejected = [v for v in self.verdicts if v.status is not None]
        if rejected:
            by_plugin = Counter(v.status.plugin for v in rejected if v.status is not None)
            lines.append("rejected by: " + ", ".join(f"{p} ({n} nodes)" for p, n in by_plugin.most_common()))
        width = max((len(v.node) for v in self.verdicts), default=4)
        lines.append("")
        lines.append(f"{'node':<{width}}  verdict")
        for verdict in sorted(self.verdicts, key=lambda v: (v.status is not None, -v.total, v.node)):
            if verdict.status is None:
                detail = ", ".join(f"{name}={score}" for name, score in verdict.scores.items())
                lines.append(f"{verdict.node:<{width}}  fits, score {verdict.total}  ({detail})")
            else:
                lines.append(f"{verdict.node:<{width}}  {verdict.status.plugin}: {verdict.status.message}")
        lines.append("")
        lines.append(self.message)
        return "\n".join(lines)


def _discard(coro: Coroutine[Any, Any, None]) -> None:
    coro.close()


def explain_pod(options: Options, raw_pod: dict[str, Any], cluster: dict[str, Any]) -> Explanation:
    """The dry run itself, over already-fetched objects (usable without a cluster)."""
    config = load_scheduler_config(options)
    sched = build_scheduler(config, full_registry(), FakeApiClient(), {})
    informers = Informers(sched)
    for ns in cluster.get("namespaces", ()):
        informers.on_namespace("ADDED", ns)
    for (group, version, _, kind), items in zip(WORKLOAD_KINDS, cluster.get("workloads_by_kind", ()), strict=False):
        for item in items:
            informers.on_workload(f"{group}/{version}" if group else version, kind, "ADDED", item)
    for (_, _, _, kind), items in zip(VOLUME_KINDS, cluster.get("volumes_by_kind", ()), strict=False):
        for item in items:
            informers.on_volume_object(kind, "ADDED", item)
    for node in cluster.get("nodes", ()):
        informers.on_node("ADDED", node)
    for budget in cluster.get("pdbs", ()):
        informers.on_pdb("ADDED", budget)
    uid = (raw_pod.get("metadata") or {}).get("uid")
    for other in cluster.get("pods", ()):
        if (other.get("spec") or {}).get("nodeName") and (other.get("metadata") or {}).get("uid") != uid:
            informers.on_pod("ADDED", other)
    pod = Pod.from_raw(raw_pod)
    profile = pod.scheduler_name if pod.scheduler_name in sched.frameworks else next(iter(sched.frameworks))
    fw = sched.frameworks[profile]
    sched.cache.update_snapshot(sched.snapshot)
    nodes = sched.snapshot.list()
    state = CycleState()
    _, pre_status, _ = fw.run_pre_filter(state, pod, nodes)
    verdicts = [NodeVerdict(n.name, pre_status) for n in nodes]
    if pre_status is None:
        verdicts = [NodeVerdict(n.name, fw.run_filter_with_nominated(state, pod, n)) for n in nodes]
    feasible = [n for n, v in zip(nodes, verdicts, strict=True) if v.status is None]
    if feasible and fw.run_pre_score(state, pod, feasible) is None:
        totals, per_plugin, status = fw.score_nodes(state, pod, feasible)
        if status is None:
            by_name = {v.node: v for v in verdicts}
            for i, info in enumerate(feasible):
                verdict = by_name[info.name]
                verdict.total = int(totals[i])
                verdict.scores = {name: int(scores[i]) for name, scores in per_plugin.items()}
    if feasible:
        best = max(v.total for v in verdicts if v.status is None)
        winners = sorted(v.node for v in verdicts if v.status is None and v.total == best)
        message = f"would be scheduled to {' or '.join(winners)} (score {best})"
    else:
        diagnosis = Diagnosis(
            node_to_status={v.node: v.status for v in verdicts if v.status is not None and pre_status is None},
            pre_filter_msg=pre_status.message if pre_status is not None else "",
            absent_status=pre_status,
        )
        if fw.post_filter_plugins:
            # PostFilter decides as in a real cycle (preemption's dry run), but nothing it would
            # start (evictions, status patches) is ever run.
            fw.handle.wire(dataclasses.replace(fw.handle.wiring, spawn=_discard))
            _, post_status = fw.run_post_filter(state, pod, diagnosis.node_statuses())
            if post_status is not None:
                diagnosis.post_filter_msg = post_status.message
        message = "FailedScheduling: " + str(FitError(pod, len(nodes), diagnosis))
    return Explanation(pod.key, profile, pod.node_name, pre_status, verdicts, message)


async def fetch_cluster(kubeconfig: str | None, namespace: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    client = HttpApiClient(load_connection(kubeconfig))
    try:
        raw_pod = await client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        cluster: dict[str, Any] = {
            "nodes": (await client.request("GET", "/api/v1/nodes"))["items"],
            "pods": (await client.request("GET", f"/api/v1/pods?fieldSelector={selector}"))["items"],
            "namespaces": (await client.request("GET", "/api/v1/namespaces"))["items"],
            "pdbs": (await client.request("GET", "/apis/policy/v1/poddisruptionbudgets"))["items"],
            "workloads_by_kind": [],
            "volumes_by_kind": [],
        }
        for group, version, plural, _ in WORKLOAD_KINDS:
            path = collection_path(group, version, plural)
            cluster["workloads_by_kind"].append((await client.request("GET", path))["items"])
        for group, version, plural, _ in VOLUME_KINDS:
            path = collection_path(group, version, plural)
            cluster["volumes_by_kind"].append((await client.request("GET", path))["items"])
        return raw_pod, cluster
    finally:
        await client.close()


def run(options: Options, namespace: str, name: str) -> str:
    raw_pod, cluster = asyncio.run(fetch_cluster(options.kubeconfig, namespace, name))
    return explain_pod(options, raw_pod, cluster).render()
