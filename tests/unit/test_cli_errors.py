"""Start-up failures are one clear line on stderr (no traceback) and a non-zero exit, and the
configuration is validated completely before anything connects. Missing RBAC at start needs an
apiserver: tests/cluster/test_serving.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.controlplane import free_ports


def _run(*args: str) -> tuple[int, str]:
    (port,) = free_ports(1)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "run",
            "--serve-plain-http",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr.strip().splitlines()[-1]


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}', insecure-skip-tls-verify: true}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


def test_missing_kubeconfig(tmp_path: Path) -> None:
    code, line = _run(f"--kubeconfig={tmp_path / 'nope'}")
    assert (code, line) == (2, f"secondary-scheduler: kubeconfig {tmp_path / 'nope'}: no such file")


@pytest.mark.parametrize("text", ["just a string", "apiVersion: v1\nkind: Config\nclusters: []\n"])
def test_invalid_kubeconfig(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    code, line = _run(f"--kubeconfig={path}")
    assert code == 2
    assert line.startswith(f"secondary-scheduler: kubeconfig {path}: not usable: "), line


def test_no_kubeconfig_outside_a_cluster() -> None:
    code, line = _run()
    assert code == 2
    assert line.startswith("secondary-scheduler: in-cluster configuration (no --kubeconfig given): "), line


def test_unreachable_apiserver_at_start(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    code, line = _run(f"--kubeconfig={_kubeconfig(tmp_path, f'https://127.0.0.1:{port}')}")
    assert code == 1
    # The first request at start is the discovery of resource.k8s.io/v1 (which DRA kinds are served).
    assert line.startswith(
        "secondary-scheduler: cannot start: 0: GET /apis/resource.k8s.io/v1: Cannot connect to host"
    ), line


def test_configuration_is_validated_before_anything_connects(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: s, plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}}]\n"
    )
    (port,) = free_ports(1)
    code, line = _run(f"--config={config}", f"--kubeconfig={_kubeconfig(tmp_path, f'https://127.0.0.1:{port}')}")
    assert code == 2
    assert line.startswith("secondary-scheduler: invalid configuration: "), line
    assert "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NoSuchPlugin'" in line, line


@pytest.mark.parametrize("bind_address", ["0.0.0.0", "127.0.0.1"])
def test_a_taken_port_is_one_line_naming_the_address_and_the_flags(tmp_path: Path, bind_address: str) -> None:
    """A second replica on one host, or kube-scheduler's own 10259: no traceback, one line, exit 1.
    Served as by default (HTTPS with a self-signed certificate), so nothing else reaches stderr."""
    (api_port,) = free_ports(1)
    with socket.create_server((bind_address, 0)) as taken:
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "scheduler",
                "run",
                f"--kubeconfig={_kubeconfig(tmp_path, f'https://127.0.0.1:{api_port}')}",
                f"--bind-address={bind_address}",
                f"--secure-port={port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"secondary-scheduler: cannot start: failed to listen on {bind_address}:{port}: address already in use "
        "(choose another with --secure-port or --bind-address)\n"
    )
