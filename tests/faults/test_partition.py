"""The race secondary schedulers are known for, and the documented way out.

kube-scheduler and ours schedule onto one shared node pool at the same time. Each counts the
other's pods only once it sees them bound, never while they are in flight, so both can place a pod
into the same free room: a node's summed requests exceed its allocatable, which only the kubelet
would catch (kwok, playing the kubelet here, admits anything). Then the partition: our profile's
NodeAffinity `addedAffinity` keeps our pods on `pool=secondary` nodes, a nodeSelector keeps the
default scheduler's pods on `pool=default`, and no node is over-committed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.faults import Replica, replicas
from harness.workload import api_pod, make_node, wait_for
from scheduler.model.objects import Node, Pod, Resource
from tests.conftest import api_client

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODES = 10
NODE_CPU = "2"
POD_CPU = "500m"  # 4 per node: 40 fit in all
PODS_EACH = 40  # per scheduler: twice what the pool holds
PARTITION_MD = Path(__file__).with_name("PARTITION.md")


def _create(plane: ControlPlane, namespace: str, scheduler: str, prefix: str, selector: dict[str, str] | None) -> None:
    api = api_client(plane)
    try:
        core = k8s_client.CoreV1Api(api)
        for i in range(PODS_EACH):
            body = api_pod(f"{prefix}-{i:02d}", scheduler, cpu=POD_CPU, memory="64Mi")
            if selector and body.spec is not None:
                body.spec.node_selector = selector
            core.create_namespaced_pod(namespace, body)
    finally:
        api.close()


def _overcommitted(core: Any, node_names: list[str]) -> tuple[int, int]:
    """(nodes over-committed, millicores requested beyond allocatable in all)."""
    used: dict[str, Resource] = {}
    for item in core.api_client.sanitize_for_serialization(core.list_pod_for_all_namespaces()).get("items", []):
        pod = Pod.from_raw(item)
        if pod.node_name and not pod.terminal:
            used.setdefault(pod.node_name, Resource()).add(pod.requests)
    nodes, excess = 0, 0
    for name in node_names:
        node = Node.from_raw(core.api_client.sanitize_for_serialization(core.read_node(name)))
        over = used.get(name, Resource()).milli_cpu - node.allocatable.milli_cpu
        if over > 0:
            nodes += 1
            excess += over
    return nodes, excess


def _race(
    plane: ControlPlane,
    core: Any,
    namespace: str,
    names: list[str],
    ours: str,
    kube: str,
    partition: bool,
    tmp_path: Path,
) -> Race:
    for i, name in enumerate(names):
        make_node(core, name, cpu=NODE_CPU, memory="8Gi", labels={"pool": "secondary" if i % 2 else "default"})
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": ours}],
    }
    if partition:
        added = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["secondary"]}]}]
        }
        config["profiles"][0]["pluginConfig"] = [
            {
                "name": "NodeAffinity",
                "args": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": added}},
            }
        ]
    config_path = tmp_path / f"ours-{partition}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    kube_proc = plane.start_kube_scheduler(kube)
    replica = Replica(plane, ours, f"partition-{partition}", extra_args=(f"--config={config_path}",))
    try:
        with replicas(replica):
            replica.start()
            began = time.time()
            creators = [
                threading.Thread(target=_create, args=(plane, namespace, ours, f"ours-{partition:d}", None)),
                threading.Thread(
                    target=_create,
                    args=(plane, namespace, kube, f"kube-{partition:d}", {"pool": "default"} if partition else None),
                ),
            ]
            for thread in creators:
                thread.start()
            for thread in creators:
                thread.join(120)

            def settled() -> bool:
                mine = [p for p in core.list_namespaced_pod(namespace).items if f"-{partition:d}-" in p.metadata.name]
                return len(mine) == 2 * PODS_EACH and all(
                    p.spec.node_name
                    or any(c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or ()))
                    for p in mine
                )

            wait_for(settled, timeout=120, what="both schedulers done", interval=0.5)
            seconds = time.time() - began
    finally:
        plane.stop_process(kube_proc)
    over_nodes, excess = _overcommitted(core, names)
    pods = [p for p in core.list_namespaced_pod(namespace).items if f"-{partition:d}-" in p.metadata.name]
    bound = sum(1 for p in pods if p.spec.node_name)
    label = (
        "partitioned: ours with addedAffinity pool=secondary, theirs with nodeSelector pool=default"
        if partition
        else "shared pool, no partition"
    )
    row = Race(label, len(pods), bound, over_nodes, excess, round(seconds, 1))
    print(f"\n{label}: {bound}/{len(pods)} bound, {over_nodes} nodes over-committed by {excess}m cpu")
    return row


@dataclass
class Race:
    setup: str
    pods: int
    bound: int
    overcommitted: int
    excess_millicpu: int
    seconds: float


def _write(rows: list[Race]) -> None:
    lines = [
        "# kube-scheduler beside ours: the race and the partition",
        "",
        "Written by `tests/faults/test_partition.py` from its own last run: "
        f"{NODES} kwok nodes of {NODE_CPU} cpu, {PODS_EACH} pods of {POD_CPU} cpu for each scheduler at once "
        f"(twice what the pool holds), measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| setup | pods | bound | nodes over-committed | cpu requested beyond allocatable | seconds |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    lines += [
        f"| {r.setup} | {r.pods} | {r.bound} | {r.overcommitted} | {r.excess_millicpu}m | {r.seconds:g} |" for r in rows
    ]
    PARTITION_MD.write_text("\n".join(lines) + "\n")


def test_kube_scheduler_beside_ours_overcommits_a_shared_pool_and_the_partition_prevents_it(
    control_plane: ControlPlane, core: Any, namespace: str, scheduler_name: str, tmp_path: Path
) -> None:
    kube = f"kube-{scheduler_name}"
    shared_nodes = [f"{namespace}-s{i}" for i in range(NODES)]
    partition_nodes = [f"{namespace}-p{i}" for i in range(NODES)]
    try:
        shared = _race(control_plane, core, namespace, shared_nodes, scheduler_name, kube, False, tmp_path)
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for(lambda: not core.list_namespaced_pod(namespace).items, timeout=60, what="the first run's pods gone")
        _delete_nodes(core, shared_nodes)
        partitioned = _race(control_plane, core, namespace, partition_nodes, scheduler_name, kube, True, tmp_path)
        _write([shared, partitioned])
    finally:
        _delete_nodes(core, shared_nodes + partition_nodes)
    # Twice as many pods as room: the shared pool ends full, and whatever the race over-committed is
    # recorded; the partition must leave no node over-committed, each pool exactly full.
    assert shared.bound >= NODES * 4
    assert partitioned.overcommitted == 0
    assert partitioned.bound == NODES * 4


def _delete_nodes(core: Any, names: list[str]) -> None:
    for name in names:
        try:
            core.delete_node(name)
        except k8s_client.ApiException as exc:
            if exc.status != 404:
                raise
