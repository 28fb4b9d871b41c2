"""Metrics parity with kube-scheduler v1.37.2, measured on the same workload.

The same small workload (pods that bind, pods that fit nowhere, a gated pod, a bound pod
deleted) runs through the real kube-scheduler (a second profile on the harness's control
plane, leader election on) and through ours, side by side. Both /metrics are scraped and every
`scheduler_*`, `rest_client_*` and `leader_election_*` family kube-scheduler exports must be in
ours with the same type, label names and histogram buckets, or be listed in NOT_APPLICABLE with
the reason (the README quotes this table).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from harness.controlplane import ControlPlane
from harness.workload import api_pod, metrics_text, registry_value, running_scheduler, wait_for
from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.api.leaderelection import LeaseElector

pytestmark = pytest.mark.cluster

COMPARED_PREFIXES = ("scheduler_", "rest_client_", "leader_election_")

# Families kube-scheduler v1.37.2 exports that ours does not, and why (exposed names).
NOT_APPLICABLE: dict[str, str] = {
    "rest_client_transport_cache_entries": "no transport cache: one aiohttp session per process",
    "rest_client_transport_create_calls_total": "no transport cache: one aiohttp session per process",
    "rest_client_transport_cert_rotation_gc_calls_total": "no transport cache: one aiohttp session per process",
    "rest_client_exec_plugin_certificate_rotation_age": "client certificates come from the kubeconfig loader; "
    "exec-plugin certificate rotation is not tracked",
    "rest_client_exec_plugin_ttl_seconds": "exec-plugin certificate TTLs are not tracked",
}

# Label values that must be spelled as kube writes them: ours may use fewer of them, never others.
CHECKED_VALUES = {
    ("scheduler_schedule_attempts_total", "result"),
    ("scheduler_scheduling_attempt_duration_seconds", "result"),
    ("scheduler_pending_pods", "queue"),
    ("scheduler_queued_entities", "queue"),
    ("scheduler_queued_entities", "type"),
    ("scheduler_cache_size", "type"),
    ("scheduler_framework_extension_point_duration_seconds", "extension_point"),
    ("scheduler_framework_extension_point_duration_seconds", "status"),
    ("scheduler_plugin_evaluation_total", "extension_point"),
    ("scheduler_plugin_evaluation_total", "plugin"),
    ("scheduler_unschedulable_pods", "plugin"),
    ("scheduler_event_handling_duration_seconds", "event"),
    ("scheduler_goroutines", "operation"),
    ("rest_client_requests_total", "method"),
}

NOT_LABELS = {"le", "quantile"}


class Family:
    """One exposed metric family as a scrape shows it."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.labels: set[str] = set()
        self.values: dict[str, set[str]] = {}
        self.buckets: set[float] = set()
        self.has_samples = False


def parse(text: str) -> dict[str, Family]:
    families: dict[str, Family] = {}
    for parsed in text_string_to_metric_families(text):
        name = parsed.name + "_total" if parsed.type == "counter" else parsed.name
        family = families[name] = Family(name, parsed.type)
        for sample in parsed.samples:
            family.has_samples = True
            for key, value in sample.labels.items():
                if key == "le":
                    family.buckets.add(float(value))
                elif key not in NOT_LABELS:
                    family.labels.add(key)
                    family.values.setdefault(key, set()).add(value)
    return families


def declared(name: str) -> tuple[set[str], set[float]]:
    """Label names and bucket bounds our code declares for a family no sample shows yet."""
    collector: Collector | None = None
    for candidate in list(metrics.REGISTRY._collector_to_names):
        if name in metrics.REGISTRY._collector_to_names[candidate]:
            collector = candidate
    assert collector is not None, f"{name} is not registered"
    labels = getattr(collector, "_labelnames", None) or getattr(collector, "labels", None) or ()
    bounds = getattr(collector, "_upper_bounds", ())
    return set(labels), set(bounds)


def kube_metrics(port: int | None) -> str:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=insecure, timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def gated_pod(name: str, scheduler_name: str) -> k8s_client.V1Pod:
    pod = api_pod(name, scheduler_name)
    assert pod.spec is not None
    pod.spec.scheduling_gates = [k8s_client.V1PodSchedulingGate(name="example.com/hold")]
    return pod


def selector_pod(name: str, scheduler_name: str) -> k8s_client.V1Pod:
    pod = api_pod(name, scheduler_name)
    assert pod.spec is not None
    pod.spec.node_selector = {"metrics-parity": "nowhere"}
    return pod


BOUND = ("fit-0", "fit-1", "fit-2", "fit-3")
UNSCHEDULABLE = ("big-0", "big-1", "elsewhere")


def submit_workload(core: Any, namespace: str, scheduler_name: str) -> None:
    for name in BOUND:
        core.create_namespaced_pod(namespace, api_pod(name, scheduler_name))
    for name in ("big-0", "big-1"):
        core.create_namespaced_pod(namespace, api_pod(name, scheduler_name, cpu="50"))
    core.create_namespaced_pod(namespace, selector_pod("elsewhere", scheduler_name))
    core.create_namespaced_pod(namespace, gated_pod("gated", scheduler_name))


def settled(core: Any, namespace: str) -> bool:
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    if not all(pods.get(name) is not None and pods[name].spec.node_name for name in BOUND):
        return False
    for name in UNSCHEDULABLE:
        conditions = pods[name].status.conditions or [] if name in pods else []
        if not any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions):
            return False
    return True


def saw_assigned_pod_delete(text: str) -> bool:
    return 'scheduler_event_handling_duration_seconds_count{event="AssignedPodDelete"}' in text


def flushed_past_the_delete(text: str) -> bool:
    """kube-scheduler writes some series (Sign's extension-point duration, queueing-hint durations)
    through an asynchronous recorder flushed once a second, first in first out: once the hint it ran
    for the delete (NodeResourcesFit, for the pods too big to fit) shows, everything observed before
    it (every pod's Sign at queue entry) shows too."""
    return any(
        line.startswith("scheduler_queueing_hint_execution_duration_seconds_count{")
        and 'event="AssignedPodDelete"' in line
        for line in text.splitlines()
    )


@pytest.fixture
def two_namespaces(core: Any, namespace: str) -> Iterator[tuple[str, str]]:
    other = f"{namespace}-ours"
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=other)))
    try:
        yield namespace, other
    finally:
        for pod in core.list_namespaced_pod(other).items:
            core.delete_namespaced_pod(pod.metadata.name, other, grace_period_seconds=0)
        core.delete_namespace(other)


def test_every_kube_scheduler_family_is_ours_or_not_applicable(
    control_plane: ControlPlane, core: Any, nodes: Any, two_namespaces: tuple[str, str]
) -> None:
    kube_ns, our_ns = two_namespaces
    suffix = uuid.uuid4().hex[:6]
    kube_name, our_name = f"kube-{suffix}", f"ours-{suffix}"
    nodes(f"parity-a-{suffix}", cpu="2")
    nodes(f"parity-b-{suffix}", cpu="2")
    kube = control_plane.start_kube_scheduler(
        kube_name,
        {
            "leaderElection": {
                "leaderElect": True,
                "resourceNamespace": kube_ns,
                "resourceName": kube_name,
            }
        },
    )
    try:
        lease_args = ("--leader-elect-resource-namespace", our_ns, "--leader-elect-resource-name", our_name)
        with running_scheduler(control_plane, our_name, extra_args=lease_args) as our_port:
            submit_workload(core, kube_ns, kube_name)
            submit_workload(core, our_ns, our_name)
            for ns in (kube_ns, our_ns):
                wait_for(functools.partial(settled, core, ns), 60, f"workload settled in {ns}")
                core.delete_namespaced_pod("fit-0", ns)
            wait_for(lambda: saw_assigned_pod_delete(kube_metrics(kube.port)), 30, "kube saw the delete")
            wait_for(lambda: flushed_past_the_delete(kube_metrics(kube.port)), 30, "kube flushed the delete hint")
            wait_for(lambda: saw_assigned_pod_delete(metrics_text(our_port)), 30, "ours saw the delete")
            kube_families = parse(kube_metrics(kube.port))
            our_families = parse(metrics_text(our_port))
    finally:
        control_plane.stop_process(kube)

    compared = {name: f for name, f in kube_families.items() if name.startswith(COMPARED_PREFIXES)}
    problems: list[str] = []
    for name, theirs in sorted(compared.items()):
        if name in NOT_APPLICABLE:
            continue
        ours = our_families.get(name)
        if ours is None:
            problems.append(f"{name}: missing ({theirs.kind}, labels {sorted(theirs.labels)})")
            continue
        if ours.kind != theirs.kind:
            problems.append(f"{name}: type {ours.kind}, kube {theirs.kind}")
        labels, buckets = (ours.labels, ours.buckets) if ours.has_samples else declared(name)
        if theirs.has_samples and labels != theirs.labels:
            problems.append(f"{name}: labels {sorted(labels)}, kube {sorted(theirs.labels)}")
        if theirs.kind == "histogram" and buckets != theirs.buckets:
            problems.append(f"{name}: buckets {sorted(buckets)}, kube {sorted(theirs.buckets)}")
        for family, label in CHECKED_VALUES:
            if family == name and label in ours.values:
                foreign = ours.values[label] - theirs.values.get(label, set())
                if foreign:
                    problems.append(f"{name}: {label} values {sorted(foreign)} kube did not write")
    assert not problems, "\n".join(problems)
    assert our_families["leader_election_master_status"].values["name"] == {our_name}
    assert kube_families["leader_election_master_status"].values["name"] == {"kube-scheduler"}


async def test_leader_election_master_status_follows_the_lease(control_plane: ControlPlane) -> None:
    client = HttpApiClient(load_connection(str(control_plane.kubeconfig)))
    name = f"lease-{uuid.uuid4().hex[:8]}"
    elector = LeaseElector(client, "kube-system", name, "me", lease_duration=3, renew_deadline=2, retry_period=0.5)
    status = "leader_election_master_status"
    try:
        assert metrics.REGISTRY.get_sample_value(status, {"name": name}) == 0  # backup until it leads
        assert await elector.acquire(asyncio.Event())
        assert metrics.REGISTRY.get_sample_value(status, {"name": name}) == 1
        assert await elector.try_acquire_or_renew()  # a renewal reads first: client-go's slow path
        assert metrics.REGISTRY.get_sample_value("leader_election_slowpath_total", {"name": name}) == 1
        await elector.release()
        assert metrics.REGISTRY.get_sample_value(status, {"name": name}) == 0
    finally:
        await client.close()


async def test_rest_client_metrics_per_request_against_the_apiserver(control_plane: ControlPlane) -> None:
    connection = load_connection(str(control_plane.kubeconfig))
    client = HttpApiClient(connection)
    host = connection.host_label
    missing = f"/api/v1/namespaces/default/pods/absent-{uuid.uuid4().hex[:8]}"

    def value(name: str, **labels: str) -> float:
        return registry_value(metrics.REGISTRY, name, **labels)

    before = value("rest_client_requests_total", code="404", method="GET", host=host)
    sizes = value("rest_client_response_size_bytes_sum", verb="GET", host=host)
    try:
        with pytest.raises(ApiError):
            await client.request("GET", missing)
    finally:
        await client.close()
    assert value("rest_client_requests_total", code="404", method="GET", host=host) == before + 1
    assert value("rest_client_response_size_bytes_sum", verb="GET", host=host) > sizes  # the Status body
    assert host == f"127.0.0.1:{control_plane.server.rsplit(':', 1)[1]}"
