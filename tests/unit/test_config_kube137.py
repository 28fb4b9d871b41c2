"""KubeSchedulerConfiguration sections kube-scheduler 1.37 honours: leaderElection, clientConnection,
parallelism, and duplicate plugin entries refused with kube's words."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as k8s_client

from scheduler.api.fake import FakeApiClient
from scheduler.api.http import Connection, HttpApiClient, TokenBucket
from scheduler.app import Options, build_scheduler, client_connection_config, full_registry, leader_election_config
from scheduler.cli import _parser
from scheduler.config import ConfigError, parse_config, parse_duration
from tests.unit.local_http import serve

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def config(**fields: Any) -> Any:
    return parse_config({**BASE, **fields})


def build(**fields: Any) -> None:
    build_scheduler(config(**fields), full_registry(), FakeApiClient(), {})


def profile(plugins: dict[str, Any], plugin_config: list[Any] | None = None) -> list[dict[str, Any]]:
    return [{"schedulerName": "s", "plugins": plugins, "pluginConfig": plugin_config or []}]


# ---- duplicate plugins --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        (
            {"filter": {"enabled": [{"name": "NodeName"}, {"name": "NodeName"}]}},
            'profiles[0].plugins.filter.enabled[1].name: plugin "NodeName" already registered as "FilterPlugin"',
        ),
        (
            # a default plugin listed twice: kube replaces the default with one and appends the other
            {"score": {"enabled": [{"name": "ImageLocality"}, {"name": "ImageLocality", "weight": 3}]}},
            'profiles[0].plugins.score.enabled[1].name: plugin "ImageLocality" already registered as "ScorePlugin"',
        ),
        (
            {"multiPoint": {"enabled": [{"name": "NodePorts"}, {"name": "NodePorts"}]}},
            'profiles[0].plugins.multiPoint.enabled[1].name: plugin "NodePorts" already registered as '
            '"PreFilterPlugin"',
        ),
    ],
)
def test_duplicate_plugin_entries_are_refused(plugins: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(profiles=profile(plugins))
    assert str(err.value) == message


def test_duplicate_plugin_config_is_refused_as_kube_words_it() -> None:
    with pytest.raises(ConfigError) as err:
        config(profiles=profile({}, [{"name": "NodeAffinity", "args": {}}, {"name": "NodeAffinity", "args": {}}]))
    assert str(err.value) == 'profiles[0].pluginConfig[1]: Duplicate value: "NodeAffinity"'


def test_reconfiguring_a_default_plugin_once_is_no_duplicate() -> None:
    build(profiles=profile({"score": {"enabled": [{"name": "ImageLocality", "weight": 3}]}}))


# ---- parallelism ------------------------------------------------------------------------------


def test_parallelism_other_than_the_default_is_refused_not_ignored() -> None:
    config(parallelism=16)
    with pytest.raises(ConfigError, match=r"^parallelism: Unsupported value: 32: .*one thread"):
        config(parallelism=32)
    with pytest.raises(ConfigError) as err:
        config(parallelism=0)
    assert str(err.value) == "parallelism: Invalid value: 0: should be an integer value greater than zero"


# ---- leaderElection ---------------------------------------------------------------------------


def test_durations_parse_like_go() -> None:
    assert parse_duration("15s", "x") == 15.0
    assert parse_duration("1m30s", "x") == 90.0
    assert parse_duration("500ms", "x") == 0.5
    assert parse_duration("1.5h", "x") == 5400.0
    with pytest.raises(ConfigError, match='x: Invalid value: 15: must be a duration such as "15s"'):
        parse_duration(15, "x")


def test_leader_election_section_is_honoured_and_flags_override_it() -> None:
    cfg = config(
        leaderElection={
            "leaderElect": True,
            "leaseDuration": "30s",
            "renewDeadline": "20s",
            "retryPeriod": "4s",
            "resourceLock": "leases",
            "resourceName": "my-scheduler",
            "resourceNamespace": "sched",
        }
    )
    le = leader_election_config(Options(config="file.yaml"), cfg)
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 30.0, 20.0, 4.0)
    assert (le.resource_name, le.resource_namespace) == ("my-scheduler", "sched")
    flagged = leader_election_config(Options(config="file.yaml", lease_name="other", retry_period=1.0), cfg)
    assert (flagged.resource_name, flagged.retry_period, flagged.lease_duration) == ("other", 1.0, 30.0)
    off = leader_election_config(Options(), config(leaderElection={"leaderElect": False}))
    assert off.leader_elect is False
    assert leader_election_config(
        Options(leader_elect=True), config(leaderElection={"leaderElect": False})
    ).leader_elect


def test_leader_election_namespace_defaults_to_the_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "scheduling")
    assert leader_election_config(Options(), config()).resource_namespace == "scheduling"
    monkeypatch.delenv("POD_NAMESPACE")
    assert leader_election_config(Options(), config()).resource_namespace == "kube-system"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"resourceLock": "endpoints"},
            'leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases"',
        ),
        (
            {"leaseDuration": "10s", "renewDeadline": "10s"},
            'leaderElection.leaseDuration: Invalid value: "10s": must be greater than `RenewDeadline`',
        ),
        ({"retryPeriod": "0s"}, 'leaderElection.retryPeriod: Invalid value: "0s": must be greater than zero'),
        ({"leaseDuraton": "10s"}, "leaderElection.leaseDuraton: unknown field"),
    ],
)
def test_invalid_leader_election_is_refused(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        leader_election_config(Options(), config(leaderElection=section))
    assert str(err.value) == message


def test_flags_are_validated_after_they_apply() -> None:
    with pytest.raises(ConfigError, match="must be greater than `RenewDeadline`"):
        leader_election_config(Options(lease_duration=5.0), config())


# ---- clientConnection -------------------------------------------------------------------------


def test_client_connection_section_is_honoured_and_kube_api_flags_only_without_a_file() -> None:
    cfg = config(clientConnection={"kubeconfig": "/k", "qps": 20, "burst": 30, "contentType": "application/json"})
    with_file = client_connection_config(Options(config="file.yaml", kube_api_qps=999.0), cfg)
    assert (with_file.kubeconfig, with_file.qps, with_file.burst) == ("/k", 20.0, 30)
    flags = client_connection_config(Options(kube_api_qps=7.0, kube_api_burst=9), config())
    assert (flags.qps, flags.burst) == (7.0, 9)
    defaults = client_connection_config(Options(), config())
    assert (defaults.qps, defaults.burst, defaults.content_type) == (50.0, 100, "application/json")
    assert config(clientConnection={"qps": 0, "burst": 0}).client_connection.qps == 50.0


def test_protobuf_is_refused_rather_than_silently_spoken_as_json() -> None:
    with pytest.raises(ConfigError) as err:
        config(clientConnection={"contentType": "application/vnd.kubernetes.protobuf"})
    assert str(err.value) == (
        'clientConnection.contentType: Unsupported value: "application/vnd.kubernetes.protobuf": '
        'supported values: "application/json"'
    )
    with pytest.raises(ConfigError, match=r"clientConnection\.burst: Invalid value: -1: must be non-negative"):
        config(clientConnection={"burst": -1})


# ---- the token bucket -------------------------------------------------------------------------


async def test_token_bucket_allows_a_burst_then_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        await bucket.wait()
    assert slept == [0.1, 0.2]  # two over the burst: reserved 0.1 s apart
    now[0] = 10.0  # a long pause refills, but never beyond the burst
    slept.clear()
    for _ in range(4):
        await bucket.wait()
    assert slept == [0.1]


async def test_qps_really_limits_the_http_client() -> None:
    arrivals: list[float] = []

    async def handler(_: web.Request) -> web.Response:
        arrivals.append(time.monotonic())
        return web.json_response({"kind": "Status"})

    runner, host = await serve("GET", "/api", handler)
    configuration = k8s_client.Configuration(host=host)
    client = HttpApiClient(Connection(configuration), rate_limiter=TokenBucket(qps=20, burst=2))
    started = time.monotonic()
    try:
        await asyncio.gather(*(client.request("GET", "/api") for _ in range(8)))
    finally:
        await client.close()
        await runner.cleanup()
    assert len(arrivals) == 8
    # Two at once, then one every 50 ms: the last leaves at least 6 x 50 ms after the start.
    assert arrivals[-1] - started >= 0.29


def test_cli_leaves_unset_flags_unset_so_the_file_decides() -> None:
    args = _parser().parse_args(["run"])
    assert (args.leader_elect, args.leader_elect_lease_duration, args.kube_api_qps) == (None, None, None)
    args = _parser().parse_args(
        ["run", "--no-leader-elect", "--leader-elect-lease-duration", "1m", "--kube-api-qps", "5"]
    )
    assert (args.leader_elect, args.leader_elect_lease_duration, args.kube_api_qps) == (False, 60.0, 5.0)
    assert _parser().parse_args(["run", "--leader-elect-retry-period", "3"]).leader_elect_retry_period == 3.0
