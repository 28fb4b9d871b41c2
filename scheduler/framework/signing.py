"""Pod signatures for OpportunisticBatching (kube-scheduler's SignPlugin and its shared signers).

Two pods with the same signature must get the same Filter verdicts and Score results on the same
nodes in the same state. A profile signs pods only when every PreFilter, Filter, PreScore and Score
plugin contributes fragments (a plugin that cannot, for some pod, returns a non-success status and
the pod goes unsigned). Fragments are hashable values under the signer names upstream uses; the
signature is the profile's ordered tuple of them, compared for equality only.

Owns the signer names and the helpers several plugins share. Pure: reads the pod, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from scheduler.model.objects import Pod

SignFragment = tuple[str, Hashable]
# (signer name, value) pairs in the profile's plugin order; None when the pod cannot be signed.
Signature = tuple[SignFragment, ...]

DYNAMIC_RESOURCES = "v1.Pod.Spec.DynamicResources"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def string_map(values: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """A label or selector map in key order."""
    return tuple(sorted(values.items())) if values else ()


def host_ports(pod: Pod) -> tuple[tuple[int, str, str], ...]:
    """The distinct host ports of containers and init containers with their protocol and host IP
    (NodePorts' conflicts depend on all three; kube signs the port numbers alone), sorted."""
    spec = pod.spec
    ports = {
        (port.get("hostPort") or 0, port.get("protocol") or "TCP", port.get("hostIP") or "")
        for container in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
        for port in container.get("ports") or ()
        if port.get("hostPort")
    }
    return tuple(sorted(ports))


def tolerations(pod: Pod) -> tuple[tuple[str, str, str, str], ...]:
    """The pod's tolerations as a sorted tuple (their order never changes a verdict)."""
    return tuple(sorted((t.key, t.operator, t.value, t.effect) for t in pod.tolerations))


def _requirements(requirements: Sequence[Mapping[str, Any]] | None) -> tuple[str, ...]:
    out = []
    for requirement in requirements or ():
        canonical = dict(requirement)
        if canonical.get("values"):
            canonical["values"] = sorted(canonical["values"])
        out.append(_canonical(canonical))
    return tuple(sorted(out))


def _term(term: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _requirements(term.get("matchExpressions")), _requirements(term.get("matchFields"))


def node_affinity(pod: Pod) -> Hashable:
    """Required terms and weighted preferred terms, each normalised and sorted; None without any."""
    affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity")
    if affinity is None:
        return None
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ()
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    return (
        tuple(sorted(_term(term) for term in required)),
        tuple(sorted((p.get("weight") or 0, _term(p.get("preference") or {})) for p in preferred)),
    )


def volumes(pod: Pod) -> Hashable:
    """Volume sources other than ConfigMaps and Secrets (those never affect placement but differ
    from pod to pod), without their names, sorted; with the pod's namespace when there are any, as
    a claim name means a different claim in another namespace (kube signs the sources alone)."""
    out = []
    for volume in pod.spec.get("volumes") or ():
        if "configMap" in volume or "secret" in volume:
            continue
        out.append(_canonical({key: value for key, value in volume.items() if key != "name"}))
    return (pod.namespace, tuple(sorted(out))) if out else ()
