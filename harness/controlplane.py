"""A real, local Kubernetes control plane for tests, `make demo` and benchmarks.

Owns: running etcd, kube-apiserver and kwok (the node simulator: nodes become Ready, pods bound to
them become Running, deleted pods really go away), and on request kube-scheduler and
kube-controller-manager, as child processes on free 127.0.0.1 ports in one work dir; the admin
kubeconfig (token auth, TLS verified against the apiserver's self-signed CA); stopping all of it; and
the `up` / `down` CLI (`python -m harness.controlplane up --dir .cache/cluster`).

Must never: be imported by the scheduler itself; listen on or talk to anything but 127.0.0.1;
download anything (binaries come from hack/controlplane/build.sh, which builds from Go modules);
leave a process behind (every child runs in its own process group, is stopped by stop(), atexit
and `down`, and dies with the process that started it).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTROLPLANE_DIR = REPO_ROOT / "hack" / "controlplane"
BUILD_SCRIPT = CONTROLPLANE_DIR / "build.sh"
LOOPBACK = "127.0.0.1"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# Pod IPs kwok hands out; kept apart from the service range (nothing routes either of them).
KWOK_POD_CIDR = "10.244.0.1/16"
ADMIN_USER = "admin"
DEFAULT_STOP_GRACE = 5.0
_START_ATTEMPTS = 3
# Components that can be stopped and started again under a running cluster (fault tests; `serve`
# restarts them when they die).
RESTARTABLE = ("etcd", "kube-apiserver", "kwok")
_SUPERVISOR_RESTARTS = 5
# kube-scheduler / kube-controller-manager serving flags: no authentication/authorization
# kubeconfigs (they would look for the kube-system/extension-apiserver-authentication ConfigMap, which
# this apiserver, configured without client CAs, never writes, and log an error for it every few
# seconds); health and metrics are open to anyone on loopback instead.
_COMPONENT_SERVING_ARGS = ("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",)
# Workload-Aware Scheduling (beta, off by default in v1.37.2): the gate on the apiserver and on
# kube-scheduler, and the API group version the apiserver must serve for Workloads and PodGroups.
GENERIC_WORKLOAD_GATES: Mapping[str, bool] = {"GenericWorkload": True}
WORKLOAD_API_RUNTIME_CONFIG: Mapping[str, str] = {"scheduling.k8s.io/v1beta1": "true"}


def feature_gate_args(gates: Mapping[str, bool]) -> list[str]:
    """`--feature-gates=A=true,B=false` as every Kubernetes component takes it ([] when none)."""
    if not gates:
        return []
    return ["--feature-gates=" + ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))]


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or reached."""


def pinned_versions() -> dict[str, str]:
    """The versions hack/controlplane/versions.env pins (K8S_VERSION, ETCD_VERSION, ...)."""
    pins: dict[str, str] = {}
    for raw in (CONTROLPLANE_DIR / "versions.env").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            pins[key.strip()] = value.strip()
    return pins


def _binary_file(name: str) -> str:
    """The file build.sh writes for one of its names (the compatibility apiserver carries its version)."""
    if name == "kube-apiserver-compat":
        return f"kube-apiserver-{pinned_versions()['K8S_COMPAT_VERSION']}"
    return name


@functools.cache
def ensure_binaries(*names: str) -> Path:
    """Build (or reuse from the user cache) the named binaries (build.sh's names: etcd,
    kube-apiserver, kwok, kube-scheduler, ...); return their folder.

    Only what is named is built (a cold Go build costs minutes per binary; the demo needs three of
    the nine). build.sh logs its progress on stderr, which is passed through so a person sees a cold
    build advance; the folder is the last line of its stdout.
    """
    if not names:
        raise ValueError("ensure_binaries needs the names of the binaries to build")
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *names],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        check=False,
    )
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed (exit code {proc.returncode}); its log is on stderr above")
    bin_dir = Path(lines[-1])
    missing = [name for name in names if not os.access(bin_dir / _binary_file(name), os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{BUILD_SCRIPT} reported {bin_dir} but it lacks {', '.join(missing)}")
    return bin_dir


def binary(name: str) -> Path:
    """The path of one pinned binary (build.sh's name: kubectl, helm, null-binder, ...), built on
    first use."""
    return ensure_binaries(name) / _binary_file(name)


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (bound to port 0 together, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in socks:
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a log file ("" when it does not exist)."""
    try:
        with path.open("rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - 256 * 1024, 0))  # logs grow large in benchmarks
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated by `extra`; nested mappings merge, everything else (lists too) is replaced."""
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def _open(request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None) -> Any:
    """urlopen without the environment's proxies: everything here is on loopback."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(request, timeout=timeout)


@functools.cache
def _setpriv_pdeathsig() -> str | None:
    """util-linux `setpriv` when it can set the parent-death signal (Debian's can)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    probe = subprocess.run(
        [setpriv, "--pdeathsig", "KILL", "--", "true"], capture_output=True, check=False, stdin=subprocess.DEVNULL
    )
    return setpriv if probe.returncode == 0 else None


def death_signal_prefix() -> list[str]:
    """Make the child die with its parent, so that a test run killed outright (SIGTERM, SIGKILL; no
    atexit) leaves no process behind: start_new_session keeps it out of its parent's process group.

    The signal comes when the *thread* that started the child ends, so only the main thread's
    children get it (a worker thread may end long before the control plane should).
    """
    setpriv = _setpriv_pdeathsig()
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"]


class ManagedProcess:
    """One child process in a process group of its own, its output appended to a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.port = port
        self.env = dict(env) if env is not None else None
        with log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                [*death_signal_prefix(), *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def alive(self) -> bool:
        return self._popen.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the whole process group (the pgid is the pid: start_new_session)."""
        if self._popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)

    def wait(self, timeout: float) -> bool:
        """True when the process has exited within `timeout` seconds."""
        try:
            self._popen.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> None:
        """SIGTERM the group, SIGKILL it after `grace` seconds."""
        self.signal(signal.SIGTERM)
        if not self.wait(grace):
            self.signal(signal.SIGKILL)
            self._popen.wait()

    def failure(self, what: str) -> ControlPlaneError:
        """An error naming this process, its exit code and the tail of its log."""
        return ControlPlaneError(
            f"{self.name} {what} (exit code {self.returncode}); log {self.log_path}:\n{tail(self.log_path)}"
        )

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid}, port={self.port}, rc={self.returncode})"


def _stop_all(processes: Sequence[ManagedProcess], grace: float) -> None:
    """SIGTERM all of them at once, then SIGKILL whatever is left after `grace` seconds."""
    for proc in processes:
        proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in processes:
        if not proc.wait(deadline - time.monotonic()):
            proc.signal(signal.SIGKILL)
            proc.wait(30.0)


_TEMPDIR_PREFIX = "controlplane-"
_OWNER_FILE = "owner.pid"


def _remove_orphaned_tempdirs() -> None:
    """Remove temp work dirs whose owning process is gone (a run killed outright: no stop(), no
    atexit; its processes died with it, see death_signal_prefix, but its files stayed)."""
    for candidate in Path(tempfile.gettempdir()).glob(f"{_TEMPDIR_PREFIX}*"):
        try:
            owner = int((candidate / _OWNER_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # not ours, or being created right now
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(candidate, ignore_errors=True)
        except PermissionError:
            pass  # alive, someone else's


_LIVE: set[ControlPlane] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_live_control_planes() -> None:
    """An interrupted run (Ctrl-C, a failing fixture) must not leave etcd or an apiserver behind."""
    with _LIVE_LOCK:
        planes = list(_LIVE)
    for plane in planes:
        with contextlib.suppress(Exception):
            plane.stop()


class ControlPlane:
    """etcd + kube-apiserver + kwok on free loopback ports in a work dir; a context manager.

    `workdir=None` makes a fresh temp dir. The work dir (logs, certificates, etcd data) is removed
    by stop() unless `keep=True`.
    """

    def __init__(
        self,
        *,
        workdir: Path | None = None,
        keep: bool = False,
        kwok: bool = True,
        apiserver_args: Sequence[str] = (),
        apiserver_verbosity: int = 1,
        apiserver_version: str | None = None,
        audit_policy: Mapping[str, Any] | None = None,
        ready_timeout: float = 60.0,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Mapping[str, str] | None = None,
    ) -> None:
        """`apiserver_version`: run that kube-apiserver instead of the pinned K8S_VERSION; only
        K8S_COMPAT_VERSION is built (`kube-apiserver-<version>` in the bin folder).
        `feature_gates` / `runtime_config`: the apiserver's --feature-gates and --runtime-config,
        e.g. GENERIC_WORKLOAD_GATES and WORKLOAD_API_RUNTIME_CONFIG for Workloads and PodGroups;
        `feature_gates` is also the default --feature-gates of the kube-scheduler it starts."""
        self._requested_workdir = workdir
        self._apiserver_version = apiserver_version
        self.keep = keep
        self._with_kwok = kwok
        self._apiserver_args = list(apiserver_args)
        self._apiserver_args += feature_gate_args(feature_gates or {})
        if runtime_config:
            self._apiserver_args.append("--runtime-config=" + ",".join(f"{k}={v}" for k, v in runtime_config.items()))
        self._apiserver_verbosity = apiserver_verbosity
        self._audit_policy = audit_policy
        self.feature_gates: dict[str, bool] = dict(feature_gates or {})
        self.ready_timeout = ready_timeout
        self._lock = threading.RLock()
        self._processes: list[ManagedProcess] = []
        self._stopped: dict[str, ManagedProcess] = {}  # components stopped by stop_component, to restart
        self._workdir: Path | None = None
        self._token = ""
        self._apiserver_port = 0
        self._ssl_context: ssl.SSLContext | None = None
        self.startup_seconds = 0.0

    # ----------------------------------------------------------------------------- properties

    def _need_started(self) -> Path:
        if self._workdir is None:
            raise ControlPlaneError("the control plane is not started")
        return self._workdir

    @property
    def workdir(self) -> Path:
        return self._need_started()

    @property
    def log_dir(self) -> Path:
        return self._need_started() / "logs"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig: bearer token in group system:masters, TLS verified against ca_file."""
        return self._need_started() / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The apiserver's self-signed serving certificate followed by the CA that signed it."""
        return self._need_started() / "pki" / "serving" / "apiserver.crt"

    @property
    def audit_log(self) -> Path:
        """The apiserver's audit log (JSON lines), written when the plane has an audit_policy."""
        return self.log_dir / "audit.log"

    @property
    def server(self) -> str:
        self._need_started()
        return f"https://{LOOPBACK}:{self._apiserver_port}"

    @property
    def token(self) -> str:
        self._need_started()
        return self._token

    def build(self) -> Path:
        """Build (or reuse) the binaries start() runs, nothing else: etcd, the apiserver of the
        requested version and kwok (when the plane has it); their folder."""
        compat = self._apiserver_version not in (None, pinned_versions()["K8S_VERSION"])
        if compat and self._apiserver_version != pinned_versions()["K8S_COMPAT_VERSION"]:
            built = pinned_versions()["K8S_COMPAT_VERSION"]
            raise ControlPlaneError(
                f"kube-apiserver {self._apiserver_version} is not built (build.sh builds K8S_COMPAT_VERSION={built})"
            )
        names = ["etcd", "kube-apiserver-compat" if compat else "kube-apiserver"]
        if self._with_kwok:
            names.append("kwok")
        return ensure_binaries(*names)

    @property
    def processes(self) -> list[ManagedProcess]:
        with self._lock:
            return list(self._processes)

    def process(self, name: str) -> ManagedProcess:
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise KeyError(name)

    # ------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        with self._lock:
            if self._workdir is not None:
                return self
            began = time.monotonic()
            bin_dir = self.build()  # may build for minutes on a cold machine; not part of start-up time
            with _LIVE_LOCK:
                _LIVE.add(self)
            try:
                for attempt in range(1, _START_ATTEMPTS + 1):
                    try:
                        self._start(bin_dir)
                        break
                    except ControlPlaneError as err:
                        # A free port can be taken between our probe and the bind by another
                        # control plane starting at the same moment (parallel test runs): retry.
                        if attempt == _START_ATTEMPTS or "address already in use" not in str(err):
                            raise
                        self._stop_processes(DEFAULT_STOP_GRACE)
            except BaseException:
                self.stop()
                raise
            self.startup_seconds = time.monotonic() - began
            return self

    def _start(self, bin_dir: Path) -> None:
        if self._workdir is None:
            if self._requested_workdir is None:
                _remove_orphaned_tempdirs()
                self._workdir = Path(tempfile.mkdtemp(prefix=_TEMPDIR_PREFIX))
                (self._workdir / _OWNER_FILE).write_text(f"{os.getpid()}\n")
            else:
                self._workdir = self._requested_workdir.resolve()
                self._workdir.mkdir(parents=True, exist_ok=True)
        workdir = self._workdir
        for sub in ("etcd", "pki", "kwok"):  # a fresh cluster (a retry must not reuse etcd's member)
            shutil.rmtree(workdir / sub, ignore_errors=True)
        for sub in ("logs", "pki/serving", "etcd", "kwok"):
            (workdir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        etcd_client, etcd_peer, self._apiserver_port = free_ports(3)
        deadline = time.monotonic() + self.ready_timeout

        etcd_peer_url = f"http://{LOOPBACK}:{etcd_peer}"
        etcd_client_url = f"http://{LOOPBACK}:{etcd_client}"
        etcd = self._spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--name=etcd0",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={etcd_client_url}",
                f"--advertise-client-urls={etcd_client_url}",
                f"--listen-peer-urls={etcd_peer_url}",
                f"--initial-advertise-peer-urls={etcd_peer_url}",
                f"--initial-cluster=etcd0={etcd_peer_url}",
                "--unsafe-no-fsync=true",  # throwaway data: speed over durability
                "--log-level=warn",
            ],
            port=etcd_client,
        )

        # While etcd starts: the service-account key (one RSA key signs and verifies tokens) and
        # the static token file. openssl's CLI avoids a Python crypto dependency.
        pki = workdir / "pki"
        sa_key = pki / "sa.key"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(sa_key), "2048"],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        self._token = secrets.token_hex(24)
        tokens = pki / "tokens.csv"
        tokens.write_text(f'{self._token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        audit_args: list[str] = []
        if self._audit_policy is not None:
            policy = workdir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(dict(self._audit_policy), sort_keys=False))
            audit_args = [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
            ]

        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self._apiserver_binary(bin_dir)),
                f"--etcd-servers={etcd_client_url}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",  # else a host interface's address, in the cert too
                f"--secure-port={self._apiserver_port}",
                f"--cert-dir={pki / 'serving'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                # No controller creates default service accounts, and nothing (no node lifecycle
                # controller) would ever remove the not-ready taint TaintNodesByCondition adds.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                # The `kubernetes` Endpoints would point at 127.0.0.1, which validation rejects
                # (a loopback address) every 10 s; nothing in-cluster needs it.
                "--endpoint-reconciler-type=none",
                f"--v={self._apiserver_verbosity}",
                *audit_args,
                *self._apiserver_args,
            ],
            port=self._apiserver_port,
        )
        self._write_kubeconfig()
        self._wait_apiserver_ready([etcd, apiserver], deadline)
        self._ensure_default_namespace(deadline)
        if self._with_kwok:
            self._start_kwok(bin_dir, deadline)

    def _apiserver_binary(self, bin_dir: Path) -> Path:
        version = self._apiserver_version
        if version is None or version == pinned_versions()["K8S_VERSION"]:
            return bin_dir / "kube-apiserver"
        return bin_dir / f"kube-apiserver-{version}"

    def _stop_processes(self, grace: float) -> None:
        """Clients of the apiserver first, then the apiserver, then etcd."""
        with self._lock:
            processes, self._processes = self._processes, []
            _stop_all([p for p in processes if p.name not in ("kube-apiserver", "etcd")], grace)
            _stop_all([p for p in processes if p.name == "kube-apiserver"], grace)
            _stop_all([p for p in processes if p.name == "etcd"], grace)
            self._ssl_context = None

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> None:
        """Stop every process; remove the work dir unless keep. Idempotent."""
        with self._lock:
            self._stop_processes(grace)
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if self._workdir is not None and not self.keep:
                shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def _spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ManagedProcess:
        log_path = self.log_dir / f"{name}.log"
        proc = ManagedProcess(name, argv, log_path, env=env, port=port)
        with self._lock:
            self._processes.append(proc)
        return proc

    # --------------------------------------------------------------------------- apiserver

    def _write_kubeconfig(self) -> None:
        # The serving certificate the apiserver generates in --cert-dir is issued for 127.0.0.1 by
        # a self-signed CA that it writes into the same file, so that file is a working
        # certificate-authority for the `kubernetes` client, urllib3 and aiohttp/ssl alike
        # (tests/cluster/test_controlplane.py checks all three); no insecure-skip-tls-verify.
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": ADMIN_USER, "user": {"token": self._token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": ADMIN_USER}}],
            "current-context": "local",
            "preferences": {},
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting only the apiserver's CA (strict X.509 checks, as Python 3.13)."""
        if self._ssl_context is None:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            ctx.verify_flags |= ssl.VERIFY_X509_STRICT
            self._ssl_context = ctx
        return self._ssl_context

    def http_request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        anonymous: bool = False,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, bytes]:
        """One request to the apiserver; returns (status, body) for any status.

        Authenticates with the admin token unless `token` is given or `anonymous` is set.
        """
        request = urllib.request.Request(self.server + path, method=method)
        if not anonymous:
            request.add_header("Authorization", f"Bearer {token if token is not None else self._token}")
        if body is not None:
            request.data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with _open(request, timeout, self.ssl_context()) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as err:
            with err:
                return int(err.code), err.read()

    def _wait_apiserver_ready(self, processes: Sequence[ManagedProcess], deadline: float) -> None:
        last = "no answer yet"
        while True:
            for proc in processes:
                if not proc.alive():
                    raise proc.failure("exited during start-up")
            if self.ca_file.exists():
                try:
                    status, body = self.http_request("GET", "/readyz", timeout=2.0)
                except (OSError, ssl.SSLError) as err:
                    self._ssl_context = None  # the CA file may have been read half written
                    last = repr(err)
                else:
                    if status == 200:
                        return
                    last = f"HTTP {status}: {body.decode(errors='replace')[-2000:]}"
            if time.monotonic() > deadline:
                apiserver = processes[-1]
                raise ControlPlaneError(
                    f"kube-apiserver not ready within {self.ready_timeout:.0f} s at {self.server}/readyz "
                    f"(last: {last}); tail of {apiserver.log_path}:\n{tail(apiserver.log_path)}"
                )
            time.sleep(0.1)

    def _ensure_default_namespace(self, deadline: float) -> None:
        """Wait for the apiserver's system-namespaces controller to create `default`, else create it."""
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        while True:
            status, body = self.http_request("GET", "/api/v1/namespaces/default")
            if status == 200:
                return
            if status == 404:
                status, body = self.http_request("POST", "/api/v1/namespaces", namespace)
                if status in (201, 409):
                    continue
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"namespace default not available (HTTP {status}: {body.decode(errors='replace')})"
                )
            time.sleep(0.1)

    # -------------------------------------------------------------------------------- kwok

    def _start_kwok(self, bin_dir: Path, deadline: float) -> None:
        # kwok plays the Stages in kwok-stages.yaml (build.sh writes it from kwok's own stage files):
        # node-initialize + node-heartbeat (nodes Ready, conditions kept fresh), pod-ready (bound
        # pods Running with a pod IP), pod-complete and pod-delete (a pod with a deletionTimestamp
        # loses its finalizers and is deleted for good). KWOK_WORKDIR keeps it off
        # ~/.kwok/kwok.yaml, which it would otherwise load before any --config.
        (port,) = free_ports(1)
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.workdir / "kwok")
        kwok = self._spawn(
            "kwok",
            [
                str(bin_dir / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={bin_dir / 'kwok-stages.yaml'}",
                "--manage-all-nodes=true",
                f"--cidr={KWOK_POD_CIDR}",
                f"--server-address={LOOPBACK}:{port}",  # only for its /healthz
            ],
            port=port,
            env=env,
        )
        # Its health server starts only after its controllers (node + pod informers) have started.
        self._wait_http_ok(kwok, f"http://{LOOPBACK}:{port}/healthz", deadline, context=None)

    def _wait_http_ok(self, proc: ManagedProcess, url: str, deadline: float, context: ssl.SSLContext | None) -> None:
        last = "no answer yet"
        while True:
            if not proc.alive():
                raise proc.failure("exited during start-up")
            try:
                with _open(urllib.request.Request(url), 2.0, context) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as err:
                with err:
                    last = f"HTTP {err.code}: {err.read().decode(errors='replace')[-500:]}"
            except OSError as err:
                last = repr(err)
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{proc.name} not healthy at {url} (last: {last}); tail of {proc.log_path}:\n{tail(proc.log_path)}"
                )
            time.sleep(0.1)

    def _wait_component_healthz(self, proc: ManagedProcess, timeout: float) -> None:
        # kube-scheduler / kube-controller-manager serve /healthz over HTTPS with a certificate they
        # generate in memory; this probes our own child on loopback, so no verification.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = f"https://{LOOPBACK}:{proc.port}/healthz"
        self._wait_http_ok(proc, url, time.monotonic() + timeout, context=context)

    # ------------------------------------------------------------------ optional processes

    def start_kube_scheduler(
        self,
        scheduler_name: str,
        extra_config: Mapping[str, Any] | None = None,
        *,
        verbosity: int = 2,
        extra_args: Sequence[str] = (),
        timeout: float = 30.0,
        feature_gates: Mapping[str, bool] | None = None,
    ) -> ManagedProcess:
        """kube-scheduler with one profile named `scheduler_name`; returns once /healthz is OK.

        `feature_gates`: its --feature-gates (default: the control plane's own `feature_gates`).

        `extra_config` is merged into the KubeSchedulerConfiguration (mappings merge, lists such
        as `profiles` are replaced: a replacement must name its schedulerName itself).
        """
        self._need_started()
        (port,) = free_ports(1)
        config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 5000, "burst": 5000},
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": scheduler_name}],
        }
        if extra_config:
            config = deep_merge(config, extra_config)
        name = f"kube-scheduler-{scheduler_name}"
        config_path = self.workdir / f"{name}.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        proc = self._spawn(
            name,
            [
                str(binary("kube-scheduler")),
                f"--config={config_path}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                *_COMPONENT_SERVING_ARGS,
                *feature_gate_args(self.feature_gates if feature_gates is None else feature_gates),
                f"--v={verbosity}",
                *extra_args,
            ],
            port=port,
        )
        self._wait_component_healthz(proc, timeout)
        return proc

    def start_kube_controller_manager(
        self,
        controllers: str | Sequence[str] = "persistentvolume-binder-controller",
        *,
        pv_sync_period: str = "1s",
        extra_args: Sequence[str] = (),
        verbosity: int = 1,
        timeout: float = 30.0,
    ) -> ManagedProcess:
        """kube-controller-manager running only `controllers` (1.34 names, e.g.
        persistentvolume-binder-controller, namespace-controller, garbage-collector-controller);
        returns once /healthz is OK."""
        self._need_started()
        (port,) = free_ports(1)
        names = controllers if isinstance(controllers, str) else ",".join(controllers)
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(binary("kube-controller-manager")),
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={names}",
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                *_COMPONENT_SERVING_ARGS,
                # Resync (from its informer caches) every second rather than every 15 s: a claim
                # processed before its volume reached the binder's cache waits a resync to bind.
                f"--pvclaimbinder-sync-period={pv_sync_period}",
                f"--v={verbosity}",
                *extra_args,
            ],
            port=port,
        )
        self._wait_component_healthz(proc, timeout)
        return proc

    # -------------------------------------------------------------- restartable components

    def stop_component(self, name: str, *, kill: bool = False, grace: float = DEFAULT_STOP_GRACE) -> None:
        """Stop one of etcd, kube-apiserver, kwok (SIGTERM, or SIGKILL with `kill`), leaving the rest
        running; start_component brings it back on the same port with the same data."""
        if name not in RESTARTABLE:
            raise ControlPlaneError(f"{name} is not restartable (only {', '.join(RESTARTABLE)})")
        with self._lock:
            proc = self.process(name)
            self._processes.remove(proc)
            self._stopped[name] = proc
        if kill:
            proc.signal(signal.SIGKILL)
            proc.wait(30.0)
        else:
            proc.stop(grace)
        if name == "kube-apiserver":
            self._ssl_context = None

    def start_component(self, name: str, timeout: float | None = None) -> ManagedProcess:
        """Start a component stopped by stop_component (same command, port and data dir) and wait
        until it serves: etcd healthy, the apiserver ready, kwok's /healthz OK."""
        with self._lock:
            old = self._stopped.pop(name, None)
        if old is None:
            raise ControlPlaneError(f"{name} was not stopped with stop_component")
        proc = self._spawn(name, old.argv, port=old.port, env=old.env)
        deadline = time.monotonic() + (timeout if timeout is not None else self.ready_timeout)
        if name == "etcd":
            self._wait_http_ok(proc, f"http://{LOOPBACK}:{proc.port}/health", deadline, context=None)
        elif name == "kube-apiserver":
            self._wait_apiserver_ready([proc], deadline)
        else:
            self._wait_http_ok(proc, f"http://{LOOPBACK}:{proc.port}/healthz", deadline, context=None)
        return proc

    def restart_component(self, name: str, *, kill: bool = False, down_for: float = 0.0) -> ManagedProcess:
        """stop_component, stay down `down_for` seconds, start_component."""
        self.stop_component(name, kill=kill)
        if down_for > 0:
            time.sleep(down_for)
        return self.start_component(name)

    def stop_process(self, proc: ManagedProcess, grace: float = DEFAULT_STOP_GRACE) -> None:
        """Stop one of the extra processes before the rest of the control plane."""
        with self._lock:
            if proc in self._processes:
                self._processes.remove(proc)
        proc.stop(grace)


# ------------------------------------------------------------------------------------ the CLI

PID_FILE = "supervisor.pid"
CHILDREN_FILE = "children.pids"
READY_FILE = "ready"
SERVE_LOG = "supervisor.log"


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_supervisor(pid: int) -> bool:
    """Alive and really our `serve` (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"harness.controlplane" in cmdline and b"serve" in cmdline


def _running_supervisor(directory: Path) -> int | None:
    pid = _read_pid(directory / PID_FILE)
    return pid if pid is not None and _is_supervisor(pid) else None


def _cmd_serve(directory: Path) -> int:
    """The detached supervisor `up` starts: runs the control plane until SIGTERM."""

    def _terminate(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _terminate)
    _write_atomically(directory / PID_FILE, f"{os.getpid()}\n")
    try:
        with ControlPlane(workdir=directory / "state", keep=True) as plane:
            _write_atomically(directory / CHILDREN_FILE, "".join(f"{p.pid} {p.name}\n" for p in plane.processes))
            _write_atomically(directory / "kubeconfig", plane.kubeconfig.read_text())
            _write_atomically(
                directory / READY_FILE,
                f"server {plane.server}\nstartup_seconds {plane.startup_seconds:.1f}\nlogs {plane.log_dir}\n",
            )
            print(f"control plane up at {plane.server}, logs in {plane.log_dir}", flush=True)
            restarts = 0
            while True:
                for proc in plane.processes:
                    if proc.alive():
                        continue
                    print(f"{proc.name} died (exit code {proc.returncode})", flush=True)
                    print(tail(proc.log_path), flush=True)
                    if proc.name not in RESTARTABLE or restarts >= _SUPERVISOR_RESTARTS:
                        print("stopping", flush=True)
                        return 1
                    restarts += 1
                    plane.stop_component(proc.name)
                    new = plane.start_component(proc.name)
                    _write_atomically(
                        directory / CHILDREN_FILE, "".join(f"{p.pid} {p.name}\n" for p in plane.processes)
                    )
                    print(
                        f"{proc.name} restarted (pid {new.pid}, restart {restarts} of {_SUPERVISOR_RESTARTS})",
                        flush=True,
                    )
                time.sleep(1.0)
    finally:
        _remove_run_files(directory)


def _cmd_up(directory: Path, timeout: float) -> int:
    pid = _running_supervisor(directory)
    if pid is not None:
        print(f"control plane already up (supervisor pid {pid}); KUBECONFIG={directory / 'kubeconfig'}")
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    ControlPlane().build()  # a cold build shows its progress here, not in a detached log
    _kill_leftover_children(directory)
    _remove_run_files(directory)
    shutil.rmtree(directory / "state", ignore_errors=True)  # every `up` is a fresh cluster
    with (directory / SERVE_LOG).open("wb") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "harness.controlplane", "serve", "--dir", str(directory)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    try:
        while not (directory / READY_FILE).exists():
            if supervisor.poll() is not None:
                print(f"control plane failed to start; {directory / SERVE_LOG}:", file=sys.stderr)
                print(tail(directory / SERVE_LOG, 60), file=sys.stderr)
                return 1
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.1)
    except (TimeoutError, KeyboardInterrupt) as err:
        supervisor.terminate()  # its handler stops whatever it had started
        supervisor.wait(60)
        if isinstance(err, KeyboardInterrupt):
            raise
        print(f"control plane not up within {timeout:.0f} s; {directory / SERVE_LOG}:", file=sys.stderr)
        print(tail(directory / SERVE_LOG, 60), file=sys.stderr)
        return 1
    # The supervisor lives on in its own session: mark the handle done so that dropping it does not
    # warn "subprocess is still running"; `down` stops it through the pid file.
    supervisor.returncode = 0
    info = dict(line.split(" ", 1) for line in (directory / READY_FILE).read_text().splitlines() if " " in line)
    print(
        f"control plane up at {info.get('server')} in {info.get('startup_seconds')} s "
        f"(supervisor pid {supervisor.pid}, logs in {info.get('logs')})\n"
        f"export KUBECONFIG={directory / 'kubeconfig'}"
    )
    return 0


def _kill_leftover_children(directory: Path) -> None:
    """SIGKILL what a supervisor that died without cleaning up (SIGKILL, OOM) left running.

    Only a listed pid whose command line still names this directory's state is touched, so a
    recycled pid is never killed.
    """
    children = directory / CHILDREN_FILE
    if not children.exists():
        return
    state = str(directory / "state")
    for line in children.read_text().splitlines():
        parts = line.split()
        if not parts or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if state in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # each child leads its own process group


def _cmd_down(directory: Path, timeout: float) -> int:
    pid = _running_supervisor(directory)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # it stops its children and cleans up, see _cmd_serve
        deadline = time.monotonic() + timeout
        while _is_supervisor(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_supervisor(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _kill_leftover_children(directory)
    _remove_run_files(directory)
    print("control plane down" if pid is not None else "control plane was not running")
    return 0


def _remove_run_files(directory: Path) -> None:
    for name in (READY_FILE, CHILDREN_FILE, PID_FILE, "kubeconfig"):
        (directory / name).unlink(missing_ok=True)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)


def _cmd_status(directory: Path) -> int:
    pid = _running_supervisor(directory)
    if pid is None:
        print("control plane is down")
        return 1
    print(f"control plane up (supervisor pid {pid}); KUBECONFIG={directory / 'kubeconfig'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.controlplane",
        description="Run a local control plane (etcd, kube-apiserver, kwok) in the background.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("up", "start it in the background; returns once it is ready"),
        ("down", "stop it, leaving no processes"),
        ("status", "exit 0 when it is up"),
        ("serve", "run it in the foreground (what `up` detaches)"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--dir", type=Path, default=Path(".cache/cluster"), help="state folder")
        cmd.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    args = parser.parse_args(argv)
    directory: Path = args.dir.resolve()
    if args.command == "up":
        return _cmd_up(directory, args.timeout)
    if args.command == "down":
        return _cmd_down(directory, args.timeout)
    if args.command == "status":
        return _cmd_status(directory)
    return _cmd_serve(directory)


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "RESTARTABLE",
    "ControlPlane",
    "ControlPlaneError",
    "ManagedProcess",
    "binary",
    "ensure_binaries",
    "free_ports",
    "main",
    "pinned_versions",
    "tail",
]
