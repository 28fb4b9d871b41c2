"""The label scopes of InterPodAffinity's and PodTopologySpread's bound-pod hints keep their promise.

A scope lets the queue visit, for a bound pod's add, relabel or delete, only the waiting pods whose
keys the event's labels carry (EventHandlingPodAdd: 2000 waiting pods, each woken by one of 2000
added pods). The promise (EventScope): for every pod none of whose keys the event gives, the hint
answers SKIP. Checked on random pods, selectors and events against the hints themselves.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.podtopologyspread import PodTopologySpread
from plugins.podtopologyspread.defaults import StaticWorkloads, parse_args
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.framework.types import EventObject, QueueingHint
from scheduler.model.objects import Pod
from scheduler.testing.builders import make_handle

NAME = "secondary-scheduler"
KEYS = ["a", "b"]
VALUES = ["x", "y"]

labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)


@st.composite
def selector(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["matchLabels"] = draw(labels)
    expressions = []
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        expression: dict[str, Any] = {"key": draw(st.sampled_from(KEYS)), "operator": op}
        if op in ("In", "NotIn"):
            expression["values"] = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True))
        expressions.append(expression)
    if expressions:
        out["matchExpressions"] = expressions
    return out


@st.composite
def term(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"labelSelector": draw(selector()), "topologyKey": "kubernetes.io/hostname"}
    if draw(st.booleans()):
        out["namespaces"] = [draw(st.sampled_from(["default", "other"]))]
    return out


@st.composite
def pending_pod(draw: Any) -> Pod:
    spec: dict[str, Any] = {"schedulerName": NAME, "containers": [{"name": "c"}]}
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = draw(st.lists(term(), max_size=2))
        if terms:
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    if affinity:
        spec["affinity"] = affinity
    constraints = []
    for _ in range(draw(st.integers(0, 2))):
        constraint: dict[str, Any] = {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            "labelSelector": draw(selector()),
        }
        if draw(st.booleans()):
            constraint["matchLabelKeys"] = [draw(st.sampled_from(KEYS))]
        constraints.append(constraint)
    if constraints:
        spec["topologySpreadConstraints"] = constraints
    meta = {"name": "p", "namespace": "default", "uid": "p", "labels": draw(labels)}
    return Pod.from_raw({"metadata": meta, "spec": spec})


@st.composite
def bound_pod(draw: Any, uid: str = "e") -> Pod:
    meta = {
        "name": uid,
        "namespace": draw(st.sampled_from(["default", "other"])),
        "uid": uid,
        "labels": draw(labels),
    }
    spec = {"nodeName": draw(st.sampled_from(["n1", "n1", ""])), "containers": [{"name": "c"}]}
    return Pod.from_raw({"metadata": meta, "spec": spec})


@st.composite
def event(draw: Any) -> tuple[EventObject | None, EventObject | None]:
    kind = draw(st.sampled_from(["add", "update", "delete"]))
    if kind == "add":
        return None, draw(bound_pod())
    if kind == "delete":
        return draw(bound_pod()), None
    old = draw(bound_pod())
    new = Pod.from_raw({**old.raw, "metadata": {**old.raw["metadata"], "labels": draw(labels)}})
    return old, new


def scoped_registrations() -> list[Any]:
    sched = build_scheduler(default_config(NAME), full_registry(), FakeApiClient(), {"default": {}})
    fw = sched.frameworks[NAME]
    plugins = {p.name: p for p in fw.filter_plugins}
    return [
        registered
        for name in ("InterPodAffinity", "PodTopologySpread")
        for registered in plugins[name].events_to_register()  # type: ignore[attr-defined]
        if registered.scope is not None
    ]


def hard_default_registration() -> Any:
    """PodTopologySpread whose defaults are hard and select pods through Services: a pod without
    constraints of its own is held to constraints the cluster's Services decide."""
    args = parse_args(
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
            ],
        }
    )
    services = [
        {"kind": "Service", "metadata": {"namespace": "default"}, "spec": {"selector": {key: value}}}
        for key in KEYS
        for value in VALUES
    ]
    spread = PodTopologySpread(args, make_handle(), StaticWorkloads(services))
    return next(r for r in spread.events_to_register() if r.scope is not None)


REGISTRATIONS = [*scoped_registrations(), hard_default_registration()]


def test_both_plugins_scope_their_bound_pod_hint() -> None:
    assert len(REGISTRATIONS) == 3


@settings(max_examples=600, deadline=None)
@given(pending_pod(), event())
def test_a_pod_the_event_does_not_key_gets_skip(
    pod: Pod, change: tuple[EventObject | None, EventObject | None]
) -> None:
    old, new = change
    for registered in REGISTRATIONS:
        keys = registered.scope.event_keys(old, new)
        if keys is None:
            continue
        try:
            pod_keys = registered.scope.pod_keys(pod)
        except Exception:
            continue  # the index visits such a pod on every event
        if pod_keys & keys:
            continue
        assert registered.hint(pod, old, new) == QueueingHint.SKIP, (registered.hint, pod.raw, old, new)


def test_an_added_pod_concerns_only_the_pods_its_labels_match() -> None:
    """EventHandlingPodAdd's shape: pods waiting for the pod labelled color=yellow-<i>."""

    def waiting(i: int) -> Pod:
        term = {"labelSelector": {"matchLabels": {"color": f"yellow-{i}"}}, "topologyKey": "kubernetes.io/hostname"}
        spec = {
            "containers": [{"name": "c"}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
        }
        return Pod.from_raw({"metadata": {"name": f"w{i}", "namespace": "default", "uid": f"w{i}"}, "spec": spec})

    added = Pod.from_raw(
        {
            "metadata": {"name": "u", "namespace": "default", "uid": "u", "labels": {"color": "yellow-3"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        }
    )
    scope = next(r.scope for r in REGISTRATIONS if r.hint is not None and "interpodaffinity" in r.hint.__module__)
    keys = scope.event_keys(None, added)
    assert keys is not None
    concerned = [i for i in range(10) if scope.pod_keys(waiting(i)) & keys]
    assert concerned == [3]
