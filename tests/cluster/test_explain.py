"""`secondary-scheduler explain` against the real apiserver."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import api_pod
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster


def test_explain_says_why_a_pod_is_pending(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    nodes(f"{namespace}-a", cpu="1")
    nodes(f"{namespace}-b", cpu="2")
    core.create_namespaced_pod(namespace, api_pod("huge", scheduler_name, cpu="3"))
    before = core.read_namespaced_pod("huge", namespace).metadata.resource_version
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "explain",
            f"{namespace}/huge",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--scheduler-name",
            scheduler_name,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"pod {namespace}/huge (profile {scheduler_name})" in result.stdout
    assert f"{namespace}-a  NodeResourcesFit: Insufficient cpu" in result.stdout
    assert "FailedScheduling: 0/2 nodes are available: 2 Insufficient cpu." in result.stdout
    # A dry run: the pod is untouched.
    assert core.read_namespaced_pod("huge", namespace).metadata.resource_version == before
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "explain",
            "nope",
            "-n",
            namespace,
            "--kubeconfig",
            str(control_plane.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 1
    assert "404" in missing.stderr
