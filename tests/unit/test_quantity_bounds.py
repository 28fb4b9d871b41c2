"""Quantities at int64's edge (issue 18, finding 1): kube's conversions, and one odd object never
stopping the scheduling of anything else.

The expected conversions were printed by apimachinery v0.37.2's resource.Quantity (MilliValue and
Value after the JSON round trip the apiserver makes, so the strings are the canonical forms a
scheduler receives; sums with Quantity.Add).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
import structlog

from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.informers import Informers
from scheduler.model.quantity import parse
from scheduler.schedule_one import Scheduler

NAME = "secondary-scheduler"


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("9300T", 0, 9300000000000000),  # int64Amount{9300, 12}: the x10 loop overflows → 0
        ("9223372036854775807", -1000, 9223372036854775807),  # inf.Dec: low 64 bits of x1000
        ("9223372036854775808", 0, -9223372036854775808),
        ("1e18", 0, 1000000000000000000),
        ("10e18", 0, 0),
        ("10e15", 0, 10000000000000000),
        ("100P", 0, 100000000000000000),
        ("100e12", 100000000000000000, 100000000000000),
        ("5Ei", -9223372036854775808, 5764607523034234880),
        ("9223372036854775807m", 9223372036854775807, 9223372036854776),
        ("9223372036854775808m", -9223372036854775808, 9223372036854776),
        ("9223372036854776", -9223372036854775616, 9223372036854776),  # int64Amount x1000 keeps the wrap
        ("92233720368547758070m", -10, 92233720368547759),
        ("12345678901234567890", 4807115922877858896, -6101065172474983726),
        ("18446744073709551617m", 1, 18446744073709552),
        ("10e99", 0, 0),
        ("123456789012345679n", 123456789013, 123456790),
        ("1n", 1, 1),
        ("1500m", 1500, 2),
        ("-1500m", -1500, -2),
        ("32Gi", 34359738368000, 34359738368),
        ("1536Mi", 1610612736000, 1610612736),
    ],
)
def test_conversions_are_apimachinerys(text: str, milli: int, value: int) -> None:
    quantity = parse(text)
    assert (quantity.milli_value(), quantity.value()) == (milli, value)


@pytest.mark.parametrize(
    ("texts", "milli", "value"),
    [
        (["5E", "5E"], 0, 0),  # int64Amount{10, 18}
        (["100m", "10e15"], -8446744073709551516, 10000000000000001),  # overflow → inf.Dec sum
        (["1n", "1e18"], 3875820019684212737, 1000000000000000001),
        (["9223372036854775807m", "1m"], -9223372036854775808, 9223372036854776),
        (["3Gi", "5E"], 932359245936984064, 5000000003221225472),
        (["200Mi", "5Ei"], -9223371827139575808, 5764607523243950080),
        (["100m", "200m", "300m"], 600, 1),
        (["1E"] * 10, 0, 0),
    ],
)
def test_sums_are_apimachinerys(texts: list[str], milli: int, value: int) -> None:
    total = parse(texts[0])
    for text in texts[1:]:
        total = total + parse(text)
    assert (total.milli_value(), total.value()) == (milli, value)


# ---- the scheduler with odd objects ----------------------------------------------------------------


def raw_node(name: str, **allocatable: str) -> dict[str, Any]:
    amounts = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    amounts.update({key.replace("_", "-"): amount for key, amount in allocatable.items()})
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": amounts},
    }


def raw_pod(
    name: str,
    node: str = "",
    overhead: dict[str, str] | None = None,
    allocated: dict[str, str] | None = None,
    **requests: str,
) -> dict[str, Any]:
    requests = {key.replace("_", "-"): amount for key, amount in requests.items()} or {"cpu": "100m"}
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "schedulerName": NAME if not node else "default-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if overhead:
        raw["spec"]["overhead"] = overhead
    if allocated:
        raw["status"]["containerStatuses"] = [{"name": "c", "allocatedResources": allocated}]
    return raw


def setup() -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    sched = build_scheduler(default_config(), full_registry(), client, {})
    sched.rng = random.Random(7)
    return sched, Informers(sched), client


async def run_queue(sched: Scheduler) -> None:
    while (info := sched.queue.pop_nowait()) is not None:
        sched.schedule_one(info)
        await asyncio.sleep(0)
    await sched.drain()


# Each odd object the probe found, on a node of its own ("odd") next to an ordinary node ("ok"):
# (nodes, bound pods, what kube-scheduler's snapshot holds for the odd node, as column → value).
ODD_OBJECTS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]] = {
    "node cpu 9300T": ([raw_node("odd", cpu="9300T")], [], {"alloc_cpu": 0}),
    "node cpu maxint64": ([raw_node("odd", cpu="9223372036854775807")], [], {"alloc_cpu": -1000}),
    "node cpu 1e18": ([raw_node("odd", cpu="1e18")], [], {"alloc_cpu": 0}),
    "node pods 1e19": ([raw_node("odd", pods="10e18")], [], {"alloc_pods": 0}),
    "node ephemeral 1e19": ([raw_node("odd", ephemeral_storage="10e18")], [], {"alloc_eph": 0}),
    "bound pod cpu 1e16": ([raw_node("odd")], [raw_pod("b", "odd", cpu="10e15")], {"req_cpu": 0}),
    "bound pod ephemeral 1e19": (
        [raw_node("odd")],
        [raw_pod("b", "odd", ephemeral_storage="10e18")],
        {"req_eph": 0},
    ),
    "two bound 5E-memory pods": (
        [raw_node("odd")],
        [raw_pod("b1", "odd", memory="5E"), raw_pod("b2", "odd", memory="5E")],
        {"req_mem": 10**19 - 2**64},  # Go's int64 sum wraps
    ),
    "RuntimeClass overhead 1e16": (
        [raw_node("odd")],
        [raw_pod("b", "odd", overhead={"cpu": "10e15"}, cpu="100m")],
        {"req_cpu": -8446744073709551516},
    ),
    "allocatedResources 1e16": (
        [raw_node("odd")],
        [raw_pod("b", "odd", allocated={"cpu": "10e15"}, cpu="100m")],
        {"req_cpu": 0},
    ),
}


@pytest.mark.parametrize("case", list(ODD_OBJECTS))
async def test_one_odd_object_leaves_every_other_pod_schedulable(case: str) -> None:
    nodes, bound, columns = ODD_OBJECTS[case]
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("ok"))
    for node in nodes:
        inf.on_node("ADDED", node)
    for pod in bound:
        inf.on_pod("ADDED", pod)
    sched.cache.update_snapshot(sched.snapshot)  # raised OverflowError here before
    table = sched.snapshot.table
    row = sched.snapshot.position["odd"]
    for column, value in columns.items():
        assert int(getattr(table, column)[row]) == value
    for i in range(3):
        inf.on_pod("ADDED", raw_pod(f"p{i}"))
    await run_queue(sched)
    assert sorted(client.bindings) == ["ns/p0", "ns/p1", "ns/p2"]
    assert not client.conditions  # no SchedulerError (or any failure) for anyone


async def test_a_pending_pod_beyond_int64_gets_a_clear_reason_and_others_still_bind() -> None:
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("ok"))
    inf.on_pod("ADDED", raw_pod("huge", cpu="10e15"))
    inf.on_pod("ADDED", raw_pod("small"))
    await run_queue(sched)
    assert client.bindings == {"ns/small": "ok"}
    condition = client.conditions["ns/huge"]
    assert condition["reason"] == "Unschedulable"
    # NodeResourcesFit's PreFilter rejects before DynamicResources' runs, whose PostFilter then finds
    # no state of its own and ends the message with that error, as kube-scheduler v1.37.2's does.
    assert condition["message"] == (
        "0/1 nodes are available: pod ns/huge: spec.containers[0].resources.requests.cpu: 10e15 "
        "is beyond int64 millicores. not found"
    )


async def test_a_pending_pod_whose_status_claims_a_huge_allocation_is_scheduled_by_its_spec() -> None:
    # As kube: a pending pod is filtered by its spec; its status only counts once it is placed
    # (then as kube counts it: 0), and the next pod's snapshot update takes it in its stride.
    sched, inf, client = setup()
    inf.on_node("ADDED", raw_node("ok"))
    inf.on_pod("ADDED", raw_pod("claims", allocated={"cpu": "10e15"}, cpu="100m"))
    await run_queue(sched)
    inf.on_pod("ADDED", raw_pod("next"))
    await run_queue(sched)
    assert client.bindings == {"ns/claims": "ok", "ns/next": "ok"}
    assert int(sched.snapshot.table.req_cpu[0]) == 0  # "claims" counted as kube counts 10e15: 0m


def test_each_odd_object_is_logged_once_by_kind_name_and_field() -> None:
    _, inf, _ = setup()
    with structlog.testing.capture_logs() as logs:
        for version in ("1", "2", "3"):  # heartbeats and status updates repeat the object
            node = raw_node("odd", cpu="9223372036854775807")
            node["metadata"]["resourceVersion"] = version
            inf.on_node("MODIFIED", node)
            pod = raw_pod("b", "ok", overhead={"cpu": "10e15"})
            pod["metadata"]["resourceVersion"] = version
            inf.on_pod("MODIFIED", pod)
    reports = [entry for entry in logs if entry["event"].startswith("quantity beyond int64")]
    assert [(e["kind"], e["namespace"], e["name"], e["field"]) for e in reports] == [
        ("Node", "", "odd", "status.allocatable.cpu: 9223372036854775807 is beyond int64 millicores"),
        ("Pod", "ns", "b", "spec.overhead.cpu: 10e15 is beyond int64 millicores"),
    ]
    assert all(entry["log_level"] == "error" for entry in reports)
