"""plugins/dynamicresources/cel.py against kube-scheduler v1.37.2's own CEL library.

hack/celoracle is a tiny Go command over k8s.io/dynamic-resource-allocation@v0.37.2/cel, built
from the module cache the control plane is built from (offline). Every case of the ported tables
in test_dynamicresources_cel.py, the library comparison's cases and the edge cases below go through
both; the verdict and kube's message must be identical, character for character.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.bench import cel_compare
from plugins.dynamicresources.cel import CELError, compile_expression
from tests.unit.plugins import test_dynamicresources_cel as tables

ORACLE_SOURCE = Path(__file__).resolve().parents[3] / "hack" / "celoracle"
GPU = {
    "model": {"string": "a100"},
    "index": {"int": 3},
    "healthy": {"bool": True},
    "driverVersion": {"version": "535.104.5"},
    "ids": {"ints": [1, 2]},
}
MEMORY = {"memory": {"value": "80Gi"}}

# Regex patterns RE2 refuses, each in the three places a pattern can sit: a literal of a
# receiver's matches() (the environment's validator), a literal of find() (program building),
# and an attribute's value (evaluation).
BAD_PATTERNS = ["(", "[", "a**", r"\p", "x{2,1}", "a{1001}", "[z-a]", r"\8", ")", "*", "a\\", "(?<n", "(?z)"]

EDGE_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    *((f"device.driver.matches({json.dumps(p)})", tables.DRIVER, {}, {}) for p in BAD_PATTERNS),
    *((f'"x".find({json.dumps(p)}) == ""', tables.DRIVER, {}, {}) for p in BAD_PATTERNS),
    *(
        ('"x".matches(device.attributes["dra.example.com"].p)', tables.DRIVER, {"p": {"string": p}}, {})
        for p in BAD_PATTERNS
    ),
    ('"x".findAll(device.attributes["dra.example.com"].p) == []', tables.DRIVER, {"p": {"string": "("}}, {}),
    ('matches("x", "(")', tables.DRIVER, {}, {}),
    ('"x".matches("(") && "y".matches("[")', tables.DRIVER, {}, {}),
    ('device.driver == "a" &&\n  "x".matches("(")', tables.DRIVER, {}, {}),
    # a comprehension over a value that is not a list or map names its type
    *(
        (f'device.attributes["dra.example.com"].{name}.all(x, x == x)', tables.DRIVER, GPU, MEMORY)
        for name in ("model", "index", "healthy", "driverVersion")
    ),
    ('device.capacity["dra.example.com"].memory.exists(x, true)', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].ids.all(x, x.exists(y, true))', tables.DRIVER, GPU, MEMORY),
    # member and global overload mismatches, unknown fields of `device`
    ('device.capacity["dra.example.com"].memory.compareTo(semver("1.0.0")) == 0', tables.DRIVER, GPU, MEMORY),
    ('semver("1.0.0").isLessThan(quantity("1"))', tables.DRIVER, GPU, MEMORY),
    ("isSemver(1) || quantity(1).isInteger()", tables.DRIVER, GPU, MEMORY),
    ("device.nope == 1", tables.DRIVER, GPU, MEMORY),
    ("device.nope.deeper == 1", tables.DRIVER, GPU, MEMORY),
    # absent domains, keys, results of the wrong type
    ('device.attributes["gpu.example.com"].model == "a100"', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["gpu.example.com"].?model.orValue("") == ""', tables.DRIVER, GPU, MEMORY),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1"))', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].driverVersion', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].ids', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].index', tables.DRIVER, GPU, MEMORY),
    ("device.attributes", tables.DRIVER, GPU, MEMORY),
    ('quantity("1") == quantity("1000m") && semver("1.0.0+a") == semver("1.0.0+b")', tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].index / 0 == 1', tables.DRIVER, GPU, MEMORY),
    ("9223372036854775807 + 1 > 0", tables.DRIVER, GPU, MEMORY),
    ('device.attributes["dra.example.com"].model > 1', tables.DRIVER, GPU, MEMORY),
    # the sets extension
    *(
        (expression, tables.DRIVER, GPU, MEMORY)
        for expression in (
            "sets.contains([1, 2, 3], [1, 3])",
            "sets.contains([1], [2])",
            "sets.contains([], [])",
            "sets.contains([[1]], [[1]])",
            "sets.equivalent([1, 2], [2, 1, 1])",
            "sets.equivalent([1], [1, 2])",
            "sets.intersects([1, 2], [3, 2])",
            "sets.intersects([], [1])",
            'sets.contains(device.attributes["dra.example.com"].ids, [1])',
            'sets.intersects(device.attributes["dra.example.com"].ids, [3, 4])',
        )
    ),
]


def _cases() -> list[tuple[str, str, dict[str, Any], dict[str, Any], bool]]:
    cases = [(e, d, a, c, m) for e, d, a, c, m, _ in tables.COMPILE_TEST.values()]
    cases += [(e, tables.DRIVER, {}, {}, False) for e, _ in tables.QUANTITY_TEST + tables.SEMVER_TEST]
    semantics = next(m for m in tables.test_kubernetes_semantics.pytestmark if m.name == "parametrize")
    cases += [(e, tables.DRIVER, GPU, MEMORY, False) for e, _ in semantics.args[1]]
    cases += [
        (c.expression, cel_compare.DRIVER, cel_compare.ATTRIBUTES, cel_compare.CAPACITY, False)
        for c in cel_compare.CASES
    ]
    cases += [(e, d, a, c, False) for e, d, a, c in EDGE_CASES]
    return cases


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    binary = tmp_path_factory.mktemp("celoracle") / "celoracle"
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=readonly -buildvcs=false", "CGO_ENABLED": "0"}
    subprocess.run(
        [go, "build", "-trimpath", "-o", str(binary), "."], cwd=ORACLE_SOURCE, env=env, check=True, timeout=900
    )
    return binary


def _ours(
    expression: str, driver: str, attributes: dict[str, Any], capacity: dict[str, Any], multi: bool
) -> dict[str, Any]:
    compiled = compile_expression(expression)
    if compiled.error is not None:
        return {"kind": "compile", "message": str(compiled.error)}
    try:
        matches = compiled.device_matches(driver, attributes, capacity, allow_multiple_allocations=multi)
    except CELError as exc:
        return {"kind": "runtime", "message": str(exc)}
    return {"kind": "match", "value": matches}


def test_every_case_as_kube_evaluates_it(oracle: Path) -> None:
    cases = _cases()
    request = [
        {"expression": e, "driver": d, "attributes": a, "capacity": c, "allowMultipleAllocations": m}
        for e, d, a, c, m in cases
    ]
    run = subprocess.run(
        [str(oracle)], input=json.dumps(request), capture_output=True, text=True, check=True, timeout=300
    )
    kube = json.loads(run.stdout)
    assert len(kube) == len(cases)
    differences = [
        (case[0], expected, actual)
        for case, expected in zip(cases, kube, strict=True)
        if (actual := _ours(*case)) != expected
    ]
    assert differences == [], "\n".join(f"{e!r}\n  kube: {k}\n  ours: {o}" for e, k, o in differences)
    assert len(cases) > 250
