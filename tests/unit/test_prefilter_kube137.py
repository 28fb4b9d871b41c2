"""PreFilter as kube-scheduler 1.37 runs it (framework/runtime RunPreFilterPlugins, schedule_one.go).

Cases of kube's TestRunPreFilterPlugins, plus what schedule_one makes of the result: the unschedulable
plugins, the FailedScheduling wording, and the one-feasible-node rule without Score plugins.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import parse_config
from scheduler.framework.types import Code, CycleState, Diagnosis, FitError, PreFilterResult, Status
from scheduler.informers import Informers
from scheduler.model.objects import Pod
from scheduler.schedule_one import Scheduler
from tests.unit.test_runtime import POD, Filt, Pre, info, make
from tests.unit.test_schedule_one import raw_node, raw_pod

SKIP = Status(Code.SKIP)
UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("plugins", "want_result", "want_skipped", "want_code"),
    [
        # all PreFilter returned success
        ([Pre("success1"), Pre("success2")], None, set(), None),
        # one returned success, another an error
        ([Pre("success"), Pre("error", status=Status(Code.ERROR, ("boom",)))], None, set(), Code.ERROR),
        # one returned skip, another an error
        ([Pre("skip", status=SKIP), Pre("error", status=Status(Code.ERROR, ("boom",)))], None, {"skip"}, Code.ERROR),
        # all returned skip
        (
            [Pre("skip1", status=SKIP), Pre("skip2", status=SKIP), Pre("skip3", status=SKIP)],
            None,
            {"skip1", "skip2", "skip3"},
            None,
        ),
        # some returned skip
        (
            [Pre("skip1", status=SKIP), Pre("success1"), Pre("skip2", status=SKIP), Pre("success2")],
            None,
            {"skip1", "skip2"},
            None,
        ),
        # Unschedulable: the next plugin still runs (kubernetes#119779)
        ([Pre("unschedulable", status=Status.unschedulable("no")), Pre("skip", status=SKIP)], None, {"skip"}, UNSCHED),
        # UnschedulableAndUnresolvable: nothing after it runs
        ([Pre("unresolvable", status=Status.unresolvable("no")), Pre("skip", status=SKIP)], None, set(), UNRESOLVABLE),
        # a result that filters out every node stops there
        ([Pre("reject-all-nodes", PreFilterResult(set())), Pre("skip", status=SKIP)], set(), set(), UNRESOLVABLE),
    ],
)
def test_run_pre_filter_plugins(
    plugins: list[Pre], want_result: set[str] | None, want_skipped: set[str], want_code: Code | None
) -> None:
    fw = make(preFilter=plugins)
    state = CycleState()
    result, status, _ = fw.run_pre_filter(state, POD, [])
    assert (result.node_names if result is not None else None) == want_result
    assert state.skip_filter_plugins == want_skipped
    assert (status.code if status is not None else None) == want_code


def test_last_unschedulable_status_is_returned_and_plugin_named() -> None:
    fw = make(
        preFilter=[Pre("A", status=Status.unschedulable("a says no")), Pre("B", status=Status.unschedulable("b"))]
    )
    _, status, narrowing = fw.run_pre_filter(CycleState(), POD, [])
    assert status is not None
    assert (status.code, status.plugin, status.message) == (Code.UNSCHEDULABLE, "B", "b")
    assert narrowing == set()


def test_error_status_is_wrapped_like_kube() -> None:
    fw = make(preFilter=[Pre("Broken", status=Status(Code.ERROR, ("boom",)))])
    _, status, _ = fw.run_pre_filter(CycleState(), POD, [])
    assert status is not None
    assert status.message == 'running PreFilter plugin "Broken": boom'
    assert status.plugin == "Broken"


def test_empty_result_from_one_plugin_names_it_singular() -> None:
    fw = make(preFilter=[Pre("A", PreFilterResult(set()))])
    _, status, narrowing = fw.run_pre_filter(CycleState(), POD, [])
    assert status is not None
    assert status.message == "node(s) didn't satisfy plugin A"
    assert status.plugin == ""
    assert narrowing == {"A"}


def test_empty_intersection_discards_an_earlier_unschedulable() -> None:
    fw = make(
        preFilter=[
            Pre("U", status=Status.unschedulable("u")),
            Pre("A", PreFilterResult({"n1"})),
            Pre("B", PreFilterResult({"n2"})),
        ]
    )
    _, status, narrowing = fw.run_pre_filter(CycleState(), POD, [])
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "node(s) didn't satisfy plugin(s) [A B] simultaneously"
    assert narrowing == {"A", "B"}


# ---- schedule_one ---------------------------------------------------------------------------


def cluster(config: dict[str, Any] | None = None, nodes: int = 3) -> tuple[Scheduler, Informers, FakeApiClient]:
    client = FakeApiClient()
    base: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    sched = build_scheduler(parse_config({**base, **(config or {})}), full_registry(), client, {})
    sched.rng = random.Random(5)
    inf = Informers(sched)
    for i in range(nodes):
        inf.on_node("ADDED", raw_node(f"n{i}"))
    return sched, inf, client


def test_narrowing_plugins_are_unschedulable_plugins_and_absent_nodes_say_so() -> None:
    sched, _, _ = cluster()
    fw = sched.frameworks["secondary-scheduler"]
    fw.pre_filter_plugins = [Pre("A", PreFilterResult({"n1"}))]
    fw.filter_plugins = [p for p in fw.filter_plugins if p.name == "NodeResourcesFit"]
    pod = Pod.from_raw(raw_pod("big", cpu="64"))
    sched.cache.update_snapshot(sched.snapshot)
    feasible, diagnosis = sched.find_nodes_that_fit(fw, CycleState(), pod)
    assert feasible == []
    assert diagnosis.unschedulable_plugins == {"A", "NodeResourcesFit"}
    assert str(FitError(pod, 3, diagnosis)) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [A]."
    )


def test_unschedulable_prefilter_is_the_message_and_the_plugin() -> None:
    sched, _, _ = cluster()
    fw = sched.frameworks["secondary-scheduler"]
    fw.pre_filter_plugins = [Pre("A", PreFilterResult({"n1"})), Pre("U", status=Status.unschedulable("u says no"))]
    pod = Pod.from_raw(raw_pod("p"))
    sched.cache.update_snapshot(sched.snapshot)
    feasible, diagnosis = sched.find_nodes_that_fit(fw, CycleState(), pod)
    assert feasible == []
    assert diagnosis.unschedulable_plugins == {"A", "U"}
    assert str(FitError(pod, 3, diagnosis)) == "0/3 nodes are available: u says no."


@pytest.mark.parametrize("path", ["batch", "reference"])
def test_without_score_plugins_one_feasible_node_is_enough(path: str) -> None:
    sched, _, _ = cluster(
        {"profiles": [{"schedulerName": "secondary-scheduler", "plugins": {"score": {"disabled": [{"name": "*"}]}}}]}
    )
    fw = sched.frameworks["secondary-scheduler"]
    assert not fw.score_plugins
    pod = Pod.from_raw(raw_pod("p"))
    sched.cache.update_snapshot(sched.snapshot)
    state = CycleState()
    assert fw.run_pre_filter(state, pod, sched.snapshot.list())[1] is None
    if path == "batch":
        feasible, _ = sched._find_batch(fw, state, pod, Diagnosis())
    else:
        feasible, _ = sched._find_per_node(fw, state, pod, sched.snapshot.list(), Diagnosis())
    assert len(feasible) == 1
    assert sched.next_start_node_index == 1  # only one node was looked at


@pytest.mark.parametrize("code", [Code.ERROR, Code.WAIT, Code.SKIP])
def test_a_filter_that_does_not_reject_is_an_error_in_kubes_words(code: Code) -> None:
    fw = make(filter=[Filt("Broken", {"n1"}, code=code)])
    status = fw.run_filter(CycleState(), POD, info("n1"))
    assert status is not None
    assert (status.code, status.plugin) == (Code.ERROR, "Broken")
    assert status.message == 'running "Broken" filter plugin: Broken says no'


def test_round_robin_start_advances_over_all_nodes_when_prefilter_narrows() -> None:
    # kube: nextStartNodeIndex = (nextStartNodeIndex + processed) % len(allNodes), not % len(narrowed).
    sched, _, _ = cluster()
    fw = sched.frameworks["secondary-scheduler"]
    fw.pre_filter_plugins = [Pre("A", PreFilterResult({"n1", "n2"}))]
    fw.filter_plugins = []
    sched.cache.update_snapshot(sched.snapshot)
    sched.next_start_node_index = 2
    feasible, _ = sched.find_nodes_that_fit(fw, CycleState(), Pod.from_raw(raw_pod("p")))
    assert sorted(n.name for n in feasible) == ["n1", "n2"]
    assert sched.next_start_node_index == (2 + 2) % 3
