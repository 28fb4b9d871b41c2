"""The benchmark runs Go-templated workloads as scheduler_perf does: objects rendered per index with
the op's templateParams, label-selector barriers, operators' own config folders, resumable runs."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from harness.bench.schedulers import SCHEDULERS
from harness.bench.upstream import (
    UpstreamError,
    perf_root,
    resolve_template_params,
    select,
    skip_reason,
    upstream_workloads,
    user_workloads,
)
from harness.bench.upstream_run import Executor, PodTracker, _record, _resumed, main
from plugins.registry import IN_TREE

OURS = [module.NAME for module in IN_TREE if not getattr(module, "STAND_IN", False)]


def _executor(key: str) -> Executor:
    (workload,) = select(upstream_workloads(), [key])
    return Executor(None, workload, SCHEDULERS[0], None, 1.0, 10.0)  # type: ignore[arg-type]


def test_template_params_resolve_from_the_workload_with_yaml_defaults() -> None:
    params = {"a": "$x", "b": "$missing|64", "c": "$gone|", "d": 7, "e": "$word|plain text"}
    assert resolve_template_params(params, {"x": 3}) == {"a": 3, "b": 64, "c": None, "d": 7, "e": "plain text"}
    with pytest.raises(UpstreamError, match="'nothing' not found"):
        resolve_template_params({"a": "$nothing"}, {})


def test_a_go_template_makes_one_object_per_index_and_a_plain_file_one_shared_body() -> None:
    executor = _executor("EventHandlingNodeUpdate/100Nodes_1000Pods")
    update = next(op for op in executor.case.ops if op["opcode"] == "updateAny")
    nodes = executor.objects(update["templatePath"], 3)
    assert [n["metadata"]["name"] for n in nodes] == [
        "node-unschedulable-0",
        "node-unschedulable-1",
        "node-unschedulable-2",
    ]
    plain = executor.objects("../templates/node-default.yaml", 3)
    assert plain[0] is plain[1] is plain[2]


def test_an_updated_pod_keeps_the_runs_scheduler_name() -> None:
    executor = _executor("EventHandlingPodUpdate/1Node_1000Pods")
    updates = [op for op in executor.case.ops if op["opcode"] == "updateAny"]
    pods = [body for op in updates for _, body in executor.update_requests(op) if body.get("kind") == "Pod"]
    assert pods
    assert {body["spec"]["schedulerName"] for body in pods} == {SCHEDULERS[0].scheduler_name}
    targets, body = executor.update_requests(updates[0])[0]
    assert targets[0].endswith(body["metadata"]["name"]) and targets[1] == targets[0] + "/status"


def test_dra_templates_render_with_their_params_and_defaults() -> None:
    root = perf_root()
    executor = _executor("SchedulingBasic/500Nodes")
    relative = str(root / "dra" / "templates" / "resourceslice-list-attributes-devices.yaml")
    (first,) = executor.objects(relative, 1, {"numDevices": 3, "numListValues": 2, "numNonMatchingDevices": 1})
    devices = first["spec"]["devices"]
    assert [d["name"] for d in devices] == ["device-0", "device-1", "device-2"]
    strings = [d["attributes"]["dra.example.com/match"]["strings"] for d in devices]
    assert strings[0] == ["device-0-value-0", "device-0-value-1"]
    assert strings[1] == ["shared-value", "device-1-value-0", "device-1-value-1"]


def test_label_selector_barriers_count_only_matching_pods() -> None:
    tracker = PodTracker()

    def pod(name: str, kind: str, node: str = "", attempted: bool = False) -> dict[str, Any]:
        status = {"conditions": [{"type": "PodScheduled", "status": "False"}]} if attempted else {}
        meta = {"namespace": "ns", "name": name, "labels": {"type": kind}}
        return {"metadata": meta, "spec": {"nodeName": node}, "status": status}

    tracker.on_event("ADDED", pod("a", "unsched", node="n1"), 0.0)
    tracker.on_event("ADDED", pod("b", "unsched", attempted=True), 0.0)
    tracker.on_event("ADDED", pod("c", "blocker", node="n2"), 0.0)
    assert tracker.scheduled("ns") == 2
    assert tracker.scheduled("ns", {"type": "unsched"}) == 1
    assert tracker.attempted_count("ns", {"type": "unsched"}) == 2
    assert tracker.attempted_count("ns", {"type": "blocker"}) == 1
    tracker.on_event("DELETED", pod("a", "unsched", node="n1"), 0.0)
    assert tracker.attempted_count("ns", {"type": "unsched"}) == 1


def test_an_operators_config_folder_reaches_upstreams_templates(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "pod-gpu.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: gpu-{{.Index}}-\nspec:\n  containers: []\n"
    )
    (tmp_path / "performance-config.yaml").write_text(
        """
- name: MyShape
  workloadTemplate:
  - opcode: createNodes
    countParam: $nodes
    nodeTemplatePath: ../templates/node-default.yaml
  - opcode: createPods
    countParam: $pods
    podTemplatePath: templates/pod-gpu.yaml
    collectMetrics: true
  workloads:
  - name: small
    labels: [mine]
    params: {nodes: 2, pods: 3}
"""
    )
    (workload,) = user_workloads(tmp_path)
    assert workload.key == "MyShape/small"
    assert workload.case.path("../templates/node-default.yaml") == (perf_root() / "templates" / "node-default.yaml")
    assert workload.case.path("templates/pod-gpu.yaml") == tmp_path / "templates" / "pod-gpu.yaml"
    assert skip_reason(workload, OURS) is None
    with pytest.raises(UpstreamError, match="no scheduler_perf-format config"):
        user_workloads(tmp_path / "templates")


def test_resume_keeps_the_first_runs_start_and_its_rows_as_written_and_reruns_errors(tmp_path: Path) -> None:
    kept = {"workload": "A/x", "scheduler": "ours", "commit": "aaaaaaa", "measured_at": "2026-12-01T09:30:00+01:00"}
    failed = {"workload": "A/x", "scheduler": "kube", "commit": "aaaaaaa", "error": "TimeoutError"}
    path = tmp_path / "results.json"
    first = {"date": "2026-12-01", "started": "2026-12-01T09:00:00+01:00", "commit": "aaaaaaa"}
    fresh: dict[str, Any] = {
        "date": "2026-12-01",
        "started": "2026-12-01T12:00:00+01:00",
        "commit": "bbbbbbb",
        "scale": 0.5,
        "kubernetes": "v1.37.2",
        "runs": [],
    }
    assert _resumed(tmp_path / "absent.json", fresh) == fresh
    path.write_text(json.dumps({**fresh, **first, "runs": [kept, failed]}))
    results = _resumed(path, fresh)
    assert {k: results[k] for k in first} == first
    assert results["resumed"] == ["2026-12-01T12:00:00+01:00"]
    assert results["runs"] == [kept]  # the errored row is run again

    before = datetime.datetime.now().astimezone().replace(microsecond=0)
    _record(results, {"workload": "A/x", "scheduler": "kube", "commit": "bbbbbbb"}, path)
    written = json.loads(path.read_text())
    assert {k: written[k] for k in first} == first
    assert written["runs"][0] == kept
    measured = datetime.datetime.fromisoformat(written["runs"][1]["measured_at"])
    assert measured.utcoffset() is not None and before <= measured <= datetime.datetime.now().astimezone()

    # A second resume keeps every row and lists both resumes.
    again = _resumed(path, {**fresh, "started": "2026-12-01T15:00:00+01:00"})
    assert again["started"] == first["started"] and again["runs"] == written["runs"]
    assert again["resumed"] == ["2026-12-01T12:00:00+01:00", "2026-12-01T15:00:00+01:00"]
    with pytest.raises(UpstreamError, match=r"scale 0\.5, this run 1\.0"):
        _resumed(path, {**fresh, "scale": 1.0})


def test_list_of_an_operators_folder_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text(
        "- name: Only\n  workloadTemplate:\n  - opcode: createNodes\n    count: 1\n  workloads:\n  - name: w\n"
    )
    assert main(["--config-dir", str(tmp_path), "--list"]) == 0
    assert "run  Only/w" in capsys.readouterr().out


def test_the_documented_example_folder_loads_and_renders() -> None:
    folder = Path(__file__).resolve().parents[2] / "harness" / "bench" / "examples" / "gpu-shape"
    workloads = {w.key: w for w in user_workloads(folder)}
    assert sorted(workloads) == ["MyGpuShape/20Nodes_40Pods", "MyGpuShape/500Nodes_2000Pods"]
    small = workloads["MyGpuShape/20Nodes_40Pods"]
    assert skip_reason(small, OURS) is None
    executor = Executor(None, small, SCHEDULERS[0], None, 1.0, 10.0)  # type: ignore[arg-type]
    pods = executor.objects("pod-with-zone-spread.yaml", 5)
    assert [p["metadata"]["labels"]["app"] for p in pods] == ["app-0", "app-1", "app-2", "app-3", "app-0"]


def test_the_peers_waiting_example_loads_and_waits_on_its_deletions() -> None:
    folder = Path(__file__).resolve().parents[2] / "harness" / "bench" / "examples" / "peers-waiting"
    workloads = {w.key: w for w in user_workloads(folder)}
    assert sorted(workloads) == [
        "PeersWaitingForCapacity/1000Nodes_4000Fillers_1000Waiting",
        "PeersWaitingForCapacity/50Nodes_200Fillers_100Waiting",
    ]
    small = workloads["PeersWaitingForCapacity/50Nodes_200Fillers_100Waiting"]
    assert skip_reason(small, OURS) is None
    opcodes = [op["opcode"] for op in small.case.ops]
    assert opcodes.index("deletePods") < len(opcodes) - 2  # the last barrier waits for the waiting pods
    executor = Executor(None, small, SCHEDULERS[0], None, 1.0, 10.0)  # type: ignore[arg-type]
    (pod,) = executor.objects("pod-one-cpu.yaml", 1)
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert "priority" not in pod["spec"] and "priorityClassName" not in pod["spec"]
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0  # deleted at once without a kubelet
