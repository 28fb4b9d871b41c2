"""The agreement harness's DRA parts without a cluster: the short forms of resource.k8s.io objects
and pod claims, reading back what a pod's claims got, the claim-by-claim comparison (exact on one
node; a node's own pool read as LOCAL_POOL only when the two schedulers chose different nodes), the
`expect:` check against kube-scheduler's run, and what the dra-*.yaml scenarios cover."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.agreement.compare import (
    LOCAL_POOL,
    ClusterState,
    Observation,
    Outcome,
    SideRun,
    check_expectation,
    compare,
    compare_claims,
    node_local_pools,
    replay,
)
from harness.agreement.dra import (
    EXTENDED_RESOURCES,
    AllocatedDevice,
    ClaimOutcome,
    as_scheduled,
    claim_names,
    claim_outcome,
)
from harness.agreement.report import AgreementReport, RunInfo
from harness.agreement.scenarios import (
    ActionStep,
    Expectation,
    PodStep,
    ScenarioError,
    load_scenarios,
    parse_scenario,
    scheduler_config,
)
from scheduler.config import parse_config

Raw = dict[str, Any]

GPU_CLASS = {"gpu.example.com": 'device.driver == "gpu.example.com"'}


def _scenario(**extra: Any) -> Raw:
    return {"nodes": [{"name": "n1"}], "pods": [{"name": "p", "claims": ["c"]}], **extra}


def _objects(raw: Raw, kind: str) -> list[Raw]:
    return [o for o in parse_scenario("s", raw).objects if o["kind"] == kind]


# --------------------------------------------------------------------------- the format


def test_device_classes_from_an_expression_or_a_mapping() -> None:
    classes = _objects(
        _scenario(
            deviceClasses={
                "gpu": 'device.driver == "gpu.example.com"',
                "big": {"selectors": ["a", "b"], "extendedResourceName": "example.com/gpu"},
                "any": None,
            }
        ),
        "DeviceClass",
    )
    assert classes == [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "big"},
            "spec": {
                "selectors": [{"cel": {"expression": "a"}}, {"cel": {"expression": "b"}}],
                "extendedResourceName": "example.com/gpu",
            },
        },
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}},
    ]


def test_a_slice_from_short_keys() -> None:
    (counters, devices, shared) = _objects(
        _scenario(
            resourceSlices=[
                {"name": "n1-counters", "node": "n1", "sliceCount": 2, "sharedCounters": {"gpu-0": {"memory": "40Gi"}}},
                {
                    "name": "n1-devices",
                    "node": "n1",
                    "sliceCount": 2,
                    "devices": [
                        {
                            "name": "gpu",
                            "count": 2,
                            "attributes": {"model": "a100", "index": 3, "healthy": True, "fw": {"version": "1.2.3"}},
                            "capacity": {"memory": "40Gi", "cores": {"value": "8", "requestPolicy": {"default": "1"}}},
                            "consumesCounters": {"gpu-0": {"memory": "20Gi"}},
                        },
                        "spare",
                    ],
                },
                {"driver": "fabric.example.com", "pool": "fabric", "allNodes": True, "generation": 3},
            ]
        ),
        "ResourceSlice",
    )
    assert counters["spec"] == {
        "driver": "gpu.example.com",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 2},
        "nodeName": "n1",
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}],
    }
    gpu = {
        "attributes": {
            "model": {"string": "a100"},
            "index": {"int": 3},
            "healthy": {"bool": True},
            "fw": {"version": "1.2.3"},
        },
        "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "8", "requestPolicy": {"default": "1"}}},
        "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}],
    }
    assert devices["spec"]["devices"] == [{"name": "gpu-0", **gpu}, {"name": "gpu-1", **gpu}, {"name": "spare"}]
    assert shared == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric-fabric.example.com"},
        "spec": {
            "driver": "fabric.example.com",
            "pool": {"name": "fabric", "generation": 3, "resourceSliceCount": 1},
            "allNodes": True,
        },
    }


def test_claims_templates_and_pod_claims_from_short_keys() -> None:
    request = {"name": "gpu", "class": "gpu.example.com", "selectors": ["x"], "count": 2, "adminAccess": True}
    alternatives = {
        "name": "alt",
        "firstAvailable": [
            {"name": "big", "class": "big", "capacity": {"memory": "20Gi"}},
            {"name": "any", "class": "gpu.example.com", "mode": "All", "tolerations": [{"operator": "Exists"}]},
        ],
    }
    status: Raw = {"allocation": {"devices": {"results": []}}}
    raw = _scenario(
        namespaces={"admin": {"resource.kubernetes.io/admin-access": "true"}},
        claims=[
            {
                "name": "c",
                "namespace": "admin",
                "requests": [request, alternatives],
                "constraints": [{"matchAttribute": "gpu.example.com/numa"}],
                "status": status,
            }
        ],
        claimTemplates=[{"name": "t", "requests": [{"name": "gpu", "class": "gpu.example.com"}]}],
        pods=[{"name": "p", "namespace": "admin", "claims": ["c", {"name": "g", "template": "t"}]}],
    )
    (claim,) = _objects(raw, "ResourceClaim")
    assert claim["metadata"] == {"name": "c", "namespace": "admin"}
    assert claim["status"] == status
    assert claim["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": "x"}}],
                        "count": 2,
                        "adminAccess": True,
                    },
                },
                {
                    "name": "alt",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "big", "capacity": {"requests": {"memory": "20Gi"}}},
                        {
                            "name": "any",
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "All",
                            "tolerations": [{"operator": "Exists"}],
                        },
                    ],
                },
            ],
            "constraints": [{"matchAttribute": "gpu.example.com/numa"}],
        }
    }
    (template,) = _objects(raw, "ResourceClaimTemplate")
    assert template["metadata"] == {"name": "t", "namespace": "default"}
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.example.com"}
    scenario = parse_scenario("s", raw)
    assert scenario.uses_dra
    step = scenario.steps[0]
    assert isinstance(step, PodStep)
    assert step.pod["spec"]["resourceClaims"] == [
        {"name": "c", "resourceClaimName": "c"},
        {"name": "g", "resourceClaimTemplateName": "t"},
    ]
    assert step.pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "c"}, {"name": "g"}]}


def test_a_scenario_without_dra_does_not_use_it() -> None:
    assert not parse_scenario("s", {"nodes": [{"name": "n1"}], "pods": [{"name": "p"}]}).uses_dra
    extended_only = parse_scenario(
        "s", {"deviceClasses": GPU_CLASS, "nodes": [{"name": "n1"}], "pods": [{"name": "p"}]}
    )
    assert extended_only.uses_dra


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"resourceSlices": [{"devices": ["gpu"]}]}, "resourceSlices[0]: exactly one of node"),
        ({"resourceSlices": [{"node": "n1", "allNodes": True}]}, "resourceSlices[0]: exactly one of node"),
        ({"resourceSlices": [{"allNodes": True}]}, "resourceSlices[0].pool"),
        ({"resourceSlices": [{"node": "n1", "devices": [{"name": "g", "colour": "red"}]}]}, "devices[0]: unknown"),
        ({"claims": [{"name": "c"}]}, "claims[0].requests"),
        ({"claims": [{"name": "c", "requests": [{"name": "gpu"}]}]}, "claims[0].requests[0].class"),
        ({"claims": [{"name": "c", "requests": [{"name": "r", "class": "x", "mode": "All", "cnt": 1}]}]}, "unknown"),
        ({"claimTemplates": [{"name": "t", "requests": [{"name": "r", "class": "x"}], "status": {}}]}, "unknown"),
        ({"deviceClasses": {"gpu": {"selektor": "x"}}}, "deviceClasses.gpu: unknown"),
        ({"pods": [{"name": "p", "claims": [{"name": "g"}]}]}, "pods[0].claims[0]: exactly one of claim, template"),
        ({"pods": [{"name": "p", "expect": {"node": "n1", "verdict": "unschedulable"}}]}, "pods[0].expect"),
        ({"pods": [{"name": "p", "expect": {"nodes": "n1"}}]}, "pods[0].expect: unknown"),
        (
            {"pods": [{"action": "delete", "node": "n1", "observe": ["p"], "expect": {"q": "n1"}}]},
            "pods[0].expect: ['q'] not observed",
        ),
        ({"pods": [{"action": "patch", "object": {"kind": "X", "metadata": {"name": "x"}}}]}, "not patched"),
    ],
)
def test_a_bad_short_form_names_its_field(extra: Raw, field: str) -> None:
    with pytest.raises(ScenarioError, match="scenario s") as err:
        parse_scenario("s", _scenario(**extra))
    assert field in str(err.value)


def test_expectations_line_up_with_the_observations() -> None:
    scenario = parse_scenario(
        "s",
        {
            "nodes": [{"name": "n1"}],
            "pods": [
                {"name": "a", "keep": True, "expect": "unschedulable"},
                {"name": "b", "keep": True},
                {"name": "c", "expect": {"node": "n1", "devices": ["n1/gpu-1", "n1/gpu-0"]}},
                {
                    "action": "create",
                    "resourceSlice": {"node": "n1", "devices": ["gpu"]},
                    "observe": ["a", "b"],
                    "expect": {"b": "n1"},
                },
                {
                    "action": "delete",
                    "object": {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "DeviceTaintRule",
                        "metadata": {"name": "r"},
                    },
                    "observe": ["a"],
                },
                {
                    "action": "create",
                    "claim": {"name": "later", "requests": [{"name": "gpu", "class": "gpu.example.com"}]},
                    "observe": ["a"],
                    "expect": {"a": "pending"},
                },
            ],
        },
    )
    assert scenario.expectations() == [
        Expectation("unschedulable"),
        None,
        Expectation("bound", "n1", ("n1/gpu-0", "n1/gpu-1")),
        None,
        Expectation("bound", "n1"),
        None,
        Expectation("pending"),
    ]
    create, delete, claim = scenario.steps[3], scenario.steps[4], scenario.steps[5]
    assert isinstance(claim, ActionStep) and claim.body["kind"] == "ResourceClaim" and claim.label.endswith("later")
    assert isinstance(create, ActionStep) and isinstance(delete, ActionStep)
    assert (create.kind, create.name, create.on_object) == ("ResourceSlice", "n1-gpu.example.com", True)
    assert create.label == "after create ResourceSlice n1-gpu.example.com"
    assert (delete.kind, delete.name, delete.on_object) == ("DeviceTaintRule", "r", True)


# --------------------------------------------------------------------------- what a claim got


def test_claim_names_follow_the_pod_spec_then_its_status() -> None:
    pod = {
        "spec": {
            "resourceClaims": [
                {"name": "named", "resourceClaimName": "c1"},
                {"name": "from-template", "resourceClaimTemplateName": "t"},
                {"name": "not-made-yet", "resourceClaimTemplateName": "t"},
            ]
        },
        "status": {
            "resourceClaimStatuses": [{"name": "from-template", "resourceClaimName": "p-from-template-x7k2q"}],
            "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-abcde"},
        },
    }
    assert claim_names(pod) == [
        ("named", "c1"),
        ("from-template", "p-from-template-x7k2q"),
        ("not-made-yet", ""),
        (EXTENDED_RESOURCES, "p-extended-resources-abcde"),
    ]


def test_a_claim_outcome_keeps_what_runs_can_agree_on() -> None:
    claim = {
        "metadata": {"name": "c1"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "b", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"},
                        {
                            "request": "a",
                            "driver": "gpu.example.com",
                            "pool": "n1",
                            "device": "gpu-3",
                            "adminAccess": True,
                            "shareID": "5d1f0e3c-random",
                            "consumedCapacity": {"memory": "10Gi"},
                        },
                    ]
                },
                "allocationTimestamp": "2026-12-02T07:00:00Z",
            },
            "reservedFor": [
                {"resource": "pods", "name": "p2", "uid": "u2"},
                {"resource": "pods", "name": "p1", "uid": "u1"},
            ],
        },
    }
    outcome = claim_outcome("gpu", claim)
    assert outcome == ClaimOutcome(
        "gpu",
        "c1",
        True,
        (
            AllocatedDevice("a", "gpu.example.com", "n1", "gpu-3", True, (("memory", "10Gi"),)),
            AllocatedDevice("b", "gpu.example.com", "n1", "gpu-1"),
        ),
        ("p1", "p2"),
    )
    assert str(outcome) == (
        "gpu: [a: gpu.example.com/n1/gpu-3 (admin access) consumed memory=10Gi; b: gpu.example.com/n1/gpu-1], "
        "reserved for ['p1', 'p2']"
    )
    assert claim_outcome("gpu", {"metadata": {"name": "c1"}}) == ClaimOutcome("gpu", "c1")
    assert str(claim_outcome("gpu", None)) == "gpu: no claim"


def test_the_replay_meets_the_pod_and_its_template_claims_as_the_scheduler_did() -> None:
    """The cluster is captured before the pod exists; the claims the controller made from its
    templates are added, unallocated, and the pod gets the status naming them."""
    created = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}}
    statuses = [{"name": "g", "resourceClaimName": "p-g-x7k2q"}]
    current = {**created, "status": {"phase": "Running", "resourceClaimStatuses": statuses}}
    made = {"metadata": {"name": "p-g-x7k2q"}, "spec": {"devices": {}}, "status": {"allocation": {}, "reservedFor": []}}
    named = {"metadata": {"name": "shared"}, "spec": {"devices": {}}, "status": {"allocation": {}}}
    pod, claims = as_scheduled(created, current, [made, named])
    assert pod == {**created, "status": {"resourceClaimStatuses": statuses}}
    assert claims == [{"metadata": {"name": "p-g-x7k2q"}, "spec": {"devices": {}}}]
    assert as_scheduled(created, created, [named]) == (created, [])


# --------------------------------------------------------------------------- the comparison


def _claim(pool: str, device: str, driver: str = "gpu.example.com", reserved: tuple[str, ...] = ("p",)) -> ClaimOutcome:
    return ClaimOutcome("g", "p-g-abcde", True, (AllocatedDevice("gpu", driver, pool, device),), reserved)


def _renamed(claim: ClaimOutcome, name: str) -> ClaimOutcome:
    return ClaimOutcome(claim.key, name, claim.allocated, claim.devices, claim.reserved_for)


def _bound(node: str, *claims: ClaimOutcome) -> Observation:
    return Observation("p", Outcome("bound", node=node), claims=claims)


LOCAL = {("gpu.example.com", "n1"): "n1", ("gpu.example.com", "n2"): "n2"}


@pytest.mark.parametrize(
    ("kube", "ours", "agree"),
    [
        # The same node: devices compared exactly.
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n1", _claim("n1", "gpu-0")), True),
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n1", _claim("n1", "gpu-1")), False),
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n1", _claim("n1", "gpu-0", reserved=("p", "q"))), False),
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n1", ClaimOutcome("g", "p-g-abcde")), False),
        # A template's claim has a generated name: whether it exists counts, not its name.
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n1", _renamed(_claim("n1", "gpu-0"), "p-g-zzzzz")), True),
        # Different nodes (a tie): each node's own pool reads LOCAL_POOL, nothing else is forgiven.
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n2", _claim("n2", "gpu-0")), True),
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n2", _claim("n2", "gpu-1")), False),
        (_bound("n1", _claim("n1", "gpu-0")), _bound("n2", _claim("n1", "gpu-0")), False),
        (_bound("n1", _claim("fabric", "link-0")), _bound("n2", _claim("fabric", "link-1")), False),
        (_bound("n1", _claim("fabric", "link-0")), _bound("n2", _claim("fabric", "link-0")), True),
        # Not bound on either side: exact.
        (
            Observation("p", Outcome("unschedulable", message="m"), claims=(ClaimOutcome("g", "c"),)),
            Observation("p", Outcome("unschedulable", message="m"), claims=(ClaimOutcome("g", ""),)),
            False,
        ),
    ],
)
def test_claims_are_compared_exactly_but_for_a_tied_nodes_own_pool(
    kube: Observation, ours: Observation, agree: bool
) -> None:
    agrees, notes = compare_claims(kube, ours, LOCAL)
    assert agrees is agree
    assert bool(notes) is not agree
    if not agree and kube.outcome.node != ours.outcome.node:
        assert LOCAL_POOL in notes[0]


def test_no_claims_on_either_side_is_not_a_claim_check() -> None:
    plain = Observation("p", Outcome("bound", node="n1"))
    assert compare_claims(plain, plain, {}) == (None, [])
    extended = _bound("n1", ClaimOutcome(EXTENDED_RESOURCES, "p-extended-resources-x", True))
    assert compare_claims(extended, Observation("p", Outcome("bound", node="n1"), claims=()), {})[0] is False


def test_node_local_pools_come_from_the_scenarios_slices_and_its_actions() -> None:
    scenario = parse_scenario(
        "s",
        _scenario(
            resourceSlices=[{"node": "n1", "devices": ["gpu"]}, {"pool": "fabric", "allNodes": True}],
            pods=[
                {"name": "p", "keep": True, "claims": ["c"]},
                {"action": "create", "resourceSlice": {"node": "n2", "driver": "nic.example.com"}, "observe": ["p"]},
            ],
        ),
    )
    assert node_local_pools(scenario) == {("gpu.example.com", "n1"): "n1", ("nic.example.com", "n2"): "n2"}


@pytest.mark.parametrize(
    ("expect", "kube", "ok"),
    [
        (None, _bound("n1"), None),
        (Expectation("bound"), _bound("n2"), True),
        (Expectation("bound", "n1"), _bound("n2"), False),
        (Expectation("bound", "n1", ("n1/gpu-0",)), _bound("n1", _claim("n1", "gpu-0")), True),
        (Expectation("bound", "n1", ("n1/gpu-1",)), _bound("n1", _claim("n1", "gpu-0")), False),
        (Expectation("bound", "n1", ()), _bound("n1"), True),
        (Expectation("unschedulable"), Observation("p", Outcome("unschedulable", message="m")), True),
        (Expectation("unschedulable"), Observation("p", Outcome("error", message="m")), False),
        (Expectation("error"), Observation("p", Outcome("error", message="m")), True),
    ],
)
def test_kube_scheduler_is_held_to_the_scenarios_expectation(
    expect: Expectation | None, kube: Observation, ok: bool | None
) -> None:
    assert check_expectation(expect, kube)[0] is ok


def test_a_kube_scheduler_that_does_not_do_what_the_scenario_says_fails_the_scenario() -> None:
    """Even where ours does the same as kube-scheduler: the scenario no longer tests what it says."""
    scenario = parse_scenario("s", {"nodes": [{"name": "n1"}], "pods": [{"name": "p", "expect": "unschedulable"}]})
    run = SideRun([Observation("p", Outcome("bound", node="n1"))])
    result = compare(scenario, run, run, parse_config(scheduler_config("ours")))
    (pod,) = result.pods
    assert pod.verdict_agrees and pod.as_expected is False
    assert not result.agrees
    assert "tests something else" in result.diff()
    report = AgreementReport([result], 1.0, (), RunInfo("now", "test"))
    assert report.table_rows()[0][6:8] == ["0/0", "0/1"]


def test_the_replay_allocates_over_the_dra_objects_the_pod_met() -> None:
    """Our framework replayed over a captured cluster sees its DeviceClasses, ResourceSlices and
    claims: the pod fits only where the slice's devices are, and not once they are allocated."""
    scenario = parse_scenario(
        "s",
        {
            "deviceClasses": GPU_CLASS,
            "resourceSlices": [{"node": "n2", "devices": ["gpu-0"]}],
            # As the apiserver's defaulting leaves it (the cluster state is read back from it).
            "claims": [
                {
                    "name": "c",
                    "requests": [{"name": "gpu", "class": "gpu.example.com", "mode": "ExactCount", "count": 1}],
                }
            ],
            "nodes": [{"name": "n1"}, {"name": "n2"}],
            "pods": [{"name": "p", "claims": ["c"]}],
        },
    )
    step = scenario.steps[0]
    assert isinstance(step, PodStep)
    resources = tuple(
        (o["kind"], {**o, "metadata": {**o["metadata"], "uid": o["metadata"]["name"]}}) for o in scenario.objects
    )
    state = ClusterState(namespaces=(), workloads=(), nodes=scenario.nodes, pods=(), resources=resources)
    config = parse_config(scheduler_config("ours"))
    pod = {**step.pod, "metadata": {**step.pod["metadata"], "uid": "p-uid"}}
    assert replay(config, state, pod, "default").feasible == ("n2",)
    held = {"metadata": {"name": "held", "namespace": "default", "uid": "held"}, "spec": resources[2][1]["spec"]}
    held["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-0"}]}
        }
    }
    full = dataclasses.replace(state, resources=(*resources, ("ResourceClaim", {"kind": "ResourceClaim", **held})))
    assert replay(config, full, pod, "default").feasible == ()


# --------------------------------------------------------------------------- the scenarios


DRA_SCENARIOS = load_scenarios(only="dra-*")


def test_at_least_forty_dra_scenarios_each_saying_what_kube_scheduler_does() -> None:
    """Issue #21 asks for at least 40; each pod's `expect:` was checked against kube-scheduler
    v1.37.2, so a scenario that stops testing what it says fails the agreement run."""
    assert len(DRA_SCENARIOS) >= 40
    for scenario in DRA_SCENARIOS:
        assert scenario.uses_dra, scenario.name
        assert "DynamicResources" in scenario.plugins, scenario.name
        assert all(e is not None for e in scenario.expectations()), f"{scenario.name}: a pod without expect:"


def _features(scenario: Any) -> set[str]:
    seen = set()
    objects = [*scenario.objects, *(s.body for s in scenario.steps if isinstance(s, ActionStep) and s.on_object)]
    for obj in objects:
        spec = obj.get("spec") or {}
        kind = obj["kind"]
        if kind == "ResourceSlice":
            seen |= {"shared counters"} if spec.get("sharedCounters") else set()
            seen |= {"all nodes"} if spec.get("allNodes") else set()
            seen |= {"device taints"} if any(d.get("taints") for d in spec.get("devices") or ()) else set()
            seen |= (
                {"consumable capacity"}
                if any(d.get("allowMultipleAllocations") for d in spec.get("devices") or ())
                else set()
            )
        if kind == "DeviceTaintRule":
            seen.add("device taint rule")
        if kind == "DeviceClass" and spec.get("extendedResourceName"):
            seen.add("extended resource")
        claim_spec = {"ResourceClaim": spec, "ResourceClaimTemplate": spec.get("spec") or {}}.get(kind, {})
        for request in (claim_spec.get("devices") or {}).get("requests") or ():
            exactly = request.get("exactly") or {}
            seen |= {"first available"} if request.get("firstAvailable") else set()
            seen |= {"admin access"} if exactly.get("adminAccess") else set()
            seen |= {"tolerations"} if exactly.get("tolerations") else set()
            for selector in exactly.get("selectors") or ():
                expression = selector["cel"]["expression"]
                seen |= {"CEL on attributes"} if "device.attributes" in expression else set()
                seen |= {"CEL on capacity"} if "device.capacity" in expression else set()
    pods = [s.pod for s in scenario.steps if isinstance(s, PodStep)]
    claims = [c.get("resourceClaimName") for p in pods for c in p["spec"].get("resourceClaims") or ()]
    if any(name and claims.count(name) > 1 for name in claims):
        seen.add("claim shared by pods")
    if any(
        "/" in r
        for p in pods
        for c in p["spec"]["containers"]
        for r in (c.get("resources") or {}).get("requests") or {}
    ):
        seen.add("extended-resource requests")
    return seen


def test_the_dra_scenarios_cover_what_the_issue_lists() -> None:
    covered = set().union(*(_features(s) for s in DRA_SCENARIOS))
    wanted = {
        "shared counters",
        "all nodes",
        "device taints",
        "device taint rule",
        "tolerations",
        "consumable capacity",
        "extended resource",
        "extended-resource requests",
        "first available",
        "admin access",
        "CEL on attributes",
        "CEL on capacity",
        "claim shared by pods",
    }
    assert wanted <= covered, f"not covered: {sorted(wanted - covered)}"
