"""Objects with quantities beyond int64 that the apiserver accepts (issue 18, finding 1): a node
offering 9223372036854775807 cpu, a bound pod asking 1e16 cpu, two bound 5E-memory pods on one
node, a RuntimeClass whose overhead (1e16 cpu) lands on a bound pod. Each is reported once by
kind, name and field; ordinary pods keep being scheduled; a pending pod asking 1e16 cpu gets a
reason naming its field instead of a SchedulerError."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import running_scheduler_process, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster


def _pod(name: str, *, scheduler: str = "", node: str = "", runtime_class: str = "", **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests or {"cpu": "10m"}}}
        ]
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def runtime_class(control_plane: ControlPlane) -> Iterator[str]:
    """A RuntimeClass whose pod overhead is 1e16 cpu (the RuntimeClass admission plugin copies it
    into spec.overhead of every pod that names it)."""
    name = f"huge-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": "runc",
        "overhead": {"podFixed": {"cpu": "1e16"}},
    }
    status, reply = control_plane.http_request("POST", "/apis/node.k8s.io/v1/runtimeclasses", body)
    assert status == 201, reply[:300]
    try:
        yield name
    finally:
        control_plane.http_request("DELETE", f"/apis/node.k8s.io/v1/runtimeclasses/{name}")


def test_objects_beyond_int64_affect_only_themselves(
    control_plane: ControlPlane, namespace: str, nodes: NodeFactory, scheduler_name: str, runtime_class: str
) -> None:
    odd_node = nodes(f"{namespace}-maxcpu", cpu="9223372036854775807")
    cpu_host, mem_host, rc_host = (nodes(f"{namespace}-{kind}") for kind in ("cpu", "mem", "rc"))
    for i in range(2):
        nodes(f"{namespace}-n{i}")  # ordinary nodes, so that ordinary pods have somewhere sensible to go

    def create(pod: dict[str, Any]) -> None:
        status, reply = control_plane.http_request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        assert status == 201, f"the apiserver refused {pod['metadata']['name']}: {reply[:300]!r}"

    with running_scheduler_process(control_plane, scheduler_name) as process:
        # Odd bound pods (anyone who may create a pod with spec.nodeName can make these).
        create(_pod("bound-cpu", node=cpu_host, cpu="1e16"))
        create(_pod("bound-mem-1", node=mem_host, memory="5E"))
        create(_pod("bound-mem-2", node=mem_host, memory="5E"))
        create(_pod("bound-overhead", node=rc_host, runtime_class=runtime_class))
        create(_pod("pending-huge", scheduler=scheduler_name, cpu="1e16"))
        for i in range(10):
            create(_pod(f"ordinary-{i}", scheduler=scheduler_name))

        def verdicts() -> dict[str, str] | None:
            status, body = control_plane.http_request("GET", f"/api/v1/namespaces/{namespace}/pods")
            found: dict[str, str] = {}
            for pod in json.loads(body)["items"] if status == 200 else ():
                if pod["spec"].get("nodeName"):
                    found[pod["metadata"]["name"]] = "bound"
                for condition in (pod.get("status") or {}).get("conditions") or ():
                    if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                        found[pod["metadata"]["name"]] = f"{condition.get('reason')}: {condition.get('message')}"
            wanted = ["pending-huge", *(f"ordinary-{i}" for i in range(10))]
            return found if all(name in found for name in wanted) else None

        verdict = wait_for(verdicts, timeout=60, what="a verdict for every pod", interval=0.5)
        log_text = process.log_path.read_text(errors="replace")

    assert all(verdict[f"ordinary-{i}"] == "bound" for i in range(10)), verdict
    assert verdict["pending-huge"] == (
        f"Unschedulable: 0/{2 + 4} nodes are available: pod {namespace}/pending-huge: "
        # NodeResourcesFit's PreFilter rejects it; DynamicResources' PostFilter ends kube's message.
        "spec.containers[0].resources.requests.cpu: 10e15 is beyond int64 millicores. not found"
    )
    assert "SchedulerError" not in json.dumps(verdict)
    assert "Traceback" not in log_text and "too large to convert" not in log_text
    reports = [json.loads(line) for line in log_text.splitlines() if "quantity beyond int64" in line]
    assert sorted((r["kind"], r["name"], r["field"]) for r in reports) == sorted(
        [
            ("Node", odd_node, "status.allocatable.cpu: 9223372036854775807 is beyond int64 millicores"),
            ("Pod", "bound-cpu", "spec.containers[0].resources.requests.cpu: 10e15 is beyond int64 millicores"),
            ("Pod", "bound-overhead", "spec.overhead.cpu: 10e15 is beyond int64 millicores"),
            ("Pod", "pending-huge", "spec.containers[0].resources.requests.cpu: 10e15 is beyond int64 millicores"),
        ]
    ), "each odd object once, by kind, name and field"
