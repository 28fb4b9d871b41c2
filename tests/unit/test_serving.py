"""The health endpoints' checks and format (kube's healthz handler), served on loopback; no apiserver
(plain HTTP: nothing is delegated). Authentication and authorization are in tests/cluster/test_serving.py."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from harness.controlplane import free_ports
from scheduler.app import Options, _serve


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
    runner = await _serve(options, None, ready, stop, leading, leader_elect=True)  # type: ignore[arg-type]
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
