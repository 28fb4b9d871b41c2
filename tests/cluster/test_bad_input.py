"""Bad input the apiserver accepts: pods that make no sense, nodes with nothing to give, invalid and
half-valid config files. Each gets a clear verdict (bound, or a PodScheduled=False condition whose
message names the reason or the field), at most one error line in the log per pod and no traceback,
while every sensible pod next to them keeps being scheduled."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import ControlPlane
from harness.workload import running_scheduler_process, wait_for
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

Spec = dict[str, Any]


def _requests(**amounts: str) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec["containers"][0]["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}

    return apply


def _limits_only(**amounts: str) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec["containers"][0]["resources"] = {"limits": dict(amounts)}

    return apply


def _init(cpu: str, sidecar: bool = False) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        container: dict[str, Any] = {
            "name": "init",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu}},
        }
        if sidecar:
            container["restartPolicy"] = "Always"
        spec["initContainers"] = [container]

    return apply


def _node_affinity(kind: str, *expressions: dict[str, Any], fields: bool = False) -> Callable[[Spec], None]:
    key = "matchFields" if fields else "matchExpressions"

    def apply(spec: Spec) -> None:
        term = {key: list(expressions)}
        affinity: dict[str, Any]
        if kind == "required":
            affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        else:
            affinity = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": term}]}
        spec["affinity"] = {"nodeAffinity": affinity}

    return apply


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def _spread(key: str, when: str = "DoNotSchedule", **extra: Any) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"case": "spread"}},
                **extra,
            }
        ]

    return apply


def _pod_affinity(kind: str, labels: dict[str, str], key: str, **term_extra: Any) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term_extra}
        spec["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}

    return apply


def _set(**fields: Any) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec.update(copy.deepcopy(fields))

    return apply


def _host_port(port: int) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]

    return apply


def _many_containers(count: int) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        spec["containers"] = [
            {"name": f"c{i}", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1m"}}}
            for i in range(count)
        ]

    return apply


def _both(first: Callable[[Spec], None], second: Callable[[Spec], None]) -> Callable[[Spec], None]:
    def apply(spec: Spec) -> None:
        first(spec)
        second(spec)

    return apply


HOSTNAME = "kubernetes.io/hostname"
# (case, how to spoil the pod, expected verdict: "bound" or a fragment of the PodScheduled=False message)
CASES: list[tuple[str, Callable[[Spec], None], str]] = [
    ("unknown-extended-resource", _requests(**{"example.com/widget": "1"}), "Insufficient example.com/widget"),
    ("huge-cpu", _requests(cpu="100000"), "Insufficient cpu"),
    ("huge-memory", _requests(memory="1Ei"), "Insufficient memory"),
    ("huge-ephemeral-storage", _requests(**{"ephemeral-storage": "1Ei"}), "Insufficient ephemeral-storage"),
    ("hugepages-nobody-has", _requests(cpu="10m", **{"hugepages-2Mi": "2Mi"}), "Insufficient hugepages-2Mi"),
    ("huge-cpu-limit-only", _limits_only(cpu="100000"), "Insufficient cpu"),
    ("huge-init-container", _init("100000"), "Insufficient cpu"),
    ("huge-sidecar", _init("100000", sidecar=True), "Insufficient cpu"),
    ("micro-cpu", _requests(cpu="1u"), "bound"),
    ("fractional-memory-bytes", _requests(memory="0.5"), "bound"),
    ("exponent-memory", _requests(memory="1e3"), "bound"),
    ("zero-cpu", _requests(cpu="0"), "bound"),
    ("zero-extended-resource", _requests(**{"example.com/widget": "0"}), "bound"),
    ("milli-memory", _requests(memory="1500m"), "bound"),
    ("node-selector-nobody-has", _set(nodeSelector={"no-such": "label"}), "didn't match Pod's node affinity"),
    ("required-in-nothing", _node_affinity("required", _expr("disk", "In", "floppy")), "didn't match Pod's node"),
    # As kube: an unparseable required term matches no node (parse errors ignored for compatibility).
    ("required-gt-not-a-number", _node_affinity("required", _expr("rank", "Gt", "1.5x")), "didn't match Pod's node"),
    ("required-lt-not-a-number", _node_affinity("required", _expr("rank", "Lt", "ten")), "didn't match Pod's node"),
    ("required-hostname-missing", _node_affinity("required", _expr(HOSTNAME, "DoesNotExist")), "didn't match"),
    (
        "required-field-no-such-node",
        _node_affinity("required", _expr("metadata.name", "In", "ghost-node"), fields=True),
        "6 node(s) didn't satisfy plugin(s) [NodeAffinity]",
    ),
    ("preferred-gt-not-a-number", _node_affinity("preferred", _expr("rank", "Gt", "1.5x")), "1.5x"),
    ("preferred-lt-not-a-number", _node_affinity("preferred", _expr("rank", "Lt", "abc")), "abc"),
    ("preferred-matching-nothing", _node_affinity("preferred", _expr("disk", "In", "floppy")), "bound"),
    ("preferred-exists-odd-key", _node_affinity("preferred", _expr("a.b/c-d_e", "Exists")), "bound"),
    ("spread-missing-key", _spread("no.such/zone"), "didn't match pod topology spread constraints"),
    ("spread-missing-key-schedule-anyway", _spread("no.such/zone", "ScheduleAnyway"), "bound"),
    ("spread-min-domains-unreachable", _spread(HOSTNAME, minDomains=1000), "bound"),
    ("spread-match-label-keys", _spread(HOSTNAME, matchLabelKeys=["pod-template-hash"]), "bound"),
    (
        "spread-honour-taints-and-affinity",
        _spread(HOSTNAME, nodeAffinityPolicy="Honor", nodeTaintsPolicy="Honor"),
        "bound",
    ),
    ("affinity-to-nobody", _pod_affinity("podAffinity", {"no": "one"}, HOSTNAME), "didn't match pod affinity rules"),
    (
        "affinity-empty-namespace-selection",
        _pod_affinity("podAffinity", {"no": "one"}, HOSTNAME, namespaceSelector={"matchLabels": {"none": "x"}}),
        "didn't match pod affinity rules",
    ),
    ("anti-affinity-odd-topology-key", _pod_affinity("podAntiAffinity", {"case": "x"}, "no.such/key"), "bound"),
    ("host-port-a", _host_port(8080), "bound"),
    ("host-port-b", _host_port(8080), "bound"),
    ("fifty-containers", _many_containers(50), "bound"),
    (
        "tolerates-everything",
        _set(tolerations=[{"operator": "Exists"}]),
        "bound",
    ),
    (
        "selector-and-affinity-disagree",
        _both(_set(nodeSelector={"pool": "a"}), _node_affinity("required", _expr("pool", "In", "b"))),
        "didn't match Pod's node affinity",
    ),
    ("node-name-of-a-ghost", _set(nodeName="ghost-node"), "bound"),
    ("gated", _set(schedulingGates=[{"name": "example.com/wait"}]), "scheduling gates"),
    ("cpu-exponent", _requests(cpu="1e-3"), "bound"),
    ("zero-ephemeral-storage", _requests(**{"ephemeral-storage": "0"}), "bound"),
    (
        "preferred-empty-term",
        _set(
            affinity={
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {}}]}
            }
        ),
        "bound",
    ),
    ("required-one-hostname", _node_affinity("required", _expr(HOSTNAME, "In", "PLACEHOLDER-n0")), "bound"),
    ("anti-self-1", _pod_affinity("podAntiAffinity", {"anti": "self"}, HOSTNAME), "bound"),
    ("anti-self-2", _pod_affinity("podAntiAffinity", {"anti": "self"}, HOSTNAME), "bound"),
    ("anti-self-3", _pod_affinity("podAntiAffinity", {"anti": "self"}, HOSTNAME), "bound"),
    ("spread-hostname-schedule-anyway", _spread(HOSTNAME, "ScheduleAnyway"), "bound"),
    ("many-tolerations", _set(tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(40)]), "bound"),
    ("very-long-label", lambda spec: None, "bound"),
]


def _pod(name: str, scheduler_name: str, spoil: Callable[[Spec], None], namespace: str = "") -> dict[str, Any]:
    spec: Spec = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
    }
    spoil(spec)
    labels = {"case": "spread" if "spread" in name else name[:63]}
    if name.startswith("anti-self"):
        labels["anti"] = "self"
    if name == "very-long-label":
        labels["x" * 63] = "y" * 63
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}
    return dict(json.loads(json.dumps(pod).replace("PLACEHOLDER", namespace)))


def _message(pod: dict[str, Any]) -> str | None:
    """ "bound", the PodScheduled=False message, or None while undecided."""
    if (pod.get("spec") or {}).get("nodeName"):
        return "bound"
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return None


def test_pods_that_make_no_sense_get_one_clear_verdict_each_and_the_rest_keep_scheduling(
    control_plane: ControlPlane, core: Any, namespace: str, nodes: NodeFactory, scheduler_name: str
) -> None:
    for i in range(4):
        nodes(f"{namespace}-n{i}", cpu="4", memory="16Gi", labels={HOSTNAME: f"{namespace}-n{i}"})
    nodes(f"{namespace}-zero", cpu="0", memory="0", pods="110")  # nothing to give
    nodes(f"{namespace}-nopods", cpu="4", memory="16Gi", pods="0")
    with running_scheduler_process(control_plane, scheduler_name) as process:
        for name, spoil, _ in CASES:
            status, body = control_plane.http_request(
                "POST", f"/api/v1/namespaces/{namespace}/pods", _pod(name, scheduler_name, spoil, namespace)
            )
            assert status == 201, f"the apiserver refused case {name}: {body[:300]!r}"
        for i in range(20):
            status, body = control_plane.http_request(
                "POST", f"/api/v1/namespaces/{namespace}/pods", _pod(f"sensible-{i}", scheduler_name, lambda s: None)
            )
            assert status == 201, body

        def verdicts() -> dict[str, str] | None:
            status, body = control_plane.http_request("GET", f"/api/v1/namespaces/{namespace}/pods")
            items = json.loads(body)["items"] if status == 200 else []
            found = {p["metadata"]["name"]: _message(p) for p in items}
            if len(found) < len(CASES) + 20 or any(v is None for v in found.values()):
                return None
            return {k: str(v) for k, v in found.items()}

        verdict = wait_for(verdicts, timeout=90, what="a verdict for every pod", interval=0.5)
        log_text = process.log_path.read_text(errors="replace")
    wrong = {
        name: verdict[name]
        for name, _, expected in CASES
        if (expected == "bound") != (verdict[name] == "bound") or expected not in verdict[name]
    }
    assert wrong == {}, json.dumps(wrong, indent=1)
    assert all(verdict[f"sensible-{i}"] == "bound" for i in range(20))
    bound_nodes = {
        p.spec.node_name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name != "ghost-node"
    }
    assert f"{namespace}-zero" not in bound_nodes and f"{namespace}-nopods" not in bound_nodes
    assert "Traceback" not in log_text
    for name, _, _ in CASES:
        errors = [
            line for line in log_text.splitlines() if f'"{namespace}/{name}"' in line and '"level": "error"' in line
        ]
        assert len(errors) <= 1, f"{name} logged {len(errors)} errors:\n" + "\n".join(errors[:3])


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("profiles: [unclosed", "not valid YAML"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: fine\n- schedulerName: broken\n  plugins:\n    filter:\n"
            "      enabled:\n      - name: NoSuchPlugin\n",
            "profiles[1].plugins.filter.enabled[0].name: unknown plugin 'NoSuchPlugin'",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "percentageOfNodesToScore: 101\n",
            "percentageOfNodesToScore: Invalid value: 101",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n"
            "    args:\n      scoringStrategy:\n        type: Random\n",
            "scoringStrategy.type: Unsupported value",
        ),
    ],
)
def test_an_invalid_config_file_stops_the_scheduler_with_one_line(
    control_plane: ControlPlane, tmp_path: Path, config: str, message: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", f"--kubeconfig={control_plane.kubeconfig}", f"--config={path}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr


def test_a_node_with_nothing_to_give_is_never_chosen(core: Any, namespace: str, nodes: NodeFactory) -> None:
    # make_node itself must accept the odd values (the cluster test above relies on them).
    name = f"{namespace}-empty"
    nodes(name, cpu="0", memory="0", pods="0")
    assert core.read_node(name).status.allocatable == {"cpu": "0", "memory": "0", "pods": "0"}
