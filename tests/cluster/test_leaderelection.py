"""Lease-based leader election against the real apiserver."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from harness.controlplane import ControlPlane
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.api.leaderelection import LeaseElector

pytestmark = pytest.mark.cluster


async def test_one_leader_at_a_time_and_release_hands_over(control_plane: ControlPlane) -> None:
    client = HttpApiClient(load_connection(str(control_plane.kubeconfig)))
    name = f"lease-{uuid.uuid4().hex[:8]}"
    first = LeaseElector(client, "kube-system", name, "first", lease_duration=3, renew_deadline=2, retry_period=0.5)
    second = LeaseElector(client, "kube-system", name, "second", lease_duration=3, renew_deadline=2, retry_period=0.5)
    try:
        assert await first.try_acquire_or_renew()
        first.is_leader = True
        assert not await second.try_acquire_or_renew()
        assert await first.try_acquire_or_renew()  # renewing keeps it
        lease = await client.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
        assert lease["spec"]["holderIdentity"] == "first"
        assert lease["spec"]["leaseDurationSeconds"] == 3
        await first.release()
        assert await second.try_acquire_or_renew()
        lease = await client.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
        assert lease["spec"]["holderIdentity"] == "second"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        await client.close()


async def test_a_dead_leaders_lease_is_taken_after_it_expires(control_plane: ControlPlane) -> None:
    client = HttpApiClient(load_connection(str(control_plane.kubeconfig)))
    name = f"lease-{uuid.uuid4().hex[:8]}"
    dead = LeaseElector(client, "kube-system", name, "dead", lease_duration=2, renew_deadline=1, retry_period=0.2)
    standby = LeaseElector(client, "kube-system", name, "standby", lease_duration=2, renew_deadline=1, retry_period=0.2)
    try:
        assert await dead.try_acquire_or_renew()
        stop = asyncio.Event()
        started = asyncio.get_running_loop().time()
        assert await asyncio.wait_for(standby.acquire(stop), timeout=10)
        waited = asyncio.get_running_loop().time() - started
        assert waited >= 1.5  # it had to watch the lease go stale for a lease duration
    finally:
        await client.close()
