"""Two replicas under a stream of 500 pods: the leader killed, and the leader's connection frozen."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.faultproxy import FaultProxy
from harness.faults import PodStream, Replica, fault_run
from harness.workload import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LEASE_TIMINGS = (6.0, 4.0, 1.0)  # leaseDuration, renewDeadline, retryPeriod: kube's 15/10/2 scaled down


def _lease_spec(plane: ControlPlane, name: str) -> dict[str, Any]:
    status, body = plane.http_request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
    return dict(json.loads(body).get("spec") or {}) if status == 200 else {}


def _acquired_at(spec: dict[str, Any]) -> float:
    return datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00")).timestamp()


def _is_bind(method: str, path: str) -> bool:
    return method == "POST" and path.endswith("/binding")


def _leads(replica: Replica) -> bool:
    return "acquired lease" in replica.log_text()


def test_leader_with_a_frozen_connection_steps_down_and_never_binds_after_the_standby_acquires(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str, tmp_path: Path
) -> None:
    lease = f"lease-{scheduler_name}"
    with fault_run("two replicas, leader's connection frozen") as run, FaultProxy(control_plane) as proxy:
        leader = Replica(
            control_plane,
            scheduler_name,
            "a",
            kubeconfig=proxy.kubeconfig(tmp_path / "through-proxy.kubeconfig"),
            lease=lease,
            lease_timings=LEASE_TIMINGS,
        )
        standby = Replica(control_plane, scheduler_name, "b", lease=lease, lease_timings=LEASE_TIMINGS)
        stream = PodStream(control_plane, namespace, scheduler_name)
        with run.replicas(leader, standby):
            leader.start()
            wait_for(lambda: _leads(leader), timeout=30, what="replica a leads")
            standby.start()
            stream.start()
            stream.wait_created(150)
            wait_for(lambda: proxy.forwarded_since(0, _is_bind), timeout=30, what="replica a binding")
            frozen_at = time.time()
            proxy.freeze()
            wait_for(lambda: _leads(standby), timeout=30, what="replica b takes the lease")
            taken_at = _acquired_at(_lease_spec(control_plane, lease))
            code = leader.wait_exit(timeout=LEASE_TIMINGS[1] + 20)
            exit_seconds = (leader.exited_at or time.time()) - frozen_at
            # The connection comes back: a leader that did not step down would bind from its stale cache now.
            proxy.thaw()
            stream.finish()
            binds_by_leader = [f for f in proxy.forwarded_since(0, _is_bind) if f.status == 201]
            run.invariants(
                control_plane,
                namespace,
                scheduler_name,
                stream.total,
                standby,
                fault_over_at=taken_at,
                fault_began_at=frozen_at,
                bound_by_others=len(binds_by_leader),
            )
        print(
            f"\nleader exited {exit_seconds:.1f}s after the freeze (rc={code}); "
            f"standby took over at +{taken_at - frozen_at:.1f}s"
        )
        late_writes = [f for f in proxy.forwarded if f.at >= taken_at and f.method != "GET"]
        run.check(late_writes == [], f"the deposed leader wrote after the standby took the lease: {late_writes}")
        # As kube-scheduler: a leader that cannot renew exits 1 on its own, within the renew deadline.
        run.check(code == 1, f"the deposed leader is still running {exit_seconds:.0f}s after the freeze (rc={code})")
        run.check(exit_seconds < LEASE_TIMINGS[1] + 12, f"the deposed leader exited only {exit_seconds:.1f}s after")
        log = leader.log_text()
        run.check(
            log.count("Leaderelection lost") == 1,
            f"'Leaderelection lost' logged {log.count('Leaderelection lost')} times",
        )
        run.check("cannot be forgotten" not in log, "the deposed leader logged 'cannot be forgotten'")
        run.no_traceback(leader)
        run.no_traceback(standby)


def test_leader_killed_standby_takes_over(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str
) -> None:
    lease = f"lease-{scheduler_name}"
    leader = Replica(control_plane, scheduler_name, "a", lease=lease, lease_timings=LEASE_TIMINGS)
    standby = Replica(control_plane, scheduler_name, "b", lease=lease, lease_timings=LEASE_TIMINGS)
    stream = PodStream(control_plane, namespace, scheduler_name)
    with fault_run("two replicas, leader SIGKILLed") as run:
        with run.replicas(leader, standby):
            leader.start()
            wait_for(lambda: _leads(leader), timeout=30, what="replica a leads")
            standby.start()
            stream.start()
            stream.wait_created(200)
            killed_at = time.time()
            leader.kill(signal.SIGKILL)
            wait_for(lambda: _leads(standby), timeout=30, what="replica b takes the lease")
            taken_at = _acquired_at(_lease_spec(control_plane, lease))
            stream.finish()
            run.invariants(
                control_plane,
                namespace,
                scheduler_name,
                stream.total,
                standby,
                fault_over_at=taken_at,
                fault_began_at=killed_at,
            )
        run.no_traceback(standby)
