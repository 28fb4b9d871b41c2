"""Raw HTTP to the benchmark's apiserver: bulk creates from a bounded pool, one pod watch.

Owns: one aiohttp session with the control plane's admin token and CA (TLS verified), creating
many objects as fast as the apiserver takes them (a fixed number of concurrent creators, each
POSTing plain JSON), and a pod watch that hands every event to a callback with its arrival time.

Must never: use the `kubernetes` package's model classes (building and decoding them costs more
than the apiserver's work at these rates), or retry a create silently — a failed create fails
the run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

import aiohttp

from harness.controlplane import ControlPlane

WatchHandler = Callable[[str, dict[str, Any], float], None]


class ApiRequestError(RuntimeError):
    """The apiserver answered a request with an unexpected status."""


async def run_concurrently(count: int, concurrency: int, job: Callable[[int], Awaitable[None]]) -> None:
    """job(0) … job(count - 1), started in order by `concurrency` workers; the first error fails all."""
    pending = iter(range(count))

    async def worker() -> None:
        for index in pending:
            await job(index)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))


class RawApi:
    """A small async client of one ControlPlane; an async context manager."""

    def __init__(self, plane: ControlPlane, connections: int = 64) -> None:
        self._server = plane.server
        self._connector = aiohttp.TCPConnector(limit=connections, ssl=plane.ssl_context())
        self._session = aiohttp.ClientSession(
            connector=self._connector,
            headers={"Authorization": f"Bearer {plane.token}", "Accept": "application/json"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._session.close()

    async def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """(status, decoded JSON body or None); `content_type` names a PATCH's patch type."""
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        headers = {"Content-Type": content_type} if body is not None else None
        async with self._session.request(method, self._server + path, data=data, headers=headers) as response:
            raw = await response.read()
            return response.status, json.loads(raw) if raw else None

    async def create(self, path: str, manifest: dict[str, Any]) -> dict[str, Any]:
        status, body = await self.request("POST", path, manifest)
        if status != 201:
            name = manifest.get("metadata", {}).get("name")
            raise ApiRequestError(f"POST {path} {name}: HTTP {status}: {body}")
        created: dict[str, Any] = body
        return created

    async def create_all(
        self,
        path: str,
        manifests: Sequence[dict[str, Any]],
        concurrency: int,
        on_created: Callable[[int, dict[str, Any], float], None] | None = None,
    ) -> None:
        """POST every manifest with `concurrency` creators working through them in order;
        `on_created(index, created object, monotonic time)` after each 201."""

        async def create_one(index: int) -> None:
            created = await self.create(path, manifests[index])
            if on_created is not None:
                on_created(index, created, time.monotonic())

        await run_concurrently(len(manifests), concurrency, create_one)

    async def list_resource_version(self, path: str) -> str:
        """The collection's resourceVersion: where a watch that misses nothing starts."""
        status, body = await self.request("GET", f"{path}?limit=1")
        if status != 200:
            raise ApiRequestError(f"GET {path}: HTTP {status}: {body}")
        version: str = body["metadata"]["resourceVersion"]
        return version

    async def watch(self, path: str, resource_version: str, handler: WatchHandler) -> None:
        """Watch `path` from `resource_version` until cancelled, reconnecting where a stream ended;
        `handler(event type, object, monotonic arrival time)` for every event but bookmarks."""
        while True:
            params = {
                "watch": "1",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "3600",
            }
            async with self._session.get(self._server + path, params=params) as response:
                if response.status != 200:
                    raise ApiRequestError(f"watch {path}: HTTP {response.status}: {await response.text()}")
                try:
                    async for line in response.content:
                        arrived = time.monotonic()
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            raise ApiRequestError(f"watch {path}: {obj}")
                        resource_version = obj["metadata"]["resourceVersion"]
                        if event["type"] != "BOOKMARK":
                            handler(event["type"], obj, arrived)
                except asyncio.CancelledError:
                    # Closing a half-read response shuts TLS down gracefully, which needs loop turns
                    # that a finishing asyncio.run() may not give (an unclosed-socket warning later);
                    # a watch being dropped has nothing left to say: abort its connection.
                    if response.connection is not None and response.connection.transport is not None:
                        response.connection.transport.abort()
                    raise
