"""`python -m harness.bench.relist [--nodes 15000] [--seconds 12] [--out FILE]`: the Lease
renewal while the node Reflector relists a large cluster on the same event loop.

Owns: a control plane without kwok (nothing else writes the nodes), `--nodes` realistic Node objects
created in bulk, and in one event loop — as in the scheduler — the real Scheduler's node informer
behind a Reflector and a LeaseElector with kube-scheduler's timings (15 s / 10 s / 2 s) holding a
Lease. It measures, over the initial list and then over back-to-back relists (what a "410 Gone" on
the watch causes) for `--seconds`: every renewal's latency (from when it was due, one retry period
after the last attempt ended, to its answer), the longest time without a successful renewal (the
renew deadline bounds it), and the loop's longest hold (LoopMonitor). Prints one JSON object.

Must never: run in the scheduler's image or in `make test` (minutes of setup at full size).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from harness.bench.rawapi import RawApi
from harness.controlplane import ControlPlane
from harness.looplag import LoopMonitor
from scheduler import gctune
from scheduler.api.http import HttpApiClient, load_connection
from scheduler.api.leaderelection import LeaseElector, run_as_leader
from scheduler.api.watch import Reflector
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.informers import Informers

CREATORS = 32
IMAGES = 12  # a kubelet reports the node's images (up to 50); a dozen keeps a node near 5 KB of JSON


def node_manifest(index: int) -> dict[str, Any]:
    """A Node as a kubelet registers it: labels, capacity, conditions, addresses, images."""
    name = f"relist-{index:05d}"
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    conditions = [
        {"type": kind, "status": "False", "reason": f"Kubelet{kind}", "message": "kubelet reports no problem"}
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.8xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24", "providerID": f"fake://{name}"},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.200.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"{index:032x}",
                "bootID": f"{index:032x}",
                "kernelVersion": "6.8.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kubeletVersion": "v1.37.2",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"registry.example/team-{i}/service@sha256:{i:064x}",
                        f"registry.example/team-{i}/service:v{i}",
                    ],
                    "sizeBytes": 10_000_000 * (i + 1),
                }
                for i in range(IMAGES)
            ],
        },
    }


class TimedElector(LeaseElector):
    """Records (start, end, renewed) of every acquire/renew attempt."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attempts: list[tuple[float, float, bool]] = []

    async def try_acquire_or_renew(self) -> bool:
        began = time.perf_counter()
        renewed = False
        try:
            renewed = await super().try_acquire_or_renew()
            return renewed
        finally:
            self.attempts.append((began, time.perf_counter(), renewed))


def renewal_figures(attempts: list[tuple[float, float, bool]], retry_period: float, since: float) -> dict[str, Any]:
    """Latency of each renewal from when it was due; the longest stretch without a successful one."""
    latencies, gaps = [], []
    for (_, prev_end, _), (start, end, _) in itertools.pairwise(attempts):
        if start < since:
            continue
        latencies.append(end - (prev_end + retry_period))
    successes = [start for start, _, renewed in attempts if renewed]
    for prev, start in itertools.pairwise(successes):
        if start >= since:
            gaps.append(start - prev)
    failed = sum(1 for start, _, renewed in attempts if start >= since and not renewed)
    return {
        "renewals": len(latencies),
        "failed_renewals": failed,
        "renew_latency_max_s": round(max(latencies), 3) if latencies else None,
        "renew_latency_median_s": round(statistics.median(latencies), 3) if latencies else None,
        "max_seconds_between_renewals": round(max(gaps), 3) if gaps else None,
    }


def _loop_figures(monitor: LoopMonitor) -> dict[str, float]:
    return {
        "loop_max_lag_s": round(monitor.max_lag, 3),
        "loop_max_held_cpu_s": round(monitor.max_held_cpu, 3),
        "loop_max_held_cpu_without_gc_s": round(monitor.max_held_cpu_without_gc, 3),
        "longest_gc_cpu_s": round(monitor.max_gc_cpu, 3),
    }


async def _measure(plane: ControlPlane, nodes: int, seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {"nodes": nodes}
    began = time.monotonic()
    async with RawApi(plane) as api:
        await api.create_all("/api/v1/nodes", [node_manifest(i) for i in range(nodes)], CREATORS)
    row["create_seconds"] = round(time.monotonic() - began, 1)
    connection = load_connection(str(plane.kubeconfig))
    client = HttpApiClient(connection)
    lease_client = HttpApiClient(connection, max_connections=2)
    scheduler = build_scheduler(default_config(), full_registry(), client, {})
    informers = Informers(scheduler)
    reflector = Reflector(client, "/api/v1/nodes", informers.on_node)
    elector = TimedElector(lease_client, "kube-system", "relist-bench", "bench")
    stop, led = asyncio.Event(), asyncio.Event()

    async def lead() -> None:
        led.set()
        await stop.wait()

    leading = asyncio.create_task(run_as_leader(elector, stop, lead))
    try:
        await led.wait()
        await asyncio.sleep(2 * elector.retry_period)  # a few renewals before the list
        since = time.perf_counter()
        async with LoopMonitor() as monitor:
            await reflector.list()
        row["initial_list"] = {
            "seconds": round(time.perf_counter() - since, 2),
            **_loop_figures(monitor),
            **renewal_figures(elector.attempts, elector.retry_period, since),
        }
        if scheduler.cache.sizes()["nodes"] != nodes:
            raise RuntimeError(f"the informer has {scheduler.cache.sizes()['nodes']} of {nodes} nodes after the list")
        gctune.freeze_startup_heap()  # as the scheduler does once its informers listed
        since = time.perf_counter()
        relists = 0
        async with LoopMonitor() as monitor:
            while time.perf_counter() - since < seconds:
                await reflector.list()
                relists += 1
        row["relists"] = {
            "count": relists,
            "seconds_each": round((time.perf_counter() - since) / relists, 2),
            **_loop_figures(monitor),
            **renewal_figures(elector.attempts, elector.retry_period, since),
        }
        row["still_leading"] = elector.leading()
    finally:
        stop.set()
        await asyncio.gather(leading, return_exceptions=True)
        await client.close()
        await lease_client.close()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.relist", description=__doc__)
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--seconds", type=float, default=12.0, help="how long to relist back to back")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    gctune.configure()  # as the scheduler's command line does
    with ControlPlane(kwok=False) as plane:
        row = asyncio.run(_measure(plane, args.nodes, args.seconds))
    text = json.dumps(row, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
