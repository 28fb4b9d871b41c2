"""A local HTTP server for the client's tests: aiohttp handlers on 127.0.0.1, a free port."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(method: str, path: str, handler: Handler) -> tuple[web.AppRunner, str]:
    """The running server (clean it up with `await runner.cleanup()`) and its base URL."""
    app = web.Application()
    app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"
