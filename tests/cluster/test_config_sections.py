"""The config file's leaderElection and clientConnection sections, honoured against the real apiserver."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.workload import api_pod, running_scheduler, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def test_leader_election_and_client_rate_limit_come_from_the_file(
    control_plane: ControlPlane,
    k8s: Any,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
) -> None:
    nodes(f"{namespace}-n", cpu="4")
    lease_name = f"lease-{scheduler_name}"
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                **CONFIG,
                "leaderElection": {
                    "leaderElect": True,
                    "leaseDuration": "7s",
                    "renewDeadline": "5s",
                    "retryPeriod": "1s",
                    "resourceLock": "leases",
                    "resourceName": lease_name,
                    "resourceNamespace": namespace,
                },
                "clientConnection": {"qps": 2, "burst": 1},
                "profiles": [{"schedulerName": scheduler_name}],
            }
        )
    )
    leases = k8s_client.CoordinationV1Api(k8s)
    with running_scheduler(control_plane, scheduler_name, config=config):
        lease = wait_for(lambda: _lease(leases, namespace, lease_name), what="the configured Lease")
        assert lease.spec.lease_duration_seconds == 7
        started = time.monotonic()
        for i in range(3):
            core.create_namespaced_pod(namespace, api_pod(f"p-{i}", scheduler_name))
        wait_for(
            lambda: all(core.read_namespaced_pod(f"p-{i}", namespace).spec.node_name for i in range(3)),
            what="pods bound",
        )
        elapsed = time.monotonic() - started
    # Three binds and three Scheduled events at 2 requests/s after a burst of 1 (lease renewals take
    # tokens too): never under a second. Unlimited, this takes a few tens of milliseconds.
    assert elapsed >= 1.0, elapsed


def _lease(api: Any, namespace: str, name: str) -> Any:
    try:
        return api.read_namespaced_lease(name, namespace)
    except k8s_client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
