"""Fixtures for scheduler tests against the real control plane: throwaway nodes, a scheduler name."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from scheduler.testing.workload import make_node

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
