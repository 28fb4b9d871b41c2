"""The API client, the lease elector and the watch Reflector against a real apiserver behind the
fault-injecting proxy: timeouts stay ApiErrors, a failing relist and a black-holed watch recover."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.faultproxy import FaultProxy
from harness.workload import api_pod
from scheduler.api.client import ApiError
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.api.leaderelection import LeaseElector
from scheduler.api.watch import Reflector
from scheduler.model.objects import Pod

pytestmark = pytest.mark.cluster


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(control_plane) as running:
        yield running


def _client(proxy: FaultProxy, tmp_path: Path, request_timeout: float = 30.0) -> HttpApiClient:
    connection = load_connection(str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")))
    return HttpApiClient(connection, request_timeout=request_timeout)


async def _until(check: Any, within: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.05)


async def test_a_request_that_times_out_is_an_api_error(proxy: FaultProxy, tmp_path: Path) -> None:
    client = _client(proxy, tmp_path, request_timeout=0.5)
    try:
        proxy.slow(3.0, count=1)
        with pytest.raises(ApiError) as raised:
            await client.request("GET", "/api/v1/namespaces/default")
        assert raised.value.status == 0
        assert "timed out" in raised.value.message
        assert (await client.request("GET", "/api/v1/namespaces/default"))["metadata"]["name"] == "default"
    finally:
        await client.close()


async def test_the_lease_elector_survives_a_request_timeout(proxy: FaultProxy, tmp_path: Path) -> None:
    client = _client(proxy, tmp_path, request_timeout=0.5)
    name = f"lease-{uuid.uuid4().hex[:8]}"
    elector = LeaseElector(client, "kube-system", name, "me", lease_duration=3, renew_deadline=2, retry_period=0.5)
    try:
        proxy.slow(3.0, count=1)
        assert await elector.try_acquire_or_renew() is False  # no exception escapes
        assert await elector.try_acquire_or_renew() is True
    finally:
        await client.close()


async def test_a_renew_that_hangs_is_abandoned_at_the_renew_deadline(proxy: FaultProxy, tmp_path: Path) -> None:
    client = _client(proxy, tmp_path)
    name = f"lease-{uuid.uuid4().hex[:8]}"
    elector = LeaseElector(client, "kube-system", name, "me", lease_duration=3, renew_deadline=1, retry_period=0.2)
    try:
        assert await elector.acquire(asyncio.Event())
        assert elector.leading()
        proxy.freeze()
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(Exception, match="failed to renew lease"):
            await asyncio.wait_for(elector.hold(asyncio.Event()), timeout=10)
        assert loop.time() - began < 2.5
        assert not elector.leading()
    finally:
        proxy.thaw()
        await client.close()


class Seen:
    def __init__(self) -> None:
        self.names: set[str] = set()

    def __call__(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind != "DELETED":
            self.names.add((obj.get("metadata") or {}).get("name", ""))


def _create_pod(k8s: Any, namespace: str, name: str) -> None:
    k8s_client.CoreV1Api(k8s).create_namespaced_pod(namespace, api_pod(name, "nobody"))


async def test_a_relist_that_fails_after_410_is_retried(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    client = _client(proxy, tmp_path)
    path = f"/api/v1/namespaces/{namespace}/pods"
    seen = Seen()
    reflector = Reflector(client, path, seen)
    await reflector.list()

    def is_watch(method: str, request_path: str) -> bool:
        return request_path.startswith(path) and "watch=1" in request_path

    def is_list(method: str, request_path: str) -> bool:
        return request_path.startswith(path) and "watch=1" not in request_path

    proxy.fail(410, 1, is_watch)
    proxy.fail(500, 2, is_list)
    task = asyncio.create_task(reflector.run(listed=True))
    try:
        await _until(lambda: proxy.injected.by_status.get(500) == 2, 10, "the relists to fail")
        _create_pod(k8s, namespace, "after-relist")
        await _until(lambda: "after-relist" in seen.names, 20, "the reflector to see the new pod")
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_a_black_holed_watch_is_dropped_after_the_read_timeout(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    client = _client(proxy, tmp_path)
    seen = Seen()
    reflector = Reflector(client, f"/api/v1/namespaces/{namespace}/pods", seen, read_timeout=1.0)
    task = asyncio.create_task(reflector.run())
    try:
        _create_pod(k8s, namespace, "before")
        await _until(lambda: "before" in seen.names, 10, "the watch to work")
        proxy.stall_streams()  # the open watch gets nothing more, as on a dead connection
        _create_pod(k8s, namespace, "while-stalled")
        # Only a new watch can bring it: the stalled one must be given up after the read timeout.
        await _until(lambda: "while-stalled" in seen.names, 10, "the reflector to see the pod through a new watch")
        assert reflector.relists == 1  # resumed from its resourceVersion, not relisted
        assert not task.done()
    finally:
        proxy.resume_streams()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_429_with_retry_after_is_retried_and_a_bare_500_is_not(proxy: FaultProxy, tmp_path: Path) -> None:
    client = _client(proxy, tmp_path)
    try:
        proxy.fail(429, 2, retry_after=1)
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert (await client.request("GET", "/api/v1/namespaces/default"))["metadata"]["name"] == "default"
        assert loop.time() - began >= 1.9  # waited as asked, twice
        assert proxy.injected.by_status[429] == 2
        proxy.fail(500, 1)
        with pytest.raises(ApiError) as raised:
            await client.request("GET", "/api/v1/namespaces/default")
        assert raised.value.status == 500
    finally:
        await client.close()


async def test_a_bind_never_waits_behind_slow_evictions(
    proxy: FaultProxy, tmp_path: Path, core: Any, namespace: str
) -> None:
    """Evictions the apiserver is slow to answer hold every connection of the general pool; a bind
    issued meanwhile goes through the bind lane at once (PreemptionAsync's binds behind victims)."""
    connection = load_connection(str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")))
    client = HttpApiClient(connection, max_connections=4)
    core.create_namespaced_pod(namespace, api_pod("bound", "nobody"))
    created = core.read_namespaced_pod("bound", namespace)
    pod = Pod.from_raw({"metadata": {"name": "bound", "namespace": namespace, "uid": created.metadata.uid}})

    def is_eviction(method: str, path: str) -> bool:
        return path.endswith("/eviction")

    proxy.slow(4.0, count=4, matcher=is_eviction)
    victims = [
        Pod.from_raw({"metadata": {"name": f"victim-{i}", "namespace": namespace, "uid": f"v{i}"}}) for i in range(4)
    ]
    evictions = [asyncio.create_task(client.evict_pod(victim)) for victim in victims]
    try:
        await _until(lambda: len(proxy.delayed_now) == 4, 10, "the evictions to hold every general connection")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await client.bind(pod, "some-node")
        assert loop.time() - began < 2.0  # the evictions hold their connections 4 s
        assert core.read_namespaced_pod("bound", namespace).spec.node_name == "some-node"
        assert not any(task.done() for task in evictions)
        for outcome in await asyncio.gather(*evictions, return_exceptions=True):
            assert isinstance(outcome, ApiError) and outcome.not_found
    finally:
        for task in evictions:
            task.cancel()
        await asyncio.gather(*evictions, return_exceptions=True)
        await client.close()
