"""Gang scheduling under faults: our scheduler (GenericWorkload on, scheduling.k8s.io/v1beta1
PodGroups) SIGKILLed or failed over while a gang's binds are in flight, a member deleted while its
gang is being bound, and gangs that together do not fit created interleaved. Each test ends with
the one invariant check (harness/faults.py), which for groups demands: no gang partly bound while
members wait, no gang left wholly unbound while enough of its members fit, no assumed pod left,
every member bound once or reported. The control plane here serves the Workload API; the suite's
other tests keep theirs without it."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from harness.controlplane import GENERIC_WORKLOAD_GATES, WORKLOAD_API_RUNTIME_CONFIG, ControlPlane, feature_gate_args
from harness.faultproxy import FaultProxy
from harness.faults import GangStream, Replica, delete_nodes, fault_run, make_nodes
from harness.workload import wait_for
from tests.conftest import api_client

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

GATES = tuple(feature_gate_args(GENERIC_WORKLOAD_GATES))
LEASE_TIMINGS = (6.0, 4.0, 1.0)  # as test_leader_election: kube's 15/10/2 scaled down
# 24 nodes of 2 CPU hold 48 members of 900m: ten gangs of four fit (with room to spare), the two
# gangs of 3-CPU members never do.
NODES = 24
FITTING_GANGS = [(f"gang-{i:02d}", 4, 4, "900m") for i in range(10)]
UNFITTING_GANGS = [(f"huge-{i}", 2, 2, "3") for i in range(2)]
# A member's Bind held this long by the proxy: long enough to land a fault between a gang's binds.
BIND_DELAY = 2.0


@pytest.fixture(scope="module")
def workload_plane() -> Iterator[ControlPlane]:
    with ControlPlane(feature_gates=GENERIC_WORKLOAD_GATES, runtime_config=WORKLOAD_API_RUNTIME_CONFIG) as plane:
        yield plane


@pytest.fixture(scope="module")
def core(workload_plane: ControlPlane) -> Iterator[Any]:
    api = api_client(workload_plane)
    try:
        yield k8s_client.CoreV1Api(api)
    finally:
        api.close()


@pytest.fixture
def gang_namespace(core: Any) -> Iterator[str]:
    name = f"gangs-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)


@pytest.fixture
def gang_nodes(core: Any, gang_namespace: str) -> Iterator[list[str]]:
    names = make_nodes(core, gang_namespace, NODES)
    yield names
    delete_nodes(core, names)


@pytest.fixture
def scheduler_name() -> str:
    return f"gangs-{uuid.uuid4().hex[:8]}"


def _is_bind(method: str, path: str) -> bool:
    return method == "POST" and path.endswith("/binding")


def _held_binds(proxy: FaultProxy, count: int) -> list[str]:
    """Pod names of `count` binds the proxy holds right now (waits for them)."""
    paths: list[str] = wait_for(
        lambda: (held := list(proxy.delayed_now)) and len(held) >= count and held,
        timeout=60,
        what=f"{count} binds held",
    )
    return [path.split("/")[-2] for path in paths]


def _leads(replica: Replica) -> bool:
    return "acquired lease" in replica.log_text()


def test_scheduler_sigkilled_mid_gang(
    workload_plane: ControlPlane, gang_namespace: str, gang_nodes: list[str], scheduler_name: str, tmp_path: Path
) -> None:
    fault = "gangs: scheduler SIGKILLed while a gang's binds are in flight, restarted"
    with fault_run(fault) as run, FaultProxy(workload_plane) as proxy:
        first = Replica(
            workload_plane,
            scheduler_name,
            "a",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig"),
            extra_args=GATES,
        )
        second = Replica(workload_plane, scheduler_name, "b", extra_args=GATES)
        stream = GangStream(workload_plane, gang_namespace, scheduler_name, FITTING_GANGS + UNFITTING_GANGS)
        with run.replicas(first, second):
            first.start()
            proxy.slow(BIND_DELAY, count=1000, matcher=_is_bind)
            stream.start()
            held = _held_binds(proxy, 2)
            killed_at = time.time()
            first.kill(signal.SIGKILL)
            second.start()
            back_at = time.time()
            stream.finish()
            print(f"\nkilled with binds held for {held}")
            run.invariants(
                workload_plane, gang_namespace, scheduler_name, stream.total, second,
                fault_over_at=back_at, fault_began_at=killed_at,
            )  # fmt: skip
        run.no_traceback(second)


def test_leader_failover_mid_gang(
    workload_plane: ControlPlane, gang_namespace: str, gang_nodes: list[str], scheduler_name: str, tmp_path: Path
) -> None:
    lease = f"lease-{scheduler_name}"
    fault = "gangs: leader SIGKILLed while a gang's binds are in flight, standby takes over"
    with fault_run(fault) as run, FaultProxy(workload_plane) as proxy:
        leader = Replica(
            workload_plane,
            scheduler_name,
            "a",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig"),
            lease=lease,
            lease_timings=LEASE_TIMINGS,
            extra_args=GATES,
        )
        standby = Replica(
            workload_plane, scheduler_name, "b", lease=lease, lease_timings=LEASE_TIMINGS, extra_args=GATES
        )
        stream = GangStream(workload_plane, gang_namespace, scheduler_name, FITTING_GANGS + UNFITTING_GANGS)
        with run.replicas(leader, standby):
            leader.start()
            wait_for(lambda: _leads(leader), timeout=30, what="replica a leads")
            standby.start()
            proxy.slow(BIND_DELAY, count=1000, matcher=_is_bind)
            stream.start()
            _held_binds(proxy, 2)
            killed_at = time.time()
            leader.kill(signal.SIGKILL)
            wait_for(lambda: _leads(standby), timeout=30, what="replica b takes the lease")
            taken_at = time.time()
            stream.finish()
            run.invariants(
                workload_plane, gang_namespace, scheduler_name, stream.total, standby,
                fault_over_at=taken_at, fault_began_at=killed_at,
            )  # fmt: skip
        run.no_traceback(standby)


def test_member_deleted_while_its_gang_is_bound(
    workload_plane: ControlPlane,
    core: Any,
    gang_namespace: str,
    gang_nodes: list[str],
    scheduler_name: str,
    tmp_path: Path,
) -> None:
    # Gangs of four with minCount 3: one member deleted while the gang's binds are held leaves a
    # gang that still reaches its quorum, so the rest must be bound, none left waiting.
    gangs = [(name, 4, 3, cpu) for name, _members, _min, cpu in FITTING_GANGS]
    fault = "gangs: a member deleted while its gang's binds are in flight"
    with fault_run(fault) as run, FaultProxy(workload_plane) as proxy:
        replica = Replica(
            workload_plane,
            scheduler_name,
            "a",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig"),
            extra_args=GATES,
        )
        stream = GangStream(workload_plane, gang_namespace, scheduler_name, gangs)
        with run.replicas(replica):
            replica.start()
            proxy.slow(BIND_DELAY, count=8, matcher=_is_bind)
            stream.start()
            (victim,) = _held_binds(proxy, 1)[:1]
            began = time.time()
            core.delete_namespaced_pod(victim, gang_namespace, grace_period_seconds=0)
            over_at = time.time()
            stream.finish()
            print(f"\ndeleted {victim} while its bind was held")
            run.invariants(
                workload_plane, gang_namespace, scheduler_name, stream.total - 1, replica,
                fault_over_at=over_at, fault_began_at=began, bound_by_others=0,
            )  # fmt: skip
        run.check("cannot be forgotten" not in replica.log_text(), "the replica logged 'cannot be forgotten'")
        run.no_traceback(replica)


def test_gangs_that_together_do_not_fit_never_deadlock(
    workload_plane: ControlPlane, core: Any, gang_namespace: str, scheduler_name: str
) -> None:
    # Eight nodes hold sixteen 900m members: four of the six gangs of four fit, created interleaved
    # (gang-0's first member, gang-1's first, ...) so that a per-pod gang scheduler would start all
    # six and finish none.
    nodes = make_nodes(core, f"{gang_namespace}-x", 8)
    gangs = [(f"rival-{i}", 4, 4, "900m") for i in range(6)]
    try:
        with fault_run("gangs: six gangs of which four fit, members created interleaved") as run:
            replica = Replica(workload_plane, scheduler_name, "a", extra_args=GATES)
            stream = GangStream(workload_plane, gang_namespace, scheduler_name, gangs, interleave=True)
            with run.replicas(replica):
                replica.start()
                began = time.time()
                stream.start()
                stream.finish()
                outcome = run.invariants(
                    workload_plane, gang_namespace, scheduler_name, stream.total, replica,
                    fault_over_at=began, bound_by_others=0,
                )  # fmt: skip
            run.check(outcome.bound == 16, f"{outcome.bound} members bound, 16 (four whole gangs) expected")
            run.no_traceback(replica)
    finally:
        delete_nodes(core, nodes)
