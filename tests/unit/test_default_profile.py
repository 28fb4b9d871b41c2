"""The default profile equals kube-scheduler 1.37.2's, for the plugins this scheduler has.

Expected lists: pkg/scheduler/apis/config/testing/defaults/defaults.go (PluginsV1 and
ExpandedPluginsV1) of v1.37.2, which reflect applyFeatureGates with 1.37's default gates
(NodeDeclaredFeatures appended; DynamicResources, weight 2, before DefaultPreemption;
InPlacePodVerticalScalingSchedulerPreemption's DeferredPodScheduling, GenericWorkload's
GangScheduling and TopologyAwareWorkloadScheduling's plugins are off by default).
"""

from __future__ import annotations

from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.config import DEFAULT_MULTI_POINT, default_config
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework, FrameworkHandle
from scheduler.profile import build_profiles

PLUGINS_V1_MULTI_POINT = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeName", 0),
    ("NodeUnschedulable", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
    ("NodeDeclaredFeatures", 0),
]

EXPANDED_FILTER = [
    "NodeName",
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "NodeDeclaredFeatures",
]
EXPANDED_SCORE = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
]


def default_framework(registry: Registry | None = None) -> Framework:
    handle = FrameworkHandle(FakeApiClient(), Snapshot())
    return build_profiles(default_config("s"), registry or in_tree_registry(), handle)["s"]


def test_multi_point_defaults_are_kube_scheduler_1_37s() -> None:
    assert list(DEFAULT_MULTI_POINT) == PLUGINS_V1_MULTI_POINT


def test_expanded_default_profile_follows_upstream_order() -> None:
    fw = default_framework()
    names = fw.plugin_names()
    ours = set(in_tree_registry())
    assert names["preFilter"] == [n for n in EXPANDED_FILTER if n in names["preFilter"]]
    assert [n for n in names["filter"] if n in ours] == [n for n in EXPANDED_FILTER if n in names["filter"]]
    assert names["filter"][-1] == "NodeDeclaredFeatures"
    assert {"DynamicResources", "NodeDeclaredFeatures", "VolumeBinding", "VolumeZone"} <= set(names["preFilter"])
    assert names["score"] == [n for n, _ in EXPANDED_SCORE if n in names["score"]]
    assert {n: fw.score_weights[n] for n in names["score"]} == {n: w for n, w in EXPANDED_SCORE if n in names["score"]}
