"""Fixtures for scheduler tests against the real control plane: throwaway nodes, a scheduler name."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import REPO_ROOT, ControlPlane
from harness.workload import make_node

NodeFactory = Callable[..., str]


@pytest.fixture
def core(k8s: Any) -> Any:
    return k8s_client.CoreV1Api(k8s)


@pytest.fixture
def nodes(core: Any) -> Iterator[NodeFactory]:
    """Create nodes by calling nodes(name, cpu=..., ...); all are deleted afterwards.

    Tests leave no nodes behind, so each test's scheduler sees only the nodes it made.
    """
    created: list[str] = []

    def factory(name: str, **kwargs: Any) -> str:
        make_node(core, name, **kwargs)
        created.append(name)
        return name

    yield factory
    for name in created:
        core.delete_node(name)


@pytest.fixture
def scheduler_name() -> str:
    return f"sched-{uuid.uuid4().hex[:8]}"


# ---- preemption: priorities and PodDisruptionBudget status ---------------------------------

PRIORITIES = {"low": 5, "mid": 10, "high": 100}


@pytest.fixture(scope="module")
def disruption_controller(control_plane: ControlPlane) -> Iterator[None]:
    """kube-controller-manager with only the disruption controller: it keeps PDB status."""
    manager = control_plane.start_kube_controller_manager("disruption-controller")
    try:
        yield
    finally:
        control_plane.stop_process(manager)


@pytest.fixture(scope="module")
def priority_classes(k8s: Any) -> Iterator[dict[str, str]]:
    """PriorityClasses low/mid/high (5/10/100), unique per module run; deleted afterwards."""
    api = k8s_client.SchedulingV1Api(k8s)
    suffix = uuid.uuid4().hex[:6]
    names = {level: f"{level}-{suffix}" for level in PRIORITIES}
    for level, name in names.items():
        api.create_priority_class(
            k8s_client.V1PriorityClass(metadata=k8s_client.V1ObjectMeta(name=name), value=PRIORITIES[level])
        )
    try:
        yield names
    finally:
        for name in names.values():
            api.delete_priority_class(name)


# ---- deploy/examples and `explain` -------------------------------------------------------------

EXAMPLES = REPO_ROOT / "deploy" / "examples"


def apply_example(plane: ControlPlane, name: str, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    """Create every object of deploy/examples/<name> in `namespace` as the apiserver takes them (a
    refusal fails the test), with the pod template's schedulerName set to the test's scheduler."""
    created = []
    for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
        template = (doc.get("spec") or {}).get("template")
        if template is not None:
            template["spec"]["schedulerName"] = scheduler_name
        group, _, version = doc["apiVersion"].rpartition("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        status, reply = plane.http_request("POST", f"{base}/namespaces/{namespace}/{doc['kind'].lower()}s", doc)
        assert status == 201, f"{name}: {doc['kind']} refused: {reply.decode()}"
        created.append(json.loads(reply))
    return created


@contextlib.contextmanager
def job_controller(plane: ControlPlane) -> Iterator[None]:
    """kube-controller-manager with only the Job controller (the examples are Jobs)."""
    manager = plane.start_kube_controller_manager("job-controller")
    try:
        yield
    finally:
        plane.stop_process(manager)


def run_explain(plane: ControlPlane, namespace: str, pod: str, *args: str) -> str:
    """`python -m scheduler explain` against `plane`; its stdout (a failure fails the test)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "explain",
            f"{namespace}/{pod}",
            "--kubeconfig",
            str(plane.kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
