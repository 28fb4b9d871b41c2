"""Agreement comparison: what a run observed, kube-scheduler's own scores from its log, the
in-process replay of our framework, and the pod-by-pod and group-by-group comparison of the runs.

Per pod: bound vs unschedulable; the FailedScheduling message (the part PostFilter plugins add, `
preemption: ...`, is cut off and counted apart); whether our node is among kube-scheduler's
top-scored nodes (its `-v=10` "Calculated node's final score for pod" lines); whether each
scheduler's node is one ours could have chosen (our framework replayed with FakeApiClient over the
nodes and pods the pod met in that run); claim by claim, whether it was allocated, which devices
(driver/pool/device/request, admin access, consumed capacity) and whom it is reserved for; and
whether kube-scheduler did what the scenario says it should (`expect:`). A group's members are
compared as pods (without the replay: a member is placed with its group, not over the cluster it
met alone; and without the top-set check when the group has topology constraints: kube-scheduler's
last scoring of a member is of the last placement it tried, not of the one it chose); per group:
the verdict (all bound, partly, unschedulable, pending), which members are bound, the PodGroup's
conditions (the message without its pod-group preemption part; not for a partly bound group, see
compare_group) and, with topology constraints, that our members share one domain.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field, replace
from typing import Any

import numpy as np

from harness.agreement.dra import AllocatedDevice, ClaimOutcome
from harness.agreement.scenarios import (
    DRA_STATE_MISSING,
    KUBE,
    OURS,
    POST_FILTER_REASONS,
    ActionStep,
    Expectation,
    Scenario,
    scheduler_name,
)
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import SchedulerConfig
from scheduler.framework.types import CycleState, FitError
from scheduler.informers import Informers
from scheduler.model.objects import Pod

Raw = dict[str, Any]


# --------------------------------------------------------------------------- observations


@dataclass(frozen=True)
class Outcome:
    # bound | unschedulable | error | gated | pending (never tried) | timeout; a group's members
    # also deleted (by the scenario) | preempted (by the scheduler)
    verdict: str
    node: str = ""
    message: str = ""

    def __str__(self) -> str:
        if self.verdict == "bound":
            return f"bound to {self.node}"
        return f"{self.verdict}: {self.message}" if self.message else self.verdict


@dataclass(frozen=True)
class ClusterState:
    """What a pending pod met: namespaces, workloads (Services, controllers: the selectors of
    default topology spreading), nodes and assigned pods, raw as the apiserver has them."""

    namespaces: tuple[Raw, ...]
    workloads: tuple[tuple[str, str, Raw], ...]  # (apiVersion, kind, object)
    nodes: tuple[Raw, ...]
    pods: tuple[Raw, ...]
    volumes: tuple[tuple[str, Raw], ...] = ()  # (kind, object): the volume plugins' listers
    resources: tuple[tuple[str, Raw], ...] = ()  # (kind, object): resource.k8s.io, DynamicResources' listers


@dataclass(frozen=True)
class Encounter:
    """A pending pod as the apiserver created it and the cluster it met: what the replay needs."""

    pod: Raw
    state: ClusterState

    @property
    def preset(self) -> bool:
        """Created with spec.nodeName: bound without any scheduler."""
        return bool(self.pod["spec"].get("nodeName"))


@dataclass(frozen=True)
class Observation:
    label: str  # the pod's name, or "<name> (after patch node n1)"
    outcome: Outcome
    encounter: Encounter | None = None  # pod steps only: after an action several pods move at once
    kube_scores: KubeScores | None = None  # kube-scheduler's side, bound pods: its own logged scores
    claims: tuple[ClaimOutcome, ...] | None = None  # DRA scenarios: what each of the pod's claims got


Condition = tuple[str, str, str, str]  # a PodGroup status condition: type, status, reason, message


@dataclass(frozen=True)
class GroupObservation:
    """A PodGroup once its step (or an action) settled: its members' outcomes and its conditions."""

    label: str  # the group's name, or "<name> (after patch node n1)"
    members: tuple[str, ...]
    outcomes: tuple[Outcome, ...]  # aligned with members
    min_count: int
    topology: tuple[str, ...]  # schedulingConstraints.topology keys
    conditions: tuple[Condition, ...]  # sorted by type

    @property
    def bound(self) -> tuple[str, ...]:
        return tuple(m for m, o in zip(self.members, self.outcomes, strict=True) if o.verdict == "bound")

    @property
    def verdict(self) -> str:
        bound = len(self.bound)
        present = sum(o.verdict != "deleted" for o in self.outcomes)  # the scenario deleted the others
        if bound == present:
            return "bound"
        if bound:
            return f"partly bound ({bound}/{present})"
        if any(o.verdict in ("unschedulable", "error") for o in self.outcomes):
            return "unschedulable"
        if all(o.verdict == "preempted" for o in self.outcomes):
            return "preempted"
        return "pending"

    def nodes(self) -> dict[str, str]:
        return {m: o.node for m, o in zip(self.members, self.outcomes, strict=True) if o.verdict == "bound"}

    def __str__(self) -> str:
        nodes = ", ".join(f"{m}@{n}" for m, n in self.nodes().items())
        conditions = "; ".join(f"{t}={st} {r}: {msg}" for t, st, r, msg in self.conditions) or "no conditions"
        return f"{self.verdict}{f' [{nodes}]' if nodes else ''}; {conditions}"


QUEUE_RACE_ATTEMPTS = 8  # runs of a scenario on kube-scheduler's side while its queue races (run.play_again)


@dataclass
class SideRun:
    observations: list[Observation] = field(default_factory=list)
    groups: list[GroupObservation] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    # Why kube-scheduler's run of this scenario was played again: its own queue raced (see
    # run.py's queue_race); the run compared is the last one.
    reruns: list[str] = field(default_factory=list)
    raced: str = ""  # this run's own queue race, when it had one (the last run is compared even so)


@dataclass(frozen=True)
class KubeScores:
    """kube-scheduler's own account of one pod's last scoring: the final score of every feasible
    node (empty when it did not score: one feasible node, or a batching hint), per-plugin scores,
    and whether OpportunisticBatching handed it a node hint."""

    final: Mapping[str, int]
    plugins: Mapping[str, Mapping[str, int]]  # node -> plugin -> score
    hinted: bool

    def top(self, bound_to: str) -> tuple[str, ...]:
        if not self.final:
            return (bound_to,)
        best = max(self.final.values())
        return tuple(sorted(node for node, score in self.final.items() if score == best))


# A member of a pod group is logged with its group first (podGroupType="podgroup" podGroup="ns/g").
_GROUP_KEYS = r'(?: \w+="[^"]*")*?'
_FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod"' + _GROUP_KEYS + r' pod="([^"]+)" node="([^"]+)" score=(-?\d+)'
)
_PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod"' + _GROUP_KEYS + r' pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)'
)
_HINT = re.compile(r'"OpportunisticBatch provided node hint" .*?pod="([^"]+)"')


def parse_kube_scores(log: str, pod: str) -> KubeScores:
    """The last scoring of `pod` ("namespace/name") in a slice of kube-scheduler's text log.

    kube-scheduler logs every node's final score of one attempt in a row; a node seen again
    starts the next attempt, so what remains is the attempt that bound the pod."""
    final: dict[str, int] = {}
    plugins: dict[str, dict[str, int]] = {}
    hinted = False
    for line in log.splitlines():
        if (match := _FINAL_SCORE.search(line)) is not None and match.group(1) == pod:
            node, score = match.group(2), int(match.group(3))
            if node in final:
                final = {}
            final[node] = score
            hinted = False
        elif (match := _PLUGIN_SCORE.search(line)) is not None and match.group(1) == pod:
            plugin, node, score = match.group(2), match.group(3), int(match.group(4))
            if plugin in plugins.get(node, {}):
                plugins, final = {}, {}
            plugins.setdefault(node, {})[plugin] = score
        elif (match := _HINT.search(line)) is not None and match.group(1) == pod:
            final, plugins, hinted = {}, {}, True
    return KubeScores(final, plugins, hinted)


# --------------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class Replay:
    """Our framework's view of one pod over one cluster state."""

    feasible: tuple[str, ...]
    top: tuple[str, ...]  # every node with the highest total score (the feasible one if only one)
    scores: Mapping[str, int]
    message: str  # the FailedScheduling message when nothing is feasible
    plugins: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # node -> plugin -> weighted score


def replay(config: SchedulerConfig, state: ClusterState, pod_raw: Mapping[str, Any], profile: str) -> Replay:
    """Filter and score `pod_raw` (as profile `profile` of our side) over `state`, in-process."""
    namespaces: dict[str, Mapping[str, str]] = {}
    sched = build_scheduler(config, full_registry(), FakeApiClient(), namespaces)
    informers = Informers(sched, namespaces)
    for namespace in state.namespaces:
        informers.on_namespace("ADDED", namespace)
    for api_version, kind, workload in state.workloads:
        informers.on_workload(api_version, kind, "ADDED", workload)
    for kind, volume in state.volumes:
        informers.on_volume_object(kind, "ADDED", volume)
    for kind, resource in state.resources:
        informers.on_dra_object(kind, "ADDED", resource)
    for node in state.nodes:
        informers.on_node("ADDED", node)
    for assigned in state.pods:
        informers.on_pod("ADDED", assigned)
    raw = copy.deepcopy(dict(pod_raw))
    raw["spec"]["schedulerName"] = scheduler_name(OURS, profile)
    pod = Pod.from_raw(raw)
    fw = sched.frameworks[pod.scheduler_name]
    sched.cache.update_snapshot(sched.snapshot)
    cycle = CycleState()
    feasible, diagnosis = sched.find_nodes_that_fit(fw, cycle, pod)
    if not feasible:
        return Replay((), (), {}, str(FitError(pod, len(sched.snapshot), diagnosis)))
    names = tuple(info.name for info in feasible)
    if len(feasible) == 1:
        return Replay(names, names, {}, "")
    totals = sched.prioritize_nodes(fw, cycle, pod, feasible)  # aligned with `feasible`
    scores = {info.name: int(total) for info, total in zip(feasible, totals, strict=True)}
    # Each plugin's weighted share too, as kube-scheduler logs it ("Plugin scored node for pod"):
    # the PreScore state is in `cycle` already.
    rows = np.fromiter((sched.snapshot.position[n] for n in names), np.int64, len(names))
    _, per_plugin, _ = fw.score_nodes(cycle, pod, feasible, sched.snapshot.table, rows)
    plugins = {
        name: {plugin: int(values[i]) * fw.score_weights[plugin] for plugin, values in per_plugin.items()}
        for i, name in enumerate(names)
    }
    best = max(scores.values())
    return Replay(names, tuple(sorted(n for n, s in scores.items() if s == best)), scores, "", plugins)


# --------------------------------------------------------------------------- comparison


def split_post_filter(message: str) -> tuple[str, str]:
    """A FailedScheduling message without the PostFilter part kube-scheduler appends (FitError.Error:
    `<filter histogram>. <post-filter message>`), and that part ("" if none).

    The PostFilter plugins of kube-scheduler's default profile that we do not have yet:
    DefaultPreemption ("preemption: 0/3 nodes are available: ...") and DynamicResources (in 1.37 it
    answers a pod without claims with a bare Unschedulable, which adds nothing; older releases said
    "no new claims to deallocate"). When a PreFilter plugin before DynamicResources rejected the
    pod, DynamicResources' PostFilter finds no state of its own and fails with the CycleState's
    "not found", which ends up as the whole post-filter message."""
    cuts = [i for reason in POST_FILTER_REASONS if (i := message.find(" " + reason)) >= 0]
    if message.endswith(" " + DRA_STATE_MISSING):
        cuts.append(len(message) - len(DRA_STATE_MISSING) - 1)
    if not cuts:
        return message, ""
    # A group's message joins its parts with ", ": the comma before the cut is not the Filter part's.
    return message[: min(cuts)].removesuffix(","), message[min(cuts) + 1 :]


@dataclass(frozen=True)
class PodComparison:
    label: str
    kube: Outcome
    ours: Outcome
    verdict_agrees: bool
    message_agrees: bool
    # None: not applicable (not bound on both sides, or created with nodeName).
    kube_top: bool | None  # our node is among kube-scheduler's top-scored nodes (its own -v=10 scores)
    replay_top: bool | None  # both nodes are in our top-score set replayed over the cluster each met
    post_filter: str  # kube-scheduler's PostFilter part of the message, not compared
    notes: tuple[str, ...] = ()
    kube_scored: bool = False  # kube-scheduler's log had final scores for this pod
    # Informational, not part of `agrees`: kube-scheduler's logged final scores equal our replay's
    # over its cluster (None: not both scored), and the plugins whose scores differ.
    scores_equal: bool | None = None
    plugins_differing: tuple[str, ...] = ()
    # None: the pod has no claims on either side (not a DRA scenario).
    claims_agree: bool | None = None
    # None: the scenario says nothing of this pod; False: kube-scheduler did not do what it says.
    as_expected: bool | None = None

    @property
    def agrees(self) -> bool:
        return (
            self.verdict_agrees
            and self.message_agrees
            and self.kube_top is not False
            and self.replay_top is not False
            and self.claims_agree is not False
            and self.as_expected is not False
        )


@dataclass(frozen=True)
class Counts:
    pods: int = 0
    verdicts: int = 0
    messages: int = 0
    kube_top: int = 0
    kube_top_checks: int = 0
    replay_top: int = 0
    replay_checks: int = 0
    post_filter: int = 0
    scores_equal: int = 0
    scores_checks: int = 0
    groups: int = 0
    groups_agreeing: int = 0
    claims: int = 0
    claim_checks: int = 0
    as_expected: int = 0
    expectations: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    status: str  # compared | pending | error
    pods: tuple[PodComparison, ...] = ()
    error: str = ""
    groups: tuple[GroupComparison, ...] = ()
    reruns: tuple[str, ...] = ()  # why kube-scheduler's run was played again (SideRun.reruns)
    raced: str = ""  # the compared kube-scheduler run's own queue race (SideRun.raced)

    @property
    def agrees(self) -> bool:
        return self.status == "compared" and all(p.agrees for p in self.pods) and all(g.agrees for g in self.groups)

    def counts(self) -> Counts:
        kube = [p.kube_top for p in self.pods if p.kube_top is not None]
        replay = [p.replay_top for p in self.pods if p.replay_top is not None]
        return Counts(
            pods=len(self.pods),
            verdicts=sum(p.verdict_agrees for p in self.pods),
            messages=sum(p.message_agrees for p in self.pods),
            kube_top=sum(kube),
            kube_top_checks=len(kube),
            replay_top=sum(replay),
            replay_checks=len(replay),
            post_filter=sum(1 for p in self.pods if p.post_filter),
            scores_equal=sum(1 for p in self.pods if p.scores_equal),
            scores_checks=sum(1 for p in self.pods if p.scores_equal is not None),
            groups=len(self.groups),
            groups_agreeing=sum(g.agrees for g in self.groups),
            claims=sum(1 for p in self.pods if p.claims_agree),
            claim_checks=sum(1 for p in self.pods if p.claims_agree is not None),
            as_expected=sum(1 for p in self.pods if p.as_expected),
            expectations=sum(1 for p in self.pods if p.as_expected is not None),
        )

    def diff(self) -> str:
        """A readable account of every disagreement (or of why the scenario was not compared)."""
        if self.status != "compared":
            return f"{self.scenario.name}: {self.status}: {self.error}"
        lines = []
        if self.raced and not self.agrees:
            lines.append(
                f"{self.scenario.name}: kube-scheduler's run compared here raced, as all before it: {self.raced}"
            )
        for pod in self.pods:
            if pod.agrees:
                continue
            lines.append(f"{self.scenario.name} / {pod.label}:")
            lines.append(f"    kube-scheduler: {pod.kube}")
            lines.append(f"    ours:           {pod.ours}")
            lines.extend(f"    {note}" for note in pod.notes)
        for group in self.groups:
            if group.agrees:
                continue
            lines.append(f"{self.scenario.name} / group {group.label}:")
            lines.append(f"    kube-scheduler: {group.kube}")
            lines.append(f"    ours:           {group.ours}")
            lines.extend(f"    {note}" for note in group.notes)
        return "\n".join(lines)


def kube_top_check(
    kube: Observation, ours: Observation, replayed_top: tuple[str, ...] | None = None
) -> tuple[bool, list[str]]:
    """Is our node among kube-scheduler's top-scored nodes, by kube-scheduler's own log?

    A pod kube-scheduler placed from an OpportunisticBatching hint was not scored; the nodes it could
    have been handed are those tied at the top of the previous cycle's scores, which a signable
    pod's scores do not change: `replayed_top`, our replay over kube-scheduler's cluster, stands for
    them when kube-scheduler's own node is among them (else the replay check reports it)."""
    scores = kube.kube_scores or KubeScores({}, {}, hinted=False)
    top = scores.top(kube.outcome.node)
    if scores.hinted and not scores.final and replayed_top is not None and kube.outcome.node in replayed_top:
        top = replayed_top
    if ours.outcome.node in top:
        return True, []
    if scores.final:
        how = f"its final scores {dict(sorted(scores.final.items()))}"
        if scores.plugins:
            per_plugin = {node: dict(sorted(p.items())) for node, p in sorted(scores.plugins.items())}
            how += f", per plugin {per_plugin}"
    elif scores.hinted:
        how = "no scoring: an OpportunisticBatching node hint; the top set is our replay over its cluster"
    else:
        how = "no scoring: one feasible node"
    return False, [f"our node {ours.outcome.node} is not in kube-scheduler's top set {list(top)} ({how})"]


# A pool that is the bound node's own, in the claims' comparison of a pod two schedulers bound to
# different nodes.
LOCAL_POOL = "<the node's own pool>"


def node_local_pools(scenario: Scenario) -> dict[tuple[str, str], str]:
    """(driver, pool) -> node, for every pool of the scenario (its objects and the slices its actions
    create) whose ResourceSlices are one node's own (spec.nodeName)."""
    slices = [*scenario.objects, *(s.body for s in scenario.steps if isinstance(s, ActionStep) and s.on_object)]
    out = {}
    for obj in slices:
        spec = obj.get("spec") or {}
        if obj.get("kind") == "ResourceSlice" and spec.get("nodeName"):
            out[(str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))] = str(spec["nodeName"])
    return out


def _claims_view(
    claims: tuple[ClaimOutcome, ...], node: str, local_pools: Mapping[tuple[str, str], str]
) -> list[tuple[str, bool, bool, tuple[AllocatedDevice, ...], tuple[str, ...]]]:
    """What is compared of a pod's claims: the key, whether the claim exists (not its name: a
    template's claim has a generated one), whether it is allocated, the devices (a pool that is
    the bound node's own reads LOCAL_POOL) and reservedFor."""
    out = []
    for claim in claims:
        devices = tuple(
            sorted(
                replace(d, pool=LOCAL_POOL) if local_pools.get((d.driver, d.pool)) == node else d for d in claim.devices
            )
        )
        out.append((claim.key, bool(claim.claim), claim.allocated, devices, claim.reserved_for))
    return out


def compare_claims(
    kube: Observation, ours: Observation, local_pools: Mapping[tuple[str, str], str]
) -> tuple[bool | None, list[str]]:
    """Claim by claim, the same on both sides? None when neither side observed claims.

    kube-scheduler's allocator walks pools and devices in a fixed order, so its choice on one node
    is deterministic and the devices are compared exactly, with one rule: a pool that is the bound
    node's own (node_local_pools) reads LOCAL_POOL on each side. When both bound the pod to the same
    node this changes nothing; when they bound it to different nodes (a tie kube-scheduler broke
    at random, which the top-set checks judge) the same devices of each node's own pool agree,
    while another device, a shared pool's device, another request, consumed capacity or
    reservedFor still differ."""
    if kube.claims is None and ours.claims is None:
        return None, []
    kube_claims, our_claims = kube.claims or (), ours.claims or ()
    kube_node = kube.outcome.node if kube.outcome.verdict == "bound" else ""
    our_node = ours.outcome.node if ours.outcome.verdict == "bound" else ""
    if _claims_view(kube_claims, kube_node, local_pools) == _claims_view(our_claims, our_node, local_pools):
        return True, []
    different = (
        " (each node's own pool reads " + LOCAL_POOL + ")" if kube_node != our_node and kube_node and our_node else ""
    )
    return False, [
        f"claims: kube-scheduler {[str(c) for c in kube_claims]} vs ours {[str(c) for c in our_claims]}{different}"
    ]


def kube_devices(observation: Observation) -> tuple[str, ...]:
    """`<pool>/<device>` of every device allocated to the observed pod's claims, sorted."""
    return tuple(sorted(f"{d.pool}/{d.device}" for claim in observation.claims or () for d in claim.devices))


def check_expectation(expect: Expectation | None, kube: Observation) -> tuple[bool | None, list[str]]:
    """Did kube-scheduler do with the pod what the scenario says it should? None: it says nothing."""
    if expect is None:
        return None, []
    outcome = kube.outcome
    ok = outcome.verdict == expect.verdict and (not expect.node or outcome.node == expect.node)
    devices = kube_devices(kube)
    if expect.devices is not None:
        ok = ok and devices == expect.devices
    if ok:
        return True, []
    got = f"{outcome}" + (f" with devices {list(devices)}" if expect.devices is not None else "")
    return False, [
        f"the scenario expects kube-scheduler's pod {expect}, it was {got}: the scenario tests something else"
    ]


def compare_pod(
    kube: Observation,
    ours: Observation,
    config: SchedulerConfig,
    profile: str,
    same_cluster: bool = True,
    *,
    expect: Expectation | None = None,
    local_pools: Mapping[tuple[str, str], str] | None = None,
) -> PodComparison:
    """One pod's comparison. `same_cluster`: every earlier pod of the scenario got the same verdict
    and node on both sides, so kube-scheduler's scores are for the cluster our pod met too (after
    a tie broken differently, only the replays, each over its own side's cluster, apply).
    `expect`: what the scenario says kube-scheduler does with the pod; `local_pools`:
    node_local_pools of the scenario (compare_claims)."""
    kube_message, post_filter = split_post_filter(kube.outcome.message)
    our_message, _ = split_post_filter(ours.outcome.message)
    verdict_agrees = kube.outcome.verdict == ours.outcome.verdict
    message_agrees = verdict_agrees and kube_message == our_message
    notes: list[str] = []
    kube_top: bool | None = None
    replay_top: bool | None = None
    both_bound = verdict_agrees and kube.outcome.verdict == "bound"
    preset = kube.encounter is not None and kube.encounter.preset
    if both_bound and not preset and same_cluster:
        replayed_top = None
        if kube.kube_scores is not None and kube.kube_scores.hinted and kube.encounter is not None:
            replayed_top = replay(config, kube.encounter.state, kube.encounter.pod, profile).top
        kube_top, kube_notes = kube_top_check(kube, ours, replayed_top)
        notes += kube_notes
    scores_equal: bool | None = None
    differing: tuple[str, ...] = ()
    if both_bound and kube.encounter is not None and ours.encounter is not None and not preset:
        replay_top = True
        for whose, observed, encounter in (
            ("kube-scheduler's", kube, kube.encounter),
            ("our", ours, ours.encounter),
        ):
            result = replay(config, encounter.state, encounter.pod, profile)
            if observed is kube and kube.kube_scores is not None and kube.kube_scores.final and result.scores:
                scores_equal = dict(result.scores) == dict(kube.kube_scores.final)
                differing = plugins_differing(kube.kube_scores, result)
            if observed.outcome.node not in result.top:
                replay_top = False
                per_plugin = {node: dict(sorted(p.items())) for node, p in sorted(result.plugins.items())}
                notes.append(
                    f"{whose} node {observed.outcome.node} is not in our top set {list(result.top)} (replayed "
                    f"scores {dict(sorted(result.scores.items()))}, per plugin {per_plugin}, feasible "
                    f"{list(result.feasible)})"
                )
    if not verdict_agrees and kube.encounter is not None:
        result = replay(config, kube.encounter.state, kube.encounter.pod, profile)
        verdict = f"top set {list(result.top)}" if result.feasible else result.message
        notes.append(f"our replay over kube-scheduler's cluster: {verdict}")
    if verdict_agrees and not message_agrees:
        notes.append(f"message: kube-scheduler {kube_message!r} vs ours {our_message!r}")
    claims_agree, claim_notes = compare_claims(kube, ours, local_pools or {})
    as_expected, expect_notes = check_expectation(expect, kube)
    notes += claim_notes + expect_notes
    return PodComparison(
        kube.label,
        kube.outcome,
        ours.outcome,
        verdict_agrees,
        message_agrees,
        kube_top,
        replay_top,
        post_filter,
        tuple(notes),
        kube_scored=bool(kube.kube_scores and kube.kube_scores.final),
        scores_equal=scores_equal,
        plugins_differing=differing,
        claims_agree=claims_agree,
        as_expected=as_expected,
    )


def plugins_differing(kube: KubeScores, ours: Replay) -> tuple[str, ...]:
    """The Score plugins whose weighted score for some node differs between kube-scheduler's log
    and our replay over the same cluster (plugins only one side has count when not 0)."""
    out = set()
    for node in set(kube.plugins) | set(ours.plugins):
        theirs, mine = kube.plugins.get(node, {}), ours.plugins.get(node, {})
        out |= {plugin for plugin in set(theirs) | set(mine) if theirs.get(plugin, 0) != mine.get(plugin, 0)}
    return tuple(sorted(out))


@dataclass(frozen=True)
class GroupComparison:
    label: str
    kube: GroupObservation
    ours: GroupObservation
    verdict_agrees: bool
    bound_agrees: bool  # the same members bound
    conditions_agree: bool  # the PodGroup's conditions, messages without the pod-group preemption part
    # With topology constraints: our bound members share one value of each key (None: no constraint
    # or nothing bound). Which domain is kube-scheduler's best is not in its log, so not compared.
    placement_ok: bool | None
    notes: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return self.verdict_agrees and self.bound_agrees and self.conditions_agree and self.placement_ok is not False


def _comparable_conditions(group: GroupObservation) -> tuple[Condition, ...]:
    return tuple((t, st, r, split_post_filter(msg)[0]) for t, st, r, msg in group.conditions)


def compare_group(
    kube: GroupObservation, ours: GroupObservation, node_labels: Mapping[str, Mapping[str, str]]
) -> GroupComparison:
    notes: list[str] = []
    verdict_agrees = kube.verdict == ours.verdict
    bound_agrees = set(kube.bound) == set(ours.bound)
    if not bound_agrees:
        notes.append(f"bound members: kube-scheduler {sorted(kube.bound)} vs ours {sorted(ours.bound)}")
    # A partly bound group's condition is not determinable: kube-scheduler writes True when the
    # group binds at its quorum, and the retry of the members left over (within ~150 ms) writes
    # Unschedulable over it when its copy of the PodGroup predates the True (updatePodGroupCondition
    # keeps a True only if it sees one); of two identical runs one ended True, the other False.
    partly = kube.verdict.startswith("partly")
    conditions_agree = partly or _comparable_conditions(kube) == _comparable_conditions(ours)
    if not conditions_agree:
        notes.append(
            f"conditions: kube-scheduler {_comparable_conditions(kube)} vs ours {_comparable_conditions(ours)}"
        )
    placement_ok: bool | None = None
    nodes = ours.nodes()
    if ours.topology and nodes:
        placement_ok = True
        for key in ours.topology:
            domains = {node_labels.get(node, {}).get(key) for node in nodes.values()}
            if len(domains) != 1 or None in domains:
                placement_ok = False
                notes.append(f"our members span {sorted(map(str, domains))} of topology key {key}: {nodes}")
    return GroupComparison(
        kube.label, kube, ours, verdict_agrees, bound_agrees, conditions_agree, placement_ok, tuple(notes)
    )


def _node_labels(scenario: Scenario) -> dict[str, dict[str, str]]:
    nodes = list(scenario.nodes)
    nodes += [step.body for step in scenario.steps if isinstance(step, ActionStep) and step.action == "create"]
    return {node["metadata"]["name"]: dict(node["metadata"].get("labels") or {}) for node in nodes}


def compare(scenario: Scenario, kube: SideRun, ours: SideRun, config: SchedulerConfig) -> ScenarioResult:
    if kube.error or ours.error:
        errors = [f"{side}: {run.error}" for side, run in ((KUBE, kube), (OURS, ours)) if run.error]
        return ScenarioResult(scenario, "error", error="; ".join(errors))
    if [o.label for o in kube.observations] != [o.label for o in ours.observations]:
        return ScenarioResult(scenario, "error", error="the two runs observed different pods")
    if [g.label for g in kube.groups] != [g.label for g in ours.groups]:
        return ScenarioResult(scenario, "error", error="the two runs observed different groups")
    # Members of a group with topology constraints: kube-scheduler's logged scores are not of its choice.
    constrained = {
        f"{g.name}/{m}"
        for g in scenario.groups
        if g.pod_group["spec"].get("schedulingConstraints")
        for m in g.member_names
    }
    pods = []
    same_cluster = True
    local_pools = node_local_pools(scenario)
    expectations = scenario.expectations()
    for k, o, expect in zip(kube.observations, ours.observations, expectations, strict=True):
        determinable = same_cluster and k.label.split(" ")[0] not in constrained
        pods.append(compare_pod(k, o, config, scenario.profile, determinable, expect=expect, local_pools=local_pools))
        same_cluster = same_cluster and k.outcome.verdict == o.outcome.verdict and k.outcome.node == o.outcome.node
    labels = _node_labels(scenario)
    groups = tuple(compare_group(k, o, labels) for k, o in zip(kube.groups, ours.groups, strict=True))
    return ScenarioResult(scenario, "compared", tuple(pods), groups=groups)
