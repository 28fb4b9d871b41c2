"""The agreement harness's pure parts: the seeded scenario generator, the reading of
kube-scheduler's score log lines, and the PostFilter cut (no cluster)."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness import generator
from harness.agreement.cli import main
from harness.agreement.compare import (
    QUEUE_RACE_ATTEMPTS,
    GroupObservation,
    KubeScores,
    Observation,
    Outcome,
    PodComparison,
    Replay,
    ScenarioResult,
    SideRun,
    compare_group,
    kube_top_check,
    parse_kube_scores,
    plugins_differing,
    split_post_filter,
)
from harness.agreement.report import AgreementReport, RunInfo, publish
from harness.agreement.run import (
    BOUND_QUIET_SECONDS,
    groups_settled,
    play_again,
    queue_race,
    queued_pod_count,
)
from harness.agreement.scenarios import (
    ActionStep,
    GroupStep,
    ScenarioError,
    generated_scenarios,
    parse_scenario,
)
from scheduler.model.objects import Pod
from scheduler.model.quantity import parse_quantity

SEED = 137


def test_a_generated_scenario_depends_only_on_seed_and_index() -> None:
    assert generator.generate(SEED, 7) == generator.generate(SEED, 7)
    assert generator.generate_many(SEED, 10)[7] == generator.generate(SEED, 7)
    assert generator.generate(SEED, 7) != generator.generate(SEED, 8)
    assert generator.generate(SEED, 7) != generator.generate(SEED + 1, 7)
    assert generator.generate(SEED, 7)["name"] == "gen-137-7"


def test_generated_scenarios_parse_and_stay_in_bounds() -> None:
    scenarios = generated_scenarios(SEED, 300)
    assert [s.name for s in scenarios[:2]] == ["gen-137-0", "gen-137-1"]
    assert all(s.generated for s in scenarios)
    assert {len(s.nodes) for s in scenarios} == set(range(3, 11))
    assert all(len(s.steps) == 1 for s in scenarios)
    for scenario in scenarios:
        for node in scenario.nodes:
            # The status travels in the create body (kwok must not initialise it).
            assert node["status"]["allocatable"] == node["status"]["capacity"]


def _features(raw_scenarios: list[dict[str, object]]) -> Counter[str]:
    seen: Counter[str] = Counter()
    for raw in raw_scenarios:
        for node in raw["nodes"]:  # type: ignore[attr-defined]
            for taint in node.get("taints") or ():
                seen[f"taint {taint['effect']}"] += 1
            seen["unschedulable node"] += bool(node.get("unschedulable"))
            seen["node images"] += bool(node.get("images"))
        for pod in raw["existingPods"]:  # type: ignore[attr-defined]
            seen["existing host port"] += "hostPort" in pod
            affinity = (pod.get("spec") or {}).get("affinity") or {}
            seen["existing anti-affinity"] += "podAntiAffinity" in affinity
            seen["existing affinity"] += "podAffinity" in affinity
        pending = raw["pods"][0]  # type: ignore[index]
        spec = pending["spec"]
        affinity = spec.get("affinity") or {}
        node_affinity = affinity.get("nodeAffinity") or {}
        seen["nodeSelector"] += "nodeSelector" in spec
        seen["required node affinity"] += "requiredDuringSchedulingIgnoredDuringExecution" in node_affinity
        seen["preferred node affinity"] += "preferredDuringSchedulingIgnoredDuringExecution" in node_affinity
        for kind in ("podAffinity", "podAntiAffinity"):
            for when in ("required", "preferred"):
                seen[f"{when} {kind}"] += f"{when}DuringSchedulingIgnoredDuringExecution" in (affinity.get(kind) or {})
        seen["tolerations"] += "tolerations" in spec
        for constraint in spec.get("topologySpreadConstraints") or ():
            seen[f"spread {constraint['whenUnsatisfiable']}"] += 1
        seen["host port"] += any(c.get("ports") for c in spec["containers"])
        seen["images"] += any(c["image"] != generator.PAUSE_IMAGE for c in spec["containers"])
        init = spec.get("initContainers") or ()
        seen["init container"] += any(c.get("restartPolicy") != "Always" for c in init)
        seen["sidecar"] += any(c.get("restartPolicy") == "Always" for c in init)
        seen["pod-level resources"] += "resources" in spec
        seen["overhead"] += "runtimeClassName" in spec
    return seen


def test_generated_scenarios_reach_every_feature_the_issue_names() -> None:
    seen = _features(generator.generate_many(SEED, 300))
    wanted = [
        "taint NoSchedule",
        "taint PreferNoSchedule",
        "taint NoExecute",
        "unschedulable node",
        "node images",
        "existing host port",
        "existing anti-affinity",
        "existing affinity",
        "nodeSelector",
        "required node affinity",
        "preferred node affinity",
        "required podAffinity",
        "preferred podAffinity",
        "required podAntiAffinity",
        "preferred podAntiAffinity",
        "tolerations",
        "spread DoNotSchedule",
        "spread ScheduleAnyway",
        "host port",
        "images",
        "init container",
        "sidecar",
        "pod-level resources",
        "overhead",
    ]
    assert [feature for feature in wanted if seen[feature] < 10] == []


def test_pod_level_requests_cover_the_containers_aggregate() -> None:
    """The apiserver rejects pod-level requests below the containers' aggregate."""
    checked = 0
    for raw in generator.generate_many(SEED, 300):
        scenario = parse_scenario(str(raw["name"]), {k: v for k, v in raw.items() if k != "name"})
        pod = copy.deepcopy(scenario.steps[0].pod)  # type: ignore[union-attr]
        pod_level = pod["spec"].pop("resources", None)
        if pod_level is None:
            continue
        aggregate = Pod.from_raw(pod).requests
        requests = pod_level["requests"]
        if "cpu" in requests:
            assert parse_quantity(requests["cpu"]) * 1000 >= aggregate.milli_cpu
        if "memory" in requests:
            assert parse_quantity(requests["memory"]) >= aggregate.memory
        checked += 1
    assert checked >= 30


def _plugin(pod: str, node: str, score: int) -> str:
    return (
        f'I1201 10:00:00.000001 1 schedule_one.go:984] "Plugin scored node for pod" pod="{pod}" '
        f'plugin="TaintToleration" node="{node}" score={score}'
    )


def _final(pod: str, node: str, score: int) -> str:
    line = 'I1201 10:00:00.000002 1 schedule_one.go:1052] "Calculated node\'s final score for pod"'
    return f'{line} pod="{pod}" node="{node}" score={score}'


# Two attempts for default/p (the second one bound it), one for default/other in between.
LOG = "\n".join(
    [
        _plugin("default/p", "n1", 300),
        _plugin("default/p", "n2", 0),
        _final("default/p", "n1", 380),
        _final("default/p", "n2", 90),
        _final("default/other", "n1", 1),
        _plugin("default/p", "n1", 0),
        _plugin("default/p", "n2", 300),
        _final("default/p", "n1", 100),
        _final("default/p", "n2", 100),
        _final("default/p", "n3", 40),
    ]
)


def test_the_last_scoring_of_the_pod_counts() -> None:
    scores = parse_kube_scores(LOG, "default/p")
    assert scores.final == {"n1": 100, "n2": 100, "n3": 40}
    assert scores.plugins == {"n1": {"TaintToleration": 0}, "n2": {"TaintToleration": 300}}
    assert scores.top("n2") == ("n1", "n2")
    assert not scores.hinted
    assert parse_kube_scores(LOG, "default/other").final == {"n1": 1}


def test_a_pod_kube_scheduler_did_not_score_has_its_own_node_as_top_set() -> None:
    assert parse_kube_scores(LOG, "default/nobody") == KubeScores({}, {}, hinted=False)
    assert KubeScores({}, {}, hinted=False).top("n4") == ("n4",)
    hint = (
        'I1201 10:00:02.000000    1 batch.go:104] "OpportunisticBatch provided node hint" profile="x" '
        'pod="default/p" cycleCount=7 hint="n3" remainingNodes=1\n'
    )
    hinted = parse_kube_scores(LOG + "\n" + hint, "default/p")
    assert hinted.hinted and hinted.final == {}
    assert hinted.top("n3") == ("n3",)


def test_a_hinted_pod_is_judged_by_the_replayed_top_set_of_kube_schedulers_cluster() -> None:
    hinted = KubeScores({}, {}, hinted=True)
    kube = Observation("p3", Outcome("bound", "n1"), kube_scores=hinted)

    def check(ours: str, replayed: tuple[str, ...] | None) -> bool:
        return kube_top_check(kube, Observation("p3", Outcome("bound", ours)), replayed)[0]

    # A tie at the top of kube-scheduler's cluster: the hint could have named either.
    assert check("n4", ("n1", "n4"))
    assert not check("n2", ("n1", "n4"))
    # Without a replay, or when kube-scheduler's own node is not in it, only its node counts.
    assert not check("n4", None)
    assert not check("n4", ("n2", "n4"))
    assert check("n1", ("n2", "n4"))
    # A pod kube-scheduler scored is judged by its own scores, never by the replay.
    scored = Observation("p3", Outcome("bound", "n1"), kube_scores=KubeScores({"n1": 90, "n4": 80}, {}, hinted=False))
    assert not kube_top_check(scored, Observation("p3", Outcome("bound", "n4")), ("n1", "n4"))[0]


def test_kube_schedulers_queue_dump_is_counted_once_written() -> None:
    head = 'I1202 15:00:00.000000    1 dumper.go:62] "Dump of scheduling queue" summary="activeQ: 0"'
    pods = [f"\tname: m{i}, namespace: ns, uid: u{i}, phase: Pending, nominated node: \n" for i in range(3)]
    full = head + " pods=<\n" + "".join(pods) + " >\nI1202 15:00:00.1 next line\n"
    assert queued_pod_count(full) == 3
    # Half written: not yet an answer.
    assert queued_pod_count(head + " pods=<\n" + pods[0]) is None
    assert queued_pod_count(head) is None
    assert queued_pod_count(head + ' pods=""\n') == 0


def _queue_line(at: str, line: int, message: str, fields: str) -> str:
    return f'I1204 15:19:{at}   29750 scheduling_queue.go:{line}] "{message}" {fields}\n'


def test_queue_race_is_read_from_kube_schedulers_log() -> None:
    """gang-competing-min-count-partial once disagreed because kube-scheduler's AddPodGroup let its
    loop take group a with two of its three members (all queued before the PodGroup); the third was
    parked as a pending pod-group pod and bound alone later. Lines as kube-scheduler v1.37.2 logs
    them at -v=5: the race is a member parked inside AddPodGroup's burst; the same parking line
    after the burst (a member's status update while its group's cycle runs) is not."""
    first = _queue_line(
        "01.324931",
        927,
        "Pod was added to root group as the first member pod",
        'rootType="podgroup" root="default/a" pod="default/a-0"',
    )
    joined = _queue_line(
        "01.324967",
        960,
        "Pod added to existing root group info",
        'rootType="podgroup" root="default/a" pod="default/a-1" queue="Active"',
    )
    parked = _queue_line(
        "01.324993",
        918,
        "Pod added to pending pod group pods, waiting for its root group to be requeued",
        'podGroupType="podgroup" podGroup="default/a" pod="default/a-2" rootType="podgroup" root="default/a"',
    )
    done = _queue_line(
        "01.324996",
        1597,
        "Pod Group was added to the root group and its pods were attempted to be moved from "
        "incompletePodGroupPods to the queue",
        'rootType="podgroup" root="default/a" podGroup="default/a" podsLen=3',
    )
    in_flight = _queue_line(
        "01.328128", 1954, "Event received while entities are in flight", 'event="scheduling.k8s.io/PodGroupAdd"'
    )
    scored = (
        'I1204 15:19:01.325401   29750 schedule_one.go:984] "Plugin scored node for pod" podGroupType="podgroup" '
        'podGroup="default/a" pod="default/a-0" plugin="TaintToleration" node="n1" score=300\n'
    )
    members = ["default/a-0", "default/a-1", "default/a-2"]
    raced = queue_race(first + scored + joined + parked + done, members)
    assert raced is not None and "default/a-2" in raced and "a-0" not in raced and "a-1" not in raced
    # All joined in the burst; a-2's status update parks it later, while the cycle runs.
    a2_joined = joined.replace("a-1", "a-2")
    assert queue_race(first + joined + a2_joined + done + in_flight + parked, members) is None
    assert queue_race(first + joined + a2_joined + done + parked, members) is None
    # Only the members asked about (those queued before their PodGroup) count.
    assert queue_race(first + joined + parked + done, ["default/b-0"]) is None
    assert queue_race("", members) is None


def test_the_report_lists_kube_runs_played_again() -> None:
    """A scenario whose kube-scheduler run was played again says so in RESULTS.md and the text."""
    scenario = parse_scenario("raced", {"nodes": [{"name": "n1"}], "pods": [{"name": "p"}]})
    why = "kube-scheduler's queue began a pod group's cycle without ns/a-2"
    info = RunInfo("2026-12-04 15:40 UTC", "abc1234")
    report = AgreementReport([ScenarioResult(scenario, "compared", reruns=(why,))], 1.0, (), info)
    assert f"- raced: {why}" in report.markdown()
    assert f"raced: {why}" in report.text()
    plain = AgreementReport([ScenarioResult(scenario, "compared")], 1.0, (), info)
    assert "played again" not in plain.markdown() and "played again" not in plain.text()


def test_a_raced_run_is_played_again_until_the_last_which_is_compared() -> None:
    """CI at 472a5d3: kube-scheduler's queue raced in all three runs of
    gang-topology-min-count-below-size, whose outcome does not hang on the race, and the scenario
    failed as an error without being compared. A raced run is played again while runs remain; the
    last is compared, raced or not; a run that failed is never played again."""
    why = "kube-scheduler's queue began a pod group's cycle without default/g-1"
    assert not play_again(SideRun())
    assert play_again(SideRun(raced=why))
    assert not play_again(SideRun(raced=why, error="kwok did not start every bound pod"))
    assert play_again(SideRun(raced=why, reruns=[why] * (QUEUE_RACE_ATTEMPTS - 2)))
    assert not play_again(SideRun(raced=why, reruns=[why] * (QUEUE_RACE_ATTEMPTS - 1)))


def test_a_compared_raced_run_is_named_in_the_report_and_in_a_disagreement() -> None:
    scenario = parse_scenario("raced", {"nodes": [{"name": "n1"}], "pods": [{"name": "p"}]})
    why = "kube-scheduler's queue began a pod group's cycle without ns/a-2"
    info = RunInfo("2026-12-05 01:00 UTC", "abc1234")
    agreeing = ScenarioResult(scenario, "compared", reruns=(why, why), raced=why)
    report = AgreementReport([agreeing], 1.0, (), info)
    assert f"- raced: compared although this run raced too: {why}" in report.markdown()
    assert f"raced: compared although this run raced too: {why}" in report.text()
    assert agreeing.agrees and agreeing.diff() == ""
    group = GroupObservation("a", ("p",), (Outcome("bound", node="n1"),), 1, (), ())
    other = GroupObservation("a", ("p",), (Outcome("pending"),), 1, (), ())
    disagreeing = dataclasses.replace(agreeing, groups=(compare_group(group, other, {}),))
    assert not disagreeing.agrees
    assert f"raced, as all before it: {why}" in disagreeing.diff()


@pytest.mark.parametrize(
    ("message", "kept", "post_filter"),
    [
        (
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
            "3 No preemption victims found for incoming pod.",
            "0/3 nodes are available: 3 Insufficient cpu.",
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
        ),
        (
            "0/1 nodes are available: 1 node(s) were unschedulable.",
            "0/1 nodes are available: 1 node(s) were unschedulable.",
            "",
        ),
        (
            "0/2 nodes are available: 2 Insufficient memory. not found",
            "0/2 nodes are available: 2 Insufficient memory.",
            "not found",
        ),
    ],
)
def test_the_post_filter_part_is_cut(message: str, kept: str, post_filter: str) -> None:
    assert split_post_filter(message) == (kept, post_filter)


def test_plugins_whose_scores_differ_are_named() -> None:
    kube = KubeScores(
        {"n1": 380, "n2": 390},
        {
            "n1": {"TaintToleration": 300, "NodeResourcesFit": 80, "VolumeBinding": 0},
            "n2": {"TaintToleration": 300, "NodeResourcesFit": 90},
        },
        hinted=False,
    )
    ours = Replay(
        ("n1", "n2"),
        ("n2",),
        {"n1": 380, "n2": 392},
        "",
        {
            "n1": {"TaintToleration": 300, "NodeResourcesFit": 80},
            "n2": {"TaintToleration": 300, "NodeResourcesFit": 92},
        },
    )
    assert plugins_differing(kube, ours) == ("NodeResourcesFit",)
    same = Replay(("n1", "n2"), ("n2",), dict(kube.final), "", {n: dict(p) for n, p in kube.plugins.items()})
    assert plugins_differing(kube, same) == ()


def _result(*pods: PodComparison, name: str = "s") -> ScenarioResult:
    scenario = parse_scenario(name, {"nodes": [{"name": "n1"}], "pods": [{"name": "p"}]})
    return ScenarioResult(scenario, "compared", pods)


def _placement(kube: str, ours: str, differing: tuple[str, ...]) -> PodComparison:
    return PodComparison(
        "p",
        Outcome("bound", node=kube),
        Outcome("bound", node=ours),
        verdict_agrees=True,
        message_agrees=True,
        kube_top=kube == ours,
        replay_top=True,
        post_filter="",
        plugins_differing=differing,
    )


BALANCED = "NodeResourcesBalancedAllocation"


def _report(*results: ScenarioResult) -> AgreementReport:
    return AgreementReport(list(results), 1.0, ("NodeResourcesFit",), RunInfo("now", "test"))


def test_every_disagreement_is_a_failure_whatever_its_cause() -> None:
    """A placement that differs only by BalancedAllocation's scores, in a scenario once listed as a
    known disagreement (gen-137-4), an error in a run, and a scenario not run at all all fail;
    only the agreeing scenario passes."""
    agreeing = _result(_placement("n1", "n1", (BALANCED,)), name="agreeing")
    balanced = _result(_placement("n1", "n2", (BALANCED,)), name="balanced-only")
    formerly_known = _result(_placement("n1", "n2", ()), name="gen-137-4")
    errored = ScenarioResult(agreeing.scenario, "error", error="kube-scheduler: node n1: HTTP 422")
    pending = ScenarioResult(agreeing.scenario, "pending", error="not run: Foo not registered")
    assert agreeing.agrees
    for result in (balanced, formerly_known, errored, pending):
        assert not result.agrees
    report = _report(agreeing, balanced, formerly_known, errored, pending)
    assert report.failures == [balanced, formerly_known, errored, pending]
    assert [row[-1] for row in report.table_rows()[:3]] == ["agree", "DISAGREE", "DISAGREE"]
    assert "known" not in report.text() and "known" not in report.markdown()
    assert "kube-scheduler: node n1: HTTP 422" in report.text()


def test_make_agreement_exits_non_zero_on_a_disagreement_or_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agreeing = _result(_placement("n1", "n1", ()), name="agreeing")
    assert publish(_report(agreeing), tmp_path / "ok.md") == 0
    errored = ScenarioResult(_result(name="gen-137-30").scenario, "error", error="ours: timed out")
    assert publish(_report(agreeing, errored), tmp_path / "errored.md") == 1
    assert "1 of 2 scenarios failed: gen-137-30" in capsys.readouterr().err
    disagreeing = _result(_placement("n1", "n2", (BALANCED,)), name="balanced-only")
    assert publish(_report(agreeing, disagreeing), None) == 1
    assert "ERROR" in (tmp_path / "errored.md").read_text()


def test_make_agreement_exits_non_zero_when_a_scenario_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario about a plugin we do not register is never run (no control plane starts for it):
    that is a failure of the run, not a quiet pass."""
    scenario = {"plugins": ["NoSuchPlugin"], "nodes": [{"name": "n1"}], "pods": [{"name": "p"}]}
    (tmp_path / "unregistered.yaml").write_text(yaml.safe_dump(scenario))
    assert main(["--scenarios", str(tmp_path), "--results", str(tmp_path / "RESULTS.md")]) == 1
    assert "scenarios failed: unregistered" in capsys.readouterr().err


# ---- pod groups ------------------------------------------------------------------------------------

GANG = {
    "featureGates": {"GenericWorkload": True},
    "nodes": [{"name": "n1"}],
    "pods": [{"group": {"name": "g", "minCount": 2, "topology": ["zone"]}, "replicas": 2, "template": {"cpu": "1"}}],
}


def test_a_group_step_makes_a_pod_group_and_members_joined_to_it() -> None:
    scenario = parse_scenario("gang", GANG)
    (group,) = scenario.groups
    assert group.pod_group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group.pod_group["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topology": [{"key": "zone"}]},
    }
    assert group.member_names == ("g-0", "g-1")
    assert all(pod["spec"]["schedulingGroup"] == {"podGroupName": "g"} for pod in group.members)
    assert scenario.feature_gates == (("GenericWorkload", True),)


def test_actions_on_nodes_pods_and_pod_groups_are_not_other_objects() -> None:
    """A PodGroup patch was sent down the other-objects path (create or delete by the body's kind)
    and crashed every gang scenario that lowers a minCount."""
    actions = [
        {"action": "patch", "podGroup": "g", "body": {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}},
        {"action": "patch", "node": "n1", "body": {"spec": {"unschedulable": True}}},
        {"action": "delete", "pod": "g-0"},
    ]
    scenario = parse_scenario("gang", {**GANG, "pods": [*GANG["pods"], *actions]})
    steps = [step for step in scenario.steps if isinstance(step, ActionStep)]
    assert [(step.kind, step.on_object) for step in steps] == [("podGroup", False), ("node", False), ("pod", False)]


def test_interleaved_groups_are_created_round_robin() -> None:
    raw = copy.deepcopy(GANG)
    raw["pods"] = [
        {
            "interleave": True,
            "groups": [
                {"group": {"name": "a"}, "replicas": 2, "template": {}},
                {"group": {"name": "b"}, "replicas": 1, "template": {}},
            ],
        }
    ]
    (step,) = parse_scenario("two", raw).steps
    assert isinstance(step, GroupStep)
    assert [pod["metadata"]["name"] for _group, pod in step.creation_order()] == ["a-0", "b-0", "a-1"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"featureGates": {}}, "pod groups need GenericWorkload: true"),
        ({"pods": [{"group": {"name": "g"}}]}, "exactly one of `members:` or `replicas:`"),
        ({"pods": [{"group": {"name": "g", "disruptionMode": "some"}, "replicas": 1}]}, "is not single or all"),
        ({"pods": [{"group": {"name": "g", "min": 2}, "replicas": 1}]}, "unknown key(s) ['min']"),
    ],
)
def test_a_malformed_group_names_the_field(change: dict[str, object], error: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(error)):
        parse_scenario("bad", {**GANG, **change})


def test_a_group_members_scores_are_read_past_the_group_keys() -> None:
    line = (
        'I1202 07:13:16.825058 1 schedule_one.go:1052] "Calculated node\'s final score for pod" '
        'podGroupType="podgroup" podGroup="default/g" pod="default/g-0" node="n1" score=414'
    )
    plugin = (
        'I1202 07:13:16.824967 1 schedule_one.go:984] "Plugin scored node for pod" podGroupType="podgroup" '
        'podGroup="default/g" pod="default/g-0" plugin="NodeResourcesFit" node="n1" score=59'
    )
    scores = parse_kube_scores(f"{plugin}\n{line}", "default/g-0")
    assert scores.final == {"n1": 414}
    assert scores.plugins == {"n1": {"NodeResourcesFit": 59}}


def test_a_group_message_loses_its_pod_group_preemption_part() -> None:
    message = (
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, pod group preemption: No preemption "
        "victims found for incoming preemptor"
    )
    assert split_post_filter(message) == (
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
        "pod group preemption: No preemption victims found for incoming preemptor",
    )


def _group(
    outcomes: list[Outcome], conditions: tuple[tuple[str, str, str, str], ...] = (), topology: tuple[str, ...] = ()
) -> GroupObservation:
    members = tuple(f"g-{i}" for i in range(len(outcomes)))
    return GroupObservation("g", members, tuple(outcomes), 2, topology, conditions)


UNSCHEDULABLE = (
    "PodGroupInitiallyScheduled",
    "False",
    "Unschedulable",
    "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining",
)


@pytest.mark.parametrize(
    ("kube", "ours", "agrees", "note"),
    [
        (
            _group([Outcome("bound", "n1"), Outcome("bound", "n2")]),
            _group([Outcome("bound", "n2"), Outcome("bound", "n1")]),
            True,
            "",
        ),
        (
            _group([Outcome("unschedulable", message="x"), Outcome("unschedulable", message="y")], (UNSCHEDULABLE,)),
            _group([Outcome("bound", "n1"), Outcome("unschedulable", message="y")], (UNSCHEDULABLE,)),
            False,
            "bound members: kube-scheduler [] vs ours ['g-0']",
        ),
        (
            _group([Outcome("pending"), Outcome("pending")], (UNSCHEDULABLE,)),
            _group(
                [Outcome("pending"), Outcome("pending")],
                ((*UNSCHEDULABLE[:3], UNSCHEDULABLE[3] + ", pod group preemption: not eligible"),),
            ),
            True,
            "",
        ),
        (
            _group([Outcome("pending"), Outcome("pending")], (UNSCHEDULABLE,)),
            _group([Outcome("pending"), Outcome("pending")]),
            False,
            "conditions: kube-scheduler",
        ),
        (  # a partly bound group's condition is kube-scheduler's race, not compared
            _group([Outcome("bound", "n1"), Outcome("unschedulable", message="x")], (UNSCHEDULABLE,)),
            _group(
                [Outcome("bound", "n1"), Outcome("unschedulable", message="x")],
                (("PodGroupInitiallyScheduled", "True", "Scheduled", ""),),
            ),
            True,
            "",
        ),
    ],
)
def test_groups_are_compared_by_verdict_members_and_conditions(
    kube: GroupObservation, ours: GroupObservation, agrees: bool, note: str
) -> None:
    result = compare_group(kube, ours, {})
    assert result.agrees == agrees
    assert any(n.startswith(note) for n in result.notes) if note else result.notes == ()


def test_our_members_of_a_topology_constrained_group_must_share_a_domain() -> None:
    labels = {"a1": {"zone": "a"}, "a2": {"zone": "a"}, "b1": {"zone": "b"}}
    kube = _group([Outcome("bound", "a1"), Outcome("bound", "a2")], topology=("zone",))
    together = _group([Outcome("bound", "a2"), Outcome("bound", "a1")], topology=("zone",))
    apart = _group([Outcome("bound", "a1"), Outcome("bound", "b1")], topology=("zone",))
    assert compare_group(kube, together, labels).placement_ok is True
    split = compare_group(kube, apart, labels)
    assert split.placement_ok is False and not split.agrees
    assert "span ['a', 'b'] of topology key zone" in split.notes[0]


def test_a_group_whose_members_are_bound_is_read_only_once_its_pod_group_stays_unchanged() -> None:
    # The condition is written beside the bindings: read at the last binding, it can be the older one.
    assert not groups_settled(True, 0.0, 11.0, False)
    assert not groups_settled(True, BOUND_QUIET_SECONDS / 2, 11.0, False)
    assert groups_settled(True, BOUND_QUIET_SECONDS, 11.0, False)
    # Members not all bound: the step's own quiet period, or the deadline, ends it.
    assert not groups_settled(False, 5.0, 11.0, False)
    assert groups_settled(False, 11.5, 11.0, False)
    assert groups_settled(False, 0.0, 11.0, True)
