"""Fixtures of the fault suite: a core/v1 client and the workload's 50 kwok nodes (deleted afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.faults import delete_nodes, make_nodes


@pytest.fixture
def core(k8s: Any) -> Any:
    return k8s_client.CoreV1Api(k8s)


@pytest.fixture
def fault_nodes(core: Any, namespace: str) -> Iterator[list[str]]:
    names = make_nodes(core, namespace)
    yield names
    delete_nodes(core, names)


@pytest.fixture
def scheduler_name() -> str:
    return f"sched-{uuid.uuid4().hex[:8]}"
