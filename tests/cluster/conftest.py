"""Fixtures for scheduler tests against the real control plane: throwaway nodes, a scheduler name."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
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
