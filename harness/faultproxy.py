"""A fault-injecting HTTPS proxy in front of the test apiserver, on loopback, for the fault tests.

Owns: terminating TLS with the apiserver's own serving certificate (issued for 127.0.0.1, so a
kubeconfig pointing at the proxy verifies against the same CA), forwarding every request to the
apiserver (watches streamed), and on the test's word: freezing (every request, new or in flight,
is held with no answer — a black-holed connection; a held request whose client gave up is dropped
on thaw, never delivered late), answering bursts of 429 with Retry-After or 500, and slowing
answers down, or stalling the bodies of answers already streaming (a watch on a dead connection).
Records every forwarded request (when, method, path, status) so a test can say what
reached the apiserver through it and when.

Must never: listen on anything but 127.0.0.1, or be imported by the scheduler. It runs its own
event loop in a daemon thread, so the blocking `kubernetes` client in a test cannot stall it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import aiohttp
from aiohttp import web

from harness.controlplane import LOOPBACK, ControlPlane

# Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus what aiohttp recomputes
# (bodies pass through as they are: gzip stays gzip, with its Content-Encoding).
_HOP_HEADERS = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
    )
)

Matcher = Callable[[str, str], bool]


def any_request(_method: str, _path: str) -> bool:
    return True


@dataclass
class Forwarded:
    """One request that reached the apiserver through the proxy."""

    at: float  # time.time() when it was sent upstream
    method: str
    path: str
    status: int


@dataclass
class _Rule:
    matcher: Matcher
    remaining: int
    status: int = 0  # answer this status instead of forwarding (0: forward)
    retry_after: int | None = None
    delay: float = 0.0  # hold the request this long before forwarding


@dataclass
class InjectedCounts:
    """How many requests each kind of fault answered."""

    by_status: dict[int, int] = field(default_factory=dict)
    delayed: int = 0


class FaultProxy:
    """An HTTPS reverse proxy to `plane`'s apiserver; a context manager (start/stop)."""

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane
        serving = plane.ca_file.parent
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_ssl.load_cert_chain(serving / "apiserver.crt", serving / "apiserver.key")
        self._upstream = plane.server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._thawed: asyncio.Event | None = None
        self._streaming: set[asyncio.Event] = set()  # one per answer being streamed: set while it flows
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self.forwarded: list[Forwarded] = []
        self.delayed_now: list[str] = []  # paths of the requests being held by slow() right now
        self.injected = InjectedCounts()
        self.port = 0

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        self._thawed = asyncio.Event()
        self._thawed.set()
        upstream_ssl = ssl.create_default_context(cafile=str(self._plane.ca_file))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream_ssl, limit=0),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((LOOPBACK, 0))
        self.port = int(sock.getsockname()[1])
        await web.SockSite(self._runner, sock, ssl_context=self._server_ssl).start()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _stop(self) -> None:
        for event in (self._thawed, *self._streaming):
            if event is not None:
                event.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
            # aiohttp's advice for TLS: give the transports a moment to close before the loop stops.
            await asyncio.sleep(0.25)

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def kubeconfig(self, path: Path) -> Path:
        """A copy of the plane's admin kubeconfig that talks to the apiserver through this proxy."""
        path.write_text(self._plane.kubeconfig.read_text().replace(self._plane.server, self.server))
        path.chmod(0o600)
        return path

    # ---- faults ----------------------------------------------------------------------------

    def freeze(self) -> None:
        """Black-hole every request from now on (and those in flight) until thaw()."""
        self._call(self._set_frozen, True)

    def thaw(self) -> None:
        self._call(self._set_frozen, False)

    def stall_streams(self) -> None:
        """Stop delivering the bodies of the answers streaming now (watches); later requests still pass."""
        self._call(self._set_streams_stalled, True)

    def resume_streams(self) -> None:
        self._call(self._set_streams_stalled, False)

    def _set_streams_stalled(self, stalled: bool) -> None:
        for flowing in self._streaming:
            if stalled:
                flowing.clear()
            else:
                flowing.set()

    def _set_frozen(self, frozen: bool) -> None:
        assert self._thawed is not None
        if frozen:
            self._thawed.clear()
        else:
            self._thawed.set()

    def fail(self, status: int, count: int, matcher: Matcher = any_request, retry_after: int | None = None) -> None:
        """Answer the next `count` matching requests with `status` (and Retry-After) instead of forwarding."""
        with self._lock:
            self._rules.append(_Rule(matcher, count, status=status, retry_after=retry_after))

    def slow(self, delay: float, count: int, matcher: Matcher = any_request) -> None:
        """Hold the next `count` matching requests `delay` seconds before forwarding them."""
        with self._lock:
            self._rules.append(_Rule(matcher, count, delay=delay))

    def _call(self, fn: Callable[[bool], None], arg: bool) -> None:
        self._loop.call_soon_threadsafe(fn, arg)
        # Wait until the loop ran it, so that the fault is in force when this returns.
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self._loop).result(timeout=10)

    def _take_rule(self, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.remaining > 0 and rule.matcher(method, path):
                    rule.remaining -= 1
                    return rule
            return None

    def forwarded_since(self, since: float, matcher: Matcher = any_request) -> list[Forwarded]:
        with self._lock:
            return [f for f in self.forwarded if f.at >= since and matcher(f.method, f.path)]

    # ---- forwarding ------------------------------------------------------------------------

    async def _held(self, request: web.Request) -> bool:
        """Wait while frozen; False when the client gave up meanwhile (drop, never deliver late)."""
        assert self._thawed is not None
        if not self._thawed.is_set():
            await self._thawed.wait()
            transport = request.transport
            if transport is None or transport.is_closing():
                return False
        return True

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path_qs
        body = await request.read()
        if not await self._held(request):
            raise asyncio.CancelledError
        rule = self._take_rule(method, path)
        if rule is not None and rule.delay:
            with self._lock:
                self.injected.delayed += 1
                self.delayed_now.append(path)
            try:
                await asyncio.sleep(rule.delay)
            finally:
                with self._lock:
                    self.delayed_now.remove(path)
        elif rule is not None and rule.status:
            with self._lock:
                self.injected.by_status[rule.status] = self.injected.by_status.get(rule.status, 0) + 1
            headers = {"Content-Type": "application/json"}
            if rule.retry_after is not None:
                headers["Retry-After"] = str(rule.retry_after)
            reason = "TooManyRequests" if rule.status == 429 else "InternalError"
            text = (
                '{"kind":"Status","apiVersion":"v1","status":"Failure",'
                f'"message":"injected by the fault proxy","reason":"{reason}","code":{rule.status}}}'
            )
            return web.Response(status=rule.status, text=text, headers=headers)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        assert self._session is not None
        sent_at = time.time()
        try:
            upstream = await self._session.request(
                method, self._upstream + path, data=body or None, headers=headers, allow_redirects=False
            )
        except aiohttp.ClientError as exc:
            return web.Response(status=502, text=f"fault proxy: upstream failed: {exc}")
        with self._lock:
            self.forwarded.append(Forwarded(sent_at, method, path, upstream.status))
        async with upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS},
            )
            await response.prepare(request)
            flowing = asyncio.Event()
            flowing.set()
            self._streaming.add(flowing)
            try:
                with contextlib.suppress(aiohttp.ClientError, ConnectionResetError):
                    async for chunk in upstream.content.iter_any():
                        await flowing.wait()
                        if not await self._held(request):
                            break
                        await response.write(chunk)
            finally:
                self._streaming.discard(flowing)
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response
