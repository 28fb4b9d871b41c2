"""KubeSchedulerConfiguration: defaults, merging, and errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plugins.noderesourcesfit import NodeResourcesFit
from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.cache import Snapshot
from scheduler.config import ConfigError, default_config, load_config, parse_config
from scheduler.framework.runtime import Framework, FrameworkHandle
from scheduler.profile import build_profiles

BASE = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def frameworks(raw: dict[str, Any]) -> dict[str, Framework]:
    config = parse_config({**BASE, **raw})
    return build_profiles(config, in_tree_registry(), FrameworkHandle(FakeApiClient(), Snapshot()))


def test_defaults_match_kube_scheduler() -> None:
    config = parse_config(BASE)
    assert config.pod_initial_backoff_seconds == 1
    assert config.pod_max_backoff_seconds == 10
    assert config.percentage_of_nodes_to_score is None
    assert [p.scheduler_name for p in config.profiles] == ["secondary-scheduler"]
    fw = build_profiles(config, in_tree_registry(), FrameworkHandle(FakeApiClient(), Snapshot()))["secondary-scheduler"]
    names = fw.plugin_names()
    assert names["queueSort"] == ["PrioritySort"]
    assert names["preEnqueue"] == ["SchedulingGates", "DynamicResources", "DefaultPreemption"]
    assert names["postFilter"] == ["DynamicResources", "DefaultPreemption"]
    assert "NodeResourcesFit" in names["filter"]
    assert names["bind"] == ["DefaultBinder"]
    assert fw.score_weights["NodeResourcesFit"] == 1
    assert default_config("x").profiles[0].scheduler_name == "x"


def test_disable_all_and_enable_explicitly_with_weight() -> None:
    fws = frameworks(
        {
            "profiles": [
                {
                    "schedulerName": "a",
                    "plugins": {
                        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                        "filter": {"disabled": [{"name": "NodeResourcesFit"}]},
                    },
                }
            ]
        }
    )
    fw = fws["a"]
    assert fw.plugin_names()["score"] == ["NodeResourcesFit"]
    assert fw.score_weights["NodeResourcesFit"] == 5
    assert "NodeResourcesFit" not in fw.plugin_names()["filter"]
    assert "NodeResourcesFit" in fw.plugin_names()["preFilter"]


def test_plugin_args_reach_the_plugin() -> None:
    fws = frameworks(
        {
            "profiles": [
                {
                    "schedulerName": "packer",
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                    ],
                }
            ]
        }
    )
    plugin = next(p for p in fws["packer"].score_plugins if p.name == "NodeResourcesFit")
    assert isinstance(plugin, NodeResourcesFit)
    assert plugin.args.strategy == "MostAllocated"


def test_two_profiles() -> None:
    fws = frameworks({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]})
    assert set(fws) == {"a", "b"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"apiVersion": "v2"}, "apiVersion: Unsupported value"),
        ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds: Invalid value: 0"),
        ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}, "podMaxBackoffSeconds: Invalid value: 2"),
        ({"percentageOfNodesToScore": 120}, "percentageOfNodesToScore: Invalid value: 120"),
        ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "profiles[1].schedulerName: Duplicate"),
        ({"profiles": [{"schedulerName": "a", "plugins": {"filtr": {}}}]}, "profiles[0].plugins.filtr: unknown"),
        ({"profiles": [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{}]}}}]}, "enabled[0].name"),
        ({"bogus": 1}, "bogus: unknown field"),
    ],
)
def test_invalid_config_names_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, **raw})
    assert message in str(err.value)


def test_unknown_plugin_lists_known_names() -> None:
    with pytest.raises(ConfigError) as err:
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]})
    text = str(err.value)
    assert "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'Nope'" in text
    assert "NodeResourcesFit" in text
    assert "PrioritySort" in text


def test_plugin_enabled_at_a_point_it_does_not_extend() -> None:
    with pytest.raises(ConfigError, match="does not extend bind"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"bind": {"enabled": [{"name": "PrioritySort"}]}}}]})


def test_invalid_plugin_args_name_plugin_and_field() -> None:
    with pytest.raises(ConfigError) as err:
        frameworks(
            {
                "profiles": [
                    {
                        "schedulerName": "a",
                        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}],
                    }
                ]
            }
        )
    assert "profiles[0].pluginConfig[NodeResourcesFit].args: scoringStrategy.type: Unsupported value" in str(err.value)


def test_a_bad_eviction_timeout_is_one_line_naming_profile_plugin_and_field() -> None:
    with pytest.raises(ConfigError) as err:
        frameworks(
            {
                "profiles": [
                    {
                        "schedulerName": "a",
                        "pluginConfig": [{"name": "DefaultPreemption", "args": {"evictionTimeoutSeconds": -3}}],
                    }
                ]
            }
        )
    assert str(err.value) == (
        "profiles[0].pluginConfig[DefaultPreemption].args: evictionTimeoutSeconds: Invalid value: -3: "
        "not in valid range [0, 300]"
    )


def test_no_queue_sort_or_binder_left_is_an_error() -> None:
    with pytest.raises(ConfigError, match="exactly one queueSort"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}]})
    with pytest.raises(ConfigError, match="at least one bind plugin"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"bind": {"disabled": [{"name": "*"}]}}}]})


def test_load_config_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: mine\n"
    )
    assert load_config(good).profiles[0].scheduler_name == "mine"
