"""Prometheus, built from the Go module proxy (hack/prometheus/build.sh): promtool lints our /metrics
and unit-tests the chart's alert rules; a real Prometheus scrapes the scheduler with the
ServiceMonitor's auth and every query of the chart's Grafana dashboard returns data."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart
from harness.controlplane import REPO_ROOT, ControlPlane, ManagedProcess, free_ports
from harness.workload import api_pod, metrics_text, running_scheduler, wait_for
from tests.cluster.conftest import NodeFactory
from tests.cluster.test_serving import secure_scheduler_process

pytestmark = pytest.mark.cluster

ALERTS = chart.CHART_DIR / "files" / "alerts.yaml"
DASHBOARD = chart.CHART_DIR / "files" / "dashboard.json"


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


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


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
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    (web,) = free_ports(1)
    prometheus = ManagedProcess(
        "prometheus",
        [
            str(prometheus_bin / "prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        control_plane.log_dir / "prometheus.log",
        port=web,
    )

    def query(expr: str) -> list[Any]:
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=5) as response:
                body = json.loads(response.read())
        except OSError:
            assert prometheus.alive(), prometheus.failure("exited")
            return []
        result: list[Any] = body["data"]["result"]
        return result

    try:
        wait_for(lambda: any(r["value"][1] == "1" for r in query("up")), timeout=60, what="the target up")
        nodes(f"{namespace}-n0")
        _workload(core, namespace, scheduler_name)
        # A series' first sample is its value then: rates need a second wave scraped after that one.
        scheduled = 'sum(scheduler_schedule_attempts_total{result="scheduled"})'
        wait_for(lambda: any(r["value"][1] == "5" for r in query(scheduled)), timeout=30, what="the first wave scraped")
        _workload(core, namespace, scheduler_name, wave=1)
        queries = [
            (title, expr.replace("$job", ".+").replace("$__rate_interval", "1m"))
            for title, expr in _dashboard_queries()
        ]
        deadline = time.monotonic() + 60
        missing = queries
        while missing and time.monotonic() < deadline:
            missing = [(t, e) for t, e in missing if not any(r["value"][1] != "NaN" for r in query(e))]
            time.sleep(1)
        assert not missing, f"dashboard queries without data: {missing}"
    finally:
        prometheus.stop()
