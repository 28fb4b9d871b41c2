"""/metrics served as kube-scheduler serves it: HTTPS, TokenReview + SubjectAccessReview against the real
apiserver; health paths open to anyone; a provided serving certificate is the one served."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import chart
from harness.controlplane import ControlPlane, free_ports
from harness.workload import wait_for
from scheduler.serving import self_signed_certificate
from tests.cluster.test_rbac import https_get

pytestmark = pytest.mark.cluster


def _service_account(plane: ControlPlane, namespace: str, name: str) -> str:
    status, _ = plane.http_request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    assert status == 201
    return chart.service_account_token(plane, namespace, name)


@contextlib.contextmanager
def secure_scheduler_process(plane: ControlPlane, scheduler_name: str, *extra_args: str) -> Iterator[int]:
    """The scheduler serving HTTPS (the default) with the admin kubeconfig; yields its port."""
    (port,) = free_ports(1)
    log_path = plane.log_dir / f"scheduler-{scheduler_name}.log"
    argv = [sys.executable, "-m", "scheduler", "run", f"--kubeconfig={plane.kubeconfig}", "--no-leader-elect"]
    argv += [f"--scheduler-name={scheduler_name}", "--bind-address=127.0.0.1", f"--secure-port={port}", *extra_args]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:

        def ready() -> bool:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            return https_get(f"https://127.0.0.1:{port}/readyz")[0] == 200

        wait_for(ready, timeout=60, what="scheduler /readyz")
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, log_path.read_text()[-3000:]


@pytest.fixture
def secure_scheduler(control_plane: ControlPlane, tmp_path: Path, scheduler_name: str) -> Iterator[tuple[int, Path]]:
    """The scheduler on HTTPS with a certificate of our own; yields (port, certificate)."""
    cert, key = self_signed_certificate(tmp_path, "localhost")
    with secure_scheduler_process(
        control_plane, scheduler_name, f"--tls-cert-file={cert}", f"--tls-private-key-file={key}"
    ) as port:
        yield port, cert


def test_metrics_need_a_token_allowed_to_get_the_path(
    control_plane: ControlPlane, namespace: str, secure_scheduler: tuple[int, Path]
) -> None:
    port, cert = secure_scheduler
    base = f"https://127.0.0.1:{port}"
    # The served certificate is the one given, and verifies against itself.
    verified = ssl.create_default_context(cafile=str(cert))
    assert ssl.get_server_certificate(("127.0.0.1", port)).strip() == cert.read_text().strip()
    with verified.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost"):
        pass
    # The ServiceMonitor's way: a token whose user is bound to the chart's metrics-reader ClusterRole.
    prometheus = chart.metrics_reader_token(control_plane, namespace, "prometheus")
    nobody = _service_account(control_plane, namespace, "nobody")
    status, body = https_get(f"{base}/metrics", prometheus)
    assert status == 200 and "# TYPE scheduler_schedule_attempts_total counter" in body
    status, body = https_get(f"{base}/metrics", nobody)
    assert status == 403
    assert f'forbidden: User \\"system:serviceaccount:{namespace}:nobody\\" cannot get path \\"/metrics\\"' in body
    assert https_get(f"{base}/metrics")[0] == 403  # system:anonymous
    assert https_get(f"{base}/metrics", "garbage")[0] == 401
    for path in ("/healthz", "/livez", "/readyz"):
        assert https_get(f"{base}{path}") == (200, "ok"), path
        assert https_get(f"{base}{path}", "garbage") == (200, "ok"), path  # never authenticated
    status, body = https_get(f"{base}/readyz?verbose")
    assert status == 200
    assert body == "[+]ping ok\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
