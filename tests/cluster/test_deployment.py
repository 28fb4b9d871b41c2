"""The chart's Deployment, run as a kubelet would run it: in-cluster mode, two replicas, the probes.

Each replica is the rendered container's command, args and env, started in a private mount
namespace with the pod's volumes (the chart's ConfigMap, its emptyDir) and a service-account token
minted for the chart's ServiceAccount at /var/run/secrets/kubernetes.io/serviceaccount, as UID 65532
on a read-only root, KUBERNETES_SERVICE_HOST/PORT pointing at the test apiserver and no kubeconfig.
The two replicas share this machine's network, so each is rendered with its own serving.port (on a
real cluster each pod has its own network namespace); nothing else differs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import chart
from harness.controlplane import REPO_ROOT, ControlPlane, free_ports
from harness.workload import api_pod, wait_for
from tests.cluster.conftest import NodeFactory
from tests.cluster.test_rbac import https_get

pytestmark = pytest.mark.cluster

RELEASE = "incluster"


def _probe(container: Mapping[str, Any], kind: str) -> tuple[int, str]:
    """What the kubelet's httpGet probe would see (no certificate check, no credentials)."""
    get = container[kind]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    port = ports.get(get["port"], get["port"])
    return https_get(f"{get['scheme'].lower()}://127.0.0.1:{port}{get['path']}")


def _log_events(path: Path) -> list[dict[str, Any]]:
    """The replica's log: every line is one structlog JSON object (the chart's logging.format)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.skipif(os.geteuid() != 0, reason="private mount namespaces need root")
def test_two_replicas_in_cluster_one_leads_pods_schedule_probes_answer(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory
) -> None:
    scheduler_name = f"ic-{uuid.uuid4().hex[:6]}"
    ports = free_ports(2)
    renders = [
        chart.documents(chart.render(RELEASE, namespace, {"schedulerName": scheduler_name, "serving": {"port": port}}))
        for port in ports
    ]
    chart.apply(control_plane, renders[0], namespace)
    fullname = f"{RELEASE}-secondary-scheduler"
    token = chart.service_account_token(control_plane, namespace, fullname)
    nodes(f"{namespace}-n0", cpu="4", memory="8Gi")
    replicas: list[tuple[subprocess.Popen[bytes], Path, dict[str, Any]]] = []
    with chart.host_mount_points(chart.mount_paths(renders[0])):
        try:
            for i, docs in enumerate(renders):
                log_path = control_plane.log_dir / f"{fullname}-{i}.log"
                proc = chart.run_as_kubelet(control_plane, docs, token, f"{fullname}-{i}", namespace, log_path)
                replicas.append((proc, log_path, chart.scheduler_container(docs)))

            def probes_pass() -> bool:
                for proc, log_path, container in replicas:
                    assert proc.poll() is None, log_path.read_text()[-3000:]
                    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                        status, _ = _probe(container, kind)
                        if not 200 <= status < 400:
                            return False
                return True

            # Both ready, the standby too: it only waits for the lease.
            wait_for(probes_pass, timeout=90, what="both replicas' probes passing")
            lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{fullname}"
            wait_for(lambda: control_plane.http_request("GET", lease_path)[0] == 200, timeout=30, what="the lease")

            def leaders() -> list[int]:
                return [
                    i
                    for i, (_, log_path, _) in enumerate(replicas)
                    if any(e.get("event") == "acquired lease" for e in _log_events(log_path))
                ]

            (leader,) = wait_for(leaders, timeout=30, what="a leader")
            for i in range(3):
                core.create_namespaced_pod(namespace, api_pod(f"web-{i}", scheduler_name))
            wait_for(
                lambda: all(core.read_namespaced_pod(f"web-{i}", namespace).spec.node_name for i in range(3)),
                timeout=60,
                what="3 pods bound",
            )
            assert leaders() == [leader]  # the standby never led, never scheduled
            # The leader goes away (a rolling update): it releases the lease, the standby takes over.
            proc, log_path, _ = replicas[leader]
            (identity,) = {e["identity"] for e in _log_events(log_path) if e.get("event") == "acquired lease"}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, log_path.read_text()[-3000:]
            # Released on the way out, not left to expire (the standby may hold it already).
            lease = json.loads(control_plane.http_request("GET", lease_path)[1])
            assert lease["spec"].get("holderIdentity") != identity, lease["spec"]
            core.create_namespaced_pod(namespace, api_pod("after-handover", scheduler_name))
            wait_for(
                lambda: core.read_namespaced_pod("after-handover", namespace).spec.node_name,
                timeout=60,
                what="a pod bound by the new leader",
            )
            assert leaders() == [0, 1]
        finally:
            for proc, _, _ in replicas:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    for proc, log_path, _ in replicas:
        assert proc.returncode == 0, log_path.read_text()[-3000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="private mount namespaces need root")
def test_an_empty_dir_over_the_checkout_hides_nothing_the_scheduler_runs_from(
    control_plane: ControlPlane, namespace: str
) -> None:
    # The chart's emptyDir is /tmp, and a clone may live there (`git clone ... /tmp/x`): it must not
    # hide the venv or the editable checkout from the replica. A checkout elsewhere gets a second
    # emptyDir over its parent folder (over itself when that is /), so the test means the same
    # wherever the checkout is.
    (port,) = free_ports(1)
    docs = chart.documents(chart.render(RELEASE, namespace, {"serving": {"port": port}}))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if not any(REPO_ROOT.is_relative_to(m["mountPath"]) for m in container["volumeMounts"]):
        hidden = REPO_ROOT.parent if REPO_ROOT.parent != Path("/") else REPO_ROOT
        pod["volumes"].append({"name": "over-checkout", "emptyDir": {}})
        container["volumeMounts"].append({"name": "over-checkout", "mountPath": str(hidden)})
    chart.apply(control_plane, docs, namespace)
    fullname = f"{RELEASE}-secondary-scheduler"
    token = chart.service_account_token(control_plane, namespace, fullname)
    log_path = control_plane.log_dir / f"{fullname}-{namespace}-hidden.log"
    with chart.host_mount_points(chart.mount_paths(docs)):
        proc = chart.run_as_kubelet(control_plane, docs, token, f"{fullname}-0", namespace, log_path)
        try:

            def started() -> bool:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                return 200 <= _probe(container, "startupProbe")[0] < 400

            wait_for(started, timeout=90, what="the replica's startup probe passing")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, log_path.read_text()[-3000:]
