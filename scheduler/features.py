"""Feature gates: kube-scheduler v1.37.2's `--feature-gates` for the gates its scheduler code reads.

Owns the table of those gates (v1.37.2's default, maturity, lock and dependencies, from
pkg/features/kube_features.go at emulation version 1.37, min compatibility version 1.36), the
parser of the flag's `A=true,B=false` syntax with component-base's error wording, and the immutable
`FeatureGates` value the configuration, the profiles and the framework handle carry.

A gate whose non-default value this scheduler does not implement is refused with one line rather
than accepted and ignored: running with `X=false` while behaving as `X=true` would be a lie. When
code starts to read a gate, mark it `honoured` here. This module must never read the environment
or the API, and never import anything of the project (it is a base-layer leaf).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

GENERIC_WORKLOAD = "GenericWorkload"
OPPORTUNISTIC_BATCHING = "OpportunisticBatching"
TOPOLOGY_AWARE_WORKLOAD_SCHEDULING = "TopologyAwareWorkloadScheduling"
COMPOSITE_POD_GROUP = "CompositePodGroup"
POD_GROUP_PREEMPTION_POLICY = "PodGroupPreemptionPolicy"
DYNAMIC_RESOURCE_ALLOCATION = "DynamicResourceAllocation"
DRA_ADMIN_ACCESS = "DRAAdminAccess"
DRA_CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
DRA_DEVICE_BINDING_CONDITIONS = "DRADeviceBindingConditions"
DRA_DEVICE_TAINTS = "DRADeviceTaints"
DRA_DEVICE_TAINT_RULES = "DRADeviceTaintRules"
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"
DRA_FRACTIONAL_CAPACITY_RANGE = "DRAFractionalCapacityRange"
DRA_PARTITIONABLE_DEVICES = "DRAPartitionableDevices"
DRA_PRIORITIZED_LIST = "DRAPrioritizedList"
DRA_RESOURCE_CLAIM_DEVICE_STATUS = "DRAResourceClaimDeviceStatus"
DRA_SCHEDULER_FILTER_TIMEOUT = "DRASchedulerFilterTimeout"


class PreRelease(Enum):
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = ""
    DEPRECATED = "DEPRECATED"


@dataclass(frozen=True)
class GateSpec:
    default: bool
    pre_release: PreRelease
    locked: bool = False
    depends_on: tuple[str, ...] = ()
    # This scheduler implements both values (else only `default` is accepted).
    honoured: bool = False


_A, _B, _GA = PreRelease.ALPHA, PreRelease.BETA, PreRelease.GA
_DRA = (DYNAMIC_RESOURCE_ALLOCATION,)

# Every gate of kube_features.go that v1.37.2's pkg/scheduler reads, as v1.37.2 defaults it.
KNOWN_GATES: Mapping[str, GateSpec] = {
    # Workload-Aware Scheduling.
    GENERIC_WORKLOAD: GateSpec(False, _B, honoured=True),
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: GateSpec(False, _A, depends_on=(GENERIC_WORKLOAD,), honoured=True),
    COMPOSITE_POD_GROUP: GateSpec(False, _A, depends_on=(GENERIC_WORKLOAD, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING)),
    POD_GROUP_PREEMPTION_POLICY: GateSpec(False, _A, depends_on=(GENERIC_WORKLOAD,)),
    # Dynamic Resource Allocation.
    DYNAMIC_RESOURCE_ALLOCATION: GateSpec(True, _GA, locked=True),
    DRA_ADMIN_ACCESS: GateSpec(True, _GA, locked=True, depends_on=_DRA),
    DRA_CONSUMABLE_CAPACITY: GateSpec(True, _B, depends_on=_DRA),
    "DRADerivedAttributes": GateSpec(False, _A, depends_on=_DRA),
    DRA_DEVICE_BINDING_CONDITIONS: GateSpec(True, _B, depends_on=(*_DRA, DRA_RESOURCE_CLAIM_DEVICE_STATUS)),
    "DRADeviceCompatibilityGroups": GateSpec(False, _A, depends_on=(*_DRA, DRA_PARTITIONABLE_DEVICES)),
    DRA_DEVICE_TAINT_RULES: GateSpec(True, _GA, depends_on=(DRA_DEVICE_TAINTS,)),
    DRA_DEVICE_TAINTS: GateSpec(True, _GA, depends_on=_DRA),
    DRA_EXTENDED_RESOURCE: GateSpec(True, _GA, locked=True, depends_on=_DRA),
    DRA_FRACTIONAL_CAPACITY_RANGE: GateSpec(False, _B, depends_on=(DRA_CONSUMABLE_CAPACITY,)),
    "DRAListTypeAttributes": GateSpec(False, _A, depends_on=_DRA),
    "DRANodeAllocatableResources": GateSpec(False, _A, depends_on=_DRA),
    "DRAOptionalNodeOperations": GateSpec(False, _A, depends_on=(*_DRA, "NodeDeclaredFeatures")),
    DRA_PARTITIONABLE_DEVICES: GateSpec(True, _B, depends_on=_DRA),
    DRA_PRIORITIZED_LIST: GateSpec(True, _GA, locked=True, depends_on=_DRA),
    DRA_RESOURCE_CLAIM_DEVICE_STATUS: GateSpec(True, _GA, locked=True),
    DRA_SCHEDULER_FILTER_TIMEOUT: GateSpec(True, _B, depends_on=_DRA),
    "DRAWorkloadResourceClaims": GateSpec(False, _B, depends_on=(*_DRA, GENERIC_WORKLOAD)),
    # Pods, nodes, queue and the other plugins.
    "InPlacePodLevelResourcesVerticalScaling": GateSpec(
        True, _B, depends_on=("InPlacePodVerticalScaling", "PodLevelResources", "NodeDeclaredFeatures")
    ),
    "InPlacePodVerticalScaling": GateSpec(True, _GA, locked=True),
    "InPlacePodVerticalScalingSchedulerPreemption": GateSpec(False, _A, depends_on=("InPlacePodVerticalScaling",)),
    "InterPodAffinityHostnameFastPath": GateSpec(False, _A),
    "MatchLabelKeysInPodTopologySpread": GateSpec(True, _B),
    "NodeDeclaredFeatures": GateSpec(True, _GA, locked=True),
    "NodeInclusionPolicyInPodTopologySpread": GateSpec(True, _GA, locked=True),
    "NominatedNodeNameForExpectation": GateSpec(True, _B),
    OPPORTUNISTIC_BATCHING: GateSpec(True, _B, honoured=True),
    "PodLevelResources": GateSpec(True, _B),
    "SchedulerAsyncAPICalls": GateSpec(False, _B),
    "SchedulerAsyncPreemption": GateSpec(True, _B),
    "SchedulerPopFromBackoffQ": GateSpec(True, _B),
    "SchedulerPreQueueingHints": GateSpec(False, _A),
    "StorageCapacityScoring": GateSpec(True, _B),
    "TaintTolerationComparisonOperators": GateSpec(False, _A),
    "VolumeAttributesClass": GateSpec(True, _GA, locked=True),
    "VolumeLimitScaling": GateSpec(True, _B),
}


class FeatureGateError(ValueError):
    """A `--feature-gates` value kube-scheduler (or this scheduler) refuses; the message is one line."""


def _bool(key: str, text: str) -> bool:
    """Go's strconv.ParseBool, as component-base parses each value."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise FeatureGateError(f'invalid value of {key}={text}, err: strconv.ParseBool: parsing "{text}": invalid syntax')


def _aggregate(errors: list[str]) -> str:
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


@dataclass(frozen=True)
class FeatureGates:
    """The gates in force: v1.37.2's defaults with the values given on the command line."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        """A gate's value; asking for a gate not in KNOWN_GATES is a programming error (KeyError)."""
        spec = KNOWN_GATES[name]
        return self.overrides.get(name, spec.default)

    def __iter__(self) -> Iterator[tuple[str, bool]]:
        return ((name, self.enabled(name)) for name in KNOWN_GATES)

    def flag(self) -> str:
        """The overrides in `--feature-gates` syntax, sorted (for logs and for passing them on)."""
        return ",".join(f"{name}={str(value).lower()}" for name, value in sorted(self.overrides.items()))

    def warnings(self) -> list[tuple[str, str, bool]]:
        """component-base's (message, gate, value) warnings for GA or deprecated gates set explicitly."""
        notes = []
        for name, value in sorted(self.overrides.items()):
            kind = {_GA: "GA", PreRelease.DEPRECATED: "deprecated"}.get(KNOWN_GATES[name].pre_release)
            if kind:
                message = f"Warning: setting {kind} feature gate. It will be removed in a future release."
                notes.append((message, name, value))
        return notes


DEFAULT_FEATURE_GATES = FeatureGates()


def parse_feature_gates(value: str) -> FeatureGates:
    """`A=true,B=false` → FeatureGates, refusing what component-base refuses, with its words.

    Unknown gate: the first one ends the check (as component-base's early return); locked gates set
    to the other value are reported together; then the dependencies of every enabled gate. Last, a
    value this scheduler does not implement.
    """
    given: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {key}")
        given[key] = _bool(key, raw.strip())
    errors: list[str] = []
    for key, wanted in given.items():
        spec = KNOWN_GATES.get(key)
        if spec is None:
            raise FeatureGateError(f"unrecognized feature gate: {key}")
        if spec.locked and wanted != spec.default:
            value, locked = str(wanted).lower(), str(spec.default).lower()
            errors.append(f"cannot set feature gate {key} to {value}, feature is locked to {locked}")
    if errors:
        raise FeatureGateError(_aggregate(errors))
    gates = FeatureGates(dict(given))
    for name, on in gates:
        disabled = [dep for dep in KNOWN_GATES[name].depends_on if not gates.enabled(dep)]
        if on and disabled:
            errors.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(disabled)}]")
    if errors:
        raise FeatureGateError(_aggregate(errors))
    for key, wanted in given.items():
        spec = KNOWN_GATES[key]
        if wanted != spec.default and not spec.honoured:
            errors.append(
                f"cannot set feature gate {key} to {str(wanted).lower()}: this scheduler implements only "
                f"kube-scheduler v1.37.2's default ({str(spec.default).lower()})"
            )
    if errors:
        raise FeatureGateError(_aggregate(errors))
    return gates
