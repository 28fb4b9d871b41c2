"""The /metrics, /healthz, /livez and /readyz server, served as kube-scheduler serves them.

Owns: HTTPS on the secure port with a provided certificate or a self-signed one made at start;
delegated authentication (TokenReview) and authorization (SubjectAccessReview on the non-resource
URL) of every path but the always-allowed health paths (kube's --authorization-always-allow-paths
default); the health endpoints' check lists and kube's text format (`ok`, or `[+]name ok` /
`[-]name failed: reason withheld` lines ending in `<endpoint> check failed`); a plain-HTTP mode that
checks nothing.
Must never: serve /metrics over HTTPS to a request the apiserver did not authorize; put a check's
failure reason in a public response (it goes to the log); keep an authentication or authorization
decision longer than kube's delegating defaults (10 s).
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler import metrics
from scheduler.api.client import ApiError

log = structlog.get_logger("serving")

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
# kube's DelegatingAuthenticationOptions / DelegatingAuthorizationOptions cache TTLs.
DECISION_TTL = 10.0
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}

# A check returns None when healthy, else the reason (logged, never served).
Check = Callable[[], str | None]


class Requester(Protocol):
    async def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any: ...


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


class _TtlCache:
    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self._ttl, self._clock = ttl, clock
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[0] > self._ttl:
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: Any, value: Any) -> None:
        if len(self._entries) > 1024:
            self._entries.clear()
        self._entries[key] = (self._clock(), value)


class DelegatingAuth:
    """Asks the apiserver who a bearer token is (TokenReview) and what it may do (SubjectAccessReview)."""

    def __init__(self, client: Requester, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._tokens = _TtlCache(DECISION_TTL, clock)
        self._decisions = _TtlCache(DECISION_TTL, clock)

    async def authenticate(self, token: str | None) -> dict[str, Any] | None:
        """The user info of the token (anonymous without one); None when the token is not valid."""
        if not token:
            return ANONYMOUS
        cached = self._tokens.get(token)
        if cached is not None:
            return cached or None
        review = await self._client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        user: dict[str, Any] = status.get("user") or {} if status.get("authenticated") else {}
        self._tokens.put(token, user)
        return user or None

    async def authorize(self, user: Mapping[str, Any], verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `verb` on the non-resource URL `path`."""
        key = (user.get("username"), tuple(user.get("groups") or ()), user.get("uid"), verb, path)
        cached = self._decisions.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": list(user.get("groups") or []),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = await self._client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._decisions.put(key, decision)
        return decision


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
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in always_allow:
            return await handler(request)  # type: ignore[no-any-return]
        try:
            user = await auth.authenticate(_bearer(request))
        except ApiError as exc:
            log.warning("authentication failed", path=request.path, error=str(exc))
            return _status(401, "Unauthorized", "Unauthorized")
        if user is None:
            return _status(401, "Unauthorized", "Unauthorized")
        verb = "get" if request.method in ("GET", "HEAD") else request.method.lower()
        try:
            allowed, reason = await auth.authorize(user, verb, request.path)
        except ApiError as exc:
            log.warning("authorization failed", path=request.path, error=str(exc))
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


async def serve(
    options: ServingOptions,
    client: Requester,
    livez: Mapping[str, Check],
    readyz: Mapping[str, Check],
    healthz: Mapping[str, Check],
) -> web.AppRunner:
    """Start the server; the caller cleans the returned runner up."""

    async def metrics_handler(_: web.Request) -> web.Response:
        metrics.recorder.flush()  # the sampled plugin durations buffered since the last flush
        return web.Response(body=generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    middlewares = [] if options.plain_http else [_auth_middleware(DelegatingAuth(client), options.always_allow_paths)]
    app = web.Application(middlewares=middlewares)
    app.add_routes(
        [
            web.get("/metrics", metrics_handler),
            web.get("/healthz", health_handler("healthz", healthz)),
            web.get("/livez", health_handler("livez", livez)),
            web.get("/readyz", health_handler("readyz", readyz)),
        ]
    )
    context = None
    if not options.plain_http:
        cert_file, key_file = options.cert_file, options.key_file
        if not cert_file or not key_file:
            directory = Path(tempfile.mkdtemp(prefix="secondary-scheduler-serving-"))
            cert, key = self_signed_certificate(directory, socket.gethostname())
            cert_file, key_file = str(cert), str(key)
            log.info("generated self-signed serving certificate", cert=cert_file)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, options.address, options.port, ssl_context=context).start()
    return runner
