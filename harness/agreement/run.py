"""Agreement runs: one driver per scheduler, each on a control plane of its own, side by side.

kube-scheduler at the pinned K8S_VERSION (leader election off) on one, ours (`--no-leader-elect`) on
the other, with the same PROFILES under their own schedulerNames, and a pair of control planes per set
of feature gates the scenarios name (scenarios with pod groups run with GenericWorkload on the
apiserver, which then serves scheduling.k8s.io/v1beta1, and on both schedulers). Between scenarios a side deletes
what the last one created and waits until the scheduler's cache is empty; after creating nodes and
existing pods it waits until the cache holds exactly them. Pods are followed by a watch: a step
waits for the apiserver's report of the change, never a fixed time (except an action's delay).

Must never: tune either scheduler beyond the shared PROFILES, or touch a cluster it did not start.
"""

from __future__ import annotations

import copy
import dataclasses
import http.client
import json
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.agreement import dra
from harness.agreement.compare import (
    QUEUE_RACE_ATTEMPTS,
    ClusterState,
    Encounter,
    GroupObservation,
    KubeScores,
    Observation,
    Outcome,
    ScenarioResult,
    SideRun,
    compare,
    parse_kube_scores,
)
from harness.agreement.report import AgreementReport, RunInfo
from harness.agreement.scenarios import (
    ACTION_GROUP_QUIET_SECONDS,
    KUBE,
    OURS,
    PODGROUP_API_VERSION,
    QUIET_SECONDS,
    SETTLE_TIMEOUT,
    TERMINAL_PHASES,
    WORKLOAD_GATE,
    ActionStep,
    Group,
    GroupStep,
    PodStep,
    Scenario,
    ScenarioError,
    min_count,
    scheduler_config,
    scheduler_name,
    topology_keys,
)
from harness.apiwatch import KeepAliveClient, PodWatch
from harness.controlplane import WORKLOAD_API_RUNTIME_CONFIG, ControlPlane, ManagedProcess, feature_gate_args
from harness.workload import metrics_text, running_scheduler, wait_for
from scheduler.app import VOLUME_KINDS, WORKLOAD_KINDS, collection_path, full_registry
from scheduler.config import parse_config

Raw = dict[str, Any]


# --------------------------------------------------------------------------- one side


class ApiFailure(RuntimeError):
    pass


_RESOURCE_PATHS = {
    ("v1", "Service"): ("services", True),
    ("v1", "ReplicationController"): ("replicationcontrollers", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "PersistentVolume"): ("persistentvolumes", False),
    ("storage.k8s.io/v1", "StorageClass"): ("storageclasses", False),
    ("storage.k8s.io/v1", "CSINode"): ("csinodes", False),
    (PODGROUP_API_VERSION, "Workload"): ("workloads", True),
    (PODGROUP_API_VERSION, "PodGroup"): ("podgroups", True),
    (dra.API_VERSION, "DeviceClass"): ("deviceclasses", False),
    (dra.API_VERSION, "ResourceSlice"): ("resourceslices", False),
    (dra.API_VERSION, "DeviceTaintRule"): ("devicetaintrules", False),
    (dra.API_VERSION, "ResourceClaim"): ("resourceclaims", True),
    (dra.API_VERSION, "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
}
# The DRA kinds a pending pod's cluster state carries (what DynamicResources' listers read).
DRA_STATE_KINDS = ("DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourceClaim")
# kube-controller-manager's controller that makes claims from a pod's ResourceClaimTemplates (and
# takes a deleted pod out of its claims' reservedFor).
RESOURCECLAIM_CONTROLLER = "resourceclaim-controller"
# How long a step whose PodGroups come after their members may wait for the scheduler's queue to
# hold every member (see _group_step).
MEMBERS_QUEUED_TIMEOUT = 30.0


def _collection_path(obj: Mapping[str, Any]) -> str:
    return _kind_path(str(obj.get("apiVersion")), str(obj.get("kind")), obj["metadata"].get("namespace", "default"))


def _kind_path(api_version: str, kind: str, namespace: str | None = None) -> str:
    """The collection of `kind`: in `namespace`, or across all namespaces when None."""
    key = (api_version, kind)
    if key not in _RESOURCE_PATHS:
        raise ScenarioError(f"objects: unsupported kind {key[1]} ({key[0]}); supported: {sorted(_RESOURCE_PATHS)}")
    plural, namespaced = _RESOURCE_PATHS[key]
    group = "/api/v1" if key[0] == "v1" else f"/apis/{key[0]}"
    if namespaced and namespace is not None:
        return f"{group}/namespaces/{namespace}/{plural}"
    return f"{group}/{plural}"


def _scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


def _outcome(pod: Mapping[str, Any]) -> Outcome | None:
    """Bound, or failed by the scheduler; None while neither (gated pods included)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return Outcome("bound", node=str(node))
    condition = _scheduled_condition(pod)
    if condition is not None and condition.get("status") == "False":
        reason = condition.get("reason")
        if reason == "Unschedulable":
            return Outcome("unschedulable", message=str(condition.get("message", "")))
        if reason == "SchedulerError":
            return Outcome("error", message=str(condition.get("message", "")))
    return None


def _waiting(pod: Mapping[str, Any]) -> Outcome:
    """A pod no scheduler has decided on: gated (the apiserver's SchedulingGated condition) or pending."""
    condition = _scheduled_condition(pod) or {}
    if condition.get("reason") == "SchedulingGated":
        return Outcome("gated", message=str(condition.get("message", "")))
    return Outcome("pending")


# kube-scheduler v1.37.2's AddPodGroup moves a new PodGroup's queued members into its group one at a
# time under the queue's lock, waking the scheduling loop at the first; Pop takes only the activeQ's
# lock, so the loop may take the group before the rest have joined, and they are parked until the
# group comes back. Its -v=5 lines show it: after "Pod was added to root group as the first member
# pod" for a group, each other member is "Pod added to existing root group info" and the burst ends
# with "Pod Group was added to the root group ..."; a member "added to pending pod group pods" inside
# that burst is one the cycle went without. (The same pending line at other times is ordinary: a
# member's status update arriving while its group's cycle runs.) Ours adds them all before its loop
# runs again.
_KLOG_QUEUE_LINE = re.compile(r'^\S+ \S+\s+\d+ scheduling_queue\.go:\d+\] "([^"]*)"(.*)$')
_KLOG_FIELD = re.compile(r'(\w+)="([^"]*)"')


def play_again(run: SideRun) -> bool:
    """Whether a side's run of a scenario is played again: its queue raced (queue_race), nothing
    failed, and fewer than QUEUE_RACE_ATTEMPTS runs were made. When every run raced, the last one is
    compared all the same: a scenario whose outcome does not hang on how many members the first cycle
    saw still agrees, one whose outcome does shows the disagreement (RESULTS.md names the race)."""
    return bool(run.raced) and not run.error and len(run.reruns) + 1 < QUEUE_RACE_ATTEMPTS


def queue_race(log: str, members: Sequence[str]) -> str | None:
    """Which of `members` (namespace/name) kube-scheduler's log text says its queue left out of the
    group it was building when its loop took the group (see above), as one line for the report;
    None when none was."""
    wanted = set(members)
    building: str | None = None  # the group AddPodGroup is filling, while its burst lasts
    parked: set[str] = set()
    for line in log.splitlines():
        found = _KLOG_QUEUE_LINE.match(line)
        if found is None:
            continue
        message, fields = found.group(1), dict(_KLOG_FIELD.findall(found.group(2)))
        root = fields.get("root")
        if message == "Pod was added to root group as the first member pod":
            building = root
        elif building is not None and root == building and message.startswith("Pod added to existing root group"):
            continue
        elif building is not None and root == building and message.startswith("Pod added to pending pod group pods"):
            if fields.get("pod") in wanted:
                parked.add(fields["pod"])
        else:
            building = None
    if not parked:
        return None
    return (
        f"kube-scheduler's queue began a pod group's cycle without {', '.join(sorted(parked))} (queued "
        "before their PodGroup; AddPodGroup's race)"
    )


class Side:
    """One scheduler on its own control plane, taken through scenarios one after the other.

    Requests go over one kept-alive connection; pods are followed by a watch (PodWatch), so a
    step waits for the apiserver to report the change, never a fixed time. `score_log` is
    kube-scheduler's log, whose `-v=10` lines give the side's own per-node final scores."""

    def __init__(
        self,
        side: str,
        plane: ControlPlane,
        cache_sizes: Callable[[], dict[str, int]],
        score_log: Path | None = None,
    ) -> None:
        self.side = side
        self.plane = plane
        self.cache_sizes = cache_sizes
        self._score_log = score_log
        self._client = KeepAliveClient(plane)
        self._watch = PodWatch(plane, side)
        self._namespaces: set[str] = {"default"}
        self._objects: list[str] = []  # paths of objects to delete before the next scenario
        self._uids: dict[str, tuple[str, str]] = {}  # this scenario's pods: name -> (namespace, uid)
        self._groups: dict[str, Group] = {}  # this scenario's pod groups by name
        self._deleted: set[str] = set()  # this scenario's pods its own actions deleted
        self._dra = False  # this scenario uses DRA: observe claims, delete them after

    # ---- API -----------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        return self._client.request(method, path, body, headers)

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Raw:
        status, data = self.request(method, path, body)
        if status not in ok:
            raise ApiFailure(f"{self.side}: {method} {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data) if data else {}
        return result

    def _merge_patch(self, path: str, body: Raw) -> Raw:
        status, data = self.request("PATCH", path, body, headers={"Content-Type": "application/merge-patch+json"})
        if status != 200:
            raise ApiFailure(f"{self.side}: PATCH {path}: HTTP {status}: {data.decode(errors='replace')[:500]}")
        result: Raw = json.loads(data)
        return result

    def _wait_cache(self, nodes: int, pods: int, what: str) -> None:
        self._wait_sizes(
            lambda seen: seen.get("nodes") == nodes and seen.get("pods") == pods,
            f"cache {what} ({nodes} nodes, {pods} pods)",
            30,
        )

    def _wait_pending(self, pending: int) -> None:
        self._wait_sizes(
            lambda seen: seen["pending"] >= pending, f"queue holding {pending} pods", MEMBERS_QUEUED_TIMEOUT
        )

    def _wait_sizes(self, reached: Callable[[dict[str, int]], bool], what: str, timeout: float) -> None:
        """Poll the scheduler's cache and queue sizes until `reached` holds. A scheduler's cache is
        visible only through its metrics or its dump: polled, not slept on."""
        seen: dict[str, int] = {}

        def check() -> bool:
            seen.update(self.cache_sizes())
            return reached(seen)

        try:
            wait_for(check, timeout=timeout, what=f"{self.side} {what}", interval=0.05)
        except AssertionError as err:
            raise AssertionError(f"{err}; last seen {seen}") from None

    def _log_offset(self) -> int:
        if self._score_log is None:
            return 0
        try:
            return self._score_log.stat().st_size
        except OSError:
            return 0

    def _log_since(self, offset: int) -> str:
        if self._score_log is None:
            return ""
        with self._score_log.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _scores_since(self, offset: int, namespace: str, name: str) -> KubeScores | None:
        if self._score_log is None:
            return None
        return parse_kube_scores(self._log_since(offset), f"{namespace}/{name}")

    # ---- a scenario ----------------------------------------------------------------------

    def run_all(self, scenarios: Sequence[Scenario], progress: Callable[[str], None]) -> dict[str, SideRun]:
        runs: dict[str, SideRun] = {}
        self._watch.start()
        failures = (ApiFailure, AssertionError, ScenarioError, OSError, http.client.HTTPException)
        try:
            self.reset()
            for scenario in scenarios:
                began = time.monotonic()
                reruns: list[str] = []
                while True:
                    run = SideRun(reruns=reruns)
                    try:
                        self.setup(scenario)
                        self.play(scenario, run)
                    except failures as err:
                        run.error = str(err)
                    # Cleaning up belongs to the scenario that left the mess (a scheduler's cache that
                    # does not empty: an assumed pod leaked), not to the next one.
                    try:
                        self.reset()
                    except failures as err:
                        run.error = "; ".join(filter(None, (run.error, f"cleaning up after it: {err}")))
                    if not play_again(run):
                        break
                    reruns.append(run.raced)
                run.seconds = time.monotonic() - began
                runs[scenario.name] = run
                progress(f"{self.side:>14}: {scenario.name} ({run.seconds:.1f} s){' ERROR' if run.error else ''}")
        finally:
            self._watch.stop()
            self._client.close()
        return runs

    def reset(self) -> None:
        """Back to an empty cluster: no pods, nodes, scenario namespaces or objects.

        Nothing is deleted while kwok still has work queued for it: kwok patches by name, from the
        object as it last saw it, so a node or pod initialised after its deletion would land on the
        next scenario's object of the same name (a new node n1 with the old n1's allocatable)."""
        self._wait_kwok_done()
        for namespace in sorted(self._namespaces):
            self.api("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200, 404))
        self.api("DELETE", "/api/v1/nodes", ok=(200,))
        if self._dra:
            self._delete_claims()
        for path in self._objects:
            if "/podgroups/" in path:
                # The apiserver's PodGroupProtection admission adds a finalizer that only
                # kube-controller-manager's podgroup-protection controller (not run here) removes.
                status, data = self.request(
                    "PATCH", path, {"metadata": {"finalizers": None}}, {"Content-Type": "application/merge-patch+json"}
                )
                if status not in (200, 404):
                    raise ApiFailure(f"{self.side}: PATCH {path}: HTTP {status}: {data.decode(errors='replace')[:300]}")
            self.api("DELETE", path, ok=(200, 202, 404))
        self._objects.clear()
        for namespace in sorted(self._namespaces - {"default"}):
            self._delete_namespace(namespace)
        self._namespaces = {"default"}
        self._uids.clear()
        self._groups.clear()
        self._deleted.clear()
        self._dra = False
        self._wait_cache(0, 0, "emptied")

    def _delete_claims(self) -> None:
        """Every ResourceClaim of the scenario's namespaces (those the scenario made, those made from
        templates or for extended resources), gone before the next scenario may reuse a name. The
        schedulers' delete-protection finalizer is taken off first: the controller that would
        deallocate and release them waits for pods to be gone and is in no hurry."""
        for namespace in sorted(self._namespaces):
            path = _kind_path(dra.API_VERSION, "ResourceClaim", namespace)
            for claim in self.api("GET", path)["items"]:
                if claim["metadata"].get("finalizers"):
                    name = claim["metadata"]["name"]
                    status, data = self.request(
                        "PATCH",
                        f"{path}/{name}",
                        {"metadata": {"finalizers": None}},
                        headers={"Content-Type": "application/merge-patch+json"},
                    )
                    if status not in (200, 404):
                        raise ApiFailure(f"{self.side}: PATCH {path}/{name}: HTTP {status}: {data.decode()[:500]}")
            self.api("DELETE", path, ok=(200,))
        wait_for(
            lambda: (
                not any(
                    self.api("GET", _kind_path(dra.API_VERSION, "ResourceClaim", namespace))["items"]
                    for namespace in self._namespaces
                )
            ),
            timeout=10,
            what=f"{self.side}: every ResourceClaim gone",
            interval=0.05,
        )

    def _wait_kwok_done(self) -> None:
        """Until kwok has initialised every node (Ready) and started every bound pod (Running, or
        the terminal phase a scenario wrote after that)."""

        def pods_started() -> bool | None:
            for pod in self._watch.pods():
                phase = (pod.get("status") or {}).get("phase")
                if (pod.get("spec") or {}).get("nodeName") and phase not in ("Running", *TERMINAL_PHASES):
                    return None
            return True

        if self._watch.wait_until(pods_started, SETTLE_TIMEOUT) is None:
            raise ApiFailure(f"{self.side}: kwok did not start every bound pod within {SETTLE_TIMEOUT:.0f} s")

        def nodes_ready() -> bool:
            return all(_node_ready(node) for node in self.api("GET", "/api/v1/nodes")["items"])

        wait_for(nodes_ready, timeout=SETTLE_TIMEOUT, what=f"{self.side}: kwok initialising every node", interval=0.05)

    def _delete_namespace(self, name: str) -> None:
        """Delete and finalize at once: no namespace controller runs here, and the next scenario
        may want the same name back."""
        deleted = self.api("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))
        if deleted.get("kind") == "Namespace":
            deleted["spec"]["finalizers"] = []
            self.api("PUT", f"/api/v1/namespaces/{name}/finalize", deleted, ok=(200, 404))
        wait_for(
            lambda: self.request("GET", f"/api/v1/namespaces/{name}")[0] == 404,
            timeout=10,
            what=f"namespace {name} gone",
            interval=0.05,
        )

    def setup(self, scenario: Scenario) -> None:
        self._dra = scenario.uses_dra
        for namespace in scenario.namespaces:
            name = namespace["metadata"]["name"]
            if name == "default":
                self._merge_patch(
                    "/api/v1/namespaces/default", {"metadata": {"labels": namespace["metadata"]["labels"]}}
                )
            else:
                self.api("POST", "/api/v1/namespaces", namespace)
            self._namespaces.add(name)
        for obj in scenario.objects:
            self._create_object(obj)
        for node in scenario.nodes:
            self._create_node(node)
        for pod in scenario.existing_pods:
            namespace = pod["metadata"]["namespace"]
            self._namespaces.add(namespace)
            created = self.api("POST", self._pod_path(namespace), pod)
            name = pod["metadata"]["name"]
            self._uids[name] = (namespace, created["metadata"]["uid"])
            if "status" in pod:
                self._set_status(namespace, name, pod["status"])
        bound = sum(
            1
            for pod in scenario.existing_pods
            if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        )
        self._wait_cache(len(scenario.nodes), bound, "filled")

    def _create_object(self, obj: Raw) -> None:
        """Create `obj` (to be deleted before the next scenario); a ResourceClaim's `status` (an
        allocation made beforehand) is written through its status subresource."""
        collection = _collection_path(obj)
        path = f"{collection}/{obj['metadata']['name']}"
        self._objects.append(path)
        created = self.api("POST", collection, {k: v for k, v in obj.items() if k != "status"})
        if obj.get("kind") == "ResourceClaim" and obj.get("status"):
            self.api("PUT", f"{path}/status", {**created, "status": obj["status"]})

    def _set_status(self, namespace: str, name: str, status: Raw) -> None:
        """Write an existing pod's status once kwok has made it Running: a patch before that races
        with kwok's pod-ready stage, which may then write Running over a Succeeded or Failed."""

        def running() -> bool | None:
            pod = self._current(name)
            return True if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

        if self._watch.wait_until(running, SETTLE_TIMEOUT) is None:
            raise ApiFailure(f"{self.side}: kwok did not make pod {namespace}/{name} Running")
        self._merge_patch(self._pod_path(namespace, name) + "/status", {"status": status})

    def _create_node(self, node: Raw) -> None:
        # The status goes in the create body: a create followed by a status patch races with kwok's
        # node initialisation, which may then write its own allocatable over ours.
        created = self.api("POST", "/api/v1/nodes", node)
        _check_allocatable(self.side, node, created)

    def state(self) -> ClusterState:
        """What a pending pod meets (DRA objects only in a scenario that uses DRA)."""
        pods = [
            pod
            for pod in self.api("GET", "/api/v1/pods")["items"]
            if (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        workloads = []
        for group, version, plural, kind in WORKLOAD_KINDS:
            api_version = f"{group}/{version}" if group else version
            path = collection_path(group, version, plural)
            workloads += [(api_version, kind, item) for item in self.api("GET", path)["items"]]
        volumes = []
        for group, version, plural, kind in VOLUME_KINDS:
            volumes += [(kind, item) for item in self.api("GET", collection_path(group, version, plural))["items"]]
        resources = []
        for kind in DRA_STATE_KINDS if self._dra else ():
            resources += [(kind, item) for item in self.api("GET", _kind_path(dra.API_VERSION, kind))["items"]]
        return ClusterState(
            namespaces=tuple(self.api("GET", "/api/v1/namespaces")["items"]),
            workloads=tuple(workloads),
            nodes=tuple(self.api("GET", "/api/v1/nodes")["items"]),
            pods=tuple(pods),
            volumes=tuple(volumes),
            resources=tuple(resources),
        )

    def play(self, scenario: Scenario, run: SideRun) -> None:
        name = scheduler_name(self.side, scenario.profile)
        expected = {node["metadata"]["name"]: node for node in scenario.nodes}
        for step in scenario.steps:
            if isinstance(step, PodStep):
                run.observations.append(self._pod_step(step, name, expected))
            elif isinstance(step, GroupStep):
                observations, groups = self._group_step(step, name, run)
                run.observations.extend(observations)
                run.groups.extend(groups)
            else:
                if step.action == "create":
                    expected[step.name] = step.body
                observations, groups = self._action_step(step)
                run.observations.extend(observations)
                run.groups.extend(groups)

    def _pod_path(self, namespace: str, name: str = "") -> str:
        return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")

    def _pod_step(self, step: PodStep, scheduler: str, expected: Mapping[str, Raw]) -> Observation:
        pod = copy.deepcopy(step.pod)
        pod["spec"]["schedulerName"] = scheduler
        namespace = pod["metadata"]["namespace"]
        self._namespaces.add(namespace)
        state = self.state()
        for node in state.nodes:
            if node["metadata"]["name"] in expected:
                _check_allocatable(self.side, expected[node["metadata"]["name"]], node)
        offset = self._log_offset()
        created = self.api("POST", self._pod_path(namespace), pod)
        uid = created["metadata"]["uid"]
        self._uids[step.name] = (namespace, uid)
        # A gated pod, or one the scenario says no scheduler decides on (PreEnqueue holds it: a
        # claim that does not exist yet), is observed once QUIET_SECONDS passed without a decision.
        waits = bool(pod["spec"].get("schedulingGates")) or (
            step.expect is not None and step.expect.verdict == "pending"
        )
        outcome = self._settle(namespace, step.name, uid, waits)
        current, raw_claims = self._pod_claims(step.name)
        claims = None
        encounter = Encounter(created, state)
        if current is not None:
            claims = tuple(dra.claim_outcome(key, claim) for key, claim in raw_claims)
            pod_met, made = dra.as_scheduled(created, current, [c for _, c in raw_claims if c is not None])
            resources = (*state.resources, *(("ResourceClaim", claim) for claim in made))
            encounter = Encounter(pod_met, dataclasses.replace(state, resources=resources))
        if outcome.verdict == "unschedulable" and not step.keep:
            self.api("DELETE", self._pod_path(namespace, step.name) + "?gracePeriodSeconds=0", ok=(200, 404))
        scores = self._scores_since(offset, namespace, step.name) if outcome.verdict == "bound" else None
        return Observation(step.name, outcome, encounter, scores, claims)

    def _pod_claims(self, name: str) -> tuple[Raw | None, list[tuple[str, Raw | None]]]:
        """This scenario's pod `name` now and each of its claims (key, the ResourceClaim or None when
        it does not exist); (None, []) outside DRA scenarios."""
        pod = self._current(name) if self._dra else None
        if pod is None:
            return None, []
        namespace = pod["metadata"]["namespace"]
        out: list[tuple[str, Raw | None]] = []
        for key, claim_name in dra.claim_names(pod):
            claim = None
            if claim_name:
                path = f"{_kind_path(dra.API_VERSION, 'ResourceClaim', namespace)}/{claim_name}"
                claim = self.api("GET", path, ok=(200, 404))
            out.append((key, claim if claim and claim.get("kind") == "ResourceClaim" else None))
        return pod, out

    def _pod_group_path(self, namespace: str, name: str = "") -> str:
        return f"/apis/{PODGROUP_API_VERSION}/namespaces/{namespace}/podgroups" + (f"/{name}" if name else "")

    def _group_step(
        self, step: GroupStep, scheduler: str, run: SideRun
    ) -> tuple[list[Observation], list[GroupObservation]]:
        """Create the step's PodGroups and members as upstream's scheduler_perf podgroup workloads do
        (the PodGroup, then its pods), settle them together, delete the groups left unbound. A race of
        kube-scheduler's queue over members created before their PodGroup is recorded in `run.raced`."""
        offset = self._log_offset()

        def create_pod_group(group: Group) -> None:
            namespace = group.pod_group["metadata"]["namespace"]
            self.api("POST", self._pod_group_path(namespace), group.pod_group)
            self._objects.append(self._pod_group_path(namespace, group.name))

        for group in step.groups:
            self._groups[group.name] = group
            self._namespaces.add(group.pod_group["metadata"]["namespace"])
            if not group.pod_group_after_pods:
                create_pod_group(group)
        pending_before = self.cache_sizes()["pending"]
        for _group, member in step.creation_order():
            pod = copy.deepcopy(member)
            pod["spec"]["schedulerName"] = scheduler
            namespace = pod["metadata"]["namespace"]
            created = self.api("POST", self._pod_path(namespace), pod)
            self._uids[pod["metadata"]["name"]] = (namespace, created["metadata"]["uid"])
        if any(group.pod_group_after_pods for group in step.groups):
            # The members' watch events must reach the scheduler before their PodGroup's does (else
            # a first attempt sees only some members, in either scheduler; a make test under load
            # once lost that race): wait until its queue holds them all (none can bind without
            # its PodGroup, so the count of pending pods grows by exactly the members).
            self._wait_pending(pending_before + sum(len(group.member_names) for group in step.groups))
        for group in step.groups:
            if group.pod_group_after_pods:
                create_pod_group(group)
        names = [g.name for g in step.groups]
        self._settle_groups(names, step.quiet)
        if self._score_log is not None:
            queued_first = [
                f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                for g in step.groups
                if g.pod_group_after_pods
                for pod in g.members
            ]
            raced = queue_race(self._log_since(offset), queued_first)
            if raced is not None:
                run.raced = "; ".join(filter(None, (run.raced, raced)))
        observations, groups = self._observe_groups(names, "", offset)
        if not step.keep:
            for group, seen in zip(step.groups, groups, strict=True):
                if seen.bound:
                    continue
                namespace = group.pod_group["metadata"]["namespace"]
                for name in group.member_names:
                    self.api("DELETE", self._pod_path(namespace, name) + "?gracePeriodSeconds=0", ok=(200, 404))
        return observations, groups

    def _group_snapshot(self, names: Sequence[str]) -> tuple[Any, ...]:
        """What settling a group watches: its members' outcomes and its PodGroup's conditions."""
        members = tuple(self._member_outcome(m) for name in names for m in self._groups[name].member_names)
        return members, tuple(self._pod_group_conditions(name) for name in names)

    def _pod_group_conditions(self, name: str) -> tuple[tuple[str, str, str, str], ...]:
        group = self._groups[name]
        status, data = self.request("GET", self._pod_group_path(group.pod_group["metadata"]["namespace"], name))
        if status == 404:
            return ()
        if status != 200:
            raise ApiFailure(f"{self.side}: GET PodGroup {name}: HTTP {status}: {data.decode(errors='replace')[:300]}")
        conditions = (json.loads(data).get("status") or {}).get("conditions") or ()
        return tuple(
            sorted(
                (str(c.get("type")), str(c.get("status")), str(c.get("reason", "")), str(c.get("message", "")))
                for c in conditions
            )
        )

    def _member_outcome(self, name: str) -> Outcome | None:
        """A member's outcome: `deleted` when an action deleted it, `preempted` when the scheduler did
        (a victim of a later group: which members go is what disruptionMode decides); None while the
        watch has not seen it."""
        if name in self._deleted:
            return Outcome("deleted")
        if self._watch.deleted(self._uids[name][1]):
            return Outcome("preempted")
        raw = self._current(name)
        return None if raw is None else (_outcome(raw) or _waiting(raw))

    def _settle_groups(self, names: Sequence[str], quiet: float, until_bound: bool = False) -> None:
        """Until nothing about these groups changed for `quiet` seconds (every member decided or
        not: a gang PreEnqueue holds stays pending), or, with `until_bound`, every member (not
        deleted or preempted) is bound; at most SETTLE_TIMEOUT."""
        last: tuple[Any, ...] | None = None
        changed = time.monotonic()
        deadline = changed + SETTLE_TIMEOUT

        def settled() -> bool | None:
            nonlocal last, changed
            now = time.monotonic()
            snapshot = self._group_snapshot(names)
            if snapshot != last:
                last, changed = snapshot, now
            members = [o for o in snapshot[0] if o is None or o.verdict not in ("deleted", "preempted")]
            bound = until_bound and all(o is not None and o.verdict == "bound" for o in members)
            return True if groups_settled(bound, now - changed, quiet, now > deadline) else None

        # PodGroup conditions come from GETs, not the watch: poll at a quarter of QUIET_SECONDS.
        while self._watch.wait_until(settled, QUIET_SECONDS / 4) is None:
            pass

    def _observe_groups(
        self, names: Sequence[str], label: str, offset: int
    ) -> tuple[list[Observation], list[GroupObservation]]:
        observations, groups = [], []
        for name in names:
            group = self._groups[name]
            namespace = group.pod_group["metadata"]["namespace"]
            outcomes = []
            for member in group.member_names:
                outcome = self._member_outcome(member) or Outcome("pending")
                outcomes.append(outcome)
                scores = self._scores_since(offset, namespace, member) if outcome.verdict == "bound" else None
                pod_label = f"{name}/{member}" + (f" ({label})" if label else "")
                observations.append(Observation(pod_label, outcome, None, scores))
            groups.append(
                GroupObservation(
                    name + (f" ({label})" if label else ""),
                    group.member_names,
                    tuple(outcomes),
                    min_count(group.pod_group),
                    topology_keys(group.pod_group),
                    self._pod_group_conditions(name),
                )
            )
        return observations, groups

    def _current(self, name: str) -> Raw | None:
        """The watch's latest copy of this scenario's pod `name` (None until the watch saw it);
        an error once it is deleted: nothing here deletes a pod it observes, so the scheduler did
        (a preemption victim)."""
        namespace, uid = self._uids[name]
        pod = self._watch.get(namespace, name)
        if pod is not None and pod["metadata"]["uid"] == uid:
            return pod
        if self._watch.deleted(uid):
            raise ApiFailure(
                f"{self.side}: pod {namespace}/{name} is gone: preempted? (scenarios must leave no victims)"
            )
        return None

    def _settle(self, namespace: str, name: str, uid: str, waits: bool) -> Outcome:
        def decided() -> Outcome | None:
            pod = self._current(name)
            return None if pod is None else _outcome(pod)

        outcome = self._watch.wait_until(decided, QUIET_SECONDS if waits else SETTLE_TIMEOUT)
        if outcome is not None:
            return outcome
        if not waits:
            watch = f" (last watch error: {self._watch.error})" if self._watch.error else ""
            return Outcome("timeout", message=f"neither bound nor failed after {SETTLE_TIMEOUT:.0f} s{watch}")
        current = self._current(name)
        return _waiting(current) if current is not None else Outcome("pending")

    def _action_step(self, step: ActionStep) -> tuple[list[Observation], list[GroupObservation]]:
        # The delay outlasts the backoff of pods that failed once (see DEFAULT_ACTION_DELAY): a
        # property of both schedulers' queues that no watch can announce.
        time.sleep(step.delay)
        offset = self._log_offset()
        if step.on_object:
            if step.action == "create":
                self._create_object(step.body)
            else:
                path = f"{_collection_path(step.body)}/{step.name}"
                self.api("DELETE", path, ok=(200, 202))
                self._objects.remove(path)
        elif step.action == "create":
            self._create_node(step.body)
        else:
            path = f"/api/v1/nodes/{step.name}"
            if step.kind == "pod":
                path = self._pod_path(self._uids[step.name][0], step.name)
            elif step.kind == "podGroup":
                if step.name not in self._groups:
                    raise ApiFailure(f"{self.side}: {step.name} is not one of this scenario's pod groups")
                path = self._pod_group_path(self._groups[step.name].pod_group["metadata"]["namespace"], step.name)
            if step.action == "patch":
                self._merge_patch(path, step.body)
            else:
                self.api("DELETE", path + "?gracePeriodSeconds=0")
                if step.kind == "pod":
                    self._deleted.add(step.name)
        group_names = [name for name in step.observe if name in self._groups]
        pods = [name for name in step.observe if name not in self._groups]
        for pod in pods:
            if pod not in self._uids:
                raise ApiFailure(f"{self.side}: {pod} is neither a pod nor a pod group of this scenario")
        # Plain pods here; the groups' members are settled by _settle_groups below.
        watched = pods
        last: dict[str, Outcome | None] = {}
        changed = time.monotonic()
        deadline = changed + SETTLE_TIMEOUT

        def settled() -> bool | None:
            nonlocal last, changed
            now = time.monotonic()
            outcomes = {pod: None if (raw := self._current(pod)) is None else _outcome(raw) for pod in watched}
            if outcomes != last:
                changed = now
            last = outcomes
            all_bound = all(o is not None and o.verdict == "bound" for o in outcomes.values())
            return True if all_bound or now - changed > QUIET_SECONDS or now > deadline else None

        while self._watch.wait_until(settled, QUIET_SECONDS / 4) is None:
            pass
        if group_names:
            self._settle_groups(group_names, ACTION_GROUP_QUIET_SECONDS, until_bound=True)
        observations = []
        for pod in pods:
            raw = self._current(pod)
            outcome = (_outcome(raw) or _waiting(raw)) if raw is not None else Outcome("pending")
            namespace = self._uids[pod][0]
            scores = self._scores_since(offset, namespace, pod) if outcome.verdict == "bound" else None
            claims = None
            if raw is not None and self._dra:
                claims = tuple(dra.claim_outcome(key, claim) for key, claim in self._pod_claims(pod)[1])
            observations.append(Observation(f"{pod} ({step.label})", outcome, None, scores, claims))
        member_observations, groups = self._observe_groups(group_names, step.label, offset)
        return observations + member_observations, groups


# After a group's last member is bound, how long its PodGroup must stay unchanged before it is read:
# both schedulers write the PodGroupInitiallyScheduled condition asynchronously, beside the
# bindings, so a read at the moment of the last binding can precede it (a CI run read ours' older
# False once, at bfee06a).
BOUND_QUIET_SECONDS = 1.0


def groups_settled(all_bound: bool, unchanged_for: float, quiet: float, past_deadline: bool) -> bool:
    """Whether a settling group step is over: its members all bound and nothing about the group
    changed for BOUND_QUIET_SECONDS, or nothing changed for `quiet`, or the deadline passed."""
    if past_deadline or unchanged_for > quiet:
        return True
    return all_bound and unchanged_for >= BOUND_QUIET_SECONDS


def _node_ready(node: Raw) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _check_allocatable(side: str, wanted: Raw, seen: Raw) -> None:
    want = wanted["status"]["allocatable"]
    got = (seen.get("status") or {}).get("allocatable")
    if got != want:
        name = wanted["metadata"]["name"]
        raise ApiFailure(f"{side}: node {name} status.allocatable is {got}, not {want} (kwok's defaults?)")


def _metric_cache_sizes(metrics: Callable[[], str]) -> Callable[[], dict[str, int]]:
    """Our scheduler's cache sizes, from scheduler_cache_size (kept current on every change), and
    its pending pods (scheduler_pending_pods summed over the queues)."""

    def sizes() -> dict[str, int]:
        out: dict[str, int] = {"pending": 0}
        for family in text_string_to_metric_families(metrics()):
            for sample in family.samples:
                if sample.name == "scheduler_cache_size":
                    out[sample.labels.get("type", "")] = int(sample.value)
                elif sample.name == "scheduler_pending_pods":
                    out["pending"] += int(sample.value)
        return out

    return sizes


_DUMP_NODES = '"Dump of cached NodeInfo"'
_DUMP_QUEUE = '"Dump of scheduling queue"'
_DUMP_POD_COUNT = re.compile(r"Scheduled Pods\(number: (\d+)\)")
_DUMP_QUEUED_POD = re.compile(r"name: [^,]*, namespace: ")
DUMP_TIMEOUT = 10.0


def queued_pod_count(dump: str) -> int | None:
    """How many pods kube-scheduler's queue dump lists; `dump` starts at its "Dump of scheduling
    queue" (None: not all written yet). klog writes a multi-line value as `pods=<`, one tab-indented
    line per pod and ` >`; an empty one inline."""
    line_end = dump.find("\n")
    if line_end < 0:
        return None
    end = line_end
    if "pods=<" in dump[:line_end]:
        end = dump.find("\n >", line_end)
        if end < 0:
            return None
    return len(_DUMP_QUEUED_POD.findall(dump[:end]))


def _kube_cache_sizes(proc: ManagedProcess) -> Callable[[], dict[str, int]]:
    """kube-scheduler's cache sizes as its CacheDebugger dumps them to the log on SIGUSR2: exact and
    at once, where its scheduler_cache_size gauge is refreshed only once a second; and its pending
    pods, one line each in the dump of its scheduling queue (PendingPods: every queue, pod-group
    pods included)."""

    def sizes() -> dict[str, int]:
        offset = proc.log_path.stat().st_size
        proc.signal(signal.SIGUSR2)
        deadline = time.monotonic() + DUMP_TIMEOUT
        while True:
            with proc.log_path.open("rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
            start = text.find(_DUMP_NODES)
            end = text.find(_DUMP_QUEUE, start)
            pending = queued_pod_count(text[end:]) if start >= 0 and end >= 0 else None
            if pending is not None:
                dump = text[start:end]
                return {
                    "nodes": dump.count("Deleted: false"),
                    "pods": sum(int(n) for n in _DUMP_POD_COUNT.findall(dump)),
                    "pending": pending,
                }
            if time.monotonic() > deadline or not proc.alive():
                raise ApiFailure(f"{KUBE}: no cache dump in {proc.log_path} within {DUMP_TIMEOUT:.0f} s of SIGUSR2")
            time.sleep(0.01)  # the dump is a few log lines away

    return sizes


# kube-scheduler logs every node's final score (and each plugin's) at -v=10 in schedule_one.go,
# OpportunisticBatching's hints at -v=3 in batch.go, and where its queue puts a pod-group member at
# -v=5 in scheduling_queue.go (queue_race reads it); --vmodule keeps the rest of its log at -v=2.
KUBE_SCORE_LOGGING = ("--vmodule=schedule_one=10,batch=3,scheduling_queue=5",)


@dataclass
class _Sides:
    kube: Side
    ours: Side


def _start_sides(stack: ExitStack, gates: Mapping[str, bool], dra_controller: bool) -> _Sides:
    """Two control planes, kube-scheduler on one and ours on the other (all from the main thread,
    so every child dies with this process), both with `gates` (the apiserver serving
    scheduling.k8s.io/v1beta1 when GenericWorkload is among them); with `dra_controller`,
    kube-controller-manager's resourceclaim controller on each."""
    runtime_config = WORKLOAD_API_RUNTIME_CONFIG if gates.get(WORKLOAD_GATE) else None
    kube_plane = stack.enter_context(ControlPlane(feature_gates=gates, runtime_config=runtime_config))
    our_plane = stack.enter_context(ControlPlane(feature_gates=gates, runtime_config=runtime_config))
    if dra_controller:
        for plane in (kube_plane, our_plane):
            plane.start_kube_controller_manager(RESOURCECLAIM_CONTROLLER)
    kube_config = scheduler_config(KUBE)
    kube_scheduler = kube_plane.start_kube_scheduler(
        scheduler_name(KUBE, "default"), {"profiles": kube_config["profiles"]}, extra_args=KUBE_SCORE_LOGGING
    )
    assert kube_scheduler.port is not None
    config_path = our_plane.workdir / "agreement-scheduler.yaml"
    config_path.write_text(yaml.safe_dump(scheduler_config(OURS), sort_keys=False))
    args = ("--no-leader-elect", *feature_gate_args(gates))
    port = stack.enter_context(running_scheduler(our_plane, scheduler_name(OURS, "default"), config_path, args))
    return _Sides(
        Side(KUBE, kube_plane, _kube_cache_sizes(kube_scheduler), score_log=kube_scheduler.log_path),
        Side(OURS, our_plane, _metric_cache_sizes(lambda: metrics_text(port))),
    )


def run_agreement(
    scenarios: Sequence[Scenario],
    progress: Callable[[str], None] | None = None,
    info: RunInfo | None = None,
) -> AgreementReport:
    """Run `scenarios` through both schedulers (side by side) and compare them; scenarios with
    feature gates of their own run on control planes of their own, one pair per set of gates."""
    say = progress or (lambda _line: None)
    began = time.monotonic()
    registered = tuple(full_registry())
    config = parse_config(scheduler_config(OURS))
    runnable = [s for s in scenarios if not s.pending_plugins(registered)]
    by_gates: dict[tuple[tuple[str, bool], ...], list[Scenario]] = {}
    for scenario in runnable:
        by_gates.setdefault(scenario.feature_gates, []).append(scenario)
    runs: dict[str, tuple[SideRun, SideRun]] = {}
    lock = threading.Lock()

    def locked_say(line: str) -> None:
        with lock:
            say(line)

    for gates, batch in by_gates.items():
        started = time.monotonic()
        with ExitStack() as stack:
            sides = _start_sides(stack, dict(gates), any(s.uses_dra for s in batch))
            named = f" with {' '.join(feature_gate_args(dict(gates)))}" if gates else ""
            say(f"control planes and schedulers up{named} in {time.monotonic() - started:.1f} s")
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="agreement") as pool:
                kube_future = pool.submit(sides.kube.run_all, batch, locked_say)
                our_future = pool.submit(sides.ours.run_all, batch, locked_say)
                kube_runs, our_runs = kube_future.result(), our_future.result()
        runs.update({name: (kube_runs[name], our_runs[name]) for name in kube_runs})
    results = []
    for scenario in scenarios:
        if scenario.name not in runs:
            missing = ", ".join(scenario.pending_plugins(registered))
            results.append(ScenarioResult(scenario, "pending", error=f"not run: {missing} not registered"))
        else:
            kube_run, our_run = runs[scenario.name]
            result = compare(scenario, kube_run, our_run, config)
            results.append(dataclasses.replace(result, reruns=tuple(kube_run.reruns), raced=kube_run.raced))
    return AgreementReport(results, time.monotonic() - began, registered, info or RunInfo.now())
