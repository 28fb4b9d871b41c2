"""One scheduler under a stream of 500 pods onto 50 kwok nodes while a fault is injected; each test
ends with the one invariant check (harness/faults.py); fault_run records its row in RESULTS.md
with every problem found, and fails the test on any."""

from __future__ import annotations

import base64
import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import LOOPBACK, ControlPlane
from harness.faultproxy import FaultProxy
from harness.faults import PodStream, Replica, fault_run
from harness.workload import make_node, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _is_bind(method: str, path: str) -> bool:
    return method == "POST" and path.endswith("/binding")


def _etcd(plane: ControlPlane, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """etcd's JSON gateway (v3 API over HTTP) on its loopback client port."""
    port = plane.process("etcd").port
    request = urllib.request.Request(
        f"http://{LOOPBACK}:{port}/v3/{call}", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_apiserver_restart(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str
) -> None:
    replica = Replica(control_plane, scheduler_name, "a")
    stream = PodStream(control_plane, namespace, scheduler_name)
    with fault_run("apiserver killed, down 5 s, restarted") as run, run.replicas(replica):
        replica.start()
        stream.start()
        stream.wait_created(200)
        control_plane.restart_component("kube-apiserver", kill=True, down_for=5.0)
        back_at = time.time()
        stream.finish()
        run.invariants(
            control_plane, namespace, scheduler_name, stream.total, replica, fault_over_at=back_at, bound_by_others=0
        )


def test_etcd_compaction_makes_watches_relist(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str
) -> None:
    replica = Replica(control_plane, scheduler_name, "a")
    stream = PodStream(control_plane, namespace, scheduler_name)
    with fault_run("etcd compacted + apiserver restarted (watches 410, relist)") as run:
        with run.replicas(replica):
            replica.start()
            stream.start()
            stream.wait_created(200)
            # Compact etcd up to now, then restart the apiserver: its new watch cache starts after the
            # scheduler's last resourceVersion, which etcd no longer has, so every watch gets 410 Gone.
            began = time.time()
            key = base64.b64encode(b"/").decode()
            revision = int(_etcd(control_plane, "kv/range", {"key": key})["header"]["revision"])
            _etcd(control_plane, "kv/compaction", {"revision": revision, "physical": True})
            control_plane.restart_component("kube-apiserver")
            back_at = time.time()
            stream.finish()
            run.invariants(
                control_plane, namespace, scheduler_name, stream.total, replica,
                fault_over_at=back_at, fault_began_at=began, bound_by_others=0,
            )  # fmt: skip
        relisted = replica.log_text().count("watch expired; relisting")
        print(f"\nwatches relisted after 410: {relisted}")
        run.check(relisted >= 1, f"no watch relisted after the compaction; the log ends:\n{replica.log_tail()}")
        run.no_traceback(replica)


def test_scheduler_sigkill_and_restart(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str
) -> None:
    first = Replica(control_plane, scheduler_name, "a")
    second = Replica(control_plane, scheduler_name, "b")
    stream = PodStream(control_plane, namespace, scheduler_name)
    with fault_run("scheduler SIGKILLed mid-stream, restarted") as run:
        with run.replicas(first, second):
            first.start()
            stream.start()
            stream.wait_created(200)
            killed_at = time.time()
            first.kill(signal.SIGKILL)
            second.start()
            back_at = time.time()
            stream.finish()
            run.invariants(
                control_plane, namespace, scheduler_name, stream.total, second,
                fault_over_at=back_at, fault_began_at=killed_at,
            )  # fmt: skip
        run.no_traceback(second)


def test_bind_conflicts_pod_deleted_or_bound_by_someone_else_between_assume_and_bind(
    control_plane: ControlPlane, core: Any, namespace: str, fault_nodes: list[str], scheduler_name: str, tmp_path: Path
) -> None:
    spare = f"{namespace}-spare"
    # Room for the pods the test binds itself; tainted, so that the scheduler never uses it.
    make_node(core, spare, cpu="64", memory="256Gi")
    core.patch_node(spare, {"spec": {"taints": [{"key": "faults/spare", "effect": "NoSchedule"}]}})
    fault = "bind conflicts (6 pods deleted, 6 bound elsewhere while their Bind was in flight)"
    try:
        with fault_run(fault) as run, FaultProxy(control_plane) as proxy:
            replica = Replica(
                control_plane, scheduler_name, "a", kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig")
            )
            stream = PodStream(control_plane, namespace, scheduler_name)
            with run.replicas(replica):
                replica.start()
                stream.start()
                stream.wait_created(100)
                began = time.time()
                proxy.slow(3.0, count=24, matcher=_is_bind)  # assumed, Reserved, Bind on its way: hold it
                held = wait_for(
                    lambda: (paths := list(proxy.delayed_now)) and len(paths) >= 12 and paths,
                    timeout=60,
                    what="12 binds held",
                )
                names = [path.split("/")[-2] for path in held[:12]]
                deleted, taken = names[:6], names[6:]
                for name in deleted:
                    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                for name in taken:
                    binding = {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": spare},
                    }
                    status, body = control_plane.http_request(
                        "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding
                    )
                    assert status == 201, body
                over_at = time.time()
                stream.finish()
                run.invariants(
                    control_plane, namespace, scheduler_name, stream.total - len(deleted), replica,
                    fault_over_at=over_at, fault_began_at=began, bound_by_others=len(taken),
                )  # fmt: skip
            conflicts = [f for f in proxy.forwarded if _is_bind(f.method, f.path) and f.status in (404, 409)]
            print(f"\nbinds answered 404/409: {len(conflicts)}")
            run.check(len(conflicts) >= len(names), f"{len(conflicts)} binds answered 404/409, {len(names)} expected")
            run.check("cannot be forgotten" not in replica.log_text(), "the replica logged 'cannot be forgotten'")
            run.no_traceback(replica)
    finally:
        core.delete_node(spare)


def test_nodes_deleted_cordoned_and_tainted_mid_stream(
    control_plane: ControlPlane, core: Any, namespace: str, fault_nodes: list[str], scheduler_name: str
) -> None:
    replica = Replica(control_plane, scheduler_name, "a")
    stream = PodStream(control_plane, namespace, scheduler_name)
    with fault_run("3 nodes deleted, 3 cordoned, 3 tainted mid-stream") as run:
        with run.replicas(replica):
            replica.start()
            stream.start()
            stream.wait_created(150)
            began = time.time()
            for name in fault_nodes[:3]:
                core.delete_node(name)
            for name in fault_nodes[3:6]:
                core.patch_node(name, {"spec": {"unschedulable": True}})
            for name in fault_nodes[6:9]:
                core.patch_node(name, {"spec": {"taints": [{"key": "faults/tainted", "effect": "NoSchedule"}]}})
            over_at = time.time()
            stream.finish()
            run.invariants(
                control_plane, namespace, scheduler_name, stream.total, replica,
                fault_over_at=over_at, fault_began_at=began, bound_by_others=0,
            )  # fmt: skip
        run.no_traceback(replica)


def test_api_errors_429_500_and_slow_answers(
    control_plane: ControlPlane, namespace: str, fault_nodes: list[str], scheduler_name: str, tmp_path: Path
) -> None:
    def not_watch(method: str, path: str) -> bool:
        return "watch=1" not in path

    def bind_or_read(method: str, path: str) -> bool:
        # Events and status writes are best effort / reported again; what must survive is the bind
        # and the informers' lists.
        return _is_bind(method, path) or (method == "GET" and "watch=1" not in path)

    fault = "proxy: 60 x 429 (Retry-After 1), 30 x 500 on binds, 40 answers 1.5 s late"
    with fault_run(fault) as run:
        with FaultProxy(control_plane) as proxy:
            replica = Replica(
                control_plane, scheduler_name, "a", kubeconfig=proxy.kubeconfig(tmp_path / "proxy.kubeconfig")
            )
            stream = PodStream(control_plane, namespace, scheduler_name)
            with run.replicas(replica):
                replica.start()
                stream.start()
                stream.wait_created(100)
                began = time.time()
                proxy.fail(429, 60, matcher=bind_or_read, retry_after=1)
                wait_for(lambda: proxy.injected.by_status.get(429, 0) >= 60, timeout=60, what="the 429 burst")
                proxy.fail(500, 30, matcher=_is_bind)
                wait_for(lambda: proxy.injected.by_status.get(500, 0) >= 30, timeout=60, what="the 500 burst")
                proxy.slow(1.5, 40, matcher=not_watch)
                wait_for(lambda: proxy.injected.delayed >= 40, timeout=60, what="the slow answers")
                over_at = time.time()
                stream.finish()
                run.invariants(
                    control_plane, namespace, scheduler_name, stream.total, replica,
                    fault_over_at=over_at, fault_began_at=began, bound_by_others=0,
                )  # fmt: skip
        print(f"\ninjected: {proxy.injected}")
        run.no_traceback(replica)
