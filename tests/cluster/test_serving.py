"""/metrics served as kube-scheduler serves it: HTTPS, TokenReview + SubjectAccessReview against the real
apiserver, on a standby too and without taking the binds' rate limit; health paths open to anyone; a
provided serving certificate is the one served, and its renewal is served without a restart."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import chart
from harness.controlplane import ControlPlane, free_ports
from harness.workload import api_pod, wait_for
from scheduler.serving import DELEGATION_BURST, DELEGATION_QPS, self_signed_certificate
from tests.cluster.conftest import NodeFactory
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
def secure_scheduler_process(
    plane: ControlPlane, scheduler_name: str, *extra_args: str, replica: str = ""
) -> Iterator[int]:
    """The scheduler serving HTTPS (the default) with the admin kubeconfig, without leader election
    unless `extra_args` ask for it; yields its port. `replica` tells replicas' logs apart."""
    (port,) = free_ports(1)
    log_path = plane.log_dir / f"scheduler-{scheduler_name}{replica}.log"
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


def _samples(body: str, sample_name: str, **labels: str) -> float:
    """Sum of the samples `sample_name` with `labels` in a /metrics body; AssertionError when there is none
    (a family that is missing is a failure, not a zero)."""
    found = [
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]
    assert found, f"no {sample_name}{labels} in /metrics"
    return sum(found)


def test_a_standby_serves_metrics_to_a_valid_token(
    control_plane: ControlPlane, namespace: str, scheduler_name: str
) -> None:
    """Two replicas, one lease (the chart's default): both answer the ServiceMonitor's scrape, as every
    kube-scheduler replica does. A standby's reviews must not go through the leader-fenced client."""
    lease = f"{scheduler_name}-lease"
    election = ["--leader-elect", f"--leader-elect-resource-namespace={namespace}"]
    election.append(f"--leader-elect-resource-name={lease}")
    prometheus = chart.metrics_reader_token(control_plane, namespace, "prometheus")
    with (
        secure_scheduler_process(control_plane, scheduler_name, *election, replica="-a") as first,
        secure_scheduler_process(control_plane, scheduler_name, *election, replica="-b") as second,
    ):

        def leading() -> list[float] | None:
            roles = []
            for port in (first, second):
                status, body = https_get(f"https://127.0.0.1:{port}/metrics", prometheus)
                assert status == 200, (port, status, body)
                roles.append(_samples(body, "leader_election_master_status", name=lease))
            return roles if sorted(roles) == [0.0, 1.0] else None

        # One leads, the other stands by, and both were scraped with the token.
        wait_for(leading, timeout=60, what="one leader and one standby, both scraped")


PODS_PER_PHASE = 200
# The scheduling client's rate limit in the flood test: low enough that the binds, not this busy
# machine's CPU, set the pace, so the two phases compare what the flood takes from the binds' budget.
BIND_QPS = 20


def _bind_rate(core: Any, namespace: str, scheduler_name: str, phase: str) -> float:
    """Pods bound per second: PODS_PER_PHASE pods created at once (8 writers), timed until all are bound."""
    started = time.monotonic()
    with ThreadPoolExecutor(8) as writers:
        list(
            writers.map(
                lambda i: core.create_namespaced_pod(namespace, api_pod(f"{phase}-{i}", scheduler_name)),
                range(PODS_PER_PHASE),
            )
        )

    def all_bound() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector=f"app={phase}").items
        return sum(1 for pod in pods if pod.spec.node_name) == PODS_PER_PHASE

    wait_for(all_bound, timeout=180, what=f"{phase} pods bound", interval=0.1)
    return PODS_PER_PHASE / (time.monotonic() - started)


async def _flood(port: int, concurrency: int) -> None:
    """`concurrency` connections asking for /metrics with a new made-up token each time, until SIGTERM;
    prints "answered" at the first answer, then a JSON count of the answers by status at the end."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    answers: collections.Counter[str] = collections.Counter()
    connector = aiohttp.TCPConnector(ssl=False, limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def ask() -> None:
            while True:
                headers = {"Authorization": f"Bearer {secrets.token_urlsafe(32)}"}
                try:
                    async with session.get(f"https://127.0.0.1:{port}/metrics", headers=headers) as response:
                        await response.read()
                        answers[str(response.status)] += 1
                except (aiohttp.ClientError, TimeoutError) as exc:
                    answers[type(exc).__name__] += 1
                if answers.total() == 1:
                    print("answered", flush=True)

        askers = [asyncio.create_task(ask()) for _ in range(concurrency)]
        await stop.wait()
        for task in askers:
            task.cancel()
        await asyncio.gather(*askers, return_exceptions=True)
    print(json.dumps(answers), flush=True)


def flood_main(port: int, concurrency: int) -> None:
    asyncio.run(_flood(port, concurrency))


@contextlib.contextmanager
def token_flood(port: int, concurrency: int) -> Iterator[dict[str, Any]]:
    """The flood in a process of its own (its CPU is not the test's); yields a dict with `started`
    (monotonic) that holds the answers by status once the block is left."""
    code = f"from tests.cluster.test_serving import flood_main; flood_main({port}, {concurrency})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = {"started": time.monotonic()}
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "answered"
        yield result
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    result.update(json.loads(out.strip().splitlines()[-1]))


def test_a_flood_of_made_up_tokens_does_not_slow_binding(
    control_plane: ControlPlane, namespace: str, scheduler_name: str, core: Any, nodes: NodeFactory
) -> None:
    """Anyone who reaches the port can send tokens; each new one costs a TokenReview. Those go through
    the delegation clients' own rate limit and connections, so the binds keep their pace: the bind rate
    during a flood of 500 parallel connections, each sending made-up tokens, stays near the rate
    without it. (Through the scheduling client, each bind would queue behind 500 reviews: 25 s.)"""
    for suffix in ("a", "b"):
        nodes(f"{scheduler_name}-{suffix}", cpu="200", memory="1Ti", pods="1000")
    prometheus = chart.metrics_reader_token(control_plane, namespace, "prometheus")
    qps = (f"--kube-api-qps={BIND_QPS}", f"--kube-api-burst={BIND_QPS}")
    with secure_scheduler_process(control_plane, scheduler_name, *qps) as port:
        calm = _bind_rate(core, namespace, scheduler_name, "calm")
        time.sleep(1.5)  # the scheduling client's burst refills, as it was for the calm phase
        with token_flood(port, concurrency=500) as flood:
            flooded = _bind_rate(core, namespace, scheduler_name, "flooded")
        status, body = https_get(f"https://127.0.0.1:{port}/metrics", prometheus)
        flood_seconds = time.monotonic() - flood.pop("started")
    print(f"bind rate calm {calm:.1f}/s, flooded {flooded:.1f}/s; flood of {flood_seconds:.1f} s answered {flood}")
    # The flood really ran: hundreds of answers while the pods were bound, every one a 401.
    assert sum(flood.values()) >= 300 and flood.get("401") == sum(flood.values()), flood
    assert flooded >= 0.5 * calm, (calm, flooded)
    # What the flood cost the apiserver is bounded by the delegation clients' rate limit.
    assert status == 200
    reviews = _samples(body, "apiserver_delegated_authn_request_total")
    print(f"token reviews {reviews:.0f}")
    assert reviews <= DELEGATION_BURST + DELEGATION_QPS * flood_seconds + 1  # + the scraper's own


def test_a_rotated_serving_certificate_is_served_without_a_restart(
    control_plane: ControlPlane, namespace: str, scheduler_name: str, tmp_path: Path
) -> None:
    """The chart's serving.tlsSecretName, renewed: the kubelet swaps the Secret volume's `..data` link
    to a new directory. New handshakes get the new certificate, and no scrape fails meanwhile."""
    volume = tmp_path / "tls"
    volume.mkdir()

    def publish(version: str) -> Path:
        payload = volume / f"..{version}"
        payload.mkdir()
        cert, key = self_signed_certificate(payload, "localhost")
        cert.rename(payload / "tls.crt")
        key.rename(payload / "tls.key")
        (volume / "..data_tmp").symlink_to(payload.name)
        (volume / "..data_tmp").replace(volume / "..data")  # atomic, as the kubelet's swap
        return payload / "tls.crt"

    first = publish("2026_12_01")
    for name in ("tls.crt", "tls.key"):
        (volume / name).symlink_to(f"..data/{name}")
    prometheus = chart.metrics_reader_token(control_plane, namespace, "prometheus")
    files = (f"--tls-cert-file={volume / 'tls.crt'}", f"--tls-private-key-file={volume / 'tls.key'}")
    with secure_scheduler_process(control_plane, scheduler_name, *files) as port:
        assert ssl.get_server_certificate(("127.0.0.1", port)).strip() == first.read_text().strip()
        second = publish("2026_12_02")

        def rotated() -> bool:
            status, body = https_get(f"https://127.0.0.1:{port}/metrics", prometheus)
            assert status == 200, body  # no scrape breaks while the files change
            return ssl.get_server_certificate(("127.0.0.1", port)).strip() == second.read_text().strip()

        wait_for(rotated, timeout=15, what="the renewed certificate served")
        verified = ssl.create_default_context(cafile=str(second))
        with verified.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost"):
            pass
        assert https_get(f"https://127.0.0.1:{port}/metrics", prometheus)[0] == 200
