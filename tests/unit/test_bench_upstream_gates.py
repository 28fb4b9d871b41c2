"""Upstream workloads that set feature gates, bring a KubeSchedulerConfiguration, create PodGroups
or allocate ResourceClaims up front: the skip decisions (asked of ours' own flag and config
parsers), what each scheduler is started with, and the objects the new opcodes make, on upstream's
own config and template files."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from harness.bench.schedulers import SCHEDULERS, Setup, ours_arguments
from harness.bench.upstream import (
    UpstreamError,
    collection_path,
    ours_feature_gates,
    ours_gate_refusal,
    perf_root,
    runtime_config,
    scheduler_configuration,
    select,
    skip_reason,
    upstream_workloads,
)
from harness.bench.upstream_dra import allocate_claims
from harness.bench.upstream_run import Executor
from plugins.registry import IN_TREE
from scheduler.config import parse_config
from scheduler.features import GENERIC_WORKLOAD, FeatureGateError, parse_feature_gates

OURS = [module.NAME for module in IN_TREE if not getattr(module, "STAND_IN", False)]


def _workload(key: str) -> Any:
    (workload,) = select(upstream_workloads(), [key])
    return workload


def _executor(key: str, scale: float = 1.0) -> Executor:
    return Executor(None, _workload(key), SCHEDULERS[0], None, scale, 10.0)  # type: ignore[arg-type]


def _accepts(flag: str) -> bool:
    try:
        parse_feature_gates(flag)
    except FeatureGateError:
        return False
    return True


@pytest.mark.parametrize(
    ("gates", "refusal"),
    [
        ({}, None),
        # Set to v1.37.2's default (locked GA gates included): ours accepts it as kube-scheduler does.
        ({"DynamicResourceAllocation": True, "SchedulerAsyncAPICalls": False}, None),
        ({"SchedulerAsyncAPICalls": True}, "ours does not implement SchedulerAsyncAPICalls=true"),
        # Both values honoured since ours implements OpportunisticBatching.
        ({"OpportunisticBatching": False}, None),
        # Locked at 1.37 (upstream emulates 1.36 for this workload); ours refuses it.
        ({"NodeDeclaredFeatures": False}, "ours does not implement NodeDeclaredFeatures=false"),
        # A gate no scheduler code reads concerns only the apiserver and controllers.
        ({"SomeApiserverOnlyGate": True}, None),
    ],
)
def test_ours_gate_refusal_names_the_gates_ours_does_not_implement(gates: dict[str, bool], refusal: str | None) -> None:
    assert ours_gate_refusal(gates) == refusal


def test_generic_workload_is_decided_by_ours_parser_not_a_list() -> None:
    # Whether a pod-group workload runs follows scheduler/features.py: refused while ours does not
    # honour GenericWorkload=true, runnable once it does (wl/upstream marks it honoured).
    gang = _workload("GangScheduling/5000Nodes_1000Gangs_3000Pods")
    reason = skip_reason(gang, OURS)
    if _accepts(f"{GENERIC_WORKLOAD}=true"):
        assert reason is None
    else:
        assert reason == "ours does not implement GenericWorkload=true"


def test_ours_gets_only_the_gates_its_scheduler_code_reads() -> None:
    gates = {"GenericWorkload": True, "SomeApiserverOnlyGate": True, "DRAPrioritizedList": True}
    assert ours_feature_gates(gates) == {"GenericWorkload": True, "DRAPrioritizedList": True}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (
            "SchedulingBasic/5000Nodes_50000Pods_AsyncAPICallsEnabled",
            "ours does not implement SchedulerAsyncAPICalls=true",
        ),
        ("PreemptionAsync/5000Nodes", "ours does not implement SchedulerAsyncPreemption=false"),
        ("HostPortConflict/20000Nodes_20000Pods_10BatchSize", None),
        ("ResourceSaturation/20000Nodes_20000Pods_OpportunisticBatchingDisabled", None),
    ],
)
def test_skip_reasons_of_gated_and_configured_workloads(key: str, reason: str | None) -> None:
    assert skip_reason(_workload(key), OURS) == reason


def test_configs_in_sub_folders_are_read() -> None:
    keys = {w.key for w in upstream_workloads()}
    assert "GangScheduling/5000Nodes_1000Gangs_3000Pods" in keys  # podgroup/gangscheduling/
    assert "SchedulingWithResourceClaimTemplate/5000pods_500nodes" in keys  # dra/
    folders = {w.case.config_file.parent.relative_to(perf_root()).as_posix() for w in upstream_workloads()}
    assert {"dra/partitionabledevices", "podgroup/tas", "workload_preemption"} <= folders


def test_dra_workloads_wait_for_the_plugin_not_for_an_opcode() -> None:
    claims = _workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes")
    without = [name for name in OURS if name != "DynamicResources"]
    assert "DynamicResources" in (skip_reason(claims, without) or "")
    # With the plugin, allocResourceClaims, steady-state createPods and every other op are run.
    assert skip_reason(claims, [*without, "DynamicResources"]) is None
    steady = _workload("SchedulingWithResourceClaimTemplate/empty_500nodes")
    assert steady.params["steadyState"] is True
    assert skip_reason(steady, [*without, "DynamicResources"]) is None


@pytest.mark.parametrize(
    ("gates", "config"),
    [
        ({}, {}),
        ({"SchedulerAsyncAPICalls": True}, {}),
        (
            {"DynamicResourceAllocation": True},
            {f"resource.k8s.io/{v}": "true" for v in ("v1", "v1beta2", "v1beta1", "v1alpha3")},
        ),
        ({"GenericWorkload": True}, {"scheduling.k8s.io/v1beta1": "true"}),
    ],
)
def test_runtime_config_as_scheduler_perf_sets_it(gates: dict[str, bool], config: dict[str, str]) -> None:
    assert runtime_config(gates) == config


def test_scheduler_configuration_is_upstreams_with_the_profile_renamed() -> None:
    case = _workload("HostPortConflict/20000Nodes_20000Pods_10BatchSize").case
    config = scheduler_configuration(case, "bench-kube-scheduler")
    assert config is not None
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "bench-kube-scheduler"
    assert profile["pluginConfig"] == [
        {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}
    ]
    assert scheduler_configuration(_workload("SchedulingBasic/500Nodes").case, "x") is None
    # Ours reads the same document.
    assert parse_config(config).profiles[0].scheduler_name == "bench-kube-scheduler"


def test_ours_is_started_with_its_gates_and_the_configuration_with_the_harness_settings() -> None:
    kubeconfig = Path("/tmp/kubeconfig")
    args, config = ours_arguments(kubeconfig, Setup())
    assert args == ["--no-leader-elect", "--kube-api-qps=5000", "--kube-api-burst=5000"] and config is None
    upstream = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    gates = {"SchedulerAsyncAPICalls": False, "SomeApiserverOnlyGate": True}
    args, config = ours_arguments(kubeconfig, Setup(gates, {**upstream, "profiles": [{"schedulerName": "o"}]}))
    # With a file, its clientConnection carries the rate limit (the flags would be ignored).
    assert args == ["--no-leader-elect", "--feature-gates=SchedulerAsyncAPICalls=false"]
    assert config == {
        **upstream,
        "profiles": [{"schedulerName": "o"}],
        "clientConnection": {"kubeconfig": "/tmp/kubeconfig", "qps": 5000, "burst": 5000},
    }


def test_groups_are_scaled_before_their_members_are_counted() -> None:
    # 3 gangs of 1000 at scale 0.02: one whole gang of 1000 pods, not 60 pods of a gang of 1000.
    executor = _executor("GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", scale=0.02)
    groups_op, pods_op = (op for op in executor.case.ops if op["opcode"] in ("createPodGroups", "createPods"))
    assert executor.count(groups_op) == 1
    assert executor.count(pods_op) == 1000
    assert _executor("GangScheduling/5000Nodes_1000Gangs_3000Pods", scale=0.02).count(pods_op) == 20 * 3


def test_pod_groups_and_their_members_from_upstreams_templates() -> None:
    executor = _executor("GangScheduling/5000Nodes_1000Gangs_3000Pods")
    groups_op, pods_op = (op for op in executor.case.ops if op["opcode"] in ("createPodGroups", "createPods"))
    groups = executor.objects(groups_op["templatePath"], 2, groups_op["templateParams"])
    assert [(g["kind"], g["metadata"]["name"], g["spec"]["schedulingPolicy"]) for g in groups] == [
        ("PodGroup", "gang-0", {"gang": {"minCount": 3}}),
        ("PodGroup", "gang-1", {"gang": {"minCount": 3}}),
    ]
    pods = executor.objects(pods_op["podTemplatePath"], 6, pods_op["templateParams"])
    assert [p["spec"]["schedulingGroup"]["podGroupName"] for p in pods] == ["gang-0"] * 3 + ["gang-1"] * 3


def _dra_cluster(nodes: int, devices: int, claims: int) -> tuple[list[Any], ...]:
    executor = _executor("SchedulingWithResourceClaimTemplate/fast")
    root = "templates/"
    made_nodes = executor.objects(root + "node-with-dra-test-driver.yaml", nodes)
    slices = executor.objects(root + "resourceslice-basic-devices.yaml", nodes, {"numDevices": devices})
    classes = executor.objects(root + "deviceclass.yaml", 1)
    made_claims = [_as_created(c) for c in executor.objects(root + "resourceclaim.yaml", claims)]
    return made_nodes, slices, classes, made_claims


def _as_created(claim: dict[str, Any]) -> dict[str, Any]:
    """The claim as the apiserver returns it from a create in namespace init: its requests
    defaulted to allocationMode ExactCount, count 1 (what allocResourceClaims lists)."""
    created = copy.deepcopy(claim)
    created["metadata"]["namespace"] = "init"
    for request in created["spec"]["devices"]["requests"]:
        request["exactly"].setdefault("allocationMode", "ExactCount")
        request["exactly"].setdefault("count", 1)
    return created


def _device(allocation: dict[str, Any]) -> tuple[str, str, str]:
    (result,) = allocation["devices"]["results"]
    return result["driver"], result["pool"], result["device"]


def test_alloc_resource_claims_gives_every_claim_its_own_device() -> None:
    nodes, slices, classes, claims = _dra_cluster(nodes=2, devices=2, claims=4)
    allocated = allocate_claims(claims, nodes, slices, classes, [], random.Random(1))
    assert [claim["metadata"]["name"] for claim, _ in allocated] == [f"test-claim-{i}" for i in range(4)]
    assert len({_device(allocation) for _, allocation in allocated}) == 4
    for _, allocation in allocated:
        (term,) = allocation["nodeSelector"]["nodeSelectorTerms"]
        assert term["matchFields"][0]["values"][0].startswith("scheduler-perf-dra-")


def test_alloc_resource_claims_keeps_what_is_allocated_and_fails_like_upstream_when_full() -> None:
    nodes, slices, classes, claims = _dra_cluster(nodes=1, devices=2, claims=2)
    ((_, first),) = allocate_claims(claims[:1], nodes, slices, classes, [], random.Random(1))
    claims[0] = {**claims[0], "status": {"allocation": first}}
    ((claim, second),) = allocate_claims(claims, nodes, slices, classes, [], random.Random(1))
    assert claim["metadata"]["name"] == "test-claim-1" and _device(second) != _device(first)
    _, _, _, three = _dra_cluster(nodes=1, devices=2, claims=3)
    with pytest.raises(UpstreamError, match=r"Could not allocate claim 2 out of 3 \(init/test-claim-2\)"):
        allocate_claims(three, nodes, slices, classes, [], random.Random(1))


def test_a_count_parameter_a_template_reads_is_scaled_as_the_count() -> None:
    # 10000 cloggers at scale 0.02 are 200 pods: their PodGroup's minCount must say 200, else the
    # group never reaches its minimum and no clogger is ever attempted.
    executor = _executor("StarvationPodGroup/10000Nodes_10000Cloggers_Podgroup", scale=0.02)
    groups_op = next(op for op in executor.case.ops if op["opcode"] == "createPodGroups")
    cloggers_op = next(op for op in executor.case.ops if op.get("countParam") == "$cloggerPods")
    (group,) = executor.objects(groups_op["templatePath"], executor.count(groups_op), groups_op["templateParams"])
    assert executor.count(cloggers_op) == 200
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 200
    # A parameter no op counts with is left as upstream wrote it.
    gangs = _executor("GangScheduling/5000Nodes_1000Gangs_3000Pods", scale=0.02)
    assert gangs.template_values["podsPerGroup"] == 3 and gangs.template_values["initNodes"] == 100


@pytest.mark.parametrize(
    ("row", "cell"),
    [
        ({"cpu_ms_per_pod": 2.5, "cpu_seconds": 1.0, "scheduled": 400}, "2.50"),
        # PublishResourceSlices: a measured phase with no pods shows what the scheduler spent.
        ({"cpu_ms_per_pod": None, "cpu_seconds": 1.234, "scheduled": 0}, "1.23 s"),
        ({}, "-"),
    ],
)
def test_cpu_cell_of_a_phase_with_and_without_pods(row: dict[str, Any], cell: str) -> None:
    from harness.bench.upstream_run import _cpu

    assert _cpu(row) == cell


def test_pod_groups_are_created_as_v1beta1_whatever_version_the_template_names() -> None:
    # default_preemption's template says scheduling.k8s.io/v1alpha3; upstream decodes it into the
    # v1beta1 type and creates it with that client.
    from harness.bench.upstream_objects import as_pod_group

    executor = _executor("PreemptionPodGroupDisruptionMode/FastTest_PodGroupDisruptionMode_Single")
    op = next(op for op in executor.case.ops if op["opcode"] == "createPodGroups")
    params = {**op["templateParams"], "minCount": 2, "disruptionMode": "single"}
    (rendered,) = executor.objects(op["templatePath"], 1, params)
    assert rendered["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    group = as_pod_group(rendered)
    assert (group["apiVersion"], group["kind"]) == ("scheduling.k8s.io/v1beta1", "PodGroup")
    assert group["spec"] == rendered["spec"] and group["spec"]["disruptionMode"] == {"single": {}}


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        # consumablecapacity's DeviceClass names v1beta2: sent there, as upstream's REST mapping does.
        (
            {"kind": "DeviceClass", "apiVersion": "resource.k8s.io/v1beta2"},
            "/apis/resource.k8s.io/v1beta2/deviceclasses",
        ),
        (
            {"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1"},
            "/apis/resource.k8s.io/v1/namespaces/init/resourceclaims",
        ),
        ({"kind": "Pod", "apiVersion": "v1"}, "/api/v1/namespaces/init/pods"),
        ({"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1"}, "/apis/scheduling.k8s.io/v1/priorityclasses"),
    ],
)
def test_objects_go_to_the_group_version_they_name(manifest: dict[str, Any], path: str) -> None:
    assert collection_path(manifest, "init") == path


def test_an_object_of_an_unknown_kind_or_another_group_is_one_clear_error() -> None:
    with pytest.raises(UpstreamError, match="Widget: a kind this harness does not create"):
        collection_path({"kind": "Widget", "apiVersion": "v1"}, "x")
    with pytest.raises(UpstreamError, match=r"DeviceClass c: apiVersion example\.com/v1 is not resource\.k8s\.io"):
        collection_path({"kind": "DeviceClass", "apiVersion": "example.com/v1", "metadata": {"name": "c"}}, "x")
