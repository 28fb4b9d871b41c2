"""Prometheus, built from the Go module proxy (hack/prometheus/build.sh): promtool lints our /metrics
and unit-tests the chart's alert rules; a real Prometheus scrapes the scheduler with the
ServiceMonitor's auth and every query of the chart's Grafana dashboard returns data; every selector
of every PromQL expression the chart renders (and every input series of the alert unit tests)
selects series scraped from a live scheduler, and no expression turns an absent series into a
constant."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart
from harness.controlplane import REPO_ROOT, ControlPlane, ManagedProcess, free_ports
from harness.workload import api_pod, metric_value, metrics_text, running_scheduler, wait_for
from tests.cluster.conftest import NodeFactory
from tests.cluster.test_serving import secure_scheduler_process

pytestmark = pytest.mark.cluster

ALERTS = chart.CHART_DIR / "files" / "alerts.yaml"
ALERTS_TEST = chart.CHART_DIR / "tests" / "alerts_test.yaml"


@pytest.fixture(scope="module")
def prometheus_bin() -> Path:
    proc = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "prometheus" / "build.sh")],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, "hack/prometheus/build.sh failed; its log is above"
    return Path(proc.stdout.strip().splitlines()[-1])


def _promtool(bin_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "promtool"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=chart.CHART_DIR,
    )


def test_both_binaries_carry_the_build_tags_their_cache_folder_is_named_by(prometheus_bin: Path) -> None:
    # A cache folder named by version alone would hand an old untagged build to these tests.
    folder = prometheus_bin.parent.name
    assert folder.endswith("-remove_all_sd"), folder
    for name in ("prometheus", "promtool"):
        info = subprocess.run(
            ["go", "version", "-m", str(prometheus_bin / name)], capture_output=True, text=True, check=True
        )
        tags = [line.split("=", 1)[1] for line in info.stdout.splitlines() if line.strip().startswith("build\t-tags=")]
        assert tags == ["remove_all_sd"], info.stdout


def test_alert_rules_check_and_unit_tests(prometheus_bin: Path) -> None:
    check = _promtool(prometheus_bin, "check", "rules", str(ALERTS))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 4 rules found" in check.stdout, check.stdout
    tested = _promtool(prometheus_bin, "test", "rules", "tests/alerts_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout, tested.stdout


def _workload(core: Any, namespace: str, scheduler_name: str, wave: int = 0) -> None:
    names = [f"web-{wave}-{i}" for i in range(5)]
    for name in names:
        core.create_namespaced_pod(namespace, api_pod(name, scheduler_name))
    core.create_namespaced_pod(namespace, api_pod(f"too-big-{wave}", scheduler_name, cpu="64"))
    wait_for(
        lambda: all(core.read_namespaced_pod(name, namespace).spec.node_name for name in names),
        timeout=60,
        what="5 pods bound",
    )


def test_promtool_check_metrics_passes_on_our_metrics(
    prometheus_bin: Path,
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
) -> None:
    nodes(f"{namespace}-n0")
    with running_scheduler(control_plane, scheduler_name) as port:
        _workload(core, namespace, scheduler_name)
        text = metrics_text(port)
    assert "scheduler_schedule_attempts_total" in text
    linted = _promtool(prometheus_bin, "check", "metrics", stdin=text)
    assert linted.returncode == 0 and not linted.stdout.strip() and not linted.stderr.strip(), (
        linted.stdout + linted.stderr
    )


def _grafana(expr: str) -> str:
    """A dashboard expression as Grafana sends it: every variable's "All" (.+), 1m rate windows."""
    return re.sub(r"\$\{?\w+\}?", ".+", re.sub(r"\$__\w+", "1m", expr))


def _chart_promql(plane: ControlPlane) -> list[tuple[str, str]]:
    """Every PromQL expression the chart renders with its rules and dashboard on, Grafana's variables
    substituted."""
    values = {"prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}}
    return [(where, _grafana(expr)) for where, expr in chart.promql(chart.documents(chart.render(values=values)))]


Api = Callable[..., Any]


@contextlib.contextmanager
def _running_prometheus(bin_dir: Path, plane: ControlPlane, workdir: Path, config: Mapping[str, Any]) -> Iterator[Api]:
    """Prometheus with `config`; yields api(path, **params): the `data` of GET /api/v1/<path>, None
    while Prometheus is still starting. Any other error answer (a query it cannot parse) fails the
    test."""
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(dict(config)))
    (web,) = free_ports(1)
    prometheus = ManagedProcess(
        "prometheus",
        [
            str(bin_dir / "prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        plane.log_dir / f"prometheus-{workdir.name}.log",
        port=web,
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def api(path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{web}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            with opener.open(url, timeout=5) as response:
                return json.loads(response.read())["data"]
        except urllib.error.HTTPError as exc:
            if exc.code == 503:  # the web server is up before the TSDB is open
                return None
            raise AssertionError(f"{path} {params}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
        except OSError:
            assert prometheus.alive(), prometheus.failure("exited")
            return None

    try:
        wait_for(lambda: api("query", query="up") is not None, timeout=60, what="Prometheus answering")
        yield api
    finally:
        prometheus.stop()


@pytest.fixture
def secure_scheduler(control_plane: ControlPlane, scheduler_name: str) -> Iterator[int]:
    with secure_scheduler_process(control_plane, scheduler_name) as port:
        yield port


def test_prometheus_scrapes_like_the_service_monitor_and_every_dashboard_query_has_data(
    prometheus_bin: Path,
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    secure_scheduler: int,
    tmp_path: Path,
) -> None:
    # The ServiceMonitor's auth: Prometheus' own service-account token, bound to the chart's
    # metrics-reader ClusterRole; the self-signed serving certificate is not verified.
    token = tmp_path / "token"
    token.write_text(chart.metrics_reader_token(control_plane, namespace, "prometheus"))
    monitor = chart.find(
        chart.documents(chart.render(values={"serviceMonitor": {"enabled": True}})),
        "ServiceMonitor",
    )
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {
                "job_name": "secondary-scheduler-metrics",
                "scheme": endpoint["scheme"],
                "metrics_path": endpoint["path"],
                "authorization": {"credentials_file": str(token)},
                "tls_config": {"insecure_skip_verify": endpoint["tlsConfig"]["insecureSkipVerify"]},
                "static_configs": [{"targets": [f"127.0.0.1:{secure_scheduler}"]}],
            }
        ],
    }
    with _running_prometheus(prometheus_bin, control_plane, tmp_path, config) as api:

        def query(expr: str) -> list[Any]:
            data = api("query", query=expr)
            return list(data["result"]) if data else []

        wait_for(lambda: any(r["value"][1] == "1" for r in query("up")), timeout=60, what="the target up")
        nodes(f"{namespace}-n0")
        _workload(core, namespace, scheduler_name)
        # A series' first sample is its value then: rates need a second wave scraped after that one.
        scheduled = 'sum(scheduler_schedule_attempts_total{result="scheduled"})'
        wait_for(lambda: any(r["value"][1] == "5" for r in query(scheduled)), timeout=30, what="the first wave scraped")
        _workload(core, namespace, scheduler_name, wave=1)
        queries = [(where, expr) for where, expr in _chart_promql(control_plane) if where.startswith("panel ")]
        deadline = time.monotonic() + 60
        missing = queries
        while missing and time.monotonic() < deadline:
            missing = [(t, e) for t, e in missing if not any(r["value"][1] != "NaN" for r in query(e))]
            time.sleep(1)
        assert not missing, f"dashboard queries without data: {missing}"


REFUSED = "bind-refused"


@contextlib.contextmanager
def _bindings_refused(plane: ControlPlane, namespace: str) -> Iterator[None]:
    """The apiserver refuses to bind pods named bind-refused* in `namespace` (a ValidatingAdmissionPolicy
    on pods/binding): a real Bind failure, as a scheduler meets one when the API says no."""
    name = f"refuse-binding-{namespace}"
    admission = "/apis/admissionregistration.k8s.io/v1"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}
                ]
            },
            "validations": [
                {"expression": f"!object.metadata.name.startsWith('{REFUSED}')", "message": "binding refused by test"}
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
        },
    }
    for kind, body in (("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)):
        status, answer = plane.http_request("POST", f"{admission}/{kind}", body)
        assert status == 201, answer.decode(errors="replace")
    try:
        # Policies take effect asynchronously: bind a pod that does not exist until the policy,
        # which the apiserver checks before it looks the pod up, answers instead of the 404.
        probe = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"{REFUSED}-probe"}}
        probe["target"] = {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}
        path = f"/api/v1/namespaces/{namespace}/pods/{REFUSED}-probe/binding"
        wait_for(
            lambda: b"binding refused by test" in plane.http_request("POST", path, probe)[1],
            timeout=30,
            what="the binding policy in force",
        )
        yield
    finally:
        plane.http_request("DELETE", f"{admission}/validatingadmissionpolicybindings/{name}")
        plane.http_request("DELETE", f"{admission}/validatingadmissionpolicies/{name}")


def _selectors(node: Any) -> Iterator[str]:
    """Every vector and matrix selector of a parse_query AST, as a series selector."""
    if isinstance(node, list):
        for item in node:
            yield from _selectors(item)
    elif isinstance(node, dict):
        if node.get("type") in ("vectorSelector", "matrixSelector"):
            yield "{" + ", ".join(f"{m['name']}{m['type']}{json.dumps(m['value'])}" for m in node["matchers"]) + "}"
        else:
            for value in node.values():
                yield from _selectors(value)


def _constant_fallbacks(node: Any) -> Iterator[str]:
    """Every binary `or` in a parse_query AST whose right side is a number literal or a `vector(...)`
    call: the masking shape the chart must not contain (it would show an absent series as a value);
    the test fails on any it yields."""
    if isinstance(node, list):
        for item in node:
            yield from _constant_fallbacks(item)
    elif isinstance(node, dict):
        if node.get("type") == "binaryExpr" and node["op"] == "or":
            rhs = node["rhs"]
            while rhs.get("type") == "parenExpr":
                rhs = rhs["expr"]
            if rhs.get("type") == "numberLiteral" or (rhs.get("type") == "call" and rhs["func"]["name"] == "vector"):
                yield json.dumps(rhs)
        for value in node.values():
            yield from _constant_fallbacks(value)


# Labels whose values name a deployment (the target, the lease, the profile), not a kind of series.
IDENTITY_LABELS = {"job", "instance", "name", "profile"}


def test_the_charts_promql_reads_only_series_a_live_scheduler_exports_and_turns_none_into_a_constant(
    prometheus_bin: Path,
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    tmp_path: Path,
) -> None:
    expressions = _chart_promql(control_plane)
    rules = {where.removeprefix("rule "): expr for where, expr in expressions if where.startswith("rule ")}
    assert set(rules) >= {"SecondarySchedulerBindErrors", "SecondarySchedulerDown", "SecondarySchedulerNoLeader"}
    nodes(f"{namespace}-n0")
    # Leader election on (its own lease): leader_election_master_status exists only then.
    lease = (f"--leader-elect-resource-namespace={namespace}", f"--leader-elect-resource-name={scheduler_name}")
    with (
        _bindings_refused(control_plane, namespace),
        running_scheduler(control_plane, scheduler_name, extra_args=lease) as port,
        _running_prometheus(
            prometheus_bin,
            control_plane,
            tmp_path,
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "secondary-scheduler-metrics", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                ],
            },
        ) as api,
    ):
        # Scheduled pods, an unschedulable one and one whose Bind the apiserver refuses (retried with
        # backoff): the series created lazily on those paths exist.
        _workload(core, namespace, scheduler_name)
        core.create_namespaced_pod(namespace, api_pod(REFUSED, scheduler_name))

        def firing(rule: str) -> list[Any]:
            data = api("query", query=rules[rule])
            return [r["metric"] for r in data["result"]] if data else []

        # The bind-errors alert's condition holds on what Prometheus scraped (rates: the refused bind
        # failed at least twice); the healthy scheduler's down and no-leader conditions do not.
        wait_for(lambda: firing("SecondarySchedulerBindErrors"), timeout=90, what="the bind-errors condition")
        assert firing("SecondarySchedulerBindErrors") == [{"job": "secondary-scheduler-metrics"}]
        assert firing("SecondarySchedulerDown") == [] and firing("SecondarySchedulerNoLeader") == []
        assert metric_value(port, "scheduler_schedule_attempts_total", result="error") >= 2

        unmatched: list[tuple[str, str]] = []
        fallbacks: list[tuple[str, str]] = []
        for where, expr in expressions:
            ast = api("parse_query", query=expr)
            unmatched += [(where, s) for s in _selectors(ast) if not api("series", **{"match[]": s})]
            fallbacks += [(where, f) for f in _constant_fallbacks(ast)]
        assert not unmatched, f"selectors no series a live scheduler exports matches: {unmatched}"
        assert not fallbacks, f"constant fallbacks: {fallbacks}"

        # The alert unit tests feed series shaped as the scheduler exports them: same name, same
        # label names, same values but for the deployment's own names.
        made_up: list[str] = []
        for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"]:
            for given in test["input_series"]:
                vector = api("parse_query", query=given["series"])
                assert vector["type"] == "vectorSelector", given
                labels = {m["name"] for m in vector["matchers"]} - {"__name__"}
                kind = {**vector, "matchers": [m for m in vector["matchers"] if m["name"] not in IDENTITY_LABELS]}
                (selector,) = _selectors(kind)
                live = api("series", **{"match[]": selector}) or []
                if not any(set(series) - {"__name__"} == labels for series in live):
                    made_up.append(f"{test['name']}: {given['series']} (live: {live[:3]})")
        assert not made_up, "alert test series no live scheduler exports:\n" + "\n".join(made_up)
