"""ApiClient over aiohttp with raw JSON (no client model classes on the hot path).

Credentials come from the `kubernetes` package's kubeconfig / in-cluster loaders so that
every auth form they support works here too; requests reuse one connection pool.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from scheduler import __version__
from scheduler.api.client import ApiError
from scheduler.model.objects import Pod

# Re-reading the kubeconfig/token on every request costs more than the request itself; bound
# service-account tokens are refreshed by the kubelet long before they expire.
AUTH_REFRESH_SECONDS = 60.0


@dataclass
class Connection:
    """Where the API server is and how to authenticate to it."""

    configuration: Any  # kubernetes.client.Configuration
    _auth: tuple[float, str | None] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        host: str = self.configuration.host
        return host.rstrip("/")

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


def load_connection(kubeconfig: str | None) -> Connection:
    """Kubeconfig file when given, otherwise the in-cluster service account."""
    cfg = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return Connection(cfg)


# The apiserver records this (up to the "/") as the field manager of every write we make.
USER_AGENT = f"secondary-scheduler/{__version__}"


class TokenBucket:
    """client-go's token-bucket rate limiter (clientConnection qps/burst): every request takes a token;
    tokens come back at `qps` per second, at most `burst` saved up. Waiters reserve tokens in arrival order."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError(f"token bucket needs qps > 0 and burst > 0, got qps={qps} burst={burst}")
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    async def wait(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self._qps)


class HttpApiClient:
    """The real ApiClient. One aiohttp session, bounded connection pool, optional rate limit."""

    def __init__(
        self,
        connection: Connection,
        component: str,
        max_connections: int = 64,
        rate_limiter: TokenBucket | None = None,
    ) -> None:
        self._rate_limiter = rate_limiter
        self._conn = connection
        self._component = component
        self._session: aiohttp.ClientSession | None = None
        self._max_connections = max_connections

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._conn.ssl_context(), limit=self._max_connections)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": USER_AGENT}
        auth = self._conn.auth_header()
        if auth:
            headers["Authorization"] = auth
        data = json.dumps(body) if body is not None else None
        if self._rate_limiter is not None:
            await self._rate_limiter.wait()
        try:
            async with self._get_session().request(method, self._conn.host + path, data=data, headers=headers) as resp:
                text = await resp.text()
                if resp.status == 401:
                    self._conn.invalidate_auth()
                if resp.status >= 400:
                    reason, message = "", text
                    try:
                        status = json.loads(text)
                        reason, message = status.get("reason", ""), status.get("message", text)
                    except ValueError:
                        pass
                    raise ApiError(resp.status, message, reason)
                return json.loads(text) if text else None
        except aiohttp.ClientError as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from exc

    async def stream(self, method: str, path: str) -> AsyncIterator[bytes]:
        """The response body in chunks as they arrive (watches); no overall timeout."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        auth = self._conn.auth_header()
        if auth:
            headers["Authorization"] = auth
        if self._rate_limiter is not None:
            await self._rate_limiter.wait()
        try:
            async with self._get_session().request(
                method, self._conn.host + path, headers=headers, timeout=aiohttp.ClientTimeout(total=None)
            ) as resp:
                if resp.status >= 400:
                    text = await resp.text()
                    if resp.status == 401:
                        self._conn.invalidate_auth()
                    raise ApiError(resp.status, text)
                async for chunk in resp.content.iter_any():
                    yield chunk
        except aiohttp.ClientError as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from exc

    async def bind(self, pod: Pod, node_name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding", body)

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
        written: Mapping[str, Any] | None = await self.request(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
            {"metadata": metadata, "status": status},
            content_type="application/strategic-merge-patch+json",
        )
        return written

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
        await self.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body)

    async def update_persistent_volume(self, pv: Mapping[str, Any]) -> Mapping[str, Any]:
        name = (pv.get("metadata") or {}).get("name", "")
        stored: Mapping[str, Any] = await self.request("PUT", f"/api/v1/persistentvolumes/{name}", pv)
        return stored

    async def update_persistent_volume_claim(self, pvc: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = pvc.get("metadata") or {}
        path = f"/api/v1/namespaces/{meta.get('namespace', '')}/persistentvolumeclaims/{meta.get('name', '')}"
        stored: Mapping[str, Any] = await self.request("PUT", path, pvc)
        return stored

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
