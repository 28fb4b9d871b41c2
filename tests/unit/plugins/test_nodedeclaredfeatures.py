"""NodeDeclaredFeatures, ported from kube-scheduler v1.37.2 plugins/nodedeclaredfeatures
(TestPreFilter, TestFilter, TestEnqueueExtensionsNodeUpdate, TestIsSchedulableAfterTargetPodUpdate)
and the scheduling inference of component-helpers v0.37.2 nodedeclaredfeatures/features
(restartallcontainers, usernamespaceshostnetwork, volumebindmountoptions, the registry).

Upstream's mock features are plain Feature entries here (a name, an inference, a max version).
Left out: the "plugin disabled" cases (the gate is locked on in 1.37) and the deferred-resize
skip (InPlacePodVerticalScalingSchedulerPreemption is alpha and off).
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.nodedeclaredfeatures import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    PRE_FILTER_KEY,
    NodeDeclaredFeatures,
    _node_changed,
    _PreFilterState,
)
from plugins.nodedeclaredfeatures.features import ALL_FEATURES, DEFAULT_REGISTRY, Feature, Registry
from scheduler.framework.types import Code, CycleState, QueueingHint
from scheduler.testing.builders import make_node, make_pod, node_info, snapshot

FEATURE_1, FEATURE_2 = "TestFeature1", "TestFeature2"


def mock(name: str, infer: bool, max_version: tuple[int, int, int] | None = None) -> Feature:
    return Feature(name, lambda spec: infer, max_version)


@pytest.mark.parametrize(
    ("features", "version", "want_required"),
    [
        ([mock(FEATURE_1, True), mock(FEATURE_2, False)], (1, 35, 0), {FEATURE_1}),
        ([mock(FEATURE_1, True, (1, 38, 0)), mock(FEATURE_2, True, (1, 38, 0))], (1, 35, 0), {FEATURE_1, FEATURE_2}),
        ([mock(FEATURE_1, False), mock(FEATURE_2, False)], (1, 35, 0), None),
        ([mock(FEATURE_1, True, (1, 33, 0)), mock(FEATURE_2, False)], (1, 34, 0), None),
    ],
    ids=[
        "Pod with feature requirements",
        "Pod with multiple feature requirements",
        "Pod with no requirements",
        "Feature not required, version > MaxVersion",
    ],
)
def test_pre_filter(features: list[Feature], version: tuple[int, int, int], want_required: set[str] | None) -> None:
    plugin = NodeDeclaredFeatures(Registry(features, version))
    state = CycleState()
    result, status = plugin.pre_filter(state, make_pod("test-pod").obj(), [])
    assert result is None
    if want_required is None:
        assert status is not None and status.code == Code.SKIP
        assert state.get(PRE_FILTER_KEY) is None
    else:
        assert status is None
        pre = state.get(PRE_FILTER_KEY)
        assert pre is not None and pre.required == want_required


FEATURE_A, FEATURE_B, FEATURE_C = "FeatureA", "FeatureB", "FeatureC"
ABC = Registry([mock(FEATURE_A, False), mock(FEATURE_B, False), mock(FEATURE_C, False)])


def declaring(*features: str) -> Any:
    node = make_node("node-1")
    if features:
        node.raw["status"]["declaredFeatures"] = list(features)
    return node


@pytest.mark.parametrize(
    ("node_features", "required", "rejected"),
    [
        ((FEATURE_A, FEATURE_B), {FEATURE_A}, False),
        ((FEATURE_B,), {FEATURE_A}, True),
        ((FEATURE_A, FEATURE_B, FEATURE_C), {FEATURE_A, FEATURE_C}, False),
        ((), {FEATURE_A}, True),
        ((FEATURE_A,), {FEATURE_A, FEATURE_B}, True),
        (("Unknown", FEATURE_A), {FEATURE_A}, False),  # names the registry does not know are ignored
    ],
    ids=[
        "Node matches requirements",
        "Node does not match requirements",
        "Node with multiple features, pod requires subset",
        "Node has no declared features",
        "Node with some but not all required features",
        "Node declaring an unknown feature",
    ],
)
def test_filter(node_features: tuple[str, ...], required: set[str], rejected: bool) -> None:
    plugin = NodeDeclaredFeatures(ABC)
    state = CycleState()
    state.write(PRE_FILTER_KEY, _PreFilterState(frozenset(required)))
    info = node_info(declaring(*node_features))
    status = plugin.filter(state, make_pod("test-pod").obj(), info)
    if rejected:
        assert status is not None
        assert (status.code, status.reasons) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON_UNSATISFIED_REQUIREMENTS,),
        )
    else:
        assert status is None
    mask = plugin.filter_batch(state, make_pod("test-pod").obj(), snapshot(info).table)
    assert mask is not None and mask.tolist() == [not rejected]


def test_filter_without_pre_filter_state_is_an_error() -> None:
    status = NodeDeclaredFeatures(ABC).filter(CycleState(), make_pod("p").obj(), node_info(declaring()))
    assert status is not None and status.code == Code.ERROR
    assert 'error reading "PreFilterNodeDeclaredFeatures" from cycle-state' in status.message


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, declaring("FeatureA"), QueueingHint.QUEUE),
        (declaring(), declaring("FeatureA"), QueueingHint.QUEUE),
        (declaring("FeatureA"), declaring("FeatureA"), QueueingHint.SKIP),
    ],
    ids=["Node Add with feature", "Node Update (Features Added)", "Node Update (Features Unchanged)"],
)
def test_node_change_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    pod = make_pod("test-pod").obj()
    assert _node_changed(pod, old.obj() if old is not None else None, new.obj()) == hint


def test_declared_features_change_is_not_a_heartbeat() -> None:
    # The informer drops node updates with the same scheduling properties: features count.
    assert not declaring().obj().same_scheduling_properties(declaring("FeatureA").obj())


@pytest.mark.parametrize(
    ("old_requires", "new_requires", "hint"),
    [(False, True, QueueingHint.QUEUE), (True, False, QueueingHint.QUEUE), (False, False, QueueingHint.SKIP)],
    ids=["Pod Update adds requirement", "Pod Update removes requirement", "Pod Update with no change in requirements"],
)
def test_target_pod_update_hint(old_requires: bool, new_requires: bool, hint: QueueingHint) -> None:
    registry = Registry([Feature("TestFeature", lambda spec: bool(spec.get("hostNetwork")))])
    plugin = NodeDeclaredFeatures(registry)
    target = make_pod("test-pod").uid("123")
    old = make_pod("test-pod").uid("123").spec(hostNetwork=old_requires)
    new = make_pod("test-pod").uid("123").label("foo", "bar").spec(hostNetwork=new_requires)
    assert plugin._pod_changed(target.obj(), old.obj(), new.obj()) == hint


def restart_rule(action: str) -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": "In", "values": [42]}}


@pytest.mark.parametrize(
    ("spec", "required"),
    [
        # restartallcontainers TestInferForScheduling
        (
            {"initContainers": [{"name": "i", "restartPolicyRules": [restart_rule("RestartAllContainers")]}]},
            {"RestartAllContainersOnContainerExits"},
        ),
        (
            {"containers": [{"name": "c", "restartPolicyRules": [restart_rule("RestartAllContainers")]}]},
            {"RestartAllContainersOnContainerExits"},
        ),
        ({"containers": [{"name": "c", "restartPolicyRules": [restart_rule("Restart")]}]}, set()),
        ({"containers": [{"name": "c"}]}, set()),
        # usernamespaceshostnetwork TestInferForScheduling
        ({"hostNetwork": True, "hostUsers": False}, {"UserNamespacesHostNetworkSupport"}),
        ({"hostNetwork": True}, set()),
        ({"hostNetwork": True, "hostUsers": True}, set()),
        ({"hostNetwork": False, "hostUsers": False}, set()),
        # volumebindmountoptions
        (
            {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": ["noexec"]}]}]},
            {"VolumeBindMountOptions"},
        ),
        (
            {"ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "v", "bindMountOptions": ["ro"]}]}]},
            {"VolumeBindMountOptions"},
        ),
        ({"initContainers": [{"name": "i", "volumeMounts": [{"name": "v"}]}]}, set()),
        # update-only features are never required for scheduling
        (
            {"resources": {"requests": {"cpu": "1"}}, "volumes": [{"name": "m", "emptyDir": {"medium": "Memory"}}]},
            set(),
        ),
    ],
    ids=[
        "init container with rules",
        "regular container with rules",
        "restart action only",
        "no rules",
        "HostNetwork true, HostUsers false",
        "HostNetwork true, HostUsers nil",
        "HostNetwork true, HostUsers true",
        "HostNetwork false, HostUsers false",
        "container bind mount options",
        "ephemeral container bind mount options",
        "no bind mount options",
        "update-only features",
    ],
)
def test_default_registry_infers_scheduling_requirements(spec: dict[str, Any], required: set[str]) -> None:
    assert DEFAULT_REGISTRY.infer_for_pod_scheduling(spec) == required


def test_default_registry_holds_upstreams_features() -> None:
    assert [f.name for f in DEFAULT_REGISTRY.features] == sorted(
        [
            "RestartAllContainersOnContainerExits",
            "InPlacePodLevelResourcesVerticalScaling",
            "ExtendWebSocketsToKubelet",
            "InPlacePodVerticalScalingInitContainers",
            "InPlacePodVerticalScalingMemoryBackedVolumes",
            "UserNamespacesHostNetworkSupport",
            "DRANodeAllocatableResources",
            "VolumeBindMountOptions",
            "DRAOptionalNodeOperations",
        ]
    )
    assert all(f.max_version is None for f in ALL_FEATURES)


def test_pod_needing_a_feature_lands_only_on_declaring_nodes() -> None:
    plugin = NodeDeclaredFeatures()
    pod = make_pod("p").spec(hostNetwork=True, hostUsers=False).obj()
    state = CycleState()
    assert plugin.pre_filter(state, pod, []) == (None, None)
    yes = node_info(declaring("UserNamespacesHostNetworkSupport"))
    no = node_info(declaring("VolumeBindMountOptions"))
    assert plugin.filter(state, pod, yes) is None
    status = plugin.filter(state, pod, no)
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_features_are_inferred_once_per_pod_version() -> None:
    """A pod version's required features are inferred once (a gang member is pre-filtered once per
    placement); a new resourceVersion is inferred again, and a pod without one every time."""
    calls: list[int] = []

    def counted(spec: Any) -> bool:
        calls.append(1)
        return bool(spec.get("hostNetwork"))

    plugin = NodeDeclaredFeatures(Registry([Feature(FEATURE_1, counted)]))
    pod = make_pod("p").spec(hostNetwork=True).obj()
    pod.raw["metadata"]["resourceVersion"] = "1"
    pod = type(pod).from_raw(pod.raw)
    for _ in range(3):
        state = CycleState()
        assert plugin.pre_filter(state, pod, []) == (None, None)
        assert state.get(PRE_FILTER_KEY) == _PreFilterState(frozenset({FEATURE_1}))
    assert len(calls) == 1
    changed = dict(pod.raw, metadata={**pod.raw["metadata"], "resourceVersion": "2"}, spec={})
    assert plugin.pre_filter(CycleState(), type(pod).from_raw(changed), [])[1].code == Code.SKIP  # type: ignore[union-attr]
    assert len(calls) == 2
    unversioned = make_pod("q").spec(hostNetwork=True).obj()
    assert unversioned.resource_version == ""
    plugin.pre_filter(CycleState(), unversioned, [])
    plugin.pre_filter(CycleState(), unversioned, [])
    assert len(calls) == 4
