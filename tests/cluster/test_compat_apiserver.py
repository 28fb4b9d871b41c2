"""The scheduler against the older kube-apiserver minor (K8S_COMPAT_VERSION), so an operator who
has not upgraded yet is covered: bind, the unschedulable report (status patch and event), the Lease
of leader election, and a watch that resumes from its resourceVersion without a relist.

Owns its own control plane (the session one runs K8S_VERSION); must never fall back to the pinned
apiserver when the older one is missing (that would pass without testing anything).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane, pinned_versions
from harness.workload import api_pod, make_node, pod_events, running_scheduler, scheduled_condition, wait_for
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.api.watch import Reflector
from tests.cluster.test_leaderelection import test_one_leader_at_a_time_and_release_hands_over as lease_handover
from tests.conftest import api_client

pytestmark = pytest.mark.cluster

COMPAT_VERSION = pinned_versions()["K8S_COMPAT_VERSION"]


@pytest.fixture(scope="module")
def compat_plane() -> Iterator[ControlPlane]:
    with ControlPlane(apiserver_version=COMPAT_VERSION) as plane:
        yield plane


@pytest.fixture(scope="module")
def compat_core(compat_plane: ControlPlane) -> Iterator[Any]:
    api = api_client(compat_plane)
    try:
        yield k8s_client.CoreV1Api(api)
    finally:
        api.close()


def test_the_older_apiserver_really_runs(compat_plane: ControlPlane) -> None:
    api = api_client(compat_plane)
    try:
        version = k8s_client.VersionApi(api).get_code().git_version
    finally:
        api.close()
    assert version == COMPAT_VERSION != pinned_versions()["K8S_VERSION"]


def test_bind_and_unschedulable_report(compat_plane: ControlPlane, compat_core: Any) -> None:
    core = compat_core
    namespace = f"compat-{uuid.uuid4().hex[:8]}"
    scheduler_name = f"sched-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=namespace)))
    node = f"{namespace}-n0"
    make_node(core, node, cpu="2", memory="4Gi")
    try:
        with running_scheduler(compat_plane, scheduler_name):
            core.create_namespaced_pod(namespace, api_pod("fits", scheduler_name, cpu="500m"))
            core.create_namespaced_pod(namespace, api_pod("huge", scheduler_name, cpu="8"))
            wait_for(
                lambda: core.read_namespaced_pod("fits", namespace).spec.node_name == node,
                timeout=60,
                what="pod bound on the older apiserver",
            )

            def reported() -> bool:
                condition = scheduled_condition(core.read_namespaced_pod("huge", namespace))
                return bool(
                    condition is not None
                    and condition.status == "False"
                    and condition.reason == "Unschedulable"
                    and condition.message
                    == "0/1 nodes are available: 1 Insufficient cpu. "
                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
                )

            wait_for(reported, timeout=60, what="PodScheduled=False on the older apiserver")
            wait_for(
                lambda: any(e.reason == "FailedScheduling" for e in pod_events(core, namespace, "huge")),
                timeout=30,
                what="FailedScheduling event on the older apiserver",
            )
            assert any(
                e.reason == "Scheduled" and e.message == f"Successfully assigned {namespace}/fits to {node}"
                for e in pod_events(core, namespace, "fits")
            )
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        core.delete_node(node)


async def test_lease_acquire_renew_release(compat_plane: ControlPlane) -> None:
    await lease_handover(compat_plane)  # the same checks as against the pinned apiserver


async def test_watch_resumes_from_its_resource_version(compat_plane: ControlPlane, compat_core: Any) -> None:
    namespace = f"watch-{uuid.uuid4().hex[:8]}"
    compat_core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=namespace)))
    client = HttpApiClient(load_connection(str(compat_plane.kubeconfig)))
    seen: list[tuple[str, str]] = []

    def handler(kind: str, obj: Mapping[str, Any]) -> None:
        seen.append((kind, obj["metadata"]["name"]))

    reflector = Reflector(client, f"/api/v1/namespaces/{namespace}/configmaps", handler, timeout_seconds=1)
    try:
        await reflector.list()
        assert seen == []
        listed_version = reflector.resource_version
        for name in ("first", "second"):
            compat_core.create_namespaced_config_map(
                namespace, k8s_client.V1ConfigMap(metadata=k8s_client.V1ObjectMeta(name=name))
            )
            # Each watch request ends after timeoutSeconds; the next resumes where it stopped.
            for _ in range(20):
                assert await asyncio.wait_for(reflector.watch_once(), timeout=30)
                if ("ADDED", name) in seen:
                    break
        assert seen == [("ADDED", "first"), ("ADDED", "second")]  # each once: resumed, never relisted
        assert reflector.resource_version not in ("", listed_version)
    finally:
        await client.close()
        compat_core.delete_namespace(namespace)
