"""Coscheduling end to end against the in-memory fake ApiClient: informers feed a scheduler with
scheduler-plugins' profile; pods are popped and scheduled one by one as the loop does, their
binding cycles left waiting at Permit until the gang is whole."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import parse_config
from scheduler.framework.podgroups import SCHEDULER_PLUGINS_POD_GROUP_API, GroupKey
from scheduler.informers import Informers
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import informer_pod

NAME = "secondary-scheduler"
KEY = GroupKey(SCHEDULER_PLUGINS_POD_GROUP_API, "ns", "gang")


def raw_node(name: str, cpu: str = "2") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def raw_member(name: str, cpu: str = "1") -> dict[str, Any]:
    raw: dict[str, Any] = informer_pod(name, NAME, cpu, labels={"scheduling.x-k8s.io/pod-group": "gang"}).raw
    return raw


def raw_pod_group(min_member: int = 3) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "gang",
            "namespace": "ns",
            "resourceVersion": "1",
            "creationTimestamp": "2026-12-02T00:00:00Z",
        },
        "spec": {"minMember": min_member},
    }


def setup() -> tuple[Scheduler, Informers, FakeApiClient]:
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": NAME,
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                    },
                }
            ],
        }
    )
    client = FakeApiClient()
    sched = build_scheduler(config, full_registry(), client, {})
    sched.rng = random.Random(7)
    informers = Informers(sched)
    for node in ("n1", "n2"):
        informers.on_node("ADDED", raw_node(node))
    informers.on_scheduler_plugins_pod_group("ADDED", raw_pod_group())
    return sched, informers, client


async def schedule_next(sched: Scheduler) -> None:
    info = sched.queue.pop_nowait()
    assert info is not None
    sched.schedule_entity(info)
    await asyncio.sleep(0)


async def test_members_wait_at_permit_then_bind_whole() -> None:
    sched, informers, client = setup()
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    await schedule_next(sched)
    await schedule_next(sched)
    state = sched.cache.pod_groups.get(KEY)
    assert state is not None and len(state.assumed) == 2 and client.bindings == {}
    assert len(sched.frameworks[NAME].handle.waiting_pods) == 2
    await schedule_next(sched)
    await sched.drain()
    assert sorted(client.bindings) == ["ns/g1", "ns/g2", "ns/g3"]


async def test_a_member_deleted_while_the_rest_wait_reverts_the_gang() -> None:
    sched, informers, client = setup()
    for name in ("g1", "g2", "g3"):
        informers.on_pod("ADDED", raw_member(name))
    await schedule_next(sched)
    await schedule_next(sched)
    waiting = sorted(pod.name for pod in sched.cache.pod_groups.get(KEY).assumed.values())  # type: ignore[union-attr]
    informers.on_pod("DELETED", raw_member(waiting[0]))
    await sched.drain()
    assert client.bindings == {}
    assert sched.cache.sizes()["assumed_pods"] == 0
    assert all(info.requested.milli_cpu == 0 for info in (sched.cache.get_node_info(n) for n in ("n1", "n2")) if info)
    state = sched.cache.pod_groups.get(KEY)
    assert state is not None and state.scheduled_pods_count() == 0 and state.all_pods_count() == 2
    rejected = client.conditions[f"ns/{waiting[1]}"]
    assert (rejected["reason"], rejected["message"]) == (
        "Unschedulable",
        "0/1 nodes are available: 1 rejection in Unreserve.",
    )


async def test_a_member_that_fits_nowhere_releases_the_waiting_ones() -> None:
    sched, informers, client = setup()
    for name, cpu in (("g1", "1"), ("g2", "1"), ("g3", "3")):
        informers.on_pod("ADDED", raw_member(name, cpu))
    for _ in range(3):
        await schedule_next(sched)
    await sched.drain()
    assert client.bindings == {}
    assert sched.cache.sizes()["assumed_pods"] == 0
    message = client.conditions["ns/g3"]["message"]
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert message.endswith("PodGroup ns/gang gets rejected due to Pod g3 is unschedulable even after PostFilter")
    for name in ("g1", "g2"):
        assert (
            client.conditions[f"ns/{name}"]["message"]
            == "0/1 nodes are available: 1 optimistic rejection in PostFilter."
        )


async def test_a_new_member_sends_no_unscheduled_pod_add_without_generic_workload() -> None:
    # kube-scheduler v1.37.2 moves unschedulable pods on UnscheduledPodAdd only with GenericWorkload on
    # (eventhandlers.go addPodToSchedulingQueue); a new Coscheduling member must not wake the others.
    sched, informers, _ = setup()
    informers.on_pod("ADDED", raw_member("m1"))
    info = sched.queue.pop_nowait()
    assert info is not None
    info.unschedulable_plugins = {"Coscheduling"}  # Coscheduling registers Pod/Add
    sched.queue.add_unschedulable_if_not_present(info)
    assert sched.queue.where("uid-m1") == "unschedulable"
    informers.on_pod("ADDED", raw_member("m2"))
    assert sched.queue.where("uid-m1") == "unschedulable"
