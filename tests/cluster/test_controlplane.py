"""The control plane the tests run on is real: pinned apiserver, verified TLS, RBAC, kwok nodes.

Owns: checks of harness/controlplane.py against the running processes (and of its
`up`/`down` CLI). Must never: mock anything, or leave nodes, processes or clients behind.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client import ApiException

from harness.controlplane import REPO_ROOT, ControlPlane, pinned_versions
from scheduler.api.http import load_connection

pytestmark = pytest.mark.cluster

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll `check` until it returns something other than None (or False)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def make_node(core: Any, name: str) -> None:
    core.create_node(k8s_client.V1Node(metadata=k8s_client.V1ObjectMeta(name=name, labels={"type": "kwok"})))


def node_ready(core: Any, name: str) -> bool:
    conditions = core.read_node(name).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def plain_api_pod(name: str, *, node_name: str | None = None, scheduler_name: str | None = None) -> Any:
    """A V1Pod with no requests, bound to `node_name` or left to `scheduler_name`."""
    return k8s_client.V1Pod(
        metadata=k8s_client.V1ObjectMeta(name=name),
        spec=k8s_client.V1PodSpec(
            node_name=node_name,
            scheduler_name=scheduler_name,
            containers=[k8s_client.V1Container(name="main", image="registry.k8s.io/pause:3.10")],
        ),
    )


def pod_gone(core: Any, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


def test_apiserver_runs_the_pinned_version(k8s: Any) -> None:
    info = k8s_client.VersionApi(k8s).get_code()
    assert info.git_version == pinned_versions()["K8S_VERSION"]


def test_kubernetes_client_verifies_tls(control_plane: ControlPlane, k8s: Any) -> None:
    cfg = k8s.configuration
    assert cfg.verify_ssl is True
    assert Path(cfg.ssl_ca_cert) == control_plane.ca_file
    assert cfg.host == control_plane.server
    # A client that does not trust the apiserver's CA is refused (so verification really happens).
    untrusting = k8s_client.Configuration()
    untrusting.host = control_plane.server
    untrusting.api_key = {"authorization": f"Bearer {control_plane.token}"}
    with k8s_client.ApiClient(untrusting) as api, pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        k8s_client.VersionApi(api).get_code(_request_timeout=5)


async def test_aiohttp_verifies_tls_with_the_scheduler_connection(control_plane: ControlPlane) -> None:
    connection = load_connection(str(control_plane.kubeconfig))
    context = connection.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    context.verify_flags |= ssl.VERIFY_X509_STRICT  # what Python 3.13 makes the default
    headers = {"Authorization": connection.auth_header() or ""}
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{connection.host}/readyz", ssl=context, headers=headers) as response:
            assert response.status == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with session.get(f"{connection.host}/readyz", ssl=ssl.create_default_context()):
                pass


def test_rbac_is_enforced(control_plane: ControlPlane, k8s: Any) -> None:
    path = "/api/v1/namespaces/default/pods"
    assert control_plane.http_request("GET", path)[0] == 200
    assert control_plane.http_request("GET", path, token="not-a-token")[0] == 401
    assert control_plane.http_request("GET", path, anonymous=True)[0] == 403
    # Authenticated but without any RoleBinding: the admin impersonates a nobody.
    assert control_plane.http_request("GET", path, headers={"Impersonate-User": "nobody"})[0] == 403
    # The same through the kubernetes client with an unknown token (TLS still verified).
    stranger = k8s_client.Configuration()
    stranger.host = control_plane.server
    stranger.ssl_ca_cert = str(control_plane.ca_file)
    stranger.api_key = {"authorization": "Bearer not-a-token"}
    with k8s_client.ApiClient(stranger) as api, pytest.raises(ApiException) as raised:
        k8s_client.CoreV1Api(api).list_namespaced_pod("default")
    assert raised.value.status == 401


def test_kwok_plays_the_node_and_its_pods(k8s: Any, namespace: str) -> None:
    core = k8s_client.CoreV1Api(k8s)
    node = f"kwok-{namespace}"
    make_node(core, node)
    try:
        wait_for(lambda: node_ready(core, node), 10, f"node {node} Ready")
        core.create_namespaced_pod(namespace, plain_api_pod("bound", node_name=node))

        def running() -> Any:
            pod = core.read_namespaced_pod("bound", namespace)
            return pod if pod.status and pod.status.phase == "Running" else None

        pod = wait_for(running, 10, "pod Running")
        assert pod.status.pod_ip
        assert pod.status.container_statuses[0].ready is True

        # A default (graceful) delete only sets deletionTimestamp; kwok, playing the kubelet,
        # finishes it.
        core.delete_namespaced_pod("bound", namespace)
        wait_for(lambda: pod_gone(core, "bound", namespace), 10, "pod deleted")
    finally:
        core.delete_node(node)


def test_kube_scheduler_peer_schedules_its_own_pods(control_plane: ControlPlane, k8s: Any, namespace: str) -> None:
    core = k8s_client.CoreV1Api(k8s)
    node = f"kwok-{namespace}"
    make_node(core, node)
    scheduler = control_plane.start_kube_scheduler("peer-scheduler")
    try:
        assert scheduler.alive()
        core.create_namespaced_pod(namespace, plain_api_pod("peer", scheduler_name="peer-scheduler"))

        def running() -> Any:
            pod = core.read_namespaced_pod("peer", namespace)
            return pod if pod.status and pod.status.phase == "Running" else None

        pod = wait_for(running, 20, "pod scheduled by kube-scheduler and Running")
        assert pod.spec.node_name  # any Ready node will do; ours is one
        # Its metrics are open on loopback (benchmarks scrape them).
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{scheduler.port}/metrics"
        with urllib.request.urlopen(url, context=insecure, timeout=5) as response:
            metrics = response.read().decode()
        assert 'scheduler_schedule_attempts_total{profile="peer-scheduler",result="scheduled"} 1' in metrics
    finally:
        control_plane.stop_process(scheduler)
        core.delete_node(node)
    assert not scheduler.alive()


def test_kube_controller_manager_binds_volumes(control_plane: ControlPlane, k8s: Any, namespace: str) -> None:
    core = k8s_client.CoreV1Api(k8s)
    manager = control_plane.start_kube_controller_manager("persistentvolume-binder-controller")
    pv_name = f"pv-{namespace}"
    try:
        core.create_persistent_volume(
            k8s_client.V1PersistentVolume(
                metadata=k8s_client.V1ObjectMeta(name=pv_name),
                spec=k8s_client.V1PersistentVolumeSpec(
                    capacity={"storage": "1Gi"},
                    access_modes=["ReadWriteOnce"],
                    storage_class_name=namespace,
                    host_path=k8s_client.V1HostPathVolumeSource(path="/tmp/unused"),
                ),
            )
        )
        core.create_namespaced_persistent_volume_claim(
            namespace,
            k8s_client.V1PersistentVolumeClaim(
                metadata=k8s_client.V1ObjectMeta(name="claim"),
                spec=k8s_client.V1PersistentVolumeClaimSpec(
                    access_modes=["ReadWriteOnce"],
                    storage_class_name=namespace,
                    resources=k8s_client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                ),
            ),
        )

        def bound() -> bool:
            claim = core.read_namespaced_persistent_volume_claim("claim", namespace)
            return bool(
                claim.status and claim.spec and claim.status.phase == "Bound" and claim.spec.volume_name == pv_name
            )

        wait_for(bound, 20, "claim bound by the PV binder")
    finally:
        control_plane.stop_process(manager)
        core.delete_namespaced_persistent_volume_claim("claim", namespace)
        core.delete_persistent_volume(pv_name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent has not reaped it yet).
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_etcd_and_apiserver_restart_one_by_one_keeping_ports_and_data(control_plane: ControlPlane, k8s: Any) -> None:
    core = k8s_client.CoreV1Api(k8s)
    name = f"restart-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_config_map(
        "default", k8s_client.V1ConfigMap(metadata=k8s_client.V1ObjectMeta(name=name), data={"k": "v"})
    )
    server = control_plane.server
    etcd_port = control_plane.process("etcd").port
    try:
        for component in ("kube-apiserver", "etcd"):
            old_pid = control_plane.process(component).pid
            control_plane.stop_component(component, kill=True)
            assert component not in {p.name for p in control_plane.processes}
            # The others keep running while it is down.
            assert {"etcd", "kube-apiserver", "kwok"} - {component} <= {p.name for p in control_plane.processes}
            restarted = control_plane.start_component(component)
            assert restarted.pid != old_pid and restarted.alive()
            assert control_plane.server == server
            assert control_plane.process("etcd").port == etcd_port
            # Same data: the object written before the restart is still there.
            got = wait_for(
                lambda: _read_config_map(core, name), timeout=60, what=f"the config map after restarting {component}"
            )
            assert got.data == {"k": "v"}
    finally:
        wait_for(lambda: _delete_config_map(core, name), timeout=60, what="deleting the config map")


def _read_config_map(core: Any, name: str) -> Any:
    try:
        return core.read_namespaced_config_map(name, "default")
    except (ApiException, OSError, urllib3.exceptions.HTTPError):
        return None


def _delete_config_map(core: Any, name: str) -> bool:
    try:
        core.delete_namespaced_config_map(name, "default")
    except ApiException as exc:
        return bool(exc.status == 404)
    except (OSError, urllib3.exceptions.HTTPError):
        return False
    return True


def test_cli_up_and_down_leave_no_process(tmp_path: Path) -> None:
    directory = tmp_path / f"cluster-{uuid.uuid4().hex[:6]}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.controlplane", *args, "--dir", str(directory)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    up = cli("up")
    assert up.returncode == 0, up.stdout + up.stderr
    pids: list[int] = []
    try:
        assert "export KUBECONFIG=" in up.stdout
        supervisor = int((directory / "supervisor.pid").read_text())
        children = (directory / "children.pids").read_text().split("\n")
        pids = [supervisor] + [int(line.split()[0]) for line in children if line]
        names = {line.split()[1] for line in children if line}
        assert names == {"etcd", "kube-apiserver", "kwok"}
        assert all(_pid_alive(pid) for pid in pids)

        kubeconfig = str(directory / "kubeconfig")
        api = k8s_config.new_client_from_config(config_file=kubeconfig, persist_config=False)  # type: ignore[no-untyped-call]
        with api:
            assert k8s_client.VersionApi(api).get_code().git_version == pinned_versions()["K8S_VERSION"]

        again = cli("up")
        assert again.returncode == 0
        assert "already up" in again.stdout
        assert cli("status").returncode == 0
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "control plane down" in down.stdout
    assert not [pid for pid in pids if _pid_alive(pid)]
    assert not (directory / "kubeconfig").exists()
    assert cli("status").returncode == 1
    assert "was not running" in cli("down").stdout


_HARNESS_KILLED_OUTRIGHT = """
import sys, time
from harness.controlplane import ControlPlane
from harness.workload import running_scheduler_process

with ControlPlane() as plane, running_scheduler_process(plane, "orphan-check") as scheduler:
    processes = [scheduler.pid, *(p.pid for p in plane.processes)]
    print(" ".join(map(str, processes)), flush=True)
    time.sleep(600)
"""


def test_a_harness_killed_outright_leaves_no_scheduler_behind() -> None:
    # pkill of a benchmark (SIGTERM: no finally, no atexit) once left our schedulers running,
    # re-binding into an apiserver that was gone, a core each, under the next make test.
    pids: list[int] = []
    with subprocess.Popen(
        [sys.executable, "-c", _HARNESS_KILLED_OUTRIGHT], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    ) as harness:
        try:
            assert harness.stdout is not None
            pids = [int(pid) for pid in harness.stdout.readline().split()]
            assert len(pids) >= 3 and all(_pid_alive(pid) for pid in pids)
        finally:
            harness.terminate()
    deadline = time.monotonic() + 15
    while [pid for pid in pids if _pid_alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _pid_alive(pid)]
