"""What upstream scheduler_perf adds to its templates (upstream_objects), on upstream's own
template files: the pre-bound PV + claim + pod triple, node names and prepare strategies."""

from __future__ import annotations

import random
from typing import Any

import yaml

from harness.bench.upstream import perf_root, select, skip_reason, upstream_workloads
from harness.bench.upstream_objects import (
    HOSTNAME_LABEL,
    MIGRATED_PLUGINS_ANNOTATION,
    allocatable_patch,
    bound,
    csi_node,
    named_nodes,
    node_strategy,
    pod_with_volume,
    strategy_labels,
)
from harness.bench.upstream_run import BASE_POD
from plugins.registry import IN_TREE

OURS = [module.NAME for module in IN_TREE]


def template(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((perf_root() / "templates" / name).read_text())
    return loaded


def test_csi_volume_is_pre_bound_to_its_claim_and_named_per_namespace() -> None:
    pod = template("pod-default.yaml")
    pod["spec"]["volumes"] = [{"name": "x"}]
    pv, pvc, with_claim = pod_with_volume(template("pv-csi.yaml"), template("pvc.yaml"), pod, "namespace-2", 7)
    assert pv["metadata"]["name"] == "namespace-2-vol-7"
    assert pv["spec"]["csi"] == {"driver": "ebs.csi.aws.com", "volumeHandle": "namespace-2-vol-7"}
    assert pv["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "namespace": "namespace-2",
        "name": "pvc-7",
        "apiVersion": "v1",
    }
    assert pv["spec"]["accessModes"] == ["ReadOnlyMany"] and pv["spec"]["capacity"] == {"storage": "1Gi"}
    assert pvc["metadata"]["name"] == "pvc-7"
    assert pvc["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "true"}
    assert pvc["spec"]["volumeName"] == "namespace-2-vol-7"
    assert pvc["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    # The pod's own volumes are replaced, not extended, by the one claim.
    assert with_claim["spec"]["volumes"] == [{"name": "vol", "persistentVolumeClaim": {"claimName": "pvc-7"}}]
    assert with_claim["spec"]["containers"] == pod["spec"]["containers"]
    assert pod["spec"]["volumes"] == [{"name": "x"}]  # the template is left alone


def test_aws_volume_id_is_per_index_not_per_namespace_as_upstream_has_it() -> None:
    pv, _, _ = pod_with_volume(template("pv-aws.yaml"), template("pvc.yaml"), BASE_POD, "namespace-1", 3)
    assert pv["metadata"]["name"] == "namespace-1-vol-3"
    assert pv["spec"]["awsElasticBlockStore"] == {"volumeID": "vol-3"}
    assert "csi" not in pv["spec"]
    other, _, _ = pod_with_volume(template("pv-aws.yaml"), template("pvc.yaml"), BASE_POD, "namespace-2", 3)
    assert other["spec"]["awsElasticBlockStore"]["volumeID"] == "vol-3"


def test_bound_sets_only_the_phase() -> None:
    created = {"metadata": {"name": "pvc-0", "resourceVersion": "5"}, "spec": {}, "status": {"phase": "Pending"}}
    assert bound(created) == {**created, "status": {"phase": "Bound"}}
    assert created["status"] == {"phase": "Pending"}


def test_nodes_are_named_from_generate_name_with_the_hostname_label() -> None:
    nodes = named_nodes(template("node-default.yaml"), 300, random.Random(1))
    names = [n["metadata"]["name"] for n in nodes]
    assert len(set(names)) == 300
    for node, name in zip(nodes, names, strict=True):
        assert name.startswith("scheduler-perf-") and len(name) == len("scheduler-perf-") + 5
        assert "generateName" not in node["metadata"]
        assert node["metadata"]["labels"] == {HOSTNAME_LABEL: name}
        assert node["status"]["capacity"]["cpu"] == "4"
    # Five characters from a 27-letter alphabet: a clash is drawn again, never sent twice.
    tiny = named_nodes({"metadata": {"generateName": "n-"}}, 2, _Repeating())
    assert len({n["metadata"]["name"] for n in tiny}) == 2
    fixed = named_nodes({"metadata": {"name": "node-1", "labels": {HOSTNAME_LABEL: "x"}}}, 1, random.Random(1))
    assert fixed[0]["metadata"]["labels"] == {HOSTNAME_LABEL: "node-1"}


class _Repeating(random.Random):
    """Draws the same name twice, then a different one."""

    def __init__(self) -> None:
        super().__init__(0)
        self.calls = 0

    def choices(self, population: Any, weights: Any = None, *, cum_weights: Any = None, k: int = 1) -> list[Any]:
        self.calls += 1
        return [population[0 if self.calls <= 2 else 1]] * k


def test_only_the_first_prepare_strategy_applies() -> None:
    label = {"labelKey": "zone", "labelValues": ["a", "b"]}
    both = {"nodeAllocatableStrategy": {"nodeAllocatable": {"x": "1"}}, "labelNodePrepareStrategy": label}
    strategy = node_strategy(both)
    assert strategy is not None and strategy[0] == "nodeAllocatableStrategy"
    assert strategy_labels(strategy, 0) == {}
    labelled = node_strategy({"labelNodePrepareStrategy": label, "uniqueNodeLabelStrategy": {"labelKey": "u"}})
    assert [strategy_labels(labelled, i) for i in range(3)] == [{"zone": "a"}, {"zone": "b"}, {"zone": "a"}]
    unique = node_strategy({"uniqueNodeLabelStrategy": {"labelKey": "u"}})
    assert strategy_labels(unique, 0)["u"] != strategy_labels(unique, 1)["u"]
    assert node_strategy({}) is None and strategy_labels(None, 0) == {}


def test_node_allocatable_strategy_of_the_migrated_case() -> None:
    (workload,) = select(upstream_workloads(), ["SchedulingMigratedInTreePVs/5Nodes"])
    strategy = node_strategy(workload.case.ops[0])
    assert strategy is not None
    key, spec = strategy
    assert key == "nodeAllocatableStrategy"
    csinode = csi_node("scheduler-perf-abcde", spec)
    assert csinode["metadata"] == {
        "name": "scheduler-perf-abcde",
        "annotations": {MIGRATED_PLUGINS_ANNOTATION: "kubernetes.io/aws-ebs"},
    }
    assert csinode["spec"]["drivers"] == [
        {"name": "ebs.csi.aws.com", "nodeID": "scheduler-perf-abcde", "allocatable": {"count": 39}}
    ]
    assert csi_node("n", {"nodeAllocatable": {}})["metadata"]["annotations"] == {MIGRATED_PLUGINS_ANNOTATION: ""}
    node = {"status": {"allocatable": {"cpu": "4", "pods": "110"}}}
    patch = allocatable_patch(node, spec)
    assert patch == {"status": {"allocatable": {"attachable-volumes-csi-ebs.csi.aws.com": "39"}}}
    assert allocatable_patch(node, {"nodeAllocatable": {"cpu": "4"}}) is None


def test_volume_and_go_templated_event_handling_cases_run() -> None:
    cases = ("SchedulingInTreePVs", "SchedulingMigratedInTreePVs", "SchedulingCSIPVs", "PreemptionPVs")
    templated = ("EventHandlingPodDelete", "EventHandlingPodUpdate", "EventHandlingNodeUpdate", "EventHandlingPodAdd")
    for case in (*cases, *templated):
        for workload in select(upstream_workloads(), [case]):
            assert skip_reason(workload, OURS) is None, workload.key


def test_templated_pods_carry_upstreams_signature_label_per_batch() -> None:
    from harness.bench.upstream_objects import with_signature

    template = {"metadata": {"generateName": "pod-", "labels": {"color": "blue"}}, "spec": {}}
    signed = [with_signature(template, i, 2) for i in range(5)]
    assert [p["metadata"]["labels"]["signature"] for p in signed] == [
        "signature-label-0",
        "signature-label-0",
        "signature-label-1",
        "signature-label-1",
        "signature-label-2",
    ]
    assert signed[0]["metadata"]["labels"]["color"] == "blue" and signed[0]["metadata"]["generateName"] == "pod-"
    assert template["metadata"]["labels"] == {"color": "blue"}  # the template is left as it was
