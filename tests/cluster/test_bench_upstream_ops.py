"""The upstream executor's newer opcodes against a real kube-apiserver v1.37.2 started with the
workload's gates and runtime-config: createPodGroups, allocResourceClaims (claims allocated up
front through the status subresource) and steady-state createPods (with the null binder as the
scheduler, the cheapest one that binds).

Must never: run a workload at upstream's size or write into the repository's bench-results/.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.bench.rawapi import RawApi
from harness.bench.schedulers import SCHEDULERS, Setup
from harness.bench.upstream import runtime_config, select, upstream_workloads, user_workloads
from harness.bench.upstream_run import APISERVER_ARGS, OPCODE_METHODS, Executor
from harness.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

NULL = next(kind for kind in SCHEDULERS if kind.key == "null")


def _plane(gates: dict[str, bool]) -> ControlPlane:
    return ControlPlane(
        kwok=False, apiserver_args=APISERVER_ARGS, feature_gates=gates, runtime_config=runtime_config(gates)
    )


async def _run_ops(executor: Executor, until: str) -> None:
    """The workload's operations up to and including the first `until` opcode."""
    for index, op in enumerate(executor.case.ops):
        await getattr(executor, "op_" + OPCODE_METHODS[op["opcode"]])(index, op)
        if op["opcode"] == until:
            return


def test_alloc_resource_claims_allocates_every_init_claim_on_its_own_device() -> None:
    # 2000pods_200nodes at scale 0.01: 2 nodes with 10 devices each, 10 claims in namespace init.
    (workload,) = select(upstream_workloads(), ["SchedulingWithResourceClaimTemplate/2000pods_200nodes"])
    with _plane(workload.gates()) as plane:

        async def go() -> list[dict[str, Any]]:
            async with RawApi(plane) as api:
                executor = Executor(api, workload, NULL, None, 0.01, 30)  # type: ignore[arg-type]
                await _run_ops(executor, "allocResourceClaims")
                return await executor.list_all("/apis/resource.k8s.io/v1/namespaces/init/resourceclaims")

        claims = asyncio.run(go())
    assert len(claims) == 10
    devices = set()
    for claim in claims:
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "test-driver.cdi.k8s.io" and result["request"] == "req-0"
        devices.add((result["pool"], result["device"]))
    assert len(devices) == 10


def test_create_pod_groups_serves_upstreams_gangs() -> None:
    (workload,) = select(upstream_workloads(), ["GangScheduling/5000Nodes_1000Gangs_3000Pods"])
    assert workload.gates() == {"GenericWorkload": True}
    with _plane(workload.gates()) as plane:

        async def go() -> list[dict[str, Any]]:
            async with RawApi(plane) as api:
                executor = Executor(api, workload, NULL, None, 0.002, 30)  # type: ignore[arg-type]
                await _run_ops(executor, "createPodGroups")
                return await executor.list_all("/apis/scheduling.k8s.io/v1beta1/namespaces/gang-ns-0/podgroups")

        groups = asyncio.run(go())
    assert sorted(g["metadata"]["name"] for g in groups) == ["gang-0", "gang-1"]  # 1000 at scale 0.002
    assert {g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in groups} == {3}


STEADY_CONFIG = """
- name: Steady
  workloadTemplate:
  - opcode: createNodes
    count: 2
  - opcode: createPods
    namespace: steady
    countParam: $pods
    steadyStateParam: $steadyState
    durationParam: $duration
    collectMetrics: true
  workloads:
  - name: 2s
    params: {pods: 3, steadyState: true, duration: 2s}
"""


def test_steady_state_keeps_the_backlog_replacing_each_bound_pod(tmp_path: Path) -> None:
    (tmp_path / "steady.yaml").write_text(STEADY_CONFIG)
    (workload,) = user_workloads(tmp_path)
    with _plane({}) as plane, NULL.start(plane, NULL.scheduler_name, Setup()) as running:

        async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            async with RawApi(plane) as api:
                executor = Executor(api, workload, NULL, running, 1.0, 30)
                await executor.run()
                return executor.phases, await executor.list_all("/api/v1/namespaces/steady/pods")

        phases, pods = asyncio.run(go())
    (phase,) = phases
    # The null binder binds within milliseconds: far more than the 3 pods of the backlog in 2 s,
    # each deleted once bound and replaced, so the namespace still holds about the backlog.
    assert phase["scheduled"] > 3
    assert 1.9 < phase["seconds"] < 10
    assert 3 <= len(pods) <= 3 + 1
