"""Coscheduling's members in the shared pod-group state (scheduler.framework.podgroups): fed by the
informers and the cache as upstream's GenericWorkload members are, keyed by the pod's label, with
scheduler-plugins' PodGroup objects kept as the API sent them."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from plugins.registry import in_tree_registry
from scheduler.api.client import ApiError
from scheduler.api.fake import FakeApiClient
from scheduler.app import _prime, build_scheduler, runs_coscheduling
from scheduler.config import parse_config
from scheduler.framework.podgroups import SCHEDULER_PLUGINS_POD_GROUP_API, GroupKey, PodGroupState
from scheduler.informers import Informers
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import PodBuilder, make_pod

LABEL = "scheduling.x-k8s.io/pod-group"
KEY = GroupKey(SCHEDULER_PLUGINS_POD_GROUP_API, "ns", "g")


def coscheduling_scheduler() -> Scheduler:
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "s",
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                    },
                }
            ],
        }
    )
    return build_scheduler(config, in_tree_registry(), FakeApiClient(), {})


def member(name: str, scheduler: str = "s") -> PodBuilder:
    return make_pod(name, "ns").uid(name).label(LABEL, "g").spec(schedulerName=scheduler)


def group(sched: Scheduler) -> PodGroupState:
    state = sched.cache.pod_groups.get(KEY)
    assert state is not None
    return state


def test_only_profiles_with_coscheduling_watch_its_pod_groups() -> None:
    assert runs_coscheduling(coscheduling_scheduler())
    default = build_scheduler(
        parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}),
        in_tree_registry(),
        FakeApiClient(),
        {},
    )
    assert not runs_coscheduling(default)
    assert default.cache.pod_groups.key_of(member("a").obj()) is None


def test_members_move_through_informers_and_cache() -> None:
    sched = coscheduling_scheduler()
    assert sched.cache.pod_groups is sched.frameworks["s"].handle.pod_groups
    informers = Informers(sched)
    for pod in (member("a"), member("b"), member("c").node("n1"), member("x", scheduler="other")):
        informers.on_pod("ADDED", pod.raw)
    state = group(sched)
    # Unscheduled members count when this scheduler owns them (as upstream's podgroupstate); bound ones always.
    assert (state.unscheduled, state.assigned) == ({"a", "b"}, {"c"})
    placed = dataclasses.replace(member("a").obj(), node_name="n1")
    sched.cache.assume_pod(placed)
    assert (state.unscheduled, set(state.assumed), state.scheduled_pods_count()) == ({"b"}, {"a"}, 2)
    sched.cache.forget_pod(placed)
    assert state.unscheduled == {"a", "b"}
    informers.on_pod("DELETED", member("b").raw)
    assert set(state.pods) == {"a", "c"}


def test_pod_group_objects_are_kept_as_sent() -> None:
    sched = coscheduling_scheduler()
    informers = Informers(sched)
    raw = {"metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"}, "spec": {"minMember": 2}}
    informers.on_scheduler_plugins_pod_group("ADDED", raw)
    assert group(sched).group == raw
    informers.on_scheduler_plugins_pod_group("DELETED", raw)
    assert sched.cache.pod_groups.get(KEY) is None


async def test_start_lists_pod_groups_and_refuses_without_their_crd() -> None:
    sched = coscheduling_scheduler()
    informers = Informers(sched)
    client = FakeApiClient()
    client.collections["/api/v1/namespaces"] = []
    never_reached: Any = None
    with pytest.raises(ApiError, match="install scheduler-plugins' PodGroup CRD"):
        await _prime(cast(Any, client), informers, never_reached, never_reached, [])
    raw = {"metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"}, "spec": {"minMember": 2}}
    client.collections["/apis/scheduling.x-k8s.io/v1alpha1/podgroups"] = [raw]
    with pytest.raises(ApiError, match="services"):  # listed before the next kinds, which this fake lacks
        await _prime(cast(Any, client), informers, never_reached, never_reached, [])
    assert group(sched).group == raw


def test_a_member_whose_label_changes_leaves_the_group_it_was_counted_in() -> None:
    sched = coscheduling_scheduler()
    informers = Informers(sched)
    informers.on_pod("ADDED", member("a").raw)
    moved = member("a").label(LABEL, "h")
    moved.raw["metadata"]["resourceVersion"] = "2"
    informers.on_pod("MODIFIED", moved.raw)
    assert sched.cache.pod_groups.get(KEY) is None
    other = sched.cache.pod_groups.get(GroupKey(SCHEDULER_PLUGINS_POD_GROUP_API, "ns", "h"))
    assert other is not None and other.unscheduled == {"a"}
    unlabelled = make_pod("a", "ns").uid("a").spec(schedulerName="s")
    unlabelled.raw["metadata"]["resourceVersion"] = "3"
    informers.on_pod("MODIFIED", unlabelled.raw)
    informers.on_pod("DELETED", unlabelled.raw)
    assert list(sched.cache.pod_groups) == []
