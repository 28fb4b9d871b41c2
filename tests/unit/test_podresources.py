"""resource.PodRequests, ported from component-helpers v0.37.2 resource/helpers_test.go.

Cases from TestPodResourceRequests, TestPodLevelResourceRequests and
TestPodRequestsAndLimitsVerticalScalingWrappers (requests only; limits are not scheduled on,
ExcludeOverhead/SkipPodLevelResources are options kube-scheduler 1.37 never passes), plus the
scheduler's own uses: framework.PodInfo's non-zero requests and the scorers' defaults.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from scheduler.model.objects import InvalidObject, Pod
from scheduler.model.podresources import (
    DEFAULT_NON_MISSING,
    PodResources,
    is_resize_infeasible,
)
from scheduler.model.quantity import parse, parse_quantity

Raw = dict[str, Any]
INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]


def c(name: str = "", sidecar: bool = False, extra: dict[str, str] | None = None, **requests: str) -> Raw:
    """A container; keyword requests (ephemeral_storage -> ephemeral-storage), `extra` for other names."""
    container: Raw = {"name": name}
    asked = {**{k.replace("_", "-"): v for k, v in requests.items()}, **(extra or {})}
    if asked:
        container["resources"] = {"requests": asked}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def cs(name: str, allocated: dict[str, str] | None = None, actual: dict[str, str] | None = None) -> Raw:
    status: Raw = {"name": name}
    if allocated is not None:
        status["allocatedResources"] = allocated
    if actual is not None:
        status["resources"] = {"requests": actual}
    return status


def pod(
    containers: list[Raw] = (),  # type: ignore[assignment]
    init: list[Raw] = (),  # type: ignore[assignment]
    overhead: dict[str, str] | None = None,
    pod_level: dict[str, str] | None = None,
    statuses: list[Raw] = (),  # type: ignore[assignment]
    init_statuses: list[Raw] = (),  # type: ignore[assignment]
    conditions: list[Raw] = (),  # type: ignore[assignment]
    status: Raw | None = None,
) -> Raw:
    spec: Raw = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if overhead is not None:
        spec["overhead"] = overhead
    if pod_level is not None:
        spec["resources"] = {"requests": pod_level}
    st: Raw = dict(status or {})
    if statuses:
        st["containerStatuses"] = list(statuses)
    if init_statuses:
        st["initContainerStatuses"] = list(init_statuses)
    if conditions:
        st["conditions"] = list(conditions)
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": st}


def amounts(**expected: str) -> dict[str, Decimal]:
    return {k.replace("_", "-"): parse_quantity(v) for k, v in expected.items()}


def hp(**expected: str) -> dict[str, Decimal]:
    """hugepages-<size> keys (Python names cannot hold the dash)."""
    return {f"hugepages-{size}": parse_quantity(v) for size, v in expected.items()}


STATUS_CASES = [
    # TestPodResourceRequests
    ("larger init container", pod([c(cpu="1")], [c(cpu="4")]), False, amounts(cpu="4")),
    ("larger containers", pod([c(cpu="2"), c(cpu="3")], [c(cpu="2")]), False, amounts(cpu="5")),
    (
        "pod overhead included",
        pod([c(cpu="2"), c(cpu="3")], [c(cpu="2")], overhead={"cpu": "1", "memory": "1Gi"}),
        False,
        amounts(cpu="6", memory="1Gi"),
    ),
    (
        "resized, infeasible",
        pod([c("container-1", cpu="4")], statuses=[cs("container-1", actual={"cpu": "2"})], conditions=INFEASIBLE),
        True,
        amounts(cpu="2"),
    ),
    (
        "resized, infeasible & in-progress",
        pod(
            [c("container-1", cpu="6")],
            statuses=[cs("container-1", allocated={"cpu": "4"}, actual={"cpu": "2"})],
            conditions=INFEASIBLE,
        ),
        True,
        amounts(cpu="4"),
    ),
    (
        "resized, no resize status",
        pod([c("container-1", cpu="4")], statuses=[cs("container-1", actual={"cpu": "2"})]),
        True,
        amounts(cpu="4"),
    ),
    (
        "resized: per-resource 3-way maximum",
        pod(
            [c("container-1", cpu="30m", memory="20M", ephemeral_storage="10G")],
            statuses=[
                cs(
                    "container-1",
                    allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                    actual={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                )
            ],
        ),
        True,
        amounts(cpu="30m", memory="30M", ephemeral_storage="30G"),
    ),
    (
        "resized, infeasible, but don't use status",
        pod([c("container-1", cpu="4")], statuses=[cs("container-1", actual={"cpu": "2"})], conditions=INFEASIBLE),
        False,
        amounts(cpu="4"),
    ),
    (
        "resized, restartable init container, infeasible",
        pod(
            [],
            [c("restartable-init-1", sidecar=True, cpu="4")],
            init_statuses=[cs("restartable-init-1", actual={"cpu": "2"})],
            conditions=INFEASIBLE,
        ),
        True,
        amounts(cpu="2"),
    ),
    (
        "resized, restartable init container, no resize status",
        pod(
            [],
            [c("restartable-init-1", sidecar=True, cpu="4")],
            init_statuses=[cs("restartable-init-1", actual={"cpu": "2"})],
        ),
        True,
        amounts(cpu="4"),
    ),
    (
        "resized, restartable init container, infeasible, but don't use status",
        pod(
            [],
            [c("restartable-init-1", sidecar=True, cpu="4")],
            init_statuses=[cs("restartable-init-1", actual={"cpu": "2"})],
            conditions=INFEASIBLE,
        ),
        False,
        amounts(cpu="4"),
    ),
    (
        "restartable init container",
        pod([c("container-1", cpu="1")], [c("restartable-init-1", sidecar=True, cpu="1")]),
        False,
        amounts(cpu="2"),
    ),
    (
        "multiple restartable init containers",
        pod(
            [c("container-1", cpu="1")],
            [
                c("init-1", cpu="5"),
                c("restartable-init-1", sidecar=True, cpu="1"),
                c("restartable-init-2", sidecar=True, cpu="2"),
                c("restartable-init-3", sidecar=True, cpu="3"),
            ],
        ),
        False,
        amounts(cpu="7"),
    ),
    (
        "multiple restartable and regular init containers",
        pod(
            [c("container-1", cpu="1")],
            [
                c("init-1", cpu="5"),
                c("restartable-init-1", sidecar=True, cpu="1"),
                c("restartable-init-2", sidecar=True, cpu="2"),
                c("init-2", cpu="5"),
                c("restartable-init-3", sidecar=True, cpu="3"),
            ],
        ),
        False,
        amounts(cpu="8"),
    ),
    (
        "restartable-init, init and regular",
        pod([c("container-1", cpu="100")], [c("restartable-init-1", sidecar=True, cpu="10"), c("init-1", cpu="200")]),
        False,
        amounts(cpu="210"),
    ),
    (
        "aggregate request resolves max of sums instead of sum of maxes",
        pod(
            [c("c1", cpu="1"), c("c2", cpu="2")],
            statuses=[cs("c1", allocated={"cpu": "2"}), cs("c2", allocated={"cpu": "1"})],
        ),
        True,
        amounts(cpu="3"),
    ),
    # TestPodLevelResourceRequests
    ("nil", pod(), False, {}),
    ("pod level memory resource", pod(pod_level={"memory": "2Mi"}), False, amounts(memory="2Mi")),
    (
        "pod level memory and container level cpu resources",
        pod([c(cpu="2m")], pod_level={"memory": "2Mi"}),
        False,
        amounts(memory="2Mi", cpu="2m"),
    ),
    (
        "pod level unsupported resources set at both pod-level and container-level",
        pod([c(storage="3Mi")], pod_level={"storage": "2Mi"}),
        False,
        amounts(storage="3Mi"),
    ),
    (
        "pod level unsupported resources set at pod-level",
        pod([c(memory="3Mi")], pod_level={"storage": "2Mi"}),
        False,
        amounts(memory="3Mi"),
    ),
    (
        "only container level resources set",
        pod([c(memory="3Mi", cpu="2m")]),
        False,
        amounts(memory="3Mi", cpu="2m"),
    ),
    (
        "both container-level and pod-level resources set",
        pod([c(memory="3Mi", cpu="2m")], pod_level={"memory": "6Mi", "cpu": "8m"}),
        False,
        amounts(memory="6Mi", cpu="8m"),
    ),
    (
        "container-level resources and init container set",
        pod([c(memory="3Mi", cpu="2m")], [c(memory="5Mi", cpu="4m")]),
        False,
        amounts(memory="5Mi", cpu="4m"),
    ),
    (
        "container-level resources and sidecar container set",
        pod([c(memory="3Mi", cpu="2m")], [c(sidecar=True, memory="5Mi", cpu="4m")]),
        False,
        amounts(memory="8Mi", cpu="6m"),
    ),
    (
        "container-level resources, init and sidecar container set",
        pod([c(memory="3Mi", cpu="2m")], [c(sidecar=True, memory="5Mi", cpu="4m"), c(memory="6Mi", cpu="8m")]),
        False,
        amounts(memory="11Mi", cpu="12m"),
    ),
    (
        "pod-level resources, container-level resources, init and sidecar container set",
        pod(
            [c(memory="3Mi", cpu="2m")],
            [c(sidecar=True, memory="5Mi", cpu="4m"), c(memory="6Mi", cpu="8m")],
            pod_level={"memory": "15Mi", "cpu": "18m"},
        ),
        False,
        amounts(memory="15Mi", cpu="18m"),
    ),
    (
        "pod-level resources, hugepage request/limit single page size",
        pod(pod_level={"memory": "10Mi", "hugepages-2Mi": "2Mi"}),
        False,
        {**amounts(memory="10Mi"), **hp(**{"2Mi": "2Mi"})},
    ),
    (
        "pod-level resources, hugepage request/limit multiple page sizes",
        pod(pod_level={"cpu": "1", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}),
        False,
        {**amounts(cpu="1"), **hp(**{"2Mi": "2Mi", "1Gi": "1Gi"})},
    ),
    (
        "pod-level resources, container-level resources, hugepage request/limit single page size",
        pod([c(extra={"hugepages-2Mi": "6Mi"})], pod_level={"cpu": "1", "hugepages-2Mi": "10Mi"}),
        False,
        {**amounts(cpu="1"), **hp(**{"2Mi": "10Mi"})},
    ),
    (
        "pod-level resources, container-level resources, hugepage request/limit multiple page sizes",
        pod(
            [c(cpu="1", extra={"hugepages-1Gi": "2Gi"})],
            pod_level={"cpu": "1", "hugepages-2Mi": "10Mi", "hugepages-1Gi": "2Gi"},
        ),
        False,
        {**amounts(cpu="1"), **hp(**{"2Mi": "10Mi", "1Gi": "2Gi"})},
    ),
    (
        "pod-level resources, container-level resources, hugepage multiple page sizes between levels",
        pod([c(memory="4Mi", extra={"hugepages-1Gi": "1Gi"})], pod_level={"cpu": "1", "hugepages-2Mi": "10Mi"}),
        False,
        {**amounts(cpu="1", memory="4Mi"), **hp(**{"2Mi": "10Mi", "1Gi": "1Gi"})},
    ),
    # TestPodRequestsAndLimitsVerticalScalingWrappers
    (
        "pod level requests with PLR vertical scaling enabled and status populated",
        pod(
            [c("c1", cpu="1")],
            pod_level={"cpu": "2"},
            status={"allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3.5"}}},
        ),
        True,
        amounts(cpu="3.5"),
    ),
    (
        "pod level requests with PLR vertical scaling enabled and infeasible resize",
        pod(
            [c("c1", cpu="1")],
            pod_level={"cpu": "10"},
            conditions=INFEASIBLE,
            status={"allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "4"}}},
        ),
        True,
        amounts(cpu="4"),
    ),
    (
        "container requests with infeasible resize and only limits in status",
        pod([{"name": "c1", "resources": {"limits": {"cpu": "10"}}}], statuses=[cs("c1")], conditions=INFEASIBLE),
        True,
        {},
    ),
]


@pytest.mark.parametrize(
    ("raw", "use_status", "expected"), [case[1:] for case in STATUS_CASES], ids=[case[0] for case in STATUS_CASES]
)
def test_pod_requests(raw: Raw, use_status: bool, expected: dict[str, Decimal]) -> None:
    assert PodResources(raw, "pod ns/p").requests(use_status=use_status) == expected


NON_MISSING_CASES = [
    ("applied to init container", pod([], [c("i1", cpu="1")]), amounts(cpu="1", memory="100Mi")),
    ("applied to regular container", pod([c("c1", cpu="1")]), amounts(cpu="1", memory="100Mi")),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [case[1:] for case in NON_MISSING_CASES], ids=[case[0] for case in NON_MISSING_CASES]
)
def test_non_missing_container_requests(raw: Raw, expected: dict[str, Decimal]) -> None:
    got = PodResources(raw, "pod ns/p").requests(use_status=False, non_missing={"memory": parse("100Mi")})
    assert got == expected


def test_resize_conditions() -> None:
    deferred = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]}
    assert not is_resize_infeasible(deferred)
    assert is_resize_infeasible({"conditions": INFEASIBLE})
    assert not is_resize_infeasible({"conditions": [{"type": "PodResizePending", "reason": "Other"}]})


MI = 1024 * 1024


@pytest.mark.parametrize(
    ("raw", "requests", "non_zero", "scoring"),
    [
        # 100 CPUs at pod level, nothing on the containers: the cache and the filter see 100 CPUs;
        # NodeResourcesFit's Score (built without the feature upstream) sees the container defaults.
        (pod([c("a")], pod_level={"cpu": "100"}), (100_000, 0), (100_000, 200 * MI), (100, 200 * MI)),
        # Pod level memory only: cpu falls back to the container defaults.
        (pod([c("a"), c("b")], pod_level={"memory": "1Gi"}), (0, 1024 * MI), (200, 1024 * MI), (200, 400 * MI)),
        # Overhead cpu present: framework.PodInfo adds no cpu default, Fit's Score still does.
        (
            pod([c("a")], pod_level={"memory": "1Gi"}, overhead={"cpu": "50m"}),
            (50, 1024 * MI),
            (50, 1024 * MI),
            (150, 200 * MI),
        ),
        # No pod-level resources: every container lacking a request gets the defaults.
        (pod([c("a", cpu="0"), c("b")], overhead={"cpu": "10m"}), (10, 0), (110, 400 * MI), (110, 400 * MI)),
    ],
)
def test_pod_struct_uses_pod_level_resources(
    raw: Raw, requests: tuple[int, int], non_zero: tuple[int, int], scoring: tuple[int, int]
) -> None:
    p = Pod.from_raw(raw)
    assert (p.requests.milli_cpu, p.requests.memory) == requests
    assert (p.fit_requests.milli_cpu, p.fit_requests.memory) == requests
    assert (p.non_zero_milli_cpu, p.non_zero_memory) == non_zero
    assert (p.fit_scoring_request("cpu"), p.fit_scoring_request("memory")) == scoring


def test_pod_struct_resized_pod_accounts_larger_of_spec_and_allocated() -> None:
    raw = pod([c("c1", cpu="1")], statuses=[cs("c1", allocated={"cpu": "3"}, actual={"cpu": "2"})])
    p = Pod.from_raw(raw)
    assert p.requests.milli_cpu == 3000  # what the node has given it
    assert p.fit_requests.milli_cpu == 1000  # what a pod not yet running asks for
    assert p.non_zero_milli_cpu == 3000
    assert p.fit_scoring_request("cpu") == 1000  # NodeResourcesFit's Score reads the spec only


def test_pod_level_and_status_quantity_errors_name_the_field() -> None:
    with pytest.raises(InvalidObject, match=r"pod ns/p: spec.resources.requests.cpu"):
        Pod.from_raw(pod([c("a")], pod_level={"cpu": "lots"}))
    with pytest.raises(InvalidObject, match=r"pod ns/p: status.containerStatuses\[0\].allocatedResources.cpu"):
        Pod.from_raw(pod([c("a")], statuses=[cs("a", allocated={"cpu": "x"})]))


def test_default_non_missing_is_kube_scheduler_default() -> None:
    assert dict(DEFAULT_NON_MISSING) == {"cpu": Decimal("0.1"), "memory": Decimal(200 * MI)}


def test_pods_of_one_template_share_the_work_but_never_one_resource_object() -> None:
    first = Pod.from_raw(pod([c("c1", cpu="1", memory="1Gi")]))
    second = Pod.from_raw({**pod([c("c1", cpu="1", memory="1Gi")]), "metadata": {"name": "q", "namespace": "ns"}})
    assert second.requests == first.requests and second.requests is not first.requests
    first.requests.add(first.requests)  # the node cache adds and subtracts Resource objects in place
    assert second.requests.milli_cpu == 1000
    assert Pod.from_raw(pod([c("c1", cpu="1", memory="1Gi")])).requests.milli_cpu == 1000
    # Same spec, a status that changes the answer: not the remembered one.
    resized = Pod.from_raw(pod([c("c1", cpu="1")], statuses=[cs("c1", allocated={"cpu": "3"})]))
    assert resized.requests.milli_cpu == 3000 and resized.fit_requests.milli_cpu == 1000


def test_an_invalid_pod_is_refused_with_its_own_name_every_time() -> None:
    bad = pod([c("a", cpu="lots")])
    for name in ("p1", "p2"):
        with pytest.raises(InvalidObject, match=f"pod ns/{name}: spec.containers"):
            Pod.from_raw({**bad, "metadata": {"name": name, "namespace": "ns"}})


def test_on_node_is_replace_with_node_name() -> None:
    """Pod.on_node (the assume path's copy) equals dataclasses.replace(pod, node_name=...) on every
    field, those left out of == included; the original is untouched."""
    import dataclasses

    from scheduler.testing.builders import make_pod

    pod = (
        make_pod("p")
        .label("app", "web")
        .priority(7)
        .req(cpu="500m", memory="1Gi")
        .toleration("k", "v", "NoSchedule")
        .pod_anti_affinity({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"})
        .start_time(5)
        .obj()
    )
    placed = pod.on_node("n1")
    wanted = dataclasses.replace(pod, node_name="n1")
    for field in dataclasses.fields(Pod):
        assert getattr(placed, field.name) == getattr(wanted, field.name), field.name
    assert placed.node_name == "n1" and pod.node_name == ""
    assert placed.raw is pod.raw and placed.has_required_anti_affinity
