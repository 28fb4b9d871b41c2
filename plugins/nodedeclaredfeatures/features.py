"""The declared-feature registry of component-helpers v0.37.2 (nodedeclaredfeatures/features).

Owns which node features exist and which of them a pod needs to be scheduled, inferred from
its spec alone as upstream's InferForPodScheduling does. Knows nothing of nodes or the
framework; the plugin matches the inferred set against a node's `status.declaredFeatures`.
Features whose inference concerns only pod updates (in-place resize of pod-level resources,
non-sidecar init containers, memory-backed volumes) or that the DynamicResources plugin checks
(DRA node operations) are registered but never required for scheduling, exactly as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Raw = Mapping[str, Any]

# The kube-scheduler version this scheduler matches: a feature whose MaxVersion is below it is
# no longer required (every node of a supported skew has it).
COMPONENT_VERSION = (1, 37, 2)


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    # Whether scheduling this pod spec requires the feature on the node.
    infer_for_scheduling: Callable[[Raw], bool]
    # Upper version bound (inclusive) of the feature's relevance for scheduling; None: unbounded.
    max_version: tuple[int, int, int] | None = None


def _never(spec: Raw) -> bool:
    return False


def _containers(spec: Raw, *fields: str) -> Iterable[Raw]:
    for field_name in fields:
        yield from spec.get(field_name) or ()


def _restarts_all_containers(spec: Raw) -> bool:
    """A container or init container with a restartPolicyRules action RestartAllContainers."""
    return any(
        rule.get("action") == "RestartAllContainers"
        for container in _containers(spec, "containers", "initContainers")
        for rule in container.get("restartPolicyRules") or ()
    )


def _user_namespace_with_host_network(spec: Raw) -> bool:
    """hostNetwork together with a user namespace (hostUsers explicitly false)."""
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _bind_mount_options(spec: Raw) -> bool:
    """Any volumeMount of any container kind that sets bindMountOptions."""
    return any(
        mount.get("bindMountOptions")
        for container in _containers(spec, "containers", "initContainers", "ephemeralContainers")
        for mount in container.get("volumeMounts") or ()
    )


ALL_FEATURES: tuple[Feature, ...] = (
    Feature("RestartAllContainersOnContainerExits", _restarts_all_containers),
    Feature("InPlacePodLevelResourcesVerticalScaling", _never),
    Feature("ExtendWebSocketsToKubelet", _never),
    Feature("InPlacePodVerticalScalingInitContainers", _never),
    Feature("InPlacePodVerticalScalingMemoryBackedVolumes", _never),
    Feature("UserNamespacesHostNetworkSupport", _user_namespace_with_host_network),
    Feature("DRANodeAllocatableResources", _never),
    Feature("VolumeBindMountOptions", _bind_mount_options),
    Feature("DRAOptionalNodeOperations", _never),
)


class Registry:
    """ndf.Framework: features by name, the pod's requirements and the node's declared set."""

    def __init__(self, features: Sequence[Feature], version: tuple[int, int, int] = COMPONENT_VERSION) -> None:
        self.features = tuple(sorted(features, key=lambda f: f.name))
        self.version = version
        self.names = frozenset(f.name for f in self.features)

    def infer_for_pod_scheduling(self, spec: Raw) -> frozenset[str]:
        """The features a node must declare to run this pod spec."""
        return frozenset(
            f.name
            for f in self.features
            if (f.max_version is None or self.version <= f.max_version) and f.infer_for_scheduling(spec)
        )

    def node_features(self, declared: Iterable[str]) -> frozenset[str]:
        """A node's declared features that this registry knows (unknown names are ignored, as TryMap does)."""
        return frozenset(name for name in declared if name in self.names)


DEFAULT_REGISTRY = Registry(ALL_FEATURES)
