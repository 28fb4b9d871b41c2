"""`make demo`: the scheduler at work on a local control plane, shown to a person.

Starts etcd + kube-apiserver + kwok (20 simulated nodes; the apiserver serves upstream's PodGroups,
GenericWorkload), runs `secondary-scheduler` as a real process with GenericWorkload on, submits a
mixed workload, shows live progress, then prints where everything landed and why anything is still
pending — and stops everything it started.

Among the workload is a gang: a PodGroup with minCount 4 whose members fit only the accelerator
nodes, where there is room for 2. It waits whole (no member bound; the PodGroup and `explain` say
why); then a second accelerator node joins and the gang binds whole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from harness.controlplane import ControlPlane
from harness.workload import api_pod, make_node, metrics_text, running_scheduler
from scheduler import explain
from scheduler.app import Options
from scheduler.features import GENERIC_WORKLOAD, parse_feature_gates
from scheduler.model.objects import Resource

SCHEDULER = "secondary-scheduler"
NAMESPACE = "demo"


@dataclass(frozen=True)
class Group:
    name: str
    count: int
    cpu: str
    memory: str
    scheduler: str = SCHEDULER
    priority_class: str | None = None
    gated: bool = False


# Accelerator nodes are tainted: only the gang (which tolerates the taint and selects them) lands there.
ACCEL = "accel"
ACCEL_TAINT = k8s_client.V1Taint(key="demo/accelerator", value="true", effect="NoSchedule")
NODE_SHAPES = [
    ("small", 10, "4", "16Gi"),
    ("medium", 7, "8", "32Gi"),
    ("large", 2, "16", "64Gi"),
    (ACCEL, 1, "16", "64Gi"),
]
# The gang: minCount members of GANG_CPU each; one accelerator node holds half of them.
GANG = "training"
GANG_MEMBERS = 4
GANG_CPU = "8"
GATE = f"{GENERIC_WORKLOAD}=true"
POD_GROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"
WORKLOAD = [
    Group("web", 120, "250m", "256Mi"),
    Group("api", 40, "500m", "1Gi"),
    Group("batch", 16, "2", "6Gi"),
    Group("critical", 6, "1", "2Gi", priority_class="demo-critical"),
    Group("gpu-sized", 2, "48", "96Gi"),  # fits on no node: stays pending with a reason
    Group("gated", 3, "100m", "64Mi", gated=True),  # waits for its scheduling gate
    Group("other-scheduler", 5, "100m", "64Mi", scheduler="default-scheduler"),  # never touched
]


def _bar(done: int, total: int, width: int = 40) -> str:
    filled = width * done // max(total, 1)
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


def _create_workload(core: Any, scheduling: Any) -> int:
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=NAMESPACE)))
    scheduling.create_priority_class(
        k8s_client.V1PriorityClass(metadata=k8s_client.V1ObjectMeta(name="demo-critical"), value=100000)
    )
    ours = 0
    for group in WORKLOAD:
        for i in range(group.count):
            pod = api_pod(f"{group.name}-{i}", group.scheduler, group.cpu, group.memory, group.priority_class)
            if group.gated and pod.spec is not None:
                pod.spec.scheduling_gates = [k8s_client.V1PodSchedulingGate(name="demo.example.com/approval")]
            core.create_namespaced_pod(NAMESPACE, pod)
            ours += group.scheduler == SCHEDULER
    return ours


def _post(plane: ControlPlane, path: str, body: dict[str, Any]) -> None:
    status, reply = plane.http_request("POST", path, body)
    if status != 201:
        raise RuntimeError(f"POST {path}: {status} {reply.decode()}")


def _create_gang(plane: ControlPlane) -> None:
    """The PodGroup and its members (raw JSON: the Python client's models predate spec.schedulingGroup)."""
    group = {"schedulingPolicy": {"gang": {"minCount": GANG_MEMBERS}}}
    _post(
        plane,
        POD_GROUPS,
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": GANG}, "spec": group},
    )
    for i in range(GANG_MEMBERS):
        spec = {
            "schedulerName": SCHEDULER,
            "schedulingGroup": {"podGroupName": GANG},
            "nodeSelector": {"demo/shape": ACCEL},
            "tolerations": [{"key": ACCEL_TAINT.key, "operator": "Exists", "effect": ACCEL_TAINT.effect}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": GANG_CPU, "memory": "16Gi"}},
                }
            ],
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{GANG}-{i}", "labels": {"app": GANG}},
            "spec": spec,
        }
        _post(plane, f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


def _gang_bound(core: Any) -> dict[str, str]:
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"app={GANG}").items
    return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}


def _gang_condition(plane: ControlPlane) -> dict[str, Any] | None:
    status, reply = plane.http_request("GET", f"{POD_GROUPS}/{GANG}")
    if status != 200:
        raise RuntimeError(f"GET PodGroup {GANG}: {status} {reply.decode()}")
    conditions = (json.loads(reply).get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == "PodGroupInitiallyScheduled"), None)


def _gang(plane: ControlPlane, core: Any, timeout: float) -> None:
    """The gang waits whole (what the PodGroup and `explain` say), then binds whole once room appears."""
    condition = _gang_condition(plane) or {}
    print(
        f"\ngang {GANG} (PodGroup, minCount {GANG_MEMBERS}): {len(_gang_bound(core))}/{GANG_MEMBERS} bound, "
        f"waiting whole -- {condition.get('reason')}: {condition.get('message')}"
    )
    options = Options(
        kubeconfig=str(plane.kubeconfig), scheduler_name=SCHEDULER, feature_gates=parse_feature_gates(GATE)
    )
    raw_pod, cluster = asyncio.run(explain.fetch_cluster(options.kubeconfig, NAMESPACE, f"{GANG}-0"))
    group = explain.explain_pod(options, raw_pod, cluster).group
    print(f"$ secondary-scheduler explain {NAMESPACE}/{GANG}-0 --feature-gates={GATE}   (its group part)")
    for line in group.render() if group is not None else ["(no group: the pod is bound already)"]:
        print("  " + line)
    print(f"a second {ACCEL} node joins...", flush=True)
    make_node(core, f"{ACCEL}-1", cpu="16", memory="64Gi", labels={"demo/shape": ACCEL}, taints=[ACCEL_TAINT])
    started = time.monotonic()
    bound: dict[str, str] = {}
    while time.monotonic() - started < timeout:
        bound = _gang_bound(core)
        if len(bound) == GANG_MEMBERS:
            break
        time.sleep(0.25)
    per_node = ", ".join(f"{node} x{list(bound.values()).count(node)}" for node in sorted(set(bound.values())))
    if len(bound) == GANG_MEMBERS:
        print(
            f"gang {GANG} bound whole in {time.monotonic() - started:.1f}s: {GANG_MEMBERS}/{GANG_MEMBERS} on {per_node}"
        )
    else:
        print(f"gang {GANG} NOT bound whole after {timeout:.0f}s: {len(bound)}/{GANG_MEMBERS} bound ({per_node})")


def _progress(core: Any, ours: int, timeout: float) -> None:
    interactive = sys.stdout.isatty()
    deadline = time.monotonic() + timeout
    last_print = 0.0
    settled_since: float | None = None
    last_state: tuple[int, int] | None = None
    expected_pending = GANG_MEMBERS + sum(
        g.count for g in WORKLOAD if g.scheduler == SCHEDULER and (g.gated or g.name == "gpu-sized")
    )
    while time.monotonic() < deadline:
        pods = [p for p in core.list_namespaced_pod(NAMESPACE).items if p.spec.scheduler_name == SCHEDULER]
        bound = sum(1 for p in pods if p.spec.node_name)
        gang_bound = sum(1 for p in pods if p.spec.node_name and (p.metadata.labels or {}).get("app") == GANG)
        reported = sum(
            1
            for p in pods
            if not p.spec.node_name
            and any(c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or ())
        )
        line = (
            f"scheduling {_bar(bound, ours)}  pending with a reason: {reported}  "
            f"gang {GANG}: {gang_bound}/{GANG_MEMBERS} bound"
        )
        now = time.monotonic()
        if interactive:
            print("\r" + line, end="", flush=True)
        elif now - last_print >= 1:
            print(line, flush=True)
            last_print = now
        state = (bound, reported)
        if bound + reported >= ours and reported >= expected_pending:
            if state == last_state and settled_since is not None and now - settled_since > 1.5:
                break
            if state != last_state:
                settled_since = now
        last_state = state
        time.sleep(0.25)
    if interactive:
        print()


def _report(plane: ControlPlane, core: Any, port: int) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    pods = core.list_namespaced_pod(NAMESPACE).items
    per_node: dict[str, list[Any]] = {name: [] for name in nodes}
    for pod in pods:
        if pod.spec.node_name:
            per_node.setdefault(pod.spec.node_name, []).append(pod)
    print(f"\n{'node':<14}{'pods':>5}  {'cpu requested/allocatable':>27}  {'memory requested/allocatable':>30}")
    for name in sorted(per_node):
        alloc = Resource.from_list(nodes[name].status.allocatable, f"node {name}")
        used = Resource()
        for pod in per_node[name]:
            for c in pod.spec.containers:
                used.add(Resource.from_list((c.resources.requests if c.resources else None) or {}, pod.metadata.name))
        cpu_pct = 100 * used.milli_cpu // max(alloc.milli_cpu, 1)
        mem_pct = 100 * used.memory // max(alloc.memory, 1)
        cpu = f"{used.milli_cpu / 1000:.2f}/{alloc.milli_cpu / 1000:.0f} ({cpu_pct}%)"
        mem = f"{used.memory / 2**30:.1f}/{alloc.memory / 2**30:.0f}Gi ({mem_pct}%)"
        print(f"{name:<14}{len(per_node[name]):>5}  {cpu:>27}  {mem:>30}")
    gang_condition = _gang_condition(plane) or {}
    print(
        f"\npod group {GANG}: {len(_gang_bound(core))}/{GANG_MEMBERS} members bound, "
        f"PodGroupInitiallyScheduled={gang_condition.get('status')} ({gang_condition.get('reason')})"
    )
    pending = [p for p in pods if not p.spec.node_name]
    print(f"\npending pods: {len(pending)}")
    for pod in sorted(pending, key=lambda p: p.metadata.name):
        condition = next((c for c in pod.status.conditions or () if c.type == "PodScheduled"), None)
        if pod.spec.scheduler_name != SCHEDULER:
            why = f"schedulerName {pod.spec.scheduler_name!r}: not ours, left alone"
        elif condition is not None:
            why = f"{condition.reason}: {condition.message}"
        else:
            why = "no condition yet"
        print(f"  {pod.metadata.name:<20} {why}")
    families = ("scheduler_schedule_attempts_total{", "scheduler_podgroup_schedule_attempts_total{")
    attempts = [line for line in metrics_text(port).splitlines() if line.startswith(families)]
    print("\nscheduler metrics:")
    for line in attempts:
        print("  " + line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    print("starting control plane (etcd, kube-apiserver, kwok)...", flush=True)
    with ControlPlane(
        feature_gates={GENERIC_WORKLOAD: True}, runtime_config={"scheduling.k8s.io/v1beta1": "true"}
    ) as plane:
        api = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(plane.kubeconfig), persist_config=False
        )
        try:
            core = k8s_client.CoreV1Api(api)
            scheduling = k8s_client.SchedulingV1Api(api)
            for shape, count, cpu, memory in NODE_SHAPES:
                taints = [ACCEL_TAINT] if shape == ACCEL else None
                for i in range(count):
                    make_node(core, f"{shape}-{i}", cpu=cpu, memory=memory, labels={"demo/shape": shape}, taints=taints)
            print(f"control plane up in {time.monotonic() - started:.1f}s; {sum(s[1] for s in NODE_SHAPES)} nodes")
            with running_scheduler(plane, SCHEDULER, extra_args=(f"--feature-gates={GATE}",)) as port:
                t0 = time.monotonic()
                ours = _create_workload(core, scheduling)
                _create_gang(plane)
                ours += GANG_MEMBERS
                total = sum(g.count for g in WORKLOAD) + GANG_MEMBERS
                print(f"submitted {total} pods ({ours} for {SCHEDULER}, {GANG_MEMBERS} of them the gang {GANG})")
                _progress(core, ours, args.timeout)
                print(f"settled in {time.monotonic() - t0:.1f}s")
                _gang(plane, core, args.timeout)
                _report(plane, core, port)
        finally:
            api.close()
    print(f"\ncleaned up; demo took {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
