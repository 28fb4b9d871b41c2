"""Leader election on a coordination.k8s.io/v1 Lease, with kube-scheduler's timings.

Only the leader schedules; every replica keeps its informers warm. Expiry is judged by when
*this* process last saw the lease record change (not by the holder's clock), so clock skew
between replicas cannot make two leaders. Leadership that cannot be renewed within the renew
deadline is lost, and the process must stop scheduling at once: every acquire/renew attempt is
abandoned when the renew deadline runs out (a hung connection cannot keep an old leader alive),
and `leading()` turns False the moment the deadline passes, whatever the renew loop is doing, so
that writes gated on it stop before a standby can take the lease (renewDeadline < leaseDuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.http import HttpApiClient

log = structlog.get_logger("leaderelection")


class LeadershipLost(Exception):
    pass


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        client: HttpApiClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("leader election needs leaseDuration > renewDeadline > retryPeriod > 0")
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0  # when the last successful acquire/renew attempt began
        self.is_leader = False
        metrics.leader_election_master_status.labels(name).set(0)

    def leading(self) -> bool:
        """True while this process may write: it holds the lease and renewed it within the renew deadline."""
        return self.is_leader and self._clock() - self._renewed_at < self.renew_deadline

    async def _attempt(self, budget: float) -> bool:
        """One try_acquire_or_renew, given up after `budget` seconds (a black-holed connection)."""
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout=budget)
        except TimeoutError:
            log.warning("lease request timed out", lease=f"{self.namespace}/{self.name}", timeout=round(budget, 3))
            return False

    async def try_acquire_or_renew(self) -> bool:
        now = self._clock()
        try:
            lease = await self.client.request("GET", self.path)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("reading lease failed", lease=self.name, error=str(exc))
                return False
            spec = self._spec(transitions=0, acquire=True)
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name},
                "spec": spec,
            }
            try:
                await self.client.request("POST", self.collection, body, fenced=False)
            except ApiError as create_error:
                log.info("creating lease failed", lease=self.name, error=str(create_error))
                return False
            self._observe(spec, now)
            self._renewed_at = now
            return True
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observe(spec, now)
        holder = spec.get("holderIdentity") or ""
        held_by_other = holder and holder != self.identity
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if held_by_other and self._observed_at + duration > now:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = self._spec(
            transitions=transitions + (1 if holder != self.identity else 0),
            acquire=holder != self.identity,
            previous=spec,
        )
        lease["spec"] = new_spec
        if self.is_leader:  # client-go's slow path: renewing after a read (ours always reads first)
            metrics.leader_election_slowpath.labels(self.name).inc()
        try:
            await self.client.request("PUT", self.path, lease, fenced=False)
        except ApiError as exc:
            log.info("updating lease failed", lease=self.name, error=str(exc))
            return False
        self._observe(new_spec, now)
        self._renewed_at = now
        return True

    def _spec(self, transitions: int, acquire: bool, previous: dict[str, Any] | None = None) -> dict[str, Any]:
        now = _micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": now if acquire else (previous or {}).get("acquireTime", now),
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: dict[str, Any], at: float) -> None:
        self._observed_spec = spec
        self._observed_at = at

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Block until this process leads (True) or `stop` is set (False)."""
        while not stop.is_set():
            if await self._attempt(self.renew_deadline):
                self.is_leader = True
                metrics.leader_election_master_status.labels(self.name).set(1)
                log.info("acquired lease", lease=f"{self.namespace}/{self.name}", identity=self.identity)
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.retry_period)
        return False

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew every retry period until `stop`; raise LeadershipLost once the renew deadline passes.

        Each attempt may take only what is left of the renew deadline since the last successful one.
        """
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.retry_period)
                break
            except TimeoutError:
                pass
            left = self._renewed_at + self.renew_deadline - self._clock()
            if left > 0 and await self._attempt(left):
                continue
            if not self.leading():
                self.is_leader = False
                metrics.leader_election_master_status.labels(self.name).set(0)
                raise LeadershipLost(
                    f"failed to renew lease {self.namespace}/{self.name}: timed out waiting for the condition"
                )

    async def release(self) -> None:
        """Give the lease up at once so that a standby can take over without waiting it out."""
        if not self.leading():
            self.is_leader = False
            return
        self.is_leader = False
        metrics.leader_election_master_status.labels(self.name).set(0)
        try:
            await asyncio.wait_for(self._release(), timeout=self.renew_deadline)
        except (ApiError, TimeoutError) as exc:
            log.warning("releasing lease failed", lease=self.name, error=str(exc) or "timed out")

    async def _release(self) -> None:
        lease = await self.client.request("GET", self.path)
        if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"] = {
            **lease["spec"],
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "renewTime": _micro_time(),
        }
        await self.client.request("PUT", self.path, lease, fenced=False)


async def run_as_leader(elector: LeaseElector, stop: asyncio.Event, lead: Callable[[], Awaitable[None]]) -> None:
    """Acquire, then run `lead()` while renewing; release on the way out."""
    if not await elector.acquire(stop):
        return
    leading = asyncio.ensure_future(lead())
    holding = asyncio.ensure_future(elector.hold(stop))
    try:
        done, _ = await asyncio.wait([leading, holding], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in (leading, holding):
            task.cancel()
        await asyncio.gather(leading, holding, return_exceptions=True)
        await elector.release()
