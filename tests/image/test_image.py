"""The container image, built from the Dockerfile and run the way the chart runs it (`make image-test`).

hack/image/build.sh builds a Debian bookworm base with mmdebstrap, imports it into podman and builds
the project's Dockerfile on it. The image then runs read-only as UID 65532 on the host network with
the chart's container args and ConfigMap, and a token of the chart's ServiceAccount mounted where a
kubelet mounts it (in-cluster mode), until it has bound a pod.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from harness import chart
from harness.controlplane import REPO_ROOT, ControlPlane, free_ports
from harness.workload import api_pod, wait_for
from tests.cluster.conftest import NodeFactory
from tests.cluster.test_rbac import https_get
from tests.unit.test_locks import RUNTIME_LOCK, read_lock

pytestmark = [pytest.mark.cluster, pytest.mark.image]

PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
BASE_LOCK = REPO_ROOT / "hack" / "image" / "bookworm.lock"
# Python's own packaging tools: in the lock to build the project, removed from the image after.
_BUILD_ONLY = {"pip", "setuptools"}


def _build_image() -> str:
    proc = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "image" / "build.sh")],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, "hack/image/build.sh failed; its log is above"
    return proc.stdout.strip().splitlines()[-1]


def _run_in(image: str, *command: str) -> str:
    proc = subprocess.run(
        [
            *PODMAN,
            "run",
            "--rm",
            "--ulimit=nofile=1024:1024",
            "--ulimit=nproc=1024:1024",
            "--network=none",
            f"--entrypoint={command[0]}",
            image,
            *command[1:],
        ],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="podman here runs as root")
def test_image_holds_exactly_the_locked_python_and_debian_packages() -> None:
    image = _build_image()
    listed = _run_in(
        image,
        "python3",
        "-c",
        "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'], d.version)",
    )
    installed: dict[str, str] = {
        canonicalize_name(name): version for name, version in (line.split() for line in listed.splitlines())
    }
    del installed["secondary-scheduler"]  # the project itself, built from the checkout
    locked = {name: version for name, (version, _) in read_lock(RUNTIME_LOCK).items() if name not in _BUILD_ONLY}
    assert installed == locked
    packages = _run_in(image, "dpkg-query", "-W", "-f=${Package}=${Version}\n")
    base = [line for line in BASE_LOCK.read_text().splitlines() if not line.startswith("#")]
    assert sorted(packages.splitlines()) == sorted(base)


@pytest.mark.skipif(os.geteuid() != 0, reason="podman here runs as root")
def test_image_runs_read_only_as_65532_and_binds_a_pod(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, tmp_path: Path
) -> None:
    image = _build_image()
    user = subprocess.run(
        [*PODMAN, "image", "inspect", "--format", "{{.Config.User}}", image], capture_output=True, text=True, check=True
    )
    assert user.stdout.strip() == "65532:65532"
    scheduler_name = f"img-{uuid.uuid4().hex[:6]}"
    (port,) = free_ports(1)
    docs = chart.documents(chart.render("img", namespace, {"schedulerName": scheduler_name, "serving": {"port": port}}))
    chart.apply(control_plane, docs, namespace)
    account = tmp_path / "serviceaccount"
    account.mkdir(mode=0o755)
    (account / "token").write_text(chart.service_account_token(control_plane, namespace, "img-secondary-scheduler"))
    (account / "ca.crt").write_text(control_plane.ca_file.read_text())
    (account / "namespace").write_text(namespace)
    config = tmp_path / "config"
    config.mkdir(mode=0o755)
    (config / "config.yaml").write_text(chart.config_file(docs))
    for path in (*account.iterdir(), *config.iterdir()):
        path.chmod(0o644)
    tmp_path.chmod(0o755)
    container = chart.scheduler_container(docs)
    host, _, api_port = control_plane.server.removeprefix("https://").rpartition(":")
    name = f"scheduler-{scheduler_name}"
    nodes(f"{namespace}-n0")
    log_path = control_plane.log_dir / f"{name}.log"
    command = [
        *PODMAN,
        "run",
        "--rm",
        f"--name={name}",
        "--read-only",
        "--user=65532:65532",
        "--network=host",
        "--ulimit=nofile=1024:1024",
        "--ulimit=nproc=1024:1024",
        "--tmpfs=/tmp:size=16m",
        f"--volume={account}:{chart.SERVICE_ACCOUNT_DIR}:ro",
        f"--volume={config}:/etc/secondary-scheduler/config:ro",
        f"--env=KUBERNETES_SERVICE_HOST={host}",
        f"--env=KUBERNETES_SERVICE_PORT={api_port}",
        f"--env=POD_NAME={name}",
        f"--env=POD_NAMESPACE={namespace}",
        f"--entrypoint={container['command'][0]}",
        image,
        *container["command"][1:],
        *container["args"],
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:

        def ready() -> bool:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            return https_get(f"https://127.0.0.1:{port}/readyz")[0] == 200

        wait_for(ready, timeout=120, what="the container's /readyz")
        core.create_namespaced_pod(namespace, api_pod("web-0", scheduler_name))
        wait_for(
            lambda: core.read_namespaced_pod("web-0", namespace).spec.node_name,
            timeout=60,
            what="the pod bound by the container",
        )
    finally:
        subprocess.run([*PODMAN, "stop", "--time=20", name], capture_output=True, check=False)
        proc.wait(timeout=60)
    assert proc.returncode == 0, log_path.read_text()[-3000:]
