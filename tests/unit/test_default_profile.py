"""The default profile equals kube-scheduler 1.37.2's, for the plugins this scheduler has.

Expected lists: pkg/scheduler/apis/config/testing/defaults/defaults.go (PluginsV1 and
ExpandedPluginsV1) of v1.37.2, which reflect applyFeatureGates with 1.37's default gates
(NodeDeclaredFeatures appended; DynamicResources, weight 2, before DefaultPreemption;
InPlacePodVerticalScalingSchedulerPreemption's DeferredPodScheduling, GenericWorkload's
GangScheduling and TopologyAwareWorkloadScheduling's plugins are off by default).
"""

from __future__ import annotations

from plugins import volumeclaimguard
from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.config import DEFAULT_MULTI_POINT, STAND_INS, default_config
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
    upstream_order = [entry for entry in DEFAULT_MULTI_POINT if entry[0] not in STAND_INS]
    assert upstream_order == PLUGINS_V1_MULTI_POINT


def test_expanded_default_profile_follows_upstream_order() -> None:
    fw = default_framework()
    names = fw.plugin_names()
    ours = set(in_tree_registry())
    stand_in_places = {upstream: guard for guard, upstream in STAND_INS.items()}
    # PreFilter/Filter: upstream's order, each stand-in in the place of the plugin it stands in for.
    expected = [stand_in_places.get(n, n) for n in EXPANDED_FILTER]
    assert names["preFilter"] == [n for n in expected if n in names["preFilter"]]
    assert [n for n in names["filter"] if n in ours] == [n for n in EXPANDED_FILTER if n in names["filter"]]
    assert names["filter"][-1] == "NodeDeclaredFeatures"
    assert {"DynamicResources", "NodeDeclaredFeatures", "VolumeClaimGuard"} <= set(names["preFilter"])
    assert names["score"] == [n for n, _ in EXPANDED_SCORE if n in names["score"]]
    assert {n: fw.score_weights[n] for n in names["score"]} == {n: w for n, w in EXPANDED_SCORE if n in names["score"]}


def test_stand_in_leaves_once_the_real_plugin_is_registered() -> None:
    class VolumeBinding:
        name = "VolumeBinding"

        def pre_filter(self, *args: object) -> tuple[None, None]:
            return None, None

        def pre_filter_extensions(self) -> None:
            return None

    registry = in_tree_registry()
    registry.register("VolumeBinding", lambda args, handle: VolumeBinding())
    names = default_framework(registry).plugin_names()
    assert volumeclaimguard.NAME not in names["preFilter"]
    assert "VolumeBinding" in names["preFilter"]
    assert volumeclaimguard.NAME in default_framework().plugin_names()["preFilter"]
