"""The health endpoints' checks and format (kube's healthz handler), served on loopback; no apiserver
(plain HTTP: nothing is delegated); the decision cache, the delegation clients' rate limit and the
serving certificate's reload. Authentication and authorization are in tests/cluster/test_serving.py."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from harness.controlplane import free_ports
from scheduler.api.client import ApiError
from scheduler.api.http import TokenBucket
from scheduler.app import Options, _serve
from scheduler.serving import ExpiringLru, ServingCertificate, self_signed_certificate


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def test_readyz_waits_for_informer_sync_and_the_elector_livez_does_not() -> None:
    (port,) = free_ports(1)
    options = Options(metrics_address="127.0.0.1", metrics_port=port, plain_http=True, leader_elect=True)
    ready, stop = asyncio.Event(), asyncio.Event()
    elector_done = asyncio.Event()
    elector = asyncio.create_task(elector_done.wait())
    leading: list[asyncio.Task[Any]] = [elector]
    runner = await _serve(options, None, ready, stop, leading, leader_elect=True)
    try:
        status, body = await _get(port, "/readyz")
        assert status == 500
        assert body == (
            "[+]ping ok\n[+]leaderElection ok\n[+]shutdown ok\n"
            "[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n"
        )
        assert await _get(port, "/livez") == (200, "ok")
        ready.set()
        assert await _get(port, "/readyz") == (200, "ok")  # a standby (not leading) is ready
        status, body = await _get(port, "/readyz?verbose")
        assert status == 200 and body.endswith("[+]sched-handler-sync ok\nreadyz check passed\n")
        assert (await _get(port, "/readyz?exclude=sched-handler-sync&verbose"))[1].count("excluded: ok") == 1
        elector_done.set()
        await elector
        status, body = await _get(port, "/healthz")
        assert status == 500 and "[-]leaderElection failed: reason withheld" in body
        assert (await _get(port, "/readyz"))[0] == 500
        assert await _get(port, "/livez") == (200, "ok")
        stop.set()
        assert "[-]shutdown failed" in (await _get(port, "/readyz?exclude=leaderElection"))[1]
    finally:
        await runner.cleanup()


def test_the_decision_cache_drops_the_least_recently_used_and_the_expired() -> None:
    now = [0.0]
    cache = ExpiringLru(3, clock=lambda: now[0])
    for key in "abc":
        cache.put(key, key.upper(), ttl=10)
    assert cache.get("a") == (True, "A")  # a is now the most recently used
    cache.put("d", None, ttl=5)  # a denial is cached like an answer; b goes, not everything
    assert [cache.get(key)[0] for key in "abcd"] == [True, False, True, True]
    assert cache.get("d") == (True, None)
    now[0] = 5.0
    assert cache.get("d") == (False, None) and cache.get("a") == (True, "A")
    now[0] = 10.0
    assert cache.get("a") == (False, None) and len(cache) == 1


async def test_a_rate_limiter_with_a_deadline_refuses_at_once_and_reserves_nothing() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    bucket = TokenBucket(qps=10, burst=2, clock=lambda: now[0], sleep=sleep, max_wait=0.25)
    for _ in range(4):  # two from the burst, then 0.1 s and 0.2 s
        await bucket.wait()
    with pytest.raises(ApiError) as refused:
        await bucket.wait()  # 0.3 s away: more than allowed
    assert refused.value.reason == "RateLimited"
    now[0] = 0.1  # one token came back; the refusal took none, so the next one waits 0.2 s, not 0.3 s
    await bucket.wait()
    assert slept == [0.1, 0.2, 0.2]


def _served_certificate(port: int) -> str:
    return ssl.get_server_certificate(("127.0.0.1", port)).strip()


async def test_a_rotated_certificate_is_served_to_new_connections_and_a_broken_pair_is_not(tmp_path: Path) -> None:
    first, second, other = (tmp_path / name for name in ("first", "second", "other"))
    for directory in (first, second, other):
        directory.mkdir()
        self_signed_certificate(directory, "localhost")
    served = tmp_path / "served"
    served.mkdir()
    cert, key = served / "tls.crt", served / "tls.key"
    shutil.copy(first / "serving.crt", cert)
    shutil.copy(first / "serving.key", key)
    certificate = ServingCertificate(str(cert), str(key))
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificate.context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        assert await asyncio.to_thread(_served_certificate, port) == (first / "serving.crt").read_text().strip()
        assert not certificate.check()  # unchanged files: nothing to do
        # A certificate whose key is another's (a half-finished rotation): the previous pair stays.
        shutil.copy(second / "serving.crt", cert)
        shutil.copy(other / "serving.key", key)
        assert not certificate.check()
        assert await asyncio.to_thread(_served_certificate, port) == (first / "serving.crt").read_text().strip()
        shutil.copy(second / "serving.key", key)
        assert certificate.check()
        assert await asyncio.to_thread(_served_certificate, port) == (second / "serving.crt").read_text().strip()
    finally:
        await runner.cleanup()
