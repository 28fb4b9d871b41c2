"""`make bench`'s harness end to end on a tiny workload: ours and the null binder, real control planes.

Owns: the check that a benchmark run binds every pod that fits, sees the ones that never fit
reported, and writes sane numbers to results.json / results.md / latest.md. Must never: run the
default sizes (minutes) or write into the repository's bench-results/.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.bench.rawapi import RawApi
from harness.bench.runner import main
from harness.bench.schedulers import DEFAULT_SETUP, SCHEDULERS
from harness.bench.upstream import select, upstream_workloads
from harness.bench.upstream_run import APISERVER_ARGS, Executor
from harness.bench.upstream_run import main as upstream_main
from harness.controlplane import ControlPlane

pytestmark = pytest.mark.cluster


def test_tiny_benchmark_binds_everything_that_fits_and_writes_sane_results(tmp_path: Path) -> None:
    args = ["--workloads", "Unschedulable", "--schedulers", "ours,null"]
    args += ["--nodes", "5", "--pods", "20", "--initial-pods", "0", "--timeout", "30", "--quiet-wait", "0"]
    args += ["--results-dir", str(tmp_path)]

    assert main(args) == 0

    (out_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    results = json.loads((out_dir / "results.json").read_text())
    runs = {run["scheduler"]: run for run in results["runs"]}
    assert set(runs) == {"ours", "null"}
    for run in runs.values():
        assert "error" not in run, run["error"]
        assert not run["timed_out"]
        assert run["fittable"] == 16  # every 5th of the 20 pods asks for 1000 CPUs
        assert run["bound"] == 16
        assert run["throughput_avg"] > 0
        assert run["throughput_p50"] > 0
        assert 0 < run["latency_p50_ms"] <= run["latency_p99_ms"] < 30_000
        assert run["cpu_seconds"] >= 0  # the null binder may bind 16 pods within one 10 ms clock tick
        assert run["peak_rss_mib"] > 10
        assert sum(run["timeline"]) == 16
    assert runs["ours"]["cpu_seconds"] > 0
    assert runs["ours"]["reported_unschedulable"] == 4
    assert runs["ours"]["violations"] == []
    assert runs["ours"]["attempt_p50_ms"] is not None and runs["ours"]["attempt_p50_ms"] > 0
    assert runs["null"]["violations"] is None  # it binds anything anywhere: nothing to check
    (ratio,) = results["ratios"]
    assert ratio["workload"] == "Unschedulable" and ratio["ours_vs_null"] > 0

    table = (out_dir / "results.md").read_text()
    assert "| Unschedulable | secondary-scheduler | 5 | 20 | 16/16 |" in table
    assert (tmp_path / "latest.md").read_text().startswith("# Scheduler benchmark")


def test_upstream_workload_runs_verbatim_through_ours_and_the_null_binder(tmp_path: Path) -> None:
    args = ["--cases", "SchedulingBasic/500Nodes", "--schedulers", "ours,null", "--scale", "0.2"]
    assert upstream_main([*args, "--timeout", "120", "--results-dir", str(tmp_path)]) == 0

    (out_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    results = json.loads((out_dir / "results.json").read_text())
    runs = {run["scheduler"]: run for run in results["runs"]}
    assert set(runs) == {"ours", "null"}
    for run in runs.values():
        assert "error" not in run, run["error"]
        (phase,) = run["phases"]  # one createPods with collectMetrics
        assert phase["scheduled"] == run["scheduled"] == 200  # measurePods 1000 at scale 0.2
        assert phase["namespaces"] == ["namespace-2"]  # upstream's namespace for op 2
    assert runs["ours"]["cpu_ms_per_pod"] > 0
    assert runs["ours"]["attempt_p50_ms"] is not None
    assert "SchedulingBasic/500Nodes" in (tmp_path / "latest-upstream.md").read_text()


def test_upstream_volume_workload_creates_upstreams_pre_bound_volumes_and_csinodes() -> None:
    # SchedulingMigratedInTreePVs/5Nodes through ours: 5 nodes with CSINodes, then 5 + 10 pods,
    # each with its own claim and PV, bound as upstream's CreatePodWithPersistentVolume binds them.
    (workload,) = select(upstream_workloads(), ["SchedulingMigratedInTreePVs/5Nodes"])
    ours = next(kind for kind in SCHEDULERS if kind.key == "ours")
    with (
        ControlPlane(kwok=False, apiserver_args=APISERVER_ARGS) as plane,
        ours.start(plane, ours.scheduler_name, DEFAULT_SETUP) as running,
    ):

        async def go() -> dict[str, Any]:
            async with RawApi(plane) as api:
                await Executor(api, workload, ours, running, 1.0, 120).run()
                seen = {}
                for key, path in [
                    ("nodes", "/api/v1/nodes"),
                    ("csinodes", "/apis/storage.k8s.io/v1/csinodes"),
                    ("pvs", "/api/v1/persistentvolumes"),
                    ("pvcs", "/api/v1/persistentvolumeclaims"),
                    ("pods", "/api/v1/pods"),
                ]:
                    status, body = await api.request("GET", path)
                    assert status == 200
                    seen[key] = body["items"]
                return seen

        seen = asyncio.run(go())

    nodes = {n["metadata"]["name"]: n for n in seen["nodes"]}
    assert len(nodes) == 5
    for name, node in nodes.items():
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
        # Upstream's allocatable patch goes to the node, not its status: the apiserver drops it.
        assert "attachable-volumes-csi-ebs.csi.aws.com" not in node["status"]["allocatable"]
    assert {c["metadata"]["name"] for c in seen["csinodes"]} == set(nodes)
    for csinode in seen["csinodes"]:
        (driver,) = csinode["spec"]["drivers"]
        assert driver["name"] == "ebs.csi.aws.com" and driver["allocatable"] == {"count": 39}
        assert csinode["metadata"]["annotations"]["storage.alpha.kubernetes.io/migrated-plugins"] == (
            "kubernetes.io/aws-ebs"
        )
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in seen["pvcs"]}
    expected = {("namespace-1", f"pvc-{i}") for i in range(5)} | {("namespace-2", f"pvc-{i}") for i in range(10)}
    assert set(claims) == expected
    volumes = {v["metadata"]["name"]: v for v in seen["pvs"]}
    assert len(volumes) == 15
    for (namespace, name), claim in claims.items():
        assert claim["status"]["phase"] == "Bound"
        volume = volumes[claim["spec"]["volumeName"]]
        index = name.removeprefix("pvc-")
        assert volume["metadata"]["name"] == f"{namespace}-vol-{index}"
        assert volume["status"]["phase"] == "Bound"
        assert volume["spec"]["claimRef"]["namespace"] == namespace and volume["spec"]["claimRef"]["name"] == name
        assert volume["spec"]["awsElasticBlockStore"]["volumeID"] == f"vol-{index}"
    pods = [p for p in seen["pods"] if p["metadata"]["namespace"].startswith("namespace-")]
    assert len(pods) == 15
    for pod in pods:
        assert pod["spec"]["nodeName"] in nodes
        (volume,) = pod["spec"]["volumes"]
        assert (pod["metadata"]["namespace"], volume["persistentVolumeClaim"]["claimName"]) in claims
    # Each claim is used by exactly one pod.
    used = {(p["metadata"]["namespace"], p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]) for p in pods}
    assert used == expected


def test_upstream_preemption_with_volumes_runs_with_upstreams_admission_plugins(tmp_path: Path) -> None:
    # pod-high-priority.yaml sets spec.priority itself: only an apiserver without the Priority
    # admission plugin (scheduler_perf's) takes it. Each of the 5 pods must preempt low ones.
    args = ["--cases", "PreemptionPVs/5Nodes", "--schedulers", "ours", "--scale", "1", "--timeout", "120"]
    assert upstream_main([*args, "--results-dir", str(tmp_path)]) == 0

    (out_dir,) = [path for path in tmp_path.iterdir() if path.is_dir()]
    (run,) = json.loads((out_dir / "results.json").read_text())["runs"]
    assert "error" not in run, run["error"]
    (phase,) = run["phases"]
    assert phase["scheduled"] == 5 and phase["namespaces"] == ["namespace-2"]
