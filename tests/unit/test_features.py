"""--feature-gates: v1.37.2's defaults, component-base's parsing and errors, and the gates reaching
the configuration and the framework handle."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.bench.upstream import perf_root
from plugins.registry import in_tree_registry
from scheduler.api.fake import FakeApiClient
from scheduler.app import Options, build_scheduler, load_scheduler_config
from scheduler.features import (
    DEFAULT_FEATURE_GATES,
    GENERIC_WORKLOAD,
    KNOWN_GATES,
    FeatureGateError,
    GateSpec,
    PreRelease,
    parse_feature_gates,
)


@pytest.mark.parametrize(
    ("gate", "default"),
    [
        ("GenericWorkload", False),
        ("TopologyAwareWorkloadScheduling", False),
        ("DRAPrioritizedList", True),
        ("DRAAdminAccess", True),
        ("DRAExtendedResource", True),
        ("DRAResourceClaimDeviceStatus", True),
        ("DRADeviceTaints", True),
        ("DRAPartitionableDevices", True),
        ("DRAConsumableCapacity", True),
        ("DRADeviceBindingConditions", True),
        ("DRASchedulerFilterTimeout", True),
        # Beta at 1.37, but its default-on spec needs --min-compatibility-version 1.37 (default 1.36).
        ("DRAFractionalCapacityRange", False),
        ("SchedulerAsyncAPICalls", False),
        ("OpportunisticBatching", True),
        ("NodeDeclaredFeatures", True),
    ],
)
def test_v1_37_2_defaults(gate: str, default: bool) -> None:
    assert DEFAULT_FEATURE_GATES.enabled(gate) is default


def _kube_specs() -> dict[str, GateSpec]:
    """kube_features.go's versioned specs at emulation 1.37 / min compatibility 1.36."""
    source = (perf_root("v1.37.2").parents[2] / "pkg" / "features" / "kube_features.go").read_text()
    start = source.index("var defaultVersionedKubernetesFeatureGates")
    body = source[start : source.index("\n}\n", start)]
    kinds = {"Alpha": PreRelease.ALPHA, "Beta": PreRelease.BETA, "GA": PreRelease.GA}
    specs: dict[str, GateSpec] = {}
    for gate in re.finditer(r"^\t(\w+): \{\n(.*?)^\t\},", body, re.S | re.M):
        current = None
        for spec in re.finditer(
            r'\{Version: version.MustParse\("1\.(\d+)"\), Default: (true|false), PreRelease: featuregate\.(\w+)(.*?)\}',
            gate.group(2),
        ):
            compat = re.search(r'MinCompatibilityVersion: version.MustParse\("1\.(\d+)"\)', spec.group(4))
            if int(spec.group(1)) <= 37 and (compat is None or int(compat.group(1)) <= 36):
                locked = "LockToDefault: true" in spec.group(4)
                current = GateSpec(spec.group(2) == "true", kinds.get(spec.group(3), PreRelease.DEPRECATED), locked)
        if current is not None:
            specs[gate.group(1)] = current
    return specs


def test_table_matches_kube_features_go() -> None:
    kube = _kube_specs()
    for name, spec in KNOWN_GATES.items():
        assert (spec.default, spec.pre_release, spec.locked) == (
            kube[name].default,
            kube[name].pre_release,
            kube[name].locked,
        ), name


def test_parse_sets_values_and_keeps_defaults() -> None:
    gates = parse_feature_gates("SchedulerAsyncAPICalls=false, DRASchedulerFilterTimeout=1,,")
    assert gates.enabled("DRASchedulerFilterTimeout")
    assert not gates.enabled(GENERIC_WORKLOAD)
    assert gates.enabled("DRADeviceTaints")
    assert gates.flag() == "DRASchedulerFilterTimeout=true,SchedulerAsyncAPICalls=false"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("GenericWorkload", "missing bool value for GenericWorkload"),
        (
            "GenericWorkload=yes",
            'invalid value of GenericWorkload=yes, err: strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        ("DRAPrioritizedList=false", "cannot set feature gate DRAPrioritizedList to false, feature is locked to true"),
        (
            "DRAAdminAccess=false,DRAExtendedResource=false",
            "[cannot set feature gate DRAAdminAccess to false, feature is locked to true, "
            "cannot set feature gate DRAExtendedResource to false, feature is locked to true]",
        ),
        (
            "TopologyAwareWorkloadScheduling=true",
            "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: [GenericWorkload]",
        ),
        (
            "DRAFractionalCapacityRange=true,DRAConsumableCapacity=false",
            "DRAFractionalCapacityRange is enabled, but depends on features that are disabled: [DRAConsumableCapacity]",
        ),
        (
            "InterPodAffinityHostnameFastPath=true",
            "cannot set feature gate InterPodAffinityHostnameFastPath to true: this scheduler implements only "
            "kube-scheduler v1.37.2's default (false)",
        ),
    ],
)
def test_parse_refuses(value: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as exc:
        parse_feature_gates(value)
    assert str(exc.value) == message


def test_setting_a_default_is_accepted_with_kube_warning_for_ga() -> None:
    gates = parse_feature_gates("DRAPrioritizedList=true,InterPodAffinityHostnameFastPath=false")
    assert gates.warnings() == [
        ("Warning: setting GA feature gate. It will be removed in a future release.", "DRAPrioritizedList", True)
    ]


def test_gates_reach_config_and_handle() -> None:
    gates = parse_feature_gates("DRAPrioritizedList=true")
    config = load_scheduler_config(Options(feature_gates=gates))
    assert config.feature_gates is gates
    scheduler = build_scheduler(config, in_tree_registry(), FakeApiClient(), {})
    handle = next(iter(scheduler.frameworks.values())).handle
    assert handle.feature_gates is gates


def test_cli_unknown_gate_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--feature-gates=Bogus=true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        'secondary-scheduler: invalid argument "Bogus=true" for "--feature-gates" flag: '
        "unrecognized feature gate: Bogus"
    )


def test_unknown_gate_name_in_code_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        DEFAULT_FEATURE_GATES.enabled("NotAGate")
