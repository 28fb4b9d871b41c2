"""DynamicResources against the real apiserver (resource.k8s.io/v1 is served by default), with
kube-controller-manager's resourceclaim controller making claims from templates. No DRA driver:
the tests publish ResourceSlices and DeviceClasses themselves and kwok plays the kubelet.

Covered: a claim allocated and its pod bound (finalizer, allocation, reservedFor written); two
claims of 2 devices on a node with 2 (kube's message for the second); template claims; one claim
shared by two pods; an extended resource backed by a DeviceClass (the pod's special claim).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import running_scheduler, scheduled_condition, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

API = "/apis/resource.k8s.io/v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


class Dra:
    """Creates resource.k8s.io objects as raw JSON; deletes the cluster-scoped ones afterwards."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.namespace = namespace
        self.driver = f"gpu-{namespace}.example.com"
        self.cluster_scoped: list[str] = []

    def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        status, raw = self.plane.http_request(method, path, body)
        assert status < 300, f"{method} {path}: {status} {raw.decode(errors='replace')}"
        result: dict[str, Any] = json.loads(raw)
        return result

    def device_class(self, name: str, extended_resource: str | None = None) -> str:
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}
        if extended_resource:
            spec["extendedResourceName"] = extended_resource
        self.request("POST", f"{API}/deviceclasses", {"metadata": {"name": name}, "spec": spec})
        self.cluster_scoped.append(f"{API}/deviceclasses/{name}")
        return name

    def slice(self, node: str, devices: int) -> None:
        name = f"{node}-{self.driver}"
        body = {
            "metadata": {"name": name},
            "spec": {
                "driver": self.driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)],
            },
        }
        self.request("POST", f"{API}/resourceslices", body)
        self.cluster_scoped.append(f"{API}/resourceslices/{name}")

    def claim(self, name: str, device_class: str, count: int = 1) -> None:
        self.request(
            "POST",
            f"{API}/namespaces/{self.namespace}/resourceclaims",
            {"metadata": {"name": name}, "spec": _devices(device_class, count)},
        )

    def template(self, name: str, device_class: str, count: int = 1) -> None:
        self.request(
            "POST",
            f"{API}/namespaces/{self.namespace}/resourceclaimtemplates",
            {"metadata": {"name": name}, "spec": {"spec": _devices(device_class, count)}},
        )

    def get_claim(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"{API}/namespaces/{self.namespace}/resourceclaims/{name}")

    def claims(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.request("GET", f"{API}/namespaces/{self.namespace}/resourceclaims")["items"]
        return items

    def pod(
        self,
        name: str,
        scheduler_name: str,
        claims: list[dict[str, str]] | None = None,
        requests: dict[str, str] | None = None,
    ) -> None:
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", **(requests or {})}},
                }
            ],
        }
        if requests:
            spec["containers"][0]["resources"]["limits"] = {k: v for k, v in requests.items() if "/" in k}
        if claims:
            spec["resourceClaims"] = claims
        self.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", {"metadata": {"name": name}, "spec": spec})

    def cleanup(self) -> None:
        for path in reversed(self.cluster_scoped):
            self.plane.http_request("DELETE", path)


def _devices(device_class: str, count: int) -> dict[str, Any]:
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count},
                }
            ]
        }
    }


@pytest.fixture
def dra(control_plane: ControlPlane, namespace: str) -> Iterator[Dra]:
    helper = Dra(control_plane, namespace)
    try:
        yield helper
    finally:
        helper.cleanup()


@pytest.fixture(scope="module")
def claim_controller(control_plane: ControlPlane) -> Iterator[None]:
    """kube-controller-manager with only the resourceclaim controller (claims from templates)."""
    manager = control_plane.start_kube_controller_manager("resourceclaim-controller")
    try:
        yield
    finally:
        control_plane.stop_process(manager)


def _node_of(core: Any, namespace: str, pod: str) -> str | None:
    node: str | None = core.read_namespaced_pod(pod, namespace).spec.node_name
    return node


def _allocated(claim: dict[str, Any]) -> list[tuple[str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return sorted((r["pool"], r["device"]) for r in results)


def _reserved(claim: dict[str, Any]) -> list[str]:
    return sorted(entry["name"] for entry in (claim.get("status") or {}).get("reservedFor") or ())


def test_claim_is_allocated_and_pod_bound(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str, dra: Dra
) -> None:
    names = [nodes(f"{namespace}-n{i}") for i in range(2)]
    dra.device_class(f"gpu-{namespace}")
    dra.slice(names[1], 2)
    dra.claim("gpu", f"gpu-{namespace}")
    with running_scheduler(control_plane, scheduler_name):
        dra.pod("app", scheduler_name, claims=[{"name": "gpu", "resourceClaimName": "gpu"}])
        node = wait_for(lambda: _node_of(core, namespace, "app"), timeout=60, what="pod bound")
    assert node == names[1]
    claim = dra.get_claim("gpu")
    assert FINALIZER in claim["metadata"]["finalizers"]
    assert _allocated(claim) == [(names[1], "gpu-0")]
    assert _reserved(claim) == ["app"]


def test_two_claims_of_two_devices_on_a_node_with_two(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str, dra: Dra
) -> None:
    names = [nodes(f"{namespace}-n{i}") for i in range(2)]
    dra.device_class(f"gpu-{namespace}")
    dra.slice(names[0], 2)
    for claim in ("a", "b"):
        dra.claim(claim, f"gpu-{namespace}", count=2)
    with running_scheduler(control_plane, scheduler_name):
        dra.pod("first", scheduler_name, claims=[{"name": "gpu", "resourceClaimName": "a"}])
        wait_for(lambda: _node_of(core, namespace, "first"), timeout=60, what="first pod bound")
        dra.pod("second", scheduler_name, claims=[{"name": "gpu", "resourceClaimName": "b"}])

        def reported() -> str | None:
            condition = scheduled_condition(core.read_namespaced_pod("second", namespace))
            return condition.message if condition is not None and condition.reason == "Unschedulable" else None

        message = wait_for(reported, timeout=60, what="second pod reported")
    assert message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    assert _node_of(core, namespace, "second") is None
    assert _allocated(dra.get_claim("b")) == []


def test_template_claims_and_a_shared_claim(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    dra: Dra,
    claim_controller: None,
) -> None:
    """Two pods from one template get a claim each (made by the resourceclaim controller) and
    distinct devices; two more pods share one claim and land where its device is."""
    names = [nodes(f"{namespace}-n{i}") for i in range(3)]
    device_class = dra.device_class(f"gpu-{namespace}")
    dra.slice(names[0], 1)
    dra.slice(names[1], 2)
    dra.template("one-gpu", device_class)
    dra.claim("shared", device_class)
    with running_scheduler(control_plane, scheduler_name):
        for i in range(2):
            dra.pod(f"t{i}", scheduler_name, claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
        for i in range(2):
            dra.pod(f"s{i}", scheduler_name, claims=[{"name": "gpu", "resourceClaimName": "shared"}])
        pods = ["t0", "t1", "s0", "s1"]
        wait_for(lambda: all(_node_of(core, namespace, p) for p in pods), timeout=90, what="4 pods bound")
        placed = {p: _node_of(core, namespace, p) for p in pods}
    claims = {c["metadata"]["name"]: c for c in dra.claims()}
    generated = [c for name, c in claims.items() if name != "shared"]
    assert len(generated) == 2
    devices = [device for c in [*generated, claims["shared"]] for device in _allocated(c)]
    assert len(devices) == len(set(devices)) == 3  # every device allocated once
    shared_node = _allocated(claims["shared"])[0][0]
    assert placed["s0"] == placed["s1"] == shared_node
    assert _reserved(claims["shared"]) == ["s0", "s1"]
    for claim in generated:
        (owner,) = claim["metadata"]["ownerReferences"]
        assert placed[owner["name"]] == _allocated(claim)[0][0]


def test_extended_resource_backed_by_a_device_class(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str, dra: Dra
) -> None:
    """`<ext>: 1` that no node advertises: the pod gets `<pod>-extended-resources-<suffix>`."""
    names = [nodes(f"{namespace}-n{i}") for i in range(2)]
    resource = f"{namespace}.example.com/gpu"
    dra.device_class(f"gpu-{namespace}", extended_resource=resource)
    dra.slice(names[1], 1)
    with running_scheduler(control_plane, scheduler_name):
        dra.pod("ext", scheduler_name, requests={resource: "1"})
        node = wait_for(lambda: _node_of(core, namespace, "ext"), timeout=60, what="pod bound")
    assert node == names[1]
    (claim,) = dra.claims()
    assert claim["metadata"]["name"].startswith("ext-extended-resources-")
    assert _allocated(claim) == [(names[1], "gpu-0")]
    assert _reserved(claim) == ["ext"]
    status = dra.request("GET", f"/api/v1/namespaces/{namespace}/pods/ext")["status"]
    assert status["extendedResourceClaimStatus"]["resourceClaimName"] == claim["metadata"]["name"]


def test_missing_claim_holds_the_pod_without_an_attempt(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str, dra: Dra
) -> None:
    """PreEnqueue holds a pod whose claim does not exist (no FailedScheduling, as kube's queue);
    creating the claim lets it through."""
    nodes(f"{namespace}-n0")
    device_class = dra.device_class(f"gpu-{namespace}")
    dra.slice(f"{namespace}-n0", 1)
    with running_scheduler(control_plane, scheduler_name):
        dra.pod("waits", scheduler_name, claims=[{"name": "gpu", "resourceClaimName": "later"}])
        wait_for(
            lambda: core.read_namespaced_pod("waits", namespace).metadata.resource_version,
            timeout=10,
            what="pod created",
        )
        assert _node_of(core, namespace, "waits") is None
        dra.claim("later", device_class)
        wait_for(lambda: _node_of(core, namespace, "waits"), timeout=60, what="pod bound once its claim exists")
    assert not [e for e in core.list_namespaced_event(namespace).items if e.reason == "FailedScheduling"], (
        "a held pod is never attempted"
    )
