"""Failure reporting against the real apiserver: RBAC that denies events, stale reports after a
bind, events.k8s.io series, and `kubectl describe` of our pods beside kube-scheduler's."""

from __future__ import annotations

import functools
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness import chart
from harness.controlplane import ControlPlane, binary
from harness.workload import api_pod, running_scheduler_process, scheduled_condition, wait_for
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.model.objects import Pod
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster


def rules_without_events(plane: ControlPlane) -> list[dict[str, Any]]:
    """The chart's ClusterRole (what the scheduler needs, proven by test_rbac) minus every events rule."""
    docs = chart.documents(chart.render())
    (role,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and any("pods/binding" in r.get("resources", ()) for r in d["rules"])
    ]
    return [rule for rule in role["rules"] if "events" not in rule.get("resources", ())]


UNFIT = (
    "0/1 nodes are available: 1 Insufficient cpu. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)


def _bound(core: Any, namespace: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, namespace).spec.node_name or "")


def _scheduled(core: Any, namespace: str, name: str) -> tuple[str, str, str] | None:
    """The pod's PodScheduled condition as (status, reason, message)."""
    condition = scheduled_condition(core.read_namespaced_pod(name, namespace))
    return (condition.status, condition.reason, condition.message) if condition is not None else None


@pytest.fixture
def kubeconfig_without_events(control_plane: ControlPlane, k8s: Any, namespace: str) -> Iterator[Path]:
    """A kubeconfig for a ServiceAccount with the chart's rules but no events: every event write is a 403."""
    rbac: Any = k8s_client.RbacAuthorizationV1Api(k8s)  # plain dicts as bodies
    core: Any = k8s_client.CoreV1Api(k8s)
    name = f"no-events-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules_without_events(control_plane)})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path = control_plane.workdir / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    try:
        yield path
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


def test_denied_events_cost_neither_the_condition_nor_a_bind(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    kubeconfig_without_events: Path,
) -> None:
    node = nodes(f"{namespace}-n0", cpu="2")
    args = ("--kubeconfig", str(kubeconfig_without_events), "--no-leader-elect")
    with running_scheduler_process(control_plane, scheduler_name, extra_args=args) as process:
        core.create_namespaced_pod(namespace, api_pod("huge", scheduler_name, cpu="8"))
        for i in range(20):
            core.create_namespaced_pod(namespace, api_pod(f"small-{i}", scheduler_name, cpu="50m"))

        seen: list[Any] = []

        def reported() -> bool:
            seen[:] = [_scheduled(core, namespace, "huge")]
            return bool(seen[0] == ("False", "Unschedulable", UNFIT))

        try:
            wait_for(reported, timeout=60, what="PodScheduled=False on the unschedulable pod")
        except AssertionError as err:
            raise AssertionError(f"{err}; last seen {seen}; log:\n{process.log_path.read_text()[-3000:]}") from None
        wait_for(
            lambda: all(_bound(core, namespace, f"small-{i}") == node for i in range(20)),
            timeout=60,
            what="20 bound pods",
        )
        log = process.log_path.read_text()
    assert core.list_namespaced_event(namespace).items == []  # the denial was real
    for i in range(20):
        condition = scheduled_condition(core.read_namespaced_pod(f"small-{i}", namespace))
        assert condition is not None and condition.status == "True"
    assert "binding cycle crashed" not in log
    assert "binding failed" not in log
    rejections = [line for line in log.splitlines() if "server rejected event" in line]
    assert 1 <= len(rejections) <= 2, rejections  # logged once per HTTP status, not once per event
    assert "Forbidden" in rejections[0]


async def test_a_stale_report_never_overwrites_a_bind_and_a_fresh_one_lands(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory
) -> None:
    node = nodes(f"{namespace}-n0", cpu="2")
    client = HttpApiClient(load_connection(str(control_plane.kubeconfig)))
    sched = build_scheduler(default_config(), full_registry(), client, {})
    try:
        for name in ("stale", "fresh"):
            core.create_namespaced_pod(namespace, api_pod(name, "nobody"))
        core.patch_namespaced_pod_status("fresh", namespace, {"status": {"nominatedNodeName": node}})
        views = {
            name: Pod.from_raw(await client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))
            for name in ("stale", "fresh")
        }
        # Bound (by anyone) after the view the report was made from.
        await client.bind(views["stale"], node)
        for pod in views.values():
            sched.pending_pods[pod.uid] = pod
            sched.status_writes.report(pod, "Unschedulable", UNFIT, "")
        await sched.drain()
        stale = core.read_namespaced_pod("stale", namespace)
        assert stale.spec.node_name == node
        condition = scheduled_condition(stale)
        assert condition is not None and condition.status == "True"

        fresh = core.read_namespaced_pod("fresh", namespace)
        condition = scheduled_condition(fresh)
        assert condition is not None
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        assert condition.observed_generation == fresh.metadata.generation == 1
        assert fresh.status.nominated_node_name is None  # the cleared nomination was sent as null
        first_transition = condition.last_transition_time

        # A later failure with another message keeps the transition time (status unchanged).
        view = Pod.from_raw(await client.request("GET", f"/api/v1/namespaces/{namespace}/pods/fresh"))
        sched.pending_pods[view.uid] = view
        sched.status_writes.report(view, "Unschedulable", "0/1 nodes are available: 1 Too many pods.", None)
        await sched.drain()
        condition = scheduled_condition(core.read_namespaced_pod("fresh", namespace))
        assert condition is not None and condition.message == "0/1 nodes are available: 1 Too many pods."
        assert condition.last_transition_time == first_transition
    finally:
        await client.close()


# ---- kubectl describe: ours and kube-scheduler's pods read the same ------------------------------

NO_PREEMPTION = {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}


def _describe(kubectl: Path, kubeconfig: Path, namespace: str, pod: str) -> str:
    out = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "-n", namespace, "describe", "pod", pod],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout


def _section(text: str, title: str) -> list[str]:
    """The lines of one top-level section of `kubectl describe` (title line excluded)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{title}:"))
    body: list[str] = []
    if lines[start].strip() != f"{title}:":
        body.append(lines[start].split(":", 1)[1].strip())  # "Events:  <none>"
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break
        body.append(line)
    return body


_AGE = re.compile(r"\b\d+(\.\d+)?(ms|s|m|h|d)\d*(s|m|h)?\b")


def _normalized(lines: list[str], replacements: dict[str, str]) -> list[str]:
    out = []
    for line in lines:
        for old, new in replacements.items():
            line = line.replace(old, new)
        out.append(" ".join(_AGE.sub("AGE", line).split()))
    return out


def _series_counts(events_api: Any, namespace: str, pod: str) -> list[int]:
    items = events_api.list_namespaced_event(namespace, field_selector=f"regarding.name={pod}").items
    return sorted((e.series.count if e.series else 1) for e in items if e.reason == "FailedScheduling")


def _wait_failed_scheduling(events_api: Any, namespace: str, pod: str, expected: list[int]) -> None:
    wait_for(
        lambda: _series_counts(events_api, namespace, pod) == expected,
        timeout=60,
        what=f"FailedScheduling events of {pod} with counts {expected}",
    )


def _running(core: Any, namespace: str, pod: str) -> bool:
    return bool(core.read_namespaced_pod(pod, namespace).status.phase == "Running")


def test_kubectl_describe_reads_the_same_for_our_pods_and_kube_schedulers(
    control_plane: ControlPlane, k8s: Any, core: Any, namespace: str, nodes: NodeFactory
) -> None:
    node = nodes(f"{namespace}-n0", cpu="1")
    events_api = k8s_client.EventsV1Api(k8s)
    suffix = uuid.uuid4().hex[:6]
    kube, ours = f"kube-{suffix}", f"ours-{suffix}"
    # Fillers on the node (bound by nodeName, no scheduler): deleting one is an AssignedPodDelete,
    # which retries both pending pods, as in the hand-made comparison of issue 8.
    for i in range(2):
        filler = api_pod(f"filler-{i}", "nobody", cpu="10m")
        assert filler.spec is not None
        filler.spec.node_name = node
        core.create_namespaced_pod(namespace, filler)
    config = control_plane.workdir / f"{ours}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": ours, "plugins": NO_PREEMPTION}],
            }
        )
    )
    kube_scheduler = control_plane.start_kube_scheduler(
        kube, {"profiles": [{"schedulerName": kube, "plugins": NO_PREEMPTION}]}
    )
    try:
        with running_scheduler_process(control_plane, ours, config, ("--no-leader-elect",)):
            for side in (kube, ours):
                core.create_namespaced_pod(namespace, api_pod(f"{side}-pending", side, cpu="2"))
                core.create_namespaced_pod(namespace, api_pod(f"{side}-bound", side, cpu="10m"))
            for side in (kube, ours):
                _wait_failed_scheduling(events_api, namespace, f"{side}-pending", [1])
                wait_for(functools.partial(_running, core, namespace, f"{side}-bound"), 60, f"{side}-bound Running")
            # Two retries each: the second makes a second Event (the first one's status patch changed
            # the pod's resourceVersion, part of the isomorphic key), the third a series of it.
            for i, expected in ((0, [1, 1]), (1, [1, 2])):
                core.delete_namespaced_pod(f"filler-{i}", namespace, grace_period_seconds=0)
                for side in (kube, ours):
                    _wait_failed_scheduling(events_api, namespace, f"{side}-pending", expected)
            described = {
                (side, kind): _describe(binary("kubectl"), control_plane.kubeconfig, namespace, f"{side}-{kind}")
                for side in (kube, ours)
                for kind in ("pending", "bound")
            }
    finally:
        control_plane.stop_process(kube_scheduler)
    for kind in ("pending", "bound"):
        for section in ("Conditions", "Events"):
            sides = {
                side: _normalized(
                    _section(described[side, kind], section),
                    {f"{namespace}/{side}-{kind}": "NS/POD", side: "SCHEDULER", node: "NODE"},
                )
                for side in (kube, ours)
            }
            assert sides[ours] == sides[kube], (
                f"{kind} pod, {section}:\n{described[kube, kind]}\n---\n{described[ours, kind]}"
            )
    events = " ".join(_section(described[ours, "pending"], "Events"))
    assert "(x2 over" in events and ours in events  # a series, reported as our profile
