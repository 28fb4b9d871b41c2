"""The shared pod-group state: members moved between unscheduled, assumed and assigned by informer
events and the cache's assume/forget (cases after kube-scheduler v1.37.2's podgroupstate_test.go),
and the scheduler wiring the cache to the store the plugins read."""

from __future__ import annotations

import dataclasses

from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler
from scheduler.cache import Cache
from scheduler.config import parse_config
from scheduler.framework.podgroups import GroupKey, PodGroupStates
from scheduler.framework.types import EventResource
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import make_pod

API = "example.io"
LABEL = "example.io/group"


def by_label(pod: Pod) -> str | None:
    return pod.labels.get(LABEL)


def member(name: str, group: str = "g") -> Pod:
    return make_pod(name, "ns").uid(name).label(LABEL, group).obj()


def split(store: PodGroupStates, group: str = "g") -> tuple[set[str], set[str], set[str]]:
    state = store.get(GroupKey(API, "ns", group))
    assert state is not None
    return state.unscheduled, set(state.assumed), state.assigned


def tracked() -> PodGroupStates:
    store = PodGroupStates()
    store.track(API, by_label)
    return store


def test_untracked_store_keeps_nothing() -> None:
    store = PodGroupStates()
    store.upsert_pod(member("a"))
    assert store.get(GroupKey(API, "ns", "g")) is None


def test_member_lifecycle() -> None:
    store = tracked()
    a, b = member("a"), member("b")
    store.upsert_pod(a)
    store.upsert_pod(b)
    assert split(store) == ({"a", "b"}, set(), set())
    store.assume_pod(dataclasses.replace(a, node_name="n1"))
    assert split(store) == ({"b"}, {"a"}, set())
    assert store.get(GroupKey(API, "ns", "g")).scheduled_count == 1  # type: ignore[union-attr]
    # A status update of the assumed pod (still unbound in the API) keeps it assumed.
    store.upsert_pod(a)
    assert split(store) == ({"b"}, {"a"}, set())
    store.assume_pod(dataclasses.replace(b, node_name="n1"))
    store.forget_pod("b")
    assert split(store) == ({"b"}, {"a"}, set())
    # The informer sees the bind: assigned; a later forget does not undo it.
    store.upsert_pod(dataclasses.replace(a, node_name="n1"))
    store.forget_pod("a")
    assert split(store) == ({"b"}, set(), {"a"})
    store.delete_pod("a")
    store.delete_pod("b")
    assert store.get(GroupKey(API, "ns", "g")) is None


def test_label_change_moves_the_pod_and_unknown_pods_are_ignored() -> None:
    store = tracked()
    store.upsert_pod(member("a", "g"))
    store.upsert_pod(member("a", "h"))
    assert store.get(GroupKey(API, "ns", "g")) is None
    assert split(store, "h") == ({"a"}, set(), set())
    store.assume_pod(dataclasses.replace(member("x"), node_name="n1"))
    assert store.get(GroupKey(API, "ns", "g")) is None


def test_group_object_outlives_its_pods_and_the_other_way_round() -> None:
    store = tracked()
    key = GroupKey(API, "ns", "g")
    assert store.set_object(key, {"v": 1}) is None
    assert store.set_object(key, {"v": 2}) == {"v": 1}
    store.upsert_pod(member("a"))
    assert store.remove_object(key) == {"v": 2}
    assert split(store) == ({"a"}, set(), set())
    store.delete_pod("a")
    assert store.get(key) is None


def test_cache_assume_and_forget_move_members() -> None:
    cache = Cache()
    cache.pod_groups.track(API, by_label)
    a = member("a")
    cache.pod_groups.upsert_pod(a)
    placed = dataclasses.replace(a, node_name="n1")
    cache.assume_pod(placed)
    assert split(cache.pod_groups) == (set(), {"a"}, set())
    cache.forget_pod(placed)
    assert split(cache.pod_groups) == ({"a"}, set(), set())


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


def test_scheduler_cache_shares_the_plugins_store() -> None:
    sched = coscheduling_scheduler()
    assert sched.cache.pod_groups is sched.frameworks["s"].handle.pod_groups
    assert sched.cache.pod_groups.tracks("scheduling.x-k8s.io")


def test_informers_feed_members_whoever_schedules_them_and_group_objects() -> None:
    sched = coscheduling_scheduler()
    informers = Informers(sched)
    key = GroupKey("scheduling.x-k8s.io", "ns", "g")
    ours = make_pod("a", "ns").uid("a").label("scheduling.x-k8s.io/pod-group", "g").spec(schedulerName="s")
    theirs = make_pod("b", "ns").uid("b").label("scheduling.x-k8s.io/pod-group", "g").spec(schedulerName="other")
    bound = make_pod("c", "ns").uid("c").label("scheduling.x-k8s.io/pod-group", "g").node("n1")
    for pod in (ours, theirs, bound):
        informers.on_pod("ADDED", pod.raw)
    state = sched.cache.pod_groups.get(key)
    assert state is not None and (state.unscheduled, state.assigned) == ({"a", "b"}, {"c"})
    informers.on_pod("DELETED", theirs.raw)
    assert set(state.all_pods) == {"a", "c"}
    group = {"metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"}, "spec": {"minMember": 2}}
    informers.on_pod_group(key.api, EventResource.SCHEDULER_PLUGINS_POD_GROUP, "ADDED", group)
    assert state.api_object == group
    informers.on_pod_group(key.api, EventResource.SCHEDULER_PLUGINS_POD_GROUP, "DELETED", group)
    assert state.api_object is None
