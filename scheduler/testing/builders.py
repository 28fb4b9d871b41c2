"""Tiny builders for unit tests: raw API JSON assembled fluently, then turned into model structs.

    pod = make_pod("p").req(cpu="1").toleration("k", "v", effect="NoSchedule").obj()
    node = make_node("n").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a").obj()
    info = node_info(node, pod)

Builders only produce the raw dicts the API server would send (through Pod.from_raw and
Node.from_raw), so tests exercise the same conversion the informers use.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler.api.fake import FakeApiClient
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.runtime import FrameworkHandle, StaticNamespaces, Wiring
from scheduler.framework.types import CycleState, NodeInfo, NodeScore
from scheduler.model.objects import Node, Pod

Raw = dict[str, Any]

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _resources(resources: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Merge an explicit mapping with keyword resources (ephemeral_storage -> ephemeral-storage)."""
    out = {name: str(amount) for name, amount in (resources or {}).items()}
    out.update({name.replace("_", "-"): str(amount) for name, amount in kwargs.items()})
    return out


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self.raw: Raw = {
            "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}/{name}", "labels": {}},
            "spec": {"containers": []},
            "status": {},
        }

    @property
    def _spec(self) -> Raw:
        spec: Raw = self.raw["spec"]
        return spec

    def uid(self, uid: str) -> PodBuilder:
        self.raw["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self.raw["metadata"]["labels"][key] = value
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def node(self, name: str) -> PodBuilder:
        """spec.nodeName: the pod is bound (or asks for) this node."""
        self._spec["nodeName"] = name
        return self

    def pod_group(self, name: str) -> PodBuilder:
        """Member of the PodGroup `name` (spec.schedulingGroup.podGroupName, GenericWorkload)."""
        self._spec["schedulingGroup"] = {"podGroupName": name}
        return self

    def nominated_node(self, name: str) -> PodBuilder:
        self.raw["status"]["nominatedNodeName"] = name
        return self

    def start_time(self, seconds: int) -> PodBuilder:
        """status.startTime, this many seconds after the epoch."""
        self.raw["status"]["startTime"] = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self

    def phase(self, phase: str) -> PodBuilder:
        self.raw["status"]["phase"] = phase
        return self

    def container(
        self,
        image: str = "",
        requests: Mapping[str, Any] | None = None,
        ports: Sequence[Raw] = (),
        **resources: Any,
    ) -> PodBuilder:
        """Append a container; resources as a mapping and/or keywords (cpu="1", memory="1Gi")."""
        containers: list[Raw] = self._spec["containers"]
        container: Raw = {"name": f"c{len(containers)}", "image": image}
        asked = _resources(requests, resources)
        if asked:
            container["resources"] = {"requests": asked}
        if ports:
            container["ports"] = [dict(p) for p in ports]
        containers.append(container)
        return self

    def req(self, requests: Mapping[str, Any] | None = None, **resources: Any) -> PodBuilder:
        """A container asking for these resources."""
        return self.container(requests=requests, **resources)

    def init_container(
        self, image: str = "", requests: Mapping[str, Any] | None = None, sidecar: bool = False, **resources: Any
    ) -> PodBuilder:
        """An init container; sidecar=True makes it restartable (restartPolicy: Always)."""
        init: list[Raw] = self._spec.setdefault("initContainers", [])
        container: Raw = {"name": f"i{len(init)}", "image": image}
        asked = _resources(requests, resources)
        if asked:
            container["resources"] = {"requests": asked}
        if sidecar:
            container["restartPolicy"] = "Always"
        init.append(container)
        return self

    def overhead(self, **resources: Any) -> PodBuilder:
        self._spec["overhead"] = _resources(None, resources)
        return self

    def host_port(
        self, port: int, protocol: str = "", host_ip: str = "", container_port: int | None = None
    ) -> PodBuilder:
        """A container exposing `port` on the host (empty protocol/hostIP keep the API's omission)."""
        entry: Raw = {"containerPort": container_port if container_port is not None else port, "hostPort": port}
        if protocol:
            entry["protocol"] = protocol
        if host_ip:
            entry["hostIP"] = host_ip
        return self.container(ports=[entry])

    def toleration(self, key: str = "", value: str = "", effect: str = "", operator: str = "") -> PodBuilder:
        """A toleration; pass operator="Exists" to ignore the value."""
        entry: Raw = {}
        for field_name, field_value in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
            if field_value:
                entry[field_name] = field_value
        self._spec.setdefault("tolerations", []).append(entry)
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, **labels: str) -> PodBuilder:
        self._spec["nodeSelector"] = {**(selector or {}), **labels}
        return self

    def _node_affinity(self) -> Raw:
        affinity: Raw = self._spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        return affinity

    def required_terms(self, *terms: Raw) -> PodBuilder:
        """requiredDuringSchedulingIgnoredDuringExecution with these NodeSelectorTerms (ORed)."""
        required = self._node_affinity().setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        required.setdefault("nodeSelectorTerms", []).extend(copy.deepcopy(list(terms)))
        return self

    def node_affinity_in(self, key: str, values: Sequence[str]) -> PodBuilder:
        return self.required_terms(term(expr(key, "In", *values)))

    def preferred_term(self, weight: int, preference: Raw) -> PodBuilder:
        preferred = self._node_affinity().setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": weight, "preference": copy.deepcopy(preference)})
        return self

    def terminating(self) -> PodBuilder:
        self.raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return self

    def owner(self, kind: str, name: str, api_version: str = "apps/v1", controller: bool = True) -> PodBuilder:
        """An ownerReference (the controlling one unless controller=False)."""
        ref: Raw = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"{kind}/{name}"}
        if controller:
            ref["controller"] = True
        self.raw["metadata"].setdefault("ownerReferences", []).append(ref)
        return self

    def spread_constraint(
        self,
        max_skew: int,
        topology_key: str,
        when: str = "DoNotSchedule",
        selector: Raw | None = None,
        *,
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: Sequence[str] = (),
    ) -> PodBuilder:
        """A topologySpreadConstraint; selector is a raw LabelSelector (see label_selector())."""
        entry: Raw = {"maxSkew": max_skew, "topologyKey": topology_key, "whenUnsatisfiable": when}
        optional = (
            ("labelSelector", copy.deepcopy(selector)),
            ("minDomains", min_domains),
            ("nodeAffinityPolicy", node_affinity_policy),
            ("nodeTaintsPolicy", node_taints_policy),
            ("matchLabelKeys", list(match_label_keys) or None),
        )
        entry.update({k: v for k, v in optional if v is not None})
        self._spec.setdefault("topologySpreadConstraints", []).append(entry)
        return self

    def _pod_affinity(self, kind: str, when: str) -> list[Raw]:
        section: Raw = self._spec.setdefault("affinity", {}).setdefault(kind, {})
        terms: list[Raw] = section.setdefault(when, [])
        return terms

    def pod_affinity(self, *terms: Raw) -> PodBuilder:
        """Required podAffinity terms (see affinity_term())."""
        self._pod_affinity("podAffinity", _REQUIRED).extend(copy.deepcopy(list(terms)))
        return self

    def pod_anti_affinity(self, *terms: Raw) -> PodBuilder:
        self._pod_affinity("podAntiAffinity", _REQUIRED).extend(copy.deepcopy(list(terms)))
        return self

    def preferred_pod_affinity(self, weight: int, affinity: Raw) -> PodBuilder:
        entry = {"weight": weight, "podAffinityTerm": copy.deepcopy(affinity)}
        self._pod_affinity("podAffinity", _PREFERRED).append(entry)
        return self

    def preferred_pod_anti_affinity(self, weight: int, affinity: Raw) -> PodBuilder:
        entry = {"weight": weight, "podAffinityTerm": copy.deepcopy(affinity)}
        self._pod_affinity("podAntiAffinity", _PREFERRED).append(entry)
        return self

    def spec(self, **fields: Any) -> PodBuilder:
        """Set raw spec fields directly, for anything without a dedicated method."""
        self._spec.update(copy.deepcopy(fields))
        return self

    def status(self, **fields: Any) -> PodBuilder:
        """Set raw status fields directly (containerStatuses, conditions, resources...)."""
        self.raw["status"].update(copy.deepcopy(fields))
        return self

    def obj(self) -> Pod:
        return Pod.from_raw(copy.deepcopy(self.raw))


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self.raw: Raw = {
            "metadata": {"name": name, "uid": name, "labels": {}},
            "spec": {},
            "status": {"allocatable": {}, "capacity": {}},
        }

    def capacity(self, resources: Mapping[str, Any] | None = None, **kwargs: Any) -> NodeBuilder:
        """Capacity and allocatable alike (pods=110 is not implied: pass it when the test needs it)."""
        amounts = _resources(resources, kwargs)
        self.raw["status"]["capacity"].update(amounts)
        self.raw["status"]["allocatable"].update(amounts)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self.raw["metadata"]["labels"][key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> NodeBuilder:
        self.raw["metadata"]["labels"].update(labels)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        entry: Raw = {"key": key, "effect": effect}
        if value:
            entry["value"] = value
        self.raw["spec"].setdefault("taints", []).append(entry)
        return self

    def unschedulable(self, value: bool = True) -> NodeBuilder:
        self.raw["spec"]["unschedulable"] = value
        return self

    def image(self, size: int, *names: str) -> NodeBuilder:
        self.raw["status"].setdefault("images", []).append({"names": list(names), "sizeBytes": size})
        return self

    def obj(self) -> Node:
        return Node.from_raw(copy.deepcopy(self.raw))


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def informer_pod(
    name: str, scheduler: str, cpu: str = "1", namespace: str = "ns", labels: Mapping[str, str] | None = None
) -> PodBuilder:
    """A pod as an informer delivers it to a scheduler: uid `uid-<name>`, resourceVersion 1, one
    container asking for `cpu`, pending unless the caller binds it (`.node(...).phase("Running")`)."""
    pod = make_pod(name, namespace).uid(f"uid-{name}").req(cpu=cpu).spec(schedulerName=scheduler).phase("Pending")
    pod.raw["metadata"]["resourceVersion"] = "1"
    for key, value in (labels or {}).items():
        pod.label(key, value)
    return pod


def expr(key: str, operator: str, *values: str) -> Raw:
    """A NodeSelectorRequirement / LabelSelectorRequirement."""
    requirement: Raw = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def term(*expressions: Raw, fields: Sequence[Raw] = ()) -> Raw:
    """A NodeSelectorTerm from matchExpressions (and optional matchFields)."""
    out: Raw = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def name_in(*names: str) -> Raw:
    """A matchFields requirement on metadata.name."""
    return expr("metadata.name", "In", *names)


def label_selector(match_labels: Mapping[str, str] | None = None, *expressions: Raw) -> Raw:
    """A metav1.LabelSelector; label_selector() selects everything, expr(...) adds matchExpressions."""
    out: Raw = {}
    if match_labels:
        out["matchLabels"] = dict(match_labels)
    if expressions:
        out["matchExpressions"] = list(expressions)
    return out


def affinity_term(
    topology_key: str,
    selector: Raw | None,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Raw | None = None,
) -> Raw:
    """A PodAffinityTerm."""
    out: Raw = {"topologyKey": topology_key}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = namespace_selector
    return out


def _as_pod(pod: Pod | PodBuilder) -> Pod:
    return pod.obj() if isinstance(pod, PodBuilder) else pod


def _as_node(node: Node | NodeBuilder) -> Node:
    return node.obj() if isinstance(node, NodeBuilder) else node


def node_info(node: Node | NodeBuilder, *pods: Pod | PodBuilder) -> NodeInfo:
    """A NodeInfo holding the node and these pods (as the cache would after assigning them)."""
    info = NodeInfo(_as_node(node))
    for pod in pods:
        info.add_pod(_as_pod(pod))
    return info


def snapshot(*infos: NodeInfo) -> Snapshot:
    return Snapshot.from_node_infos(list(infos))


def make_handle(*infos: NodeInfo, namespaces: Mapping[str, Mapping[str, str]] | None = None) -> FrameworkHandle:
    """A framework handle over a snapshot of these nodes, with the in-memory api client.

    `namespaces` maps namespace names to their labels (for namespaceSelectors). Wired standalone:
    nothing nominated, every pod exists, events dropped.
    """
    snap = snapshot(*infos)
    handle = FrameworkHandle(FakeApiClient(), snap, StaticNamespaces(dict(namespaces or {})))
    handle.wire(Wiring.standalone(snap))
    return handle


def run_score(plugin: ScorePlugin, state: CycleState, pod: Pod, infos: Sequence[NodeInfo]) -> list[int]:
    """Score every node, then normalise when the plugin has NormalizeScore (weights not applied)."""
    scores: list[NodeScore] = []
    for info in infos:
        value, status = plugin.score(state, pod, info)
        assert status is None, status
        scores.append(NodeScore(info.name, value))
    extensions = plugin.score_extensions()
    if extensions is not None:
        status = extensions.normalize_score(state, pod, scores)
        assert status is None, status
    return [s.score for s in scores]
