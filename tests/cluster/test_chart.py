"""charts/secondary-scheduler: helm lint, the values that matter, deploy/ in step with `helm template`.

Needs the helm the control-plane build makes (hence the cluster mark); the manifests themselves are
applied to a real apiserver in test_rbac.py and test_deployment.py.
"""

from __future__ import annotations

import pytest
import yaml

from harness import chart
from harness.controlplane import ControlPlaneError
from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler
from scheduler.config import parse_config

pytestmark = pytest.mark.cluster

DEPLOY_FILE = chart.DEPLOY_DIR / "secondary-scheduler.yaml"


def test_helm_lint_is_clean() -> None:
    out = chart.helm("lint", "--strict", str(chart.CHART_DIR))
    assert "0 chart(s) failed" in out, out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_deploy_manifests_are_the_chart_rendered_with_default_values() -> None:
    expected = chart.deploy_manifests()
    assert DEPLOY_FILE.read_text() == expected, "deploy/ drifted from the chart: run `make deploy` and commit"


def test_lease_defaults_to_the_release_never_kube_scheduler() -> None:
    docs = chart.documents(chart.render("blue", "team-a"))
    args = chart.scheduler_container(docs)["args"]
    assert "--leader-elect-resource-name=blue-secondary-scheduler" in args
    assert "--leader-elect-resource-namespace=team-a" in args
    config = yaml.safe_load(chart.config_file(docs))
    assert config["leaderElection"]["resourceName"] == "blue-secondary-scheduler"
    assert config["leaderElection"]["resourceNamespace"] == "team-a"
    role = chart.find(docs, "Role", "blue-secondary-scheduler-leader-election")
    assert role["metadata"]["namespace"] == "team-a"
    assert role["rules"][1]["resourceNames"] == ["blue-secondary-scheduler"]
    with pytest.raises(ControlPlaneError, match="must not be kube-scheduler"):
        chart.render(values={"leaderElection": {"resourceName": "kube-scheduler"}})


def test_values_reach_the_deployment() -> None:
    values = {
        "replicaCount": 3,
        "image": {"repository": "example/sched", "tag": "v9"},
        "nodeSelector": {"role": "control"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "serving": {"plainHTTP": True, "port": 8080},
        "leaderElection": {"enabled": False},
        "podDisruptionBudget": {"maxUnavailable": 1},
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
    }
    docs = chart.documents(chart.render(values=values))
    deployment = chart.find(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = chart.scheduler_container(docs)
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "example/sched:v9"
    assert pod["nodeSelector"] == {"role": "control"}
    assert pod["tolerations"] == values["tolerations"]
    assert pod["topologySpreadConstraints"] == values["topologySpreadConstraints"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert container["resources"] == values["resources"]
    assert "--serve-plain-http" in container["args"] and "--secure-port=8080" in container["args"]
    assert "--no-leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert not [d for d in docs if d["kind"] == "Role"]
    assert chart.find(docs, "PodDisruptionBudget")["spec"] == {
        "maxUnavailable": 1,
        "selector": deployment["spec"]["selector"],
    }
    monitor = chart.find(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["scheme"] == "http"
    assert chart.find(docs, "PrometheusRule")["spec"]["groups"][0]["name"] == "secondary-scheduler"


def test_feature_gates_reach_the_args_and_generic_workload_the_role() -> None:
    docs = chart.documents(chart.render(values={"featureGates": {"GenericWorkload": True, "DRADeviceTaints": True}}))
    assert "--feature-gates=DRADeviceTaints=true,GenericWorkload=true" in chart.scheduler_container(docs)["args"]
    role = chart.find(docs, "ClusterRoleBinding")["roleRef"]["name"]
    rules = chart.find(docs, "ClusterRole", role)["rules"]
    assert {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "verbs": ["list", "watch"]} in rules
    assert {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch"]} in rules
    default = chart.documents(chart.render())
    assert not [a for a in chart.scheduler_container(default)["args"] if a.startswith("--feature-gates")]
    assert "scheduling.k8s.io" not in str(chart.find(default, "ClusterRole", role)["rules"])


def test_configured_profiles_render_into_a_configuration_the_scheduler_accepts() -> None:
    profiles = [
        {
            "schedulerName": "packer",
            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
            ],
            "percentageOfNodesToScore": 50,
        },
        {"schedulerName": "spreader"},
    ]
    docs = chart.documents(chart.render(values={"config": {"profiles": profiles}}))
    raw = yaml.safe_load(chart.config_file(docs))
    assert raw["profiles"] == profiles
    config = parse_config(raw)
    scheduler = build_scheduler(config, in_tree_registry(), FakeApiClient(), {})  # plugin names and args too
    assert set(scheduler.frameworks) == {"packer", "spreader"}
    default = yaml.safe_load(chart.config_file(chart.documents(chart.render())))
    assert default["profiles"] == [{"schedulerName": "secondary-scheduler"}]
    assert parse_config(default).profiles[0].scheduler_name == "secondary-scheduler"


# scheduler-plugins' manifests/coscheduling/scheduler-config.yaml profile, as an operator brings it.
AS_A_SECOND_SCHEDULER_PROFILE = {
    "schedulerName": "gangs",
    "plugins": {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
    },
    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
}


def test_coscheduling_values_grant_podgroup_reads_and_install_the_crd() -> None:
    assert "scheduling.x-k8s.io" not in chart.render()
    values = {
        "coscheduling": {"enabled": True, "installCRD": True},
        "config": {"profiles": [AS_A_SECOND_SCHEDULER_PROFILE]},
    }
    docs = chart.documents(chart.render(values=values))
    crd = chart.find(docs, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    rules = [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"]]
    assert {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["list", "watch"]} in rules
    config = parse_config(yaml.safe_load(chart.config_file(docs)))
    scheduler = build_scheduler(config, in_tree_registry(), FakeApiClient(), {})
    assert scheduler.frameworks["gangs"].queue_sort.name == "Coscheduling"
    # RBAC without the CRD: for clusters where scheduler-plugins or a training operator installed it.
    docs = chart.documents(chart.render(values={"coscheduling": {"enabled": True}}))
    assert not [d for d in docs if d["kind"] == "CustomResourceDefinition"]
