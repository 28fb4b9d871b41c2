"""`secondary-scheduler explain POD`: why is this pod pending (or where would it go)?

Reads the cluster once (nodes, pods, namespaces, workloads, PodDisruptionBudgets, PodGroups of both
APIs), rebuilds the scheduler's view in-process and runs one dry scheduling cycle for the pod against
*every* node with the per-node plugin forms: the verdict and reason per node, the plugin that
rejected it, the scores of the nodes that fit, and kube-scheduler's FailedScheduling message, with
what preemption would do.

For a member of a pod group (upstream's `spec.schedulingGroup` PodGroup with GenericWorkload, or
scheduler-plugins' `scheduling.x-k8s.io/pod-group` label with Coscheduling) it also dry-runs the
group as the scheduler would: its minCount/minMember, how many members exist, are bound and would be
assumed, and each member that blocks the group with its own reason (filter verdicts, scheduling
gates, missing members, quorum not reached). A dry run sees only the API: members a running
scheduler holds at Permit count as unbound here. Writes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from plugins.coscheduling.core import PodGroup as CoschedulingPodGroup
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.app import (
    POD_GROUP_COLLECTION,
    SCHEDULER_PLUGINS_POD_GROUPS,
    VOLUME_KINDS,
    WORKLOAD_KINDS,
    Options,
    build_scheduler,
    collection_path,
    full_registry,
    load_scheduler_config,
)
from scheduler.framework.podgroups import POD_GROUP_API, GroupKey, PodGroupState
from scheduler.framework.runtime import Framework
from scheduler.framework.types import CycleState, Diagnosis, FitError, QueuedPodInfo, Status, pod_group_member_order
from scheduler.informers import Informers
from scheduler.model.objects import InvalidObject, Pod
from scheduler.model.podgroups import PodGroup
from scheduler.schedule_one import Scheduler


@dataclass
class NodeVerdict:
    node: str
    status: Status | None
    scores: dict[str, int] = field(default_factory=dict)
    total: int = 0


@dataclass
class MemberVerdict:
    """One member of the pod's group: where the dry run put it, or why it holds the group back."""

    pod: str
    node: str = ""
    blocks: str = ""


@dataclass
class GroupExplanation:
    key: GroupKey
    # "minCount 3" (upstream), "minMember 3" (scheduler-plugins), or why there is no usable minimum.
    minimum: str
    exist: int = 0
    bound: int = 0
    assumed: int = 0
    gated: int = 0
    members: list[MemberVerdict] = field(default_factory=list)
    verdict: str = ""
    # The dry run places the group (at least its minimum) in one go.
    whole: bool = False

    @property
    def held_back(self) -> list[MemberVerdict]:
        return [m for m in self.members if m.blocks]

    def render(self) -> list[str]:
        api, _, kind = self.key.api.rpartition("/")
        lines = [
            f"group {self.key} ({api} {kind}): {self.minimum}",
            f"members: {self.exist} exist, {self.bound} bound, {self.assumed} would be assumed, {self.gated} gated",
        ]
        if self.held_back:
            lines.append("members not placed:")
            lines.extend(f"  {m.pod}: {m.blocks}" for m in self.held_back)
        lines.append(f"group verdict: {self.verdict}")
        return lines


@dataclass
class Explanation:
    pod: str
    profile: str
    bound_to: str
    pre_filter: Status | None
    verdicts: list[NodeVerdict]
    message: str
    group: GroupExplanation | None = None

    @property
    def feasible(self) -> list[NodeVerdict]:
        return [v for v in self.verdicts if v.status is None]

    def render(self) -> str:
        lines = [f"pod {self.pod} (profile {self.profile})"]
        if self.bound_to:
            lines.append(f"already bound to {self.bound_to}")
        if self.group is not None:
            lines.extend(self.group.render())
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
        if self.group is not None and not self.group.whole and self.feasible:
            lines.append(f"alone it {self.message}; it waits for its group (group verdict above)")
        else:
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
    for raw_group in cluster.get("pod_groups", ()):
        informers.on_pod_group("ADDED", raw_group)
    for raw_group in cluster.get("scheduler_plugins_pod_groups", ()):
        informers.on_scheduler_plugins_pod_group("ADDED", raw_group)
    uid = (raw_pod.get("metadata") or {}).get("uid")
    for other in cluster.get("pods", ()):
        if (other.get("spec") or {}).get("nodeName") and (other.get("metadata") or {}).get("uid") != uid:
            informers.on_pod("ADDED", other)
    pod = Pod.from_raw(raw_pod)
    _count_unscheduled_members(sched, pod, cluster.get("pods", ()))
    profile = pod.scheduler_name if pod.scheduler_name in sched.frameworks else next(iter(sched.frameworks))
    fw = sched.frameworks[profile]
    # PostFilter and PodGroupPostFilter decide as in a real cycle (preemption's dry run), but nothing
    # they would start (evictions, status patches) is ever run.
    fw.handle.wire(dataclasses.replace(fw.handle.wiring, spawn=_discard))
    # The group first: its dry run reverts every assume it makes, and the pod's own cycle below must not
    # leave plugin memories (Coscheduling's failed-group backoff) for the group's run.
    group_explanation = None if pod.node_name else explain_group(sched, fw, pod)
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
            _, post_status = fw.run_post_filter(state, pod, diagnosis.node_statuses())
            if post_status is not None:
                diagnosis.post_filter_msg = post_status.message
        message = "FailedScheduling: " + str(FitError(pod, len(nodes), diagnosis))
    return Explanation(pod.key, profile, pod.node_name, pre_status, verdicts, message, group_explanation)


def _count_unscheduled_members(sched: Scheduler, pod: Pod, raw_pods: Any) -> None:
    """Unbound group members join their group's state (bound ones came in through the cache), so the
    counts are the scheduler's; they stay out of the queue and the nominator (a dry run keeps none)."""
    groups = sched.cache.pod_groups
    members = [pod]
    for raw in raw_pods:
        if (raw.get("spec") or {}).get("nodeName") or (raw.get("metadata") or {}).get("deletionTimestamp"):
            continue
        try:
            members.append(Pod.from_raw(raw))
        except InvalidObject:
            continue  # the scheduler reports it; it is no member anyone can count
    for member in members:
        if member.scheduler_name in sched.frameworks and groups.key_of(member) is not None:
            groups.add_pod(member)


def _minimum(state: PodGroupState | None) -> tuple[int | None, str]:
    """The members the group needs together, and how to say it; None when the group cannot be used."""
    group = state.group if state is not None else None
    if state is None or group is None:
        return None, "not found"
    if isinstance(group, PodGroup):
        if group.min_count is None:
            return 1, "basic policy (no minCount)"
        return group.min_count, f"minCount {group.min_count}"
    if not isinstance(group, Mapping):
        return None, f"unknown group object {type(group).__name__}"
    try:
        parsed = CoschedulingPodGroup.from_raw(state.key, group)
    except InvalidObject as exc:
        return None, f"invalid: {exc}"
    return parsed.min_member, f"minMember {parsed.min_member}"


def uid_key(state: PodGroupState, uid: str) -> str:
    """A member's namespace/name from its UID (nominations are keyed by UID)."""
    member = state.pods.get(uid)
    return member.key if member is not None else uid


def explain_group(sched: Scheduler, fw: Framework, pod: Pod) -> GroupExplanation | None:
    """The pod's group dry-run as the scheduler runs it: upstream's PodGroups through the pod-group
    cycle (PreEnqueue, then the members together), scheduler-plugins' through each member's own
    cycle with the earlier ones assumed (Coscheduling's Permit then counts the quorum)."""
    groups = sched.cache.pod_groups
    key = groups.key_of(pod)
    if key is None:
        return None
    state = groups.get(key)
    needed, minimum = _minimum(state)
    result = GroupExplanation(key, minimum)
    if state is not None:
        result.exist, result.bound = state.all_pods_count(), len(state.assigned)
    if state is None or needed is None:
        what = f'podgroup "{key.name}"'
        result.verdict = f"{what} {minimum}: no member is scheduled until it exists and is valid"
        return result
    upstream = key.api == POD_GROUP_API
    candidates: list[QueuedPodInfo] = []
    quorum_wait = ""
    for member in state.unscheduled_pods():
        gate = fw.run_pre_enqueue(member)
        if gate is None:
            candidates.append(QueuedPodInfo(member, timestamp=0.0))
        elif member.scheduling_gates:
            result.gated += 1
            result.members.append(MemberVerdict(member.key, blocks=f"gated: {gate.plugin}: {gate.message}"))
        else:
            quorum_wait = f"{gate.plugin}: {gate.message}"
    if result.exist < needed:
        missing = needed - result.exist
        result.members.append(
            MemberVerdict(f"({missing} missing)", blocks=f"{minimum} needs {needed} members, {result.exist} exist")
        )
    if upstream and quorum_wait:
        # PreEnqueue keeps every member out of the queue: the group is never tried.
        result.verdict = f"waits before the queue: {quorum_wait}"
        return result
    # No member order history in a dry run: priority, then name (kube's order without attempts).
    candidates.sort(key=pod_group_member_order)
    if not candidates:
        result.whole = result.bound >= needed
        result.verdict = "no member left to schedule" if result.whole else f"{minimum} not reached"
        return result
    results, status, nominations = sched.pod_group_cycle.simulate(fw, state, candidates)
    tried = {r.info.pod.uid: r for r in results}
    for info in candidates:
        outcome = tried.get(info.pod.uid)
        if outcome is None:
            result.members.append(MemberVerdict(info.pod.key, blocks="not tried: the group was already infeasible"))
        elif outcome.status is None and outcome.host:
            result.assumed += 1
            result.members.append(MemberVerdict(info.pod.key, node=outcome.host))
        else:
            own = outcome.status.message if outcome.status is not None else "unschedulable"
            result.members.append(MemberVerdict(info.pod.key, blocks=own))
    result.whole = result.bound + result.assumed >= needed and (status is None or not upstream)
    if upstream and nominations is not None:
        nominated = ", ".join(f"{uid_key(state, uid)} on {node}" for uid, node in sorted(nominations.items()))
        result.verdict = f"waits on preemption ({nominated}): {status.message if status else ''}"
    elif upstream:
        result.verdict = status.message if status is not None else "would be scheduled whole"
    elif result.whole:
        result.verdict = f"would be scheduled whole: {minimum} reached, Permit lets the members go together"
    else:
        result.verdict = f"{minimum} not reached: {result.bound} bound + {result.assumed} would be assumed"
        if result.assumed:
            result.verdict += "; the placed members would wait at Permit, then be rejected together"
    return result


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
        cluster["pod_groups"] = await _list_if_served(client, POD_GROUP_COLLECTION)
        groups = collection_path(*SCHEDULER_PLUGINS_POD_GROUPS)
        cluster["scheduler_plugins_pod_groups"] = await _list_if_served(client, groups)
        return raw_pod, cluster
    finally:
        await client.close()


async def _list_if_served(client: HttpApiClient, path: str) -> list[dict[str, Any]]:
    """Either API's PodGroups, or none where the apiserver does not serve them (gate or CRD absent)."""
    try:
        items: list[dict[str, Any]] = (await client.request("GET", path))["items"]
    except ApiError as exc:
        if exc.not_found:
            return []
        raise
    return items


def run(options: Options, namespace: str, name: str) -> str:
    raw_pod, cluster = asyncio.run(fetch_cluster(options.kubeconfig, namespace, name))
    return explain_pod(options, raw_pod, cluster).render()
