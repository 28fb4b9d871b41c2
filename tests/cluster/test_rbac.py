"""The chart's RBAC is sufficient and minimal, proven from the apiserver's audit log.

A control plane of its own logs every request of the chart's ServiceAccount (audit policy). The chart
is rendered and applied; the scheduler runs with a token minted for that ServiceAccount (TokenRequest)
and the chart's own arguments and configuration, through every write path that exists: binds,
Scheduled events, an unschedulable pod (PodScheduled condition + FailedScheduling event), leader
election (create, renew, release) and a /metrics scrape (TokenReview + SubjectAccessReview). Then:
nothing it asked was denied, every request is covered by a rule, and every rule verb was used or is
listed in KEPT with the reason it is there.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness import chart
from harness.controlplane import ControlPlane, free_ports
from harness.workload import api_pod, make_node, wait_for
from tests.conftest import api_client

pytestmark = pytest.mark.cluster

RELEASE, NAMESPACE = "rbac-proof", "sched-system"
FULLNAME = f"{RELEASE}-secondary-scheduler"
USER = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
SCHEDULER_NAME = "rbac-proof"

# (apiGroup, resource, verb) granted but not exercised by the workload, and why each is kept.
KEPT: Mapping[tuple[str, str, str], str] = {
    ("", "pods", "delete"): "DefaultPreemption deletes victims with victimRemoval delete, and in evict-then-delete "
    "mode those kube-scheduler would knowingly take past a PodDisruptionBudget (the workload evicts)",
    ("", "persistentvolumes", "update"): "VolumeBinding's PreBind sets a PV's claimRef (static binding); needs a PV "
    "controller to finish, which this audited plane does not run (tests/cluster/test_volumes.py exercises it)",
    ("", "persistentvolumeclaims", "update"): "VolumeBinding's PreBind annotates a claim with its selected node "
    "(provisioning); exercised by tests/cluster/test_volumes.py",
    ("events.k8s.io", "events", "patch"): "the events.k8s.io/v1 recorder updates an Event's series by PATCH "
    "(the second identical event of an object; the workload writes each event once)",
    ("resource.k8s.io", "resourceclaims", "get"): "DynamicResources re-reads a claim after a write conflict and "
    "before deleting a stale extended-resource claim (tests/unit/plugins/test_dynamicresources.py)",
    ("resource.k8s.io", "resourceclaims", "delete"): "DynamicResources deletes the extended-resource claim of a pod "
    "whose binding failed (Unreserve) or that fits no node any more (PostFilter)",
    ("resource.k8s.io", "resourceclaims/status", "patch"): "DynamicResources' Unreserve removes the pod from a "
    "claim's reservedFor after a failed binding cycle",
    ("resource.k8s.io", "resourceclaims/binding", "update"): "the apiserver authorizes a status update that changes "
    "status.allocation or status.reservedFor against this synthetic subresource (no request names it; without it "
    "PreBind's status update is refused: 422 ... requires resource=resourceclaims/binding)",
    ("resource.k8s.io", "resourceclaims/binding", "patch"): "as update, for Unreserve's status patch of reservedFor",
}

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": [USER]}, {"level": "None"}],
}


@pytest.fixture(scope="module")
def audited_plane() -> Iterator[ControlPlane]:
    with ControlPlane(audit_policy=AUDIT_POLICY) as plane:
        yield plane


def _insecure_context() -> ssl.SSLContext:
    # The scheduler's serving certificate is self-signed, as kube-scheduler's (the kubelet's probes
    # and the ServiceMonitor skip verification too).
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def https_get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=_insecure_context())
    )
    try:
        with opener.open(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return int(err.code), err.read().decode()
    except OSError as err:  # not listening (yet)
        return 0, str(err)


def _rules(docs: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(where, rule) for the ClusterRole (cluster) and the leader-election Role (its namespace)."""
    found = [("cluster", r) for r in chart.find(docs, "ClusterRole", FULLNAME)["rules"]]
    role = chart.find(docs, "Role", f"{FULLNAME}-leader-election")
    found += [(role["metadata"]["namespace"], r) for r in role["rules"]]
    return found


def _resource(ref: Mapping[str, Any]) -> str:
    return f"{ref['resource']}/{ref['subresource']}" if ref.get("subresource") else str(ref["resource"])


def _covers(where: str, rule: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    ref = event["objectRef"]
    if where != "cluster" and ref.get("namespace") != where:
        return False
    names = rule.get("resourceNames")
    return (
        ref.get("apiGroup", "") in rule["apiGroups"]
        and _resource(ref) in rule["resources"]
        and event["verb"] in rule["verbs"]
        and (not names or ref.get("name") in names)
    )


def _audit_events(plane: ControlPlane) -> list[dict[str, Any]]:
    lines = plane.audit_log.read_text().splitlines() if plane.audit_log.exists() else []
    return [e for e in map(json.loads, lines) if e["user"]["username"] == USER]


def test_chart_rbac_is_sufficient_and_minimal(audited_plane: ControlPlane, tmp_path: Path) -> None:
    plane = audited_plane
    docs = chart.documents(chart.render(RELEASE, NAMESPACE, {"schedulerName": SCHEDULER_NAME}))
    rules = _rules(docs)
    for where, rule in rules:
        flat = [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
        assert "*" not in flat, (where, rule)
        assert "secrets" not in rule["resources"], (where, rule)
    chart.apply(plane, docs, NAMESPACE)
    token = chart.service_account_token(plane, NAMESPACE, FULLNAME)
    # API Priority and Fairness puts the ServiceAccount's requests in the chart's FlowSchema.
    _, schema = plane.http_request("GET", f"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{FULLNAME}")
    request = urllib.request.Request(f"{plane.server}/api/v1/nodes?limit=1")
    request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=plane.ssl_context())
    )
    with opener.open(request, timeout=10) as response:
        assert response.headers["X-Kubernetes-PF-FlowSchema-UID"] == json.loads(schema)["metadata"]["uid"]
    kubeconfig = chart.token_kubeconfig(plane, token, tmp_path / "kubeconfig")
    config = tmp_path / "config.yaml"
    config.write_text(chart.config_file(docs))
    (port,) = free_ports(1)
    container = chart.scheduler_container(docs)
    assert container["command"] == ["secondary-scheduler", "run"]
    argv = [
        sys.executable,
        "-m",
        "scheduler",
        "run",
        *container["args"],
        # The paths and port of a pod, moved onto this machine (later flags win).
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
    ]
    api = api_client(plane)
    core: Any = k8s_client.CoreV1Api(api)
    log_path = plane.log_dir / "scheduler-rbac.log"
    try:
        for i in range(2):
            make_node(core, f"rbac-n{i}", cpu="2", memory="4Gi")
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "POD_NAMESPACE": NAMESPACE}
            )
        try:
            base = f"https://127.0.0.1:{port}"
            wait_for(lambda: proc.poll() is None and https_get(f"{base}/readyz")[0] == 200, timeout=60, what="readyz")
            for i in range(3):
                core.create_namespaced_pod("default", api_pod(f"fits-{i}", SCHEDULER_NAME, cpu="100m"))
            core.create_namespaced_pod("default", api_pod("too-big", SCHEDULER_NAME, cpu="64"))
            wait_for(
                lambda: all(core.read_namespaced_pod(f"fits-{i}", "default").spec.node_name for i in range(3)),
                timeout=60,
                what="3 pods bound",
            )

            def reported() -> bool:
                conditions = core.read_namespaced_pod("too-big", "default").status.conditions or []
                return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)

            wait_for(reported, timeout=60, what="too-big reported Unschedulable")
            # Preemption: one low-priority pod per node leaves no room; a higher-priority pod evicts one.
            scheduling = k8s_client.SchedulingV1Api(api)
            scheduling.create_priority_class(
                k8s_client.V1PriorityClass(metadata=k8s_client.V1ObjectMeta(name="rbac-high"), value=1000)
            )
            for i in range(2):
                core.create_namespaced_pod("default", api_pod(f"low-{i}", SCHEDULER_NAME, cpu="1500m"))
            wait_for(
                lambda: all(core.read_namespaced_pod(f"low-{i}", "default").spec.node_name for i in range(2)),
                timeout=60,
                what="2 low-priority pods bound",
            )
            core.create_namespaced_pod(
                "default", api_pod("high", SCHEDULER_NAME, cpu="1500m", priority_class="rbac-high")
            )
            wait_for(
                lambda: core.read_namespaced_pod("high", "default").spec.node_name,
                timeout=90,
                what="the preemptor bound after evicting a victim",
            )
            _dra_workload(plane, core)
            # /metrics: the admin's token is reviewed and allowed; no token is anonymous and forbidden.
            status, body = https_get(f"{base}/metrics", plane.token)
            assert status == 200 and "scheduler_schedule_attempts_total" in body
            status, body = https_get(f"{base}/metrics")
            assert status == 403 and 'User \\"system:anonymous\\" cannot get path \\"/metrics\\"' in body, body
            assert https_get(f"{base}/metrics", "not-a-token")[0] == 401
            lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{FULLNAME}"
            wait_for(
                lambda: any(
                    e["verb"] == "update" and e["objectRef"].get("name") == FULLNAME for e in _audit_events(plane)
                ),
                timeout=30,
                what="a lease renewal",
            )
            status, _ = plane.http_request("GET", lease)
            assert status == 200
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        assert proc.returncode == 0, log_path.read_text()[-3000:]
        # The release on shutdown is an update too; the audit log is written synchronously.
        events = _audit_events(plane)
    finally:
        for i in range(2):
            core.delete_node(f"rbac-n{i}")
        core.delete_collection_namespaced_pod("default", grace_period_seconds=0)
        api.close()

    denied = [e for e in events if e.get("annotations", {}).get("authorization.k8s.io/decision") != "allow"]
    assert not denied, [(e["verb"], e["requestURI"], e.get("responseStatus")) for e in denied]
    resource_events = [e for e in events if "objectRef" in e]
    uncovered = [e["requestURI"] for e in resource_events if not any(_covers(w, r, e) for w, r in rules)]
    assert not uncovered, uncovered  # sufficient, and the audit log agrees with our reading of the rules
    unused = []
    for where, rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    one = {
                        "apiGroups": [group],
                        "resources": [resource],
                        "verbs": [verb],
                        **({"resourceNames": rule["resourceNames"]} if "resourceNames" in rule else {}),
                    }
                    if not any(_covers(where, one, e) for e in resource_events) and (group, resource, verb) not in KEPT:
                        unused.append((where, group, resource, verb))
    assert not unused, f"granted but never used (drop them or say in KEPT why they stay): {unused}"


def _dra_workload(plane: ControlPlane, core: Any) -> None:
    """DynamicResources' reads and writes: a DeviceClass backing an extended resource, a slice of two
    devices, a pod with a claim (finalizer update, status update) and a pod asking for the extended
    resource (its claim created, the pod's status patched)."""
    api = "/apis/resource.k8s.io/v1"
    driver = "rbac.example.com"
    for path, body in (
        (
            f"{api}/deviceclasses",
            {
                "metadata": {"name": "rbac-gpu"},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                    "extendedResourceName": "example.com/rbac-gpu",
                },
            },
        ),
        (
            f"{api}/resourceslices",
            {
                "metadata": {"name": "rbac-n0-gpus"},
                "spec": {
                    "driver": driver,
                    "nodeName": "rbac-n0",
                    "pool": {"name": "rbac-n0", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                },
            },
        ),
        (
            f"{api}/namespaces/default/resourceclaims",
            {
                "metadata": {"name": "rbac-claim"},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "rbac-gpu", "allocationMode": "ExactCount"}}
                        ]
                    }
                },
            },
        ),
    ):
        status, raw = plane.http_request("POST", path, body)
        assert status == 201, raw
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}
    gpu = {"example.com/rbac-gpu": "1"}
    extended = {**container, "resources": {"requests": {"cpu": "10m", **gpu}, "limits": gpu}}
    for name, spec in (
        ("dra", {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimName": "rbac-claim"}]}),
        ("dra-extended", {"containers": [extended]}),
    ):
        body = {"metadata": {"name": name}, "spec": {"schedulerName": SCHEDULER_NAME, **spec}}
        status, raw = plane.http_request("POST", "/api/v1/namespaces/default/pods", body)
        assert status == 201, raw
    wait_for(
        lambda: all(core.read_namespaced_pod(name, "default").spec.node_name for name in ("dra", "dra-extended")),
        timeout=60,
        what="the DRA pods bound",
    )


def test_missing_rbac_at_start_is_one_line_naming_the_verb_and_resource(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    status, _ = control_plane.http_request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "unbound"}},
    )
    assert status == 201
    token = chart.service_account_token(control_plane, namespace, "unbound")
    kubeconfig = chart.token_kubeconfig(control_plane, token, tmp_path / "kubeconfig")
    (port,) = free_ports(1)
    argv = [sys.executable, "-m", "scheduler", "run", f"--kubeconfig={kubeconfig}", "--serve-plain-http"]
    proc = subprocess.run(
        [*argv, "--bind-address=127.0.0.1", f"--secure-port={port}", "--no-leader-elect"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "secondary-scheduler: cannot start: 403 Forbidden: namespaces is forbidden: User "
        f'"system:serviceaccount:{namespace}:unbound" cannot list resource "namespaces" in API group "" '
        "at the cluster scope"
    )
