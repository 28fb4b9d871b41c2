"""The upstream scheduler_perf reader: upstream's real config files from the Go module cache (the
control-plane build downloads k8s.io/kubernetes), its selection rules and its throughput maths."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.bench import report
from harness.bench.upstream import (
    UpstreamError,
    default_gates,
    resolve_count,
    scaled,
    select,
    skip_reason,
    throughput_summary,
    upstream_throughput,
    upstream_workloads,
)
from plugins.registry import IN_TREE

OURS = [module.NAME for module in IN_TREE]


def test_reads_upstreams_test_cases_with_their_thresholds_and_labels() -> None:
    by_key = {w.key: w for w in upstream_workloads()}
    basic = by_key["SchedulingBasic/5000Nodes_10000Pods"]
    assert basic.threshold == 680
    assert "performance" in basic.labels
    assert basic.params == {"initNodes": 5000, "initPods": 1000, "measurePods": 10000}
    assert [op["opcode"] for op in basic.case.ops] == ["createNodes", "createPods", "createPods"]
    assert basic.case.path(basic.case.default_pod_template or "").name == "pod-default.yaml"
    assert by_key["SchedulingPodAntiAffinity/5000Nodes_2000Pods"].threshold == 180


def test_selection_by_case_workload_and_label() -> None:
    workloads = upstream_workloads()
    one = select(workloads, ["SchedulingBasic/500Nodes"])
    assert [w.key for w in one] == ["SchedulingBasic/500Nodes"]
    whole_case = select(workloads, ["TopologySpreading"])
    assert {w.case.name for w in whole_case} == {"TopologySpreading"} and len(whole_case) > 1
    performance = select(workloads, labels=["performance"])
    assert performance and all("performance" in w.labels for w in performance)
    assert select(workloads, ["SchedulingBasic"], ["performance", "short"]) == []
    with pytest.raises(UpstreamError, match="NoSuchCase"):
        select(workloads, ["NoSuchCase"])


def test_feature_gate_defaults_are_read_from_the_release() -> None:
    gates = default_gates()
    assert gates["SchedulerAsyncAPICalls"] is False  # beta but off in 1.37 (kubernetes#135900)
    assert gates["OpportunisticBatching"] is True
    assert gates["PodLevelResources"] is True


def test_workloads_that_cannot_run_say_why() -> None:
    by_key = {w.key: w for w in upstream_workloads()}
    assert skip_reason(by_key["SchedulingBasic/5000Nodes_10000Pods"], OURS) is None
    assert "SchedulerAsyncAPICalls=true" in (
        skip_reason(by_key["SchedulingBasic/5000Nodes_50000Pods_AsyncAPICallsEnabled"], OURS) or ""
    )
    in_tree_pvs = by_key["SchedulingInTreePVs/5000Nodes_2000Pods"]
    without_binding = [name for name in OURS if name != "VolumeBinding"]
    assert "VolumeBinding" in (skip_reason(in_tree_pvs, without_binding) or "")
    assert "VolumeBinding" not in (skip_reason(in_tree_pvs, OURS) or "")
    # Its own KubeSchedulerConfiguration is given to both schedulers, not a reason to skip.
    assert skip_reason(by_key["HostPortConflict/20000Nodes_20000Pods_10BatchSize"], OURS) is None
    # Once ours has the plugin, the same workload is no longer skipped for it.
    preemption = by_key["PreemptionBasic/1000Nodes"]
    without = [name for name in OURS if name != "DefaultPreemption"]
    assert "DefaultPreemption" in (skip_reason(preemption, without) or "")
    assert "DefaultPreemption" not in (skip_reason(preemption, [*without, "DefaultPreemption"]) or "")


def test_counts_from_parameters_and_scale() -> None:
    params = {"initNodes": 5000, "perGroup": 3}
    assert resolve_count({"countParam": "$initNodes"}, params) == 5000
    assert resolve_count({"count": 2}, params) == 2
    assert resolve_count({"count": 4, "countMultiplierParam": "$perGroup"}, params) == 12
    with pytest.raises(UpstreamError, match=r"\$missing"):
        resolve_count({"countParam": "$missing"}, params)
    assert scaled(5000, 0.2) == 1000
    assert scaled(3, 0.1) == 1
    assert scaled(0, 0.5) == 0


def test_throughput_as_upstreams_collector_samples_it() -> None:
    # Collector from t=0; ticks at 1, 2, 3, 4, 5. Nothing before the tick at 1 -> ignored;
    # the first tick that sees pods (t=2, 3 pods) starts the clock; t=3 sees 13 (10/s);
    # t=4 sees nothing new (folded); t=5 sees 23: 10 pods over 2 s -> two samples of 5/s.
    scheduled = [1.5, 1.6, 1.7] + [2.0 + i / 10 for i in range(1, 11)] + [4.0 + i / 10 for i in range(1, 11)]
    samples = upstream_throughput(scheduled, start=0.0, stop=5.0)
    assert samples == pytest.approx([10.0, 5.0, 5.0])
    summary = throughput_summary(samples)
    assert summary["average"] == pytest.approx(20 / 3)
    assert summary["p50"] == 5.0 and summary["p99"] == 10.0
    assert throughput_summary([])["average"] is None
    assert upstream_throughput([], 0.0, 10.0) == []


def test_scaling_sizes_vary_upstreams_node_count_and_keep_anti_affinity_pods_placeable() -> None:
    from harness.bench.upstream_run import SCALING_CASES, at_nodes, scaling_markdown

    basic, anti = select(upstream_workloads(), list(SCALING_CASES))
    small = at_nodes(basic, 500)
    assert small.key == "SchedulingBasic/5000Nodes_10000Pods@500Nodes"
    assert small.params == {"initNodes": 500, "initPods": 1000, "measurePods": 10000}
    assert basic.params["initNodes"] == 5000  # the original is left as upstream wrote it
    # Required anti-affinity on the hostname: never more pods than nodes can take one each.
    for nodes in (500, 1000, 2000):
        sized = at_nodes(anti, nodes)
        assert sized.params["initPods"] + sized.params["measurePods"] <= nodes
        assert sized.params["measurePods"] == 2 * sized.params["initPods"]
    assert at_nodes(anti, 15000).params == {"initNodes": 15000, "initPods": 1000, "measurePods": 2000}
    rows = [
        {"workload": f"{basic.key}@{n}Nodes", "scheduler": kind, "cpu_ms_per_pod": ms}
        for n, kind, ms in [(500, "ours", 1.0), (500, "kube", 2.0), (5000, "ours", 3.0), (5000, "kube", 2.0)]
    ]
    table = scaling_markdown({"runs": rows})
    assert "| 500 | 1.00 | 2.00 | 0.50 |" in table and "| 5000 | 3.00 | 2.00 | 1.50 |" in table


def test_an_ours_variant_is_ours_with_environment_settings() -> None:
    from harness.bench.schedulers import ours_variant

    kind = ours_variant("stdjson:SECONDARY_SCHEDULER_JSON=stdlib,SECONDARY_SCHEDULER_GC=python")
    assert kind.key == "ours-stdjson" and kind.scheduler_name == "bench-ours-stdjson" and kind.honours_constraints
    assert "SECONDARY_SCHEDULER_GC=python" in kind.title
    for bad in ("nolabel", ":A=1", "label:", "label:novalue"):
        with pytest.raises(ValueError, match="LABEL:NAME=VALUE"):
            ours_variant(bad)


def test_a_variant_row_carries_its_own_trees_commit(tmp_path: Path) -> None:
    """An A/B's `ours-LABEL:PYTHONPATH=<tree>` row says the commit of <tree>, not the harness's."""
    from harness.bench.schedulers import SCHEDULERS, ours_variant
    from harness.bench.upstream_run import row_commit
    from harness.controlplane import REPO_ROOT

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "f").write_text("x")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "variant")
    variant_commit = git("rev-parse", "--short", "HEAD")
    assert row_commit(ours_variant(f"old:PYTHONPATH={tmp_path}")) == variant_commit
    ours = next(kind for kind in SCHEDULERS if kind.key == "ours")
    assert row_commit(ours) == report.git_revision(REPO_ROOT) != variant_commit


def test_release_defaults_honour_min_compatibility_and_agree_with_the_schedulers_gates() -> None:
    from scheduler.features import KNOWN_GATES

    gates = default_gates()
    assert gates["DRAFractionalCapacityRange"] is False  # its "true" spec needs min-compatibility 1.37
    assert {name: gates[name] for name in KNOWN_GATES} == {name: spec.default for name, spec in KNOWN_GATES.items()}


def test_the_claim_controller_runs_as_scheduler_perf_runs_it() -> None:
    """Its workers and client rate, read from upstream's sources: kube-controller-manager's
    defaults (20 requests/s) paced every claim-template workload instead of the scheduler."""
    from harness.bench.upstream import perf_root
    from harness.bench.upstream_run import claim_controller_args
    from scheduler.features import DYNAMIC_RESOURCE_ALLOCATION

    perf = perf_root()
    client = (perf / "util.go").read_text()
    qps = re.search(r"cfg\.QPS = ([0-9.]+)", client)
    burst = re.search(r"cfg\.Burst = ([0-9]+)", client)
    workers = re.search(r"claimController\.Run\(ctx, ([0-9]+)", (perf.parent / "util" / "util.go").read_text())
    assert qps and burst and workers
    gates = default_gates()
    assert gates[DYNAMIC_RESOURCE_ALLOCATION]
    assert claim_controller_args({**gates, DYNAMIC_RESOURCE_ALLOCATION: False}) is None
    args = claim_controller_args(gates)
    assert args is not None
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in args)
    assert float(flags["kube-api-qps"]) == float(qps.group(1))
    assert int(flags["kube-api-burst"]) == int(burst.group(1))
    assert int(flags["concurrent-resourceclaim-syncs"]) == int(workers.group(1))
