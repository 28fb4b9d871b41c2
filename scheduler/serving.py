"""The /metrics, /healthz, /livez and /readyz server, served as kube-scheduler serves them.

Owns: HTTPS on the secure port with a provided certificate (re-read when its files change, as kube's
dynamic serving certificate) or a self-signed one made at start; delegated authentication
(TokenReview) and authorization (SubjectAccessReview on the non-resource URL) of every path but the
always-allowed health paths (kube's --authorization-always-allow-paths default), through clients of
their own; the health endpoints' check lists and kube's text format (`ok`, or `[+]name ok` /
`[-]name failed: reason withheld` lines ending in `<endpoint> check failed`); a plain-HTTP mode that
checks nothing.
Must never: serve /metrics over HTTPS to a request the apiserver did not authorize; put a check's
failure reason in a public response (it goes to the log); keep an authentication or authorization
decision longer than kube's delegating defaults (10 s); send a review through the scheduling client
(whose rate limit and connections binds wait for, and which a standby's write fence closes) or let
a flood of made-up tokens cost more than the delegation clients' own rate limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import ipaddress
import os
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler import metrics
from scheduler.api.client import ApiError
from scheduler.api.http import Connection, HttpApiClient, TokenBucket
from scheduler.logs import Repeats

log = structlog.get_logger("serving")

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
# kube's DelegatingAuthenticationOptions (--authentication-token-webhook-cache-ttl, for valid and
# invalid tokens alike) and DelegatingAuthorizationOptions (allow and deny TTLs).
TOKEN_TTL = 10.0
ALLOW_TTL = 10.0
DENY_TTL = 10.0
# kube's webhook authorizer keeps this many decisions (LRU); tokens get the same bound here.
CACHE_SIZE = 8192
# The delegation clients: kube gives each its own client with "high qps/burst limits" (200/400). A
# review has REVIEW_TIMEOUT in all, retries included (kube's TokenAccessReviewTimeout); one whose turn
# at the rate limiter would come after MAX_QUEUE_SECONDS fails at once (401) rather than queue behind
# a flood, so a scraper's new token never waits longer than that for its turn.
DELEGATION_QPS = 200.0
DELEGATION_BURST = 400
DELEGATION_CONNECTIONS = 8
REVIEW_TIMEOUT = 10.0
MAX_QUEUE_SECONDS = 5.0
# How often the serving certificate's files are compared with the pair being served.
CERT_CHECK_SECONDS = 1.0
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
AUTHENTICATED = "system:authenticated"

# A check returns None when healthy, else the reason (logged, never served).
Check = Callable[[], str | None]
T = TypeVar("T")


class Requester(Protocol):
    async def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any: ...

    async def close(self) -> None: ...


class ServingError(Exception):
    """The server cannot start (its address is taken, its certificate unusable); the message says which.
    `address` is set when listening failed."""

    def __init__(self, message: str, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address


@dataclass(frozen=True)
class ServingOptions:
    address: str = "0.0.0.0"
    port: int = 10259
    plain_http: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS


def self_signed_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A self-signed ECDSA serving certificate for `host`, localhost and 127.0.0.1, valid one year
    (kube's self-signed serving certificate covers the same names)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(host), x509.DNSName("localhost")]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "serving.crt", directory / "serving.key"
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


class ExpiringLru:
    """At most `size` entries, each kept for its own TTL; the least recently used goes first when full
    (kube's LRUExpireCache), so a flood of new keys pushes out old ones instead of wiping everything."""

    def __init__(self, size: int, clock: Callable[[], float]) -> None:
        self._size, self._clock = size, clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """(found, value)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        if self._clock() >= entry[0]:
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: Hashable, value: Any, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def delegation_client(connection: Connection) -> HttpApiClient:
    """A client for reviews only: its own connections and rate limit, no write fence (a standby
    authenticates its scrapers too)."""
    return HttpApiClient(
        connection,
        max_connections=DELEGATION_CONNECTIONS,
        request_timeout=REVIEW_TIMEOUT,
        rate_limiter=TokenBucket(DELEGATION_QPS, DELEGATION_BURST, max_wait=MAX_QUEUE_SECONDS),
    )


async def _coalesced(inflight: dict[Hashable, asyncio.Future[T]], key: Hashable, call: Callable[[], Awaitable[T]]) -> T:
    """One call per key at a time: concurrent requests with the same token share its review."""
    pending = inflight.get(key)
    if pending is None:
        pending = inflight[key] = asyncio.ensure_future(call())

        def settled(done: asyncio.Future[T]) -> None:
            inflight.pop(key, None)
            if not done.cancelled():
                done.exception()  # retrieved even when every waiter went away (no "never retrieved")

        pending.add_done_callback(settled)
    # A waiter that goes away (its client hung up) must not cancel the review the others wait for.
    return await asyncio.shield(pending)


async def _delegated(client: Requester, path: str, body: Mapping[str, Any], total: Any, duration: Any) -> Any:
    """POST a review, counted as kube counts delegated requests (code of the answer; none when the
    rate limiter refused it, which sends nothing)."""
    started = time.perf_counter()
    try:
        try:
            # The client's own retries (a 429 with Retry-After) must not outlast the scrape either.
            review = await asyncio.wait_for(client.request("POST", path, body), REVIEW_TIMEOUT)
        except TimeoutError as exc:
            raise ApiError(0, f"POST {path}: no answer within {REVIEW_TIMEOUT:g}s") from exc
    except ApiError as exc:
        if exc.reason != "RateLimited":
            metrics.child(total, str(exc.status)).inc()
            metrics.child(duration, str(exc.status)).observe(time.perf_counter() - started)
        raise
    metrics.child(total, "201").inc()
    metrics.child(duration, "201").observe(time.perf_counter() - started)
    return review


class DelegatingAuth:
    """Asks the apiserver who a bearer token is (TokenReview) and what it may do (SubjectAccessReview),
    each through a client of its own; answers are cached (valid and invalid alike) and concurrent
    identical questions asked once."""

    def __init__(
        self, authentication: Requester, authorization: Requester, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._authn, self._authz = authentication, authorization
        # Keyed by the token's digest: the cache holds no credentials.
        self._tokens = ExpiringLru(CACHE_SIZE, clock)
        self._decisions = ExpiringLru(CACHE_SIZE, clock)
        self._token_reviews: dict[Hashable, asyncio.Future[dict[str, Any] | None]] = {}
        self._access_reviews: dict[Hashable, asyncio.Future[tuple[bool, str]]] = {}

    async def close(self) -> None:
        await self._authn.close()
        await self._authz.close()

    async def authenticate(self, token: str | None) -> dict[str, Any] | None:
        """The user info of the token (anonymous without one); None when the token is not valid."""
        if not token:
            return ANONYMOUS
        key = hashlib.sha256(token.encode()).digest()
        found, user = self._tokens.get(key)
        if found:
            return user  # type: ignore[no-any-return]
        return await _coalesced(self._token_reviews, key, lambda: self._review_token(key, token))

    async def _review_token(self, key: bytes, token: str) -> dict[str, Any] | None:
        review = await _delegated(
            self._authn,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
            metrics.delegated_authn_requests,
            metrics.delegated_authn_duration,
        )
        status = review.get("status") or {}
        user: dict[str, Any] | None = None
        if status.get("authenticated"):
            user = dict(status.get("user") or {})
            # kube's AuthenticatedGroupAdder: every authenticated user is in system:authenticated.
            groups = list(user.get("groups") or [])
            user["groups"] = groups if AUTHENTICATED in groups else [*groups, AUTHENTICATED]
        self._tokens.put(key, user, TOKEN_TTL)
        return user

    async def authorize(self, user: Mapping[str, Any], verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `verb` on the non-resource URL `path`."""
        key = (user.get("username"), tuple(user.get("groups") or ()), user.get("uid"), verb, path)
        found, decision = self._decisions.get(key)
        if found:
            return decision  # type: ignore[no-any-return]
        return await _coalesced(self._access_reviews, key, lambda: self._review_access(key, user, verb, path))

    async def _review_access(self, key: Hashable, user: Mapping[str, Any], verb: str, path: str) -> tuple[bool, str]:
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": list(user.get("groups") or []),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = await _delegated(
            self._authz,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
            metrics.delegated_authz_requests,
            metrics.delegated_authz_duration,
        )
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._decisions.put(key, decision, ALLOW_TTL if decision[0] else DENY_TTL)
        return decision


def _tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


def _describe_certificate(pem: bytes) -> dict[str, str]:
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return {}
    return {
        "subject": cert.subject.rfc4514_string(),
        "not_after": cert.not_valid_after_utc.isoformat(),
        "serial": format(cert.serial_number, "x"),
    }


class ServingCertificate:
    """The serving certificate and key, re-read when their files change (kube's dynamic serving
    certificate): new handshakes get the new pair, connections already open keep theirs, and a pair
    that does not load (half written, key and certificate not matching) leaves the previous one
    served and is reported once."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self._files = (cert_file, key_file)
        try:
            self._content = self._read()
            self.context = _tls_context(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ServingError(f"serving certificate {cert_file} / key {key_file}: {exc}") from exc
        self._current = self.context
        self._reported: object = None
        # Asked at every handshake (with or without SNI): hand the connection the newest pair.
        self.context.sni_callback = self._select

    @property
    def cert_file(self) -> str:
        return self._files[0]

    def _select(self, connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        if self._current is not context:
            connection.context = self._current

    def _read(self) -> tuple[bytes, bytes]:
        return Path(self._files[0]).read_bytes(), Path(self._files[1]).read_bytes()

    def check(self) -> bool:
        """Load the files' pair if it differs from the one served; True when it was swapped in."""
        try:
            content = self._read()
            if content == self._content:
                return False
            context = _tls_context(*self._files)
        except (OSError, ssl.SSLError) as exc:
            problem = (type(exc), str(exc))
            if problem != self._reported:
                self._reported = problem
                log.error(
                    "cannot load the new serving certificate; keeping the previous one",
                    cert=self._files[0],
                    key=self._files[1],
                    error=str(exc),
                )
            return False
        self._content, self._current, self._reported = content, context, None
        details = _describe_certificate(content[0])
        log.info("Loaded a new cert/key pair", cert=self._files[0], key=self._files[1], **details)
        return True

    async def watch(self, interval: float = CERT_CHECK_SECONDS) -> None:
        while True:
            await asyncio.sleep(interval)
            self.check()


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
         "reason": reason, "code": code},
        status=code,
    )  # fmt: skip


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _auth_middleware(auth: DelegatingAuth, always_allow: Sequence[str]) -> Any:
    # A flood of made-up tokens fails the same way thousands of times: log the first and every 100th.
    repeats = Repeats()

    def failed(stage: str, request: web.Request, exc: ApiError) -> None:
        seen = repeats.count((stage, exc.status, exc.reason))
        if seen is not None:
            log.warning(f"{stage} failed", path=request.path, error=str(exc), occurrences=seen)

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in always_allow:
            return await handler(request)  # type: ignore[no-any-return]
        try:
            user = await auth.authenticate(_bearer(request))
        except ApiError as exc:
            failed("authentication", request, exc)
            return _status(401, "Unauthorized", "Unauthorized")
        if user is None:
            return _status(401, "Unauthorized", "Unauthorized")
        verb = "get" if request.method in ("GET", "HEAD") else request.method.lower()
        try:
            allowed, reason = await auth.authorize(user, verb, request.path)
        except ApiError as exc:
            failed("authorization", request, exc)
            return _status(500, "InternalError", "Internal error occurred: authorization failed")
        if not allowed:
            message = f'forbidden: User "{user.get("username", "")}" cannot {verb} path "{request.path}"'
            return _status(403, "Forbidden", f"{message}: {reason}" if reason else message)
        return await handler(request)  # type: ignore[no-any-return]

    return middleware


def health_handler(name: str, checks: Mapping[str, Check]) -> Callable[[web.Request], Any]:
    """kube's healthz handler: `ok` (or the check list with ?verbose); 500 listing failed checks."""

    async def handler(request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", []))
        lines, failed = [], []
        for check_name, check in checks.items():
            if check_name in excluded:
                lines.append(f"[+]{check_name} excluded: ok")
                continue
            reason = check()
            if reason is None:
                lines.append(f"[+]{check_name} ok")
            else:
                lines.append(f"[-]{check_name} failed: reason withheld")
                failed.append(f"{check_name}: {reason}")
        if failed:
            log.info(f"{name} check failed", failed=failed)
            return web.Response(status=500, text="\n".join([*lines, f"{name} check failed"]) + "\n")
        if "verbose" not in request.query:
            return web.Response(text="ok")
        return web.Response(text="\n".join([*lines, f"{name} check passed"]) + "\n")

    return handler


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _certificate(options: ServingOptions) -> tuple[ServingCertificate, bool]:
    """The serving certificate, and whether it was made here (then it never changes on disk)."""
    if options.cert_file and options.key_file:
        return ServingCertificate(options.cert_file, options.key_file), False
    directory = Path(tempfile.mkdtemp(prefix="secondary-scheduler-serving-"))
    cert, key = self_signed_certificate(directory, socket.gethostname())
    return ServingCertificate(str(cert), str(key)), True


async def serve(
    options: ServingOptions,
    auth: DelegatingAuth | None,
    livez: Mapping[str, Check],
    readyz: Mapping[str, Check],
    healthz: Mapping[str, Check],
) -> web.AppRunner:
    """Start the server; the caller cleans the returned runner up (which closes `auth`'s clients).
    Raises ServingError when the address cannot be listened on or the certificate not loaded."""
    if not options.plain_http and auth is None:
        raise ValueError("HTTPS serving delegates authentication and authorization: it needs a DelegatingAuth")

    async def metrics_handler(_: web.Request) -> web.Response:
        metrics.recorder.flush()  # the sampled plugin durations buffered since the last flush
        return web.Response(body=generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    middlewares = [] if auth is None or options.plain_http else [_auth_middleware(auth, options.always_allow_paths)]
    app = web.Application(middlewares=middlewares)
    app.add_routes(
        [
            web.get("/metrics", metrics_handler),
            web.get("/healthz", health_handler("healthz", healthz)),
            web.get("/livez", health_handler("livez", livez)),
            web.get("/readyz", health_handler("readyz", readyz)),
        ]
    )
    certificate, generated = (None, False) if options.plain_http else _certificate(options)
    if certificate is not None and not generated:
        # A certificate someone provides gets rotated (cert-manager, a renewed Secret): follow its files.

        async def reload_certificate(_: web.Application) -> AsyncIterator[None]:
            watcher = asyncio.create_task(certificate.watch(), name="serving-certificate")
            yield
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

        app.cleanup_ctx.append(reload_certificate)
    if auth is not None:

        async def close_auth(_: web.Application) -> None:
            await auth.close()

        app.on_cleanup.append(close_auth)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context = certificate.context if certificate is not None else None
    site = web.TCPSite(runner, options.address, options.port, ssl_context=context)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        address = _host_port(options.address, options.port)
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ServingError(f"failed to listen on {address}: {reason}", address) from exc
    if certificate is not None and generated:
        log.info("generated self-signed serving certificate", cert=certificate.cert_file)
    return runner
