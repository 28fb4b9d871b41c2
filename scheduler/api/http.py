"""ApiClient over aiohttp with raw JSON (no client model classes on the hot path).

Credentials come from the `kubernetes` package's kubeconfig / in-cluster loaders so that
every auth form they support works here too; requests reuse pooled connections.

Binds have a connection pool and a rate limiter of their own (the bind lane): a burst of
evictions, victim deletions or status patches holds every connection of the general pool for as
long as the apiserver takes to answer them, and a bind queued behind them added its wait to the
pod's attempt (PreemptionAsync: 2 s at p50). kube-scheduler's Go client multiplexes every request
over HTTP/2 and never waits for a connection; kubernetes#135900 is the same lesson about its
shared rate limiter.

Every failure — an HTTP error, a refused or reset connection, a request that outlives its
timeout — surfaces as ApiError, never as a bare aiohttp or asyncio exception. A write fence
(leader election's `leading`) refuses every write once this process may no longer write.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from scheduler import __version__, codec, metrics
from scheduler.api.client import ApiError
from scheduler.model.objects import Pod

Result = TypeVar("Result")

# Re-reading the kubeconfig/token on every request costs more than the request itself; bound
# service-account tokens are refreshed by the kubelet long before they expire.
AUTH_REFRESH_SECONDS = 60.0
# A request (not a watch) that takes longer than this is abandoned as failed.
REQUEST_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10.0
# client-go's retries of a 429 / 5xx that carries Retry-After.
MAX_RETRIES = 10
MAX_RETRY_AFTER_SECONDS = 10
# Failure reports (status patches) ride out an apiserver outage this long.
OUTAGE_RETRY_SECONDS = 30.0
# Connections of the bind lane: as many as the general pool, so that binds never have fewer than
# when they shared it (kube-scheduler caps binds in flight nowhere).
BIND_CONNECTIONS = 64


@dataclass
class Connection:
    """Where the API server is and how to authenticate to it."""

    configuration: Any  # kubernetes.client.Configuration
    _auth: tuple[float, str | None] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        host: str = self.configuration.host
        return host.rstrip("/")

    @property
    def host_label(self) -> str:
        """The `host` label of rest_client_* (host:port, as client-go's URL.Host)."""
        return urllib.parse.urlsplit(self.host).netloc

    def ssl_context(self) -> ssl.SSLContext | bool:
        cfg = self.configuration
        if not cfg.verify_ssl:
            return False
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        return ctx

    def auth_header(self) -> str | None:
        """The Authorization header, re-read at most every AUTH_REFRESH_SECONDS (tokens rotate)."""
        now = time.monotonic()
        if self._auth is not None and now - self._auth[0] < AUTH_REFRESH_SECONDS:
            return self._auth[1]
        value = self._read_auth_header()
        self._auth = (now, value)
        return value

    def invalidate_auth(self) -> None:
        self._auth = None

    def _read_auth_header(self) -> str | None:
        cfg = self.configuration
        if cfg.refresh_api_key_hook is not None:
            cfg.refresh_api_key_hook(cfg)
        # The client's own auth settings know every form (token, exec plugin, refreshed SA token).
        for setting in cfg.auth_settings().values():
            if setting.get("in") == "header" and setting.get("key", "").lower() == "authorization":
                value: str | None = setting.get("value")
                if value:
                    return value
        return None


class KubeconfigError(ValueError):
    """The kubeconfig (or the in-cluster service account) cannot be used; the message names which."""


def load_connection(kubeconfig: str | None) -> Connection:
    """Kubeconfig file when given, otherwise the in-cluster service account."""
    cfg = k8s_client.Configuration()
    if kubeconfig:
        if not Path(kubeconfig).is_file():
            raise KubeconfigError(f"kubeconfig {kubeconfig}: no such file")
        try:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        except Exception as exc:  # the loader raises ConfigException, but also TypeError/KeyError on odd YAML
            raise KubeconfigError(f"kubeconfig {kubeconfig}: not usable: {exc}") from exc
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise KubeconfigError(
                f"in-cluster configuration (no --kubeconfig given): {exc} "
                "(needs KUBERNETES_SERVICE_HOST/PORT and a token in /var/run/secrets/kubernetes.io/serviceaccount)"
            ) from exc
    return Connection(cfg)


def _observe_request(
    method: str, host: str, started: float, data: bytes | None, status: int | None, response_size: int | None
) -> None:
    """client-go's rest_client_* for one request; `status` None for a request that got no response."""
    metrics.child(metrics.rest_client_requests, "<error>" if status is None else str(status), method, host).inc()
    metrics.child(metrics.rest_client_request_duration, method, host).observe(time.perf_counter() - started)
    metrics.child(metrics.rest_client_request_size, method, host).observe(len(data) if data else 0)
    if response_size is not None:
        metrics.child(metrics.rest_client_response_size, method, host).observe(response_size)


# The apiserver records this (up to the "/") as the field manager of every write we make.
USER_AGENT = f"secondary-scheduler/{__version__}"


class TokenBucket:
    """client-go's token-bucket rate limiter (clientConnection qps/burst): every request takes a token;
    tokens come back at `qps` per second, at most `burst` saved up. Waiters reserve tokens in arrival order.

    With `max_wait`, a request whose turn would come later than that fails at once (ApiError, reason
    RateLimited) and reserves nothing, as client-go's limiter does for a request whose context deadline
    comes first: the backlog, and so the wait of the next request, never exceeds `max_wait`."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_wait: float | None = None,
    ) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError(f"token bucket needs qps > 0 and burst > 0, got qps={qps} burst={burst}")
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._max_wait = max_wait
        self._last = clock()

    async def wait(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        if self._max_wait is not None and (1 - self._tokens) / self._qps > self._max_wait:
            raise ApiError(
                0, f"client rate limiter: the wait would exceed {self._max_wait:g}s (qps {self._qps:g})", "RateLimited"
            )
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self._qps)


async def _through_outage(send: Callable[[], Awaitable[Any]]) -> Any:
    """Retry a status patch while the apiserver is unreachable or failing (5xx), for up to
    OUTAGE_RETRY_SECONDS: a PodScheduled=False condition lost to an apiserver restart would otherwise
    wait for the pod's next attempt, up to 5 minutes (kube's own retry, which the failure report adds
    on top, lasts about 1.5 s). Events need none of this: their broadcaster retries as client-go's."""
    deadline = time.monotonic() + OUTAGE_RETRY_SECONDS
    pause = 0.5
    while True:
        try:
            return await send()
        except ApiError as exc:
            transient = (exc.status == 0 and exc.reason != "NotLeader") or exc.status in (500, 502, 503, 504)
            if not transient or time.monotonic() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 4.0)


def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
    """The wait a 429 or 5xx asks for with Retry-After (whole seconds, at most MAX_RETRY_AFTER)."""
    if resp.status != 429 and resp.status < 500:
        return None
    value = resp.headers.get("Retry-After", "")
    if not value.isdigit():
        return None
    return float(min(int(value), MAX_RETRY_AFTER_SECONDS))


def _describe(exc: BaseException) -> str:
    """aiohttp's timeouts carry no message; name them."""
    text = str(exc)
    if isinstance(exc, TimeoutError):
        return f"timed out ({text})" if text else "timed out"
    return text or type(exc).__name__


class LoopStalls:
    """How long the running event loop could not run (a long synchronous scheduling cycle: a big
    gang over many placements) since it was first asked: a timer every TICK seconds adds how late
    it fired. A request's timeout counts only the time the loop could have read its answer, as a Go
    client's does, whose goroutines are not held by the scheduling cycle."""

    TICK = 0.25

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due = 0.0
        self.total = 0.0

    def clock(self) -> float:
        """The loop's time less the stalls so far (starts counting on the first call in a loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self.total = loop, 0.0
            self._schedule(loop)
        return loop.time() - self.total

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = loop.time() + self.TICK
        loop.call_at(self._due, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop or loop.is_closed():
            return
        # A timer fires in the same loop iteration as the requests' own deadlines, and before the
        # tasks they wake run: a request woken after a stall sees the stall counted.
        self.total += max(0.0, loop.time() - self._due)
        self._schedule(loop)


LOOP_STALLS = LoopStalls()


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    """Mark a request nobody awaits any more as seen: asyncio logs no "never retrieved" for it."""
    if not task.cancelled():
        task.exception()


async def within(seconds: float, awaitable: Awaitable[Result], stalls: LoopStalls = LOOP_STALLS) -> Result:
    """`awaitable`'s result, or TimeoutError once it ran `seconds` of loop time not stalled."""
    task = asyncio.ensure_future(awaitable)
    started = stalls.clock()
    try:
        while True:
            left = seconds - (stalls.clock() - started)
            if left <= 0:
                raise TimeoutError()
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            try:
                # Until the request has let go of its connection. Whatever it ends with is not the
                # caller's answer (a timeout or the caller's cancellation is); a second
                # cancellation of the caller ends this wait and goes on up.
                await asyncio.wait({task})
            finally:
                task.add_done_callback(_consume_outcome)


class _Lane:
    """One connection pool (an aiohttp session of its own) and its own optional rate limiter."""

    def __init__(self, max_connections: int, rate_limiter: TokenBucket | None) -> None:
        self.max_connections = max_connections
        self.rate_limiter = rate_limiter
        self.session: aiohttp.ClientSession | None = None


class HttpApiClient:
    """The real ApiClient: aiohttp sessions (the general pool, and the bind lane's), bounded
    connection pools, optional rate limits."""

    def __init__(
        self,
        connection: Connection,
        max_connections: int = 64,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        rate_limiter: TokenBucket | None = None,
        bind_connections: int = BIND_CONNECTIONS,
        bind_rate_limiter: TokenBucket | None = None,
    ) -> None:
        self._conn = connection
        self._general = _Lane(max_connections, rate_limiter)
        self._bind = _Lane(bind_connections, bind_rate_limiter)
        self._request_timeout = request_timeout
        # The overall deadline is `within`'s (loop stalls not counted); aiohttp keeps the connect one.
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECONDS)
        # Writes are refused while this returns False (set by leader election; None: always allowed).
        self.write_fence: Callable[[], bool] | None = None

    def _get_session(self, lane: _Lane) -> aiohttp.ClientSession:
        if lane.session is None:
            connector = aiohttp.TCPConnector(ssl=self._conn.ssl_context(), limit=lane.max_connections)
            lane.session = aiohttp.ClientSession(connector=connector)
        return lane.session

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        *,
        fenced: bool = True,
        max_retries: int = MAX_RETRIES,
        lane: _Lane | None = None,
    ) -> Any:
        """One request; `fenced=False` only for the lease itself, which must be written to be kept.

        As client-go: a 429, or a 5xx with Retry-After, is retried after the time the server asked
        for, up to `max_retries` times (the server did not act on the request).
        """
        for attempt in range(max_retries + 1):
            try:
                return await self._send(method, path, body, content_type, fenced, lane or self._general)
            except ApiError as exc:
                if exc.retry_after is None or attempt == max_retries:
                    raise
                await asyncio.sleep(exc.retry_after)
        raise AssertionError("unreachable")

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any] | None, content_type: str, fenced: bool, lane: _Lane
    ) -> Any:
        if fenced and method != "GET" and self.write_fence is not None and not self.write_fence():
            raise ApiError(0, f"{method} {path}: not the leader; refusing to write", "NotLeader")
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": USER_AGENT}
        auth = self._conn.auth_header()
        if auth:
            headers["Authorization"] = auth
        data = codec.dumps(body) if body is not None else None
        started = time.perf_counter()
        if lane.rate_limiter is not None:
            await lane.rate_limiter.wait()
            metrics.child(metrics.rest_client_rate_limiter_duration, method, self._conn.host_label).observe(
                time.perf_counter() - started
            )
        session = self._get_session(lane)

        async def exchange() -> tuple[int, bytes, float | None]:
            async with session.request(
                method, self._conn.host + path, data=data, headers=headers, timeout=self._timeout
            ) as resp:
                return resp.status, await resp.read(), _retry_after(resp)

        try:
            status_code, raw, retry_after = await within(self._request_timeout, exchange())
            _observe_request(method, self._conn.host_label, started, data, status_code, len(raw))
            if status_code == 401:
                self._conn.invalidate_auth()
            if status_code >= 400:
                text = raw.decode(errors="replace")
                reason, message, causes = "", text, []
                try:
                    status = codec.loads(raw)
                    reason, message = status.get("reason", ""), status.get("message", text)
                    causes = [
                        (str(c.get("reason", "")), str(c.get("message", "")))
                        for c in (status.get("details") or {}).get("causes") or ()
                    ]
                except (ValueError, AttributeError):
                    pass
                raise ApiError(status_code, message, reason, retry_after, causes)
            return codec.loads(raw) if raw.strip() else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            _observe_request(method, self._conn.host_label, started, data, None, None)
            raise ApiError(0, f"{method} {path}: {_describe(exc)}") from exc
        except ValueError as exc:  # a 2xx answer that is not JSON (a proxy's page)
            raise ApiError(0, f"{method} {path}: invalid JSON in the response: {exc}") from exc

    async def stream(self, method: str, path: str, read_timeout: float | None = None) -> AsyncGenerator[bytes, None]:
        """The response body in chunks as they arrive (watches): no overall timeout, but ApiError when
        nothing arrives for `read_timeout` seconds (a black-holed connection)."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        auth = self._conn.auth_header()
        if auth:
            headers["Authorization"] = auth
        if self._general.rate_limiter is not None:
            await self._general.rate_limiter.wait()
        try:
            async with self._get_session(self._general).request(
                method,
                self._conn.host + path,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_SECONDS, sock_read=read_timeout),
            ) as resp:
                metrics.child(metrics.rest_client_requests, str(resp.status), method, self._conn.host_label).inc()
                if resp.status >= 400:
                    text = await resp.text()
                    if resp.status == 401:
                        self._conn.invalidate_auth()
                    raise ApiError(resp.status, text)
                async for chunk in resp.content.iter_any():
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiError(0, f"{method} {path}: {_describe(exc)}") from exc

    async def bind(self, pod: Pod, node_name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding", body, lane=self._bind)

    async def patch_pod_status(
        self,
        pod: Pod,
        condition: Mapping[str, Any] | None,
        nominated_node_name: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Mapping[str, Any] | None:
        status: dict[str, Any] = {}
        if condition is not None:
            status["conditions"] = [dict(condition)]
        if nominated_node_name is not None:
            status["nominatedNodeName"] = nominated_node_name or None
        if not status:
            return None
        metadata = {"uid": pod.uid}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        written: Mapping[str, Any] | None = await _through_outage(
            lambda: self.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                {"metadata": metadata, "status": status},
                content_type="application/strategic-merge-patch+json",
            )
        )
        return written

    async def patch_pod_group_status(self, namespace: str, name: str, uid: str, condition: Mapping[str, Any]) -> None:
        await _through_outage(
            lambda: self.request(
                "PATCH",
                f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}/status",
                {"metadata": {"uid": uid}, "status": {"conditions": [dict(condition)]}},
                content_type="application/strategic-merge-patch+json",
            )
        )

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        await self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        await self.request(
            "PATCH",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}",
            patch,
            content_type="application/strategic-merge-patch+json",
        )

    async def delete_pod(self, pod: Pod) -> None:
        await self.request(
            "DELETE",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}},
        )

    async def evict_pod(self, pod: Pod) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": pod.uid}},
        }
        # A PDB that is not yet processed answers 429 with Retry-After 10: retrying here, ten times,
        # held preemption for 100 s. Preemption's eviction budget decides how long to keep trying.
        await self.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body, max_retries=0)

    async def update_persistent_volume(self, pv: Mapping[str, Any]) -> Mapping[str, Any]:
        name = (pv.get("metadata") or {}).get("name", "")
        stored: Mapping[str, Any] = await self.request("PUT", f"/api/v1/persistentvolumes/{name}", pv)
        return stored

    async def update_persistent_volume_claim(self, pvc: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = pvc.get("metadata") or {}
        path = f"/api/v1/namespaces/{meta.get('namespace', '')}/persistentvolumeclaims/{meta.get('name', '')}"
        stored: Mapping[str, Any] = await self.request("PUT", path, pvc)
        return stored

    @staticmethod
    def _claim_path(namespace: str, name: str = "") -> str:
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        return f"{path}/{name}" if name else path

    @staticmethod
    def _claim_key(claim: Mapping[str, Any]) -> tuple[str, str]:
        meta = claim.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    async def get_resource_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        stored: Mapping[str, Any] = await self.request("GET", self._claim_path(namespace, name))
        return stored

    async def update_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        stored: Mapping[str, Any] = await self.request("PUT", self._claim_path(*self._claim_key(claim)), claim)
        return stored

    async def update_resource_claim_status(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        path = self._claim_path(*self._claim_key(claim)) + "/status"
        stored: Mapping[str, Any] = await self.request("PUT", path, claim)
        return stored

    async def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        stored: Mapping[str, Any] = await self.request(
            "PATCH",
            self._claim_path(namespace, name) + "/status",
            patch,
            content_type="application/strategic-merge-patch+json",
        )
        return stored

    async def create_resource_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        namespace, _ = self._claim_key(claim)
        stored: Mapping[str, Any] = await self.request("POST", self._claim_path(namespace), claim)
        return stored

    async def delete_resource_claim(self, claim: Mapping[str, Any]) -> None:
        uid = (claim.get("metadata") or {}).get("uid")
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        await self.request("DELETE", self._claim_path(*self._claim_key(claim)), body)

    async def patch_pod_status_fields(self, pod: Pod, status: Mapping[str, Any]) -> Mapping[str, Any]:
        written: Mapping[str, Any] = await self.request(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
            {"metadata": {"uid": pod.uid}, "status": dict(status)},
            content_type="application/strategic-merge-patch+json",
        )
        return written

    async def close(self) -> None:
        closed = False
        for lane in (self._general, self._bind):
            if lane.session is not None:
                await lane.session.close()
                lane.session = None
                closed = True
        if closed:
            # aiohttp's graceful shutdown for TLS: let the transports (one may have been cut mid-request
            # by a timeout) finish closing before the loop goes away.
            await asyncio.sleep(0.25)
