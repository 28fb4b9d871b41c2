"""Framework runtime with one fake plugin per extension point."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from plugins.prioritysort import PrioritySort
from scheduler.api.fake import FakeApiClient
from scheduler.cache import Snapshot
from scheduler.framework.interface import Plugin
from scheduler.framework.runtime import Framework, FrameworkHandle
from scheduler.framework.types import Code, CycleState, NodeInfo, NodeScore, NodeToStatus, PreFilterResult, Status
from scheduler.model.objects import Node, Pod

POD = Pod.from_raw({"metadata": {"name": "p", "namespace": "ns", "uid": "p"}, "spec": {"containers": []}})


def info(name: str) -> NodeInfo:
    return NodeInfo(Node.from_raw({"metadata": {"name": name}, "status": {"allocatable": {"pods": "10"}}}))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []


class Filt:
    def __init__(self, name: str, rejects: set[str], code: Code = Code.UNSCHEDULABLE) -> None:
        self.name = name
        self.rejects = rejects
        self.code = code
        self.seen: list[str] = []

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        self.seen.append(node_info.name)
        return Status(self.code, (f"{self.name} says no",)) if node_info.name in self.rejects else None


class Pre:
    def __init__(self, name: str, result: PreFilterResult | None = None, status: Status | None = None) -> None:
        self.name = name
        self.result = result
        self.status = status

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return self.result, self.status

    def pre_filter_extensions(self) -> None:
        return None


class Scorer:
    def __init__(self, name: str, scores: dict[str, int], normalize_to: int | None = None) -> None:
        self.name = name
        self.scores = scores
        self.normalize_to = normalize_to

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return self.scores[node_info.name], None

    def score_extensions(self) -> Scorer | None:
        return self if self.normalize_to is not None else None

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        top = max(s.score for s in scores) or 1
        for s in scores:
            s.score = s.score * (self.normalize_to or 0) // top
        return None


class Reserver:
    def __init__(self, name: str, log: Recorder, fail: bool = False) -> None:
        self.name = name
        self.log = log
        self.fail = fail

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"reserve {self.name}")
        return Status.unschedulable("full") if self.fail else None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.calls.append(f"unreserve {self.name}")


class Waiter:
    def __init__(self, name: str, timeout: float = 30) -> None:
        self.name = name
        self.timeout = timeout

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), self.timeout


class Binder:
    def __init__(self, name: str, log: Recorder, status: Status | None) -> None:
        self.name = name
        self.log = log
        self.status = status

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"bind {self.name}")
        return self.status


def make(**points: Sequence[Plugin]) -> Framework:
    log = Recorder()
    plugins: dict[str, Sequence[Plugin]] = {
        "queueSort": [PrioritySort()],
        "bind": [Binder("B", log, None)],
        **points,
    }
    return Framework("test", plugins, {"S1": 2, "S2": 1}, FrameworkHandle(FakeApiClient(), Snapshot()))


def test_filter_stops_at_first_failure_and_names_the_plugin() -> None:
    first, second = Filt("F1", {"n1"}), Filt("F2", {"n1", "n2"})
    fw = make(filter=[first, second])
    status = fw.run_filter(CycleState(), POD, info("n1"))
    assert status is not None
    assert status.plugin == "F1"
    assert status.reasons == ("F1 says no",)
    assert second.seen == []
    status2 = fw.run_filter(CycleState(), POD, info("n2"))
    assert status2 is not None
    assert status2.plugin == "F2"


def test_filter_skipped_after_prefilter_skip() -> None:
    filt = Filt("F1", {"n1"})
    fw = make(preFilter=[Pre("F1", status=Status(Code.SKIP))], filter=[filt])
    state = CycleState()
    _, status, _ = fw.run_pre_filter(state, POD, [info("n1")])
    assert status is None
    assert fw.run_filter(state, POD, info("n1")) is None
    assert filt.seen == []


def test_prefilter_results_intersect_and_empty_is_unresolvable() -> None:
    fw = make(
        preFilter=[
            Pre("A", PreFilterResult({"n1", "n2"})),
            Pre("B", PreFilterResult({"n2", "n3"})),
        ]
    )
    result, status, _ = fw.run_pre_filter(CycleState(), POD, [])
    assert status is None
    assert result is not None
    assert result.node_names == {"n2"}
    fw2 = make(preFilter=[Pre("A", PreFilterResult({"n1"})), Pre("B", PreFilterResult({"n3"}))])
    _, status2, rejecting = fw2.run_pre_filter(CycleState(), POD, [])
    assert status2 is not None
    assert status2.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status2.message == "node(s) didn't satisfy plugin(s) [A B] simultaneously"
    assert rejecting == {"A", "B"}


def test_prefilter_rejection_carries_plugin() -> None:
    fw = make(preFilter=[Pre("A", status=Status.unresolvable("nope"))])
    _, status, rejecting = fw.run_pre_filter(CycleState(), POD, [])
    assert status is not None
    assert status.plugin == "A"
    assert rejecting == set()  # kube: the rejecting plugin travels in the status, not in the narrowing set


def test_scores_are_normalised_then_weighted() -> None:
    fw = make(
        score=[Scorer("S1", {"a": 10, "b": 5}, normalize_to=100), Scorer("S2", {"a": 0, "b": 100})],
    )
    totals, per_plugin, status = fw.run_score(CycleState(), POD, [info("a"), info("b")])
    assert status is None
    assert per_plugin["S1"] == [NodeScore("a", 100), NodeScore("b", 50)]
    assert totals == [NodeScore("a", 200), NodeScore("b", 200)]


def test_out_of_range_score_is_an_error_naming_the_plugin() -> None:
    fw = make(score=[Scorer("S1", {"a": 101})])
    _, _, status = fw.run_score(CycleState(), POD, [info("a")])
    assert status is not None
    assert status.code == Code.ERROR
    assert "plugin 'S1' returns an invalid score 101" in status.message


def test_unreserve_runs_in_reverse_order() -> None:
    log = Recorder()
    fw = make(reserve=[Reserver("R1", log), Reserver("R2", log, fail=True), Reserver("R3", log)])
    status = fw.run_reserve(CycleState(), POD, "n")
    assert status is not None
    assert status.plugin == "R2"
    fw.run_unreserve(CycleState(), POD, "n")
    assert log.calls == ["reserve R1", "reserve R2", "unreserve R3", "unreserve R2", "unreserve R1"]


async def test_permit_wait_then_allow_by_every_waiting_plugin() -> None:
    fw = make(permit=[Waiter("W1"), Waiter("W2")])
    status = fw.run_permit(CycleState(), POD, "n")
    assert status is not None
    assert status.code == Code.WAIT
    waiting = asyncio.ensure_future(fw.wait_on_permit(POD))
    fw.handle.allow_waiting_pod("p", "W1")
    await asyncio.sleep(0)
    assert not waiting.done()
    fw.handle.allow_waiting_pod("p", "W2")
    assert await asyncio.wait_for(waiting, 1) is None
    assert fw.handle.waiting_pods == {}


async def test_permit_reject() -> None:
    fw = make(permit=[Waiter("W1")])
    fw.run_permit(CycleState(), POD, "n")
    waiting = asyncio.ensure_future(fw.wait_on_permit(POD))
    fw.handle.reject_waiting_pod("p", "W1", "not today")
    status = await asyncio.wait_for(waiting, 1)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == ("not today",)
    assert status.plugin == "W1"


async def test_permit_timeout_rejects() -> None:
    fw = make(permit=[Waiter("W1", timeout=0.05)])
    fw.run_permit(CycleState(), POD, "n")
    status = await asyncio.wait_for(fw.wait_on_permit(POD), 2)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE
    assert "timeout" in status.message


@pytest.mark.parametrize(
    ("statuses", "expected_calls", "expected_code"),
    [
        ((Status(Code.SKIP), None), ["bind A", "bind B"], None),
        ((None, None), ["bind A"], None),
        ((Status(Code.SKIP), Status(Code.SKIP)), ["bind A", "bind B"], Code.SKIP),
        ((Status.as_error(RuntimeError("x")), None), ["bind A"], Code.ERROR),
    ],
)
async def test_bind_skip_passes_to_the_next_binder(
    statuses: tuple[Status | None, Status | None], expected_calls: list[str], expected_code: Code | None
) -> None:
    log = Recorder()
    fw = make(bind=[Binder("A", log, statuses[0]), Binder("B", log, statuses[1])])
    status = await fw.run_bind(CycleState(), POD, "n")
    assert log.calls == expected_calls
    assert (status.code if status else None) == expected_code


class Gate:
    name = "Gate"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return Status.unresolvable("gated") if pod.name == "p" else None


class Preempt:
    def __init__(self, name: str, nominate: str | None, status: Status | None) -> None:
        self.name = name
        self.nominate = nominate
        self.status = status
        self.calls = 0

    def post_filter(self, state: CycleState, pod: Pod, node_to_status: object) -> tuple[str | None, Status | None]:
        self.calls += 1
        return self.nominate, self.status


class PreBinder:
    def __init__(self, name: str, log: Recorder, status: Status | None) -> None:
        self.name = name
        self.log = log
        self.status = status

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.calls.append(f"prebind {self.name}")
        return self.status


class PostBinder:
    def __init__(self, name: str, log: Recorder) -> None:
        self.name = name
        self.log = log

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.calls.append(f"postbind {self.name}")


def test_pre_enqueue_status_names_the_plugin() -> None:
    fw = make(preEnqueue=[Gate()])
    status = fw.run_pre_enqueue(POD)
    assert status is not None
    assert status.plugin == "Gate"
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_post_filter_stops_at_the_first_success_and_collects_messages() -> None:
    first = Preempt("P1", None, Status.unschedulable("no victims"))
    second = Preempt("P2", "n1", None)
    third = Preempt("P3", None, None)
    nominated, status = make(postFilter=[first, second, third]).run_post_filter(CycleState(), POD, NodeToStatus())
    assert (nominated, status) == ("n1", None)
    assert third.calls == 0
    nominated, status = make(postFilter=[first]).run_post_filter(CycleState(), POD, NodeToStatus())
    assert nominated is None
    assert status is not None
    assert status.reasons == ("no victims",)


async def test_pre_bind_failure_stops_and_post_bind_runs_all() -> None:
    log = Recorder()
    fw = make(
        preBind=[
            PreBinder("A", log, None),
            PreBinder("B", log, Status.as_error(RuntimeError("volume"))),
            PreBinder("C", log, None),
        ],
        postBind=[PostBinder("X", log), PostBinder("Y", log)],
    )
    status = await fw.run_pre_bind(CycleState(), POD, "n")
    assert status is not None
    assert status.plugin == "B"
    # kube's runPreBindPlugins wraps the error: the pod's SchedulerError message names the plugin.
    assert status.code == Code.ERROR and status.message == 'running PreBind plugin "B": volume'
    fw.run_post_bind(CycleState(), POD, "n")
    assert log.calls == ["prebind A", "prebind B", "postbind X", "postbind Y"]


async def test_pre_bind_rejection_keeps_its_reasons() -> None:
    fw = make(preBind=[PreBinder("A", Recorder(), Status.unschedulable("no room", plugin="A"))])
    status = await fw.run_pre_bind(CycleState(), POD, "n")
    assert status == Status.unschedulable("no room", plugin="A")


def test_a_handle_nothing_wired_fails_loudly_where_a_plugin_reaches_the_scheduler() -> None:
    """No silent placeholders: before `wire`, activate/spawn/pod_exists/nominator/events raise."""
    from scheduler.framework.runtime import HandleNotWired

    handle = FrameworkHandle(FakeApiClient(), Snapshot())
    reaches = (
        lambda: handle.activate,
        lambda: handle.spawn,
        lambda: handle.pod_exists,
        lambda: handle.nominator,
        lambda: handle.event_recorder("any"),
    )
    for reach in reaches:
        with pytest.raises(HandleNotWired, match="used before wire"):
            reach()


def test_the_scheduler_wires_every_profiles_handle_when_it_is_built() -> None:
    from scheduler.app import build_scheduler, full_registry
    from scheduler.config import default_config

    sched = build_scheduler(default_config("secondary-scheduler"), full_registry(), FakeApiClient(), {})
    for fw in sched.frameworks.values():
        wiring = fw.handle.wiring
        assert fw.handle.snapshot is sched.snapshot is wiring.snapshot
        assert (wiring.activate, wiring.spawn, wiring.pod_exists) == (
            sched.queue.activate,
            sched.spawn,
            sched.pod_exists,
        )
        assert wiring.nominator is sched.nominator and wiring.recorders is sched.recorders
