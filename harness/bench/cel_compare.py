"""Which CEL runtime for DRA selectors: correctness on Kubernetes' expressions, compile + evaluate cost.

Owns the comparison behind plugins/dynamicresources/cel.py's choice of library: each candidate
evaluates the same ~30 DRA selectors against the same device and is scored against what
kube-scheduler v1.37.2 answers (a match value, or a compile or runtime error with kube's text), then
compiles and evaluates a representative selector set in a loop. The candidates are PyPI's
`cel-expr-python` (cel-cpp, through the project's own module), `cel-python` (pure Python) and
`common-expression-language` (cel-rust). Each of the other two gets the Kubernetes functions the
DRA environment declares (quantity, semver and their methods) written in its own extension
mechanism, so the table measures the runtime, not a missing adapter.

Must never be imported by the scheduler; the two rejected libraries are not project dependencies
and are loaded from a directory given on the command line:

    pip install --target /tmp/celtry/cel_python cel-python==0.5.0
    pip install --no-deps --target /tmp/celtry/common_expression_language common-expression-language==0.10.0
    python -m harness.bench.cel_compare --cel-python /tmp/celtry/cel_python \\
        --common-expression-language /tmp/celtry/common_expression_language

A candidate whose directory is not given is not run and the run says so; none is scored as a pass.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from plugins.dynamicresources import cel as dra_cel
from scheduler.model.quantity import parse as parse_quantity

DRIVER = "dra.example.com"
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "model": {"string": "a100"},
    "index": {"int": 3},
    "healthy": {"bool": True},
    "driverVersion": {"version": "1.2.3"},
    "services": {"string": "some_example_service"},
    "other.example.com/name": {"string": "fish"},
}
CAPACITY: dict[str, dict[str, Any]] = {"memory": {"value": "80Gi"}, "cores": {"value": "8"}}


@dataclass(frozen=True)
class Case:
    name: str
    expression: str
    # What kube answers: True/False, or ("compile" | "runtime", a text kube's message contains).
    expect: bool | tuple[str, str]


D = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'
CASES = [
    Case("true", "true", True),
    Case("driver", f'device.driver == "{DRIVER}"', True),
    Case("string attribute", f'{D}.model == "a100"', True),
    Case("map-style lookup", f'{D}["model"] == "a100"', True),
    Case("int attribute", f"{D}.index > 2", True),
    Case("bool attribute", f"{D}.healthy", True),
    Case("qualified domain", 'device.attributes["other.example.com"].name == "fish"', True),
    Case("domain in attributes", f'"{DRIVER}" in device.attributes', True),
    Case("missing domain, in", '"no-such-domain" in device.attributes', False),
    Case("missing domain is an empty map", 'device.attributes["no-such-domain"].size() == 0', True),
    Case("missing domain, has()", 'has(device.attributes["no-such-domain"].x)', False),
    Case("missing key", f"{D}.noSuchAttr == 1", ("runtime", "no such key: noSuchAttr")),
    Case("missing domain then key", 'device.attributes["x.com"]["y"] == 1', ("runtime", "no such key: y")),
    Case("capacity quantity", f'{C}.memory.isGreaterThan(quantity("40Gi"))', True),
    Case("quantity compareTo", f'{C}.cores.compareTo(quantity("8")) == 0', True),
    Case("quantity equality", f'{C}.memory == quantity("81920Mi")', True),
    Case("quantity asInteger", f"{C}.cores.asInteger() == 8", True),
    Case("quantity add", f'{C}.cores.add(2).isLessThan(quantity("11"))', True),
    Case("bad quantity", 'quantity("12x").isInteger()', ("runtime", "quantities must match the regular expression")),
    Case("semver attribute", f'{D}.driverVersion.isGreaterThan(semver("1.2.0"))', True),
    Case("semver normalize", 'semver("v1.2", true).minor() == 2 && isSemver("v1.0.0", true)', True),
    Case("semver prerelease", 'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
    Case("cel.bind", f"cel.bind(dra, {D}, dra.model == 'a100' && dra.index == 3)", True),
    Case("strings ext", f'{D}.model.upperAscii() == "A100" && {D}.services.split("_").size() == 3', True),
    Case("regex matches", f'{D}.services.matches("[^a]?sym|example")', True),
    Case("optional chaining", f"{D}.?noSuchAttr.orValue(7) == 7", True),
    Case("exists_one over domains", f'device.attributes.exists_one(x, x == "{DRIVER}")', True),
    Case("syntax error", "?!", ("compile", "Syntax error")),
    Case("not a bool", "1", ("compile", "must evaluate to bool or the unknown type, not int")),
    Case("undeclared", "foo == 1", ("compile", "undeclared reference to 'foo'")),
    Case("type error", f"{C}.memory.isGreaterThan(1)", ("compile", "found no matching overload for 'isGreaterThan'")),
    Case("dyn result not bool", f"{D}.model", ("runtime", "could not be converted to bool")),
]

BENCH = [
    f'device.driver == "{DRIVER}"',
    f'{D}.model == "a100" && {D}.index >= 2',
    f'{C}.memory.compareTo(quantity("40Gi")) >= 0',
    f'{D}.driverVersion.isGreaterThan(semver("1.0.0"))',
]


Outcome = tuple[str, Any]  # ("match", bool) | ("compile", message) | ("runtime", message)


class Candidate:
    name = ""

    def run(self, expression: str) -> Outcome:
        raise NotImplementedError

    def compile_and_eval(self, expression: str) -> None:
        """One uncached compile and one evaluation, for the benchmark."""
        raise NotImplementedError

    def eval_compiled(self, expression: str) -> Callable[[], Any]:
        raise NotImplementedError


class CelExprPython(Candidate):
    name = "cel-expr-python 0.1.3"

    def run(self, expression: str) -> Outcome:
        compiled = dra_cel.compile_expression(expression)
        if compiled.error is not None:
            return ("compile", str(compiled.error))
        try:
            return ("match", compiled.device_matches(DRIVER, ATTRIBUTES, CAPACITY))
        except dra_cel.CELError as exc:
            return ("runtime", str(exc))

    def compile_and_eval(self, expression: str) -> None:
        dra_cel._compile(expression).device_matches(DRIVER, ATTRIBUTES, CAPACITY)

    def eval_compiled(self, expression: str) -> Callable[[], Any]:
        # Like the other candidates' contexts, the device is converted once.
        compiled = dra_cel.compile_expression(expression)
        device = dra_cel.CELDevice(DRIVER, ATTRIBUTES, CAPACITY)
        return lambda: compiled.matches(device)


def _split(name: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (DRIVER, name)


class _Semver:
    def __init__(self, text: str, normalize: bool = False) -> None:
        self.message = dra_cel._semver_message(text, normalize)

    def cmp(self, other: _Semver) -> int:
        return dra_cel._semver_compare(self.message, other.message)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Semver) and self.cmp(other) == 0

    __hash__ = None  # type: ignore[assignment]


class _Quantity:
    def __init__(self, value: Decimal) -> None:
        self.value = value

    def cmp(self, other: _Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Quantity) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


def _plain_device(value_of: Callable[[Mapping[str, Any]], Any], quantity_of: Callable[[str], Any]) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, attribute in ATTRIBUTES.items():
        domain, ident = _split(name)
        attributes.setdefault(domain, {})[ident] = value_of(attribute)
    capacity: dict[str, dict[str, Any]] = {}
    for name, entry in CAPACITY.items():
        domain, ident = _split(name)
        capacity.setdefault(domain, {})[ident] = quantity_of(entry["value"])
    return {"driver": DRIVER, "attributes": attributes, "capacity": capacity}


class CelPython(Candidate):
    name = "cel-python 0.5.0"

    def __init__(self, site: str) -> None:
        sys.path.insert(0, site)
        import celpy
        from celpy import celtypes

        self.celpy, self.celtypes = celpy, celtypes

        class Quantity(_Quantity):
            pass

        class Semver(_Semver):
            pass

        def cmp(a: Any, b: Any) -> Any:
            return celtypes.IntType(a.cmp(b))

        self.functions = {
            "quantity": lambda s: Quantity(parse_quantity(str(s)).exact),
            "semver": lambda s, n=False: Semver(str(s), bool(n)),
            "isSemver": lambda s, n=False: celtypes.BoolType(dra_cel._is_semver(str(s), bool(n))),
            "isGreaterThan": lambda a, b: celtypes.BoolType(a.cmp(b) == 1),
            "isLessThan": lambda a, b: celtypes.BoolType(a.cmp(b) == -1),
            "compareTo": cmp,
            "asInteger": lambda q: celtypes.IntType(int(q.value)),
            "isInteger": lambda q: celtypes.BoolType(q.value == q.value.to_integral_value()),
            "add": lambda q, n: Quantity(q.value + (n.value if isinstance(n, _Quantity) else int(n))),
            "minor": lambda s: celtypes.IntType(s.message.minor),
        }

        class DomainMap(celtypes.MapType):  # type: ignore[misc]
            def __getitem__(self, key: Any) -> Any:
                return super().get(key, celtypes.MapType())

        def value_of(attribute: Mapping[str, Any]) -> Any:
            if "version" in attribute:
                return Semver(attribute["version"])
            return next(iter(attribute.values()))

        device = _plain_device(value_of, lambda v: Quantity(parse_quantity(v).exact))
        self.activation = {
            "device": celtypes.MapType(
                {
                    celtypes.StringType("driver"): celtypes.StringType(DRIVER),
                    celtypes.StringType("attributes"): DomainMap(self._native(device["attributes"])),
                    celtypes.StringType("capacity"): DomainMap(self._native(device["capacity"])),
                }
            )
        }
        self.env = celpy.Environment()

    def _native(self, value: Any) -> Any:
        t = self.celtypes
        if isinstance(value, bool):
            return t.BoolType(value)
        if isinstance(value, int):
            return t.IntType(value)
        if isinstance(value, str):
            return t.StringType(value)
        if isinstance(value, dict):
            return t.MapType({t.StringType(k): self._native(v) for k, v in value.items()})
        return value

    def _program(self, expression: str) -> Any:
        return self.env.program(self.env.compile(expression), functions=self.functions)

    def run(self, expression: str) -> Outcome:
        try:
            program = self._program(expression)
        except Exception as exc:  # any failure of a foreign library is its verdict
            return ("compile", str(exc))
        try:
            result = program.evaluate(self.activation)
        except Exception as exc:
            return ("runtime", str(exc))
        if isinstance(result, Exception):
            return ("runtime", str(result))
        if not isinstance(result, self.celtypes.BoolType):
            return ("runtime", f"result {result!r} could not be converted to bool")
        return ("match", bool(result))

    def compile_and_eval(self, expression: str) -> None:
        self._program(expression).evaluate(self.activation)

    def eval_compiled(self, expression: str) -> Callable[[], Any]:
        program = self._program(expression)
        return lambda: program.evaluate(self.activation)


class CommonExpressionLanguage(Candidate):
    name = "common-expression-language 0.10.0"

    def __init__(self, site: str) -> None:
        # The package's __init__ imports its command line (typer, rich); the runtime is the
        # extension module alone.
        path = str(next(Path(site, "cel").glob("cel.cpython-*.so")))
        loader = importlib.machinery.ExtensionFileLoader("cel", path)
        spec = importlib.util.spec_from_file_location("cel", path, loader=loader)
        assert spec is not None
        self.cel = importlib.util.module_from_spec(spec)
        loader.exec_module(self.cel)

        # cel-rust cannot carry a Python object: a quantity travels as its exact value's string
        # and a semver as its text, tagged so the functions can tell them apart.
        def qty(value: Any) -> Decimal:
            return parse_quantity(str(value)[2:]).exact

        def sv(value: Any) -> _Semver:
            return _Semver(str(value)[2:])

        def cmp(a: Any, b: Any) -> int:
            if str(a).startswith("q:"):
                x, y = qty(a), qty(b)
                return (x > y) - (x < y)
            return sv(a).cmp(sv(b))

        functions = {
            "quantity": lambda s: "q:" + str(parse_quantity(s).exact),
            "semver": lambda s, n=False: "s:" + (dra_cel._normalize_semver(s) if n else s),
            "isSemver": lambda s, n=False: dra_cel._is_semver(s, n),
            "isGreaterThan": lambda a, b: cmp(a, b) == 1,
            "isLessThan": lambda a, b: cmp(a, b) == -1,
            "compareTo": cmp,
            "asInteger": lambda q: int(qty(q)),
            "isInteger": lambda q: qty(q) == qty(q).to_integral_value(),
            "add": lambda q, n: "q:" + str(qty(q) + (qty(n) if str(n).startswith("q:") else int(n))),
            "minor": lambda s: sv(s).message.minor,
        }

        def value_of(attribute: Mapping[str, Any]) -> Any:
            return "s:" + attribute["version"] if "version" in attribute else next(iter(attribute.values()))

        device = _plain_device(value_of, lambda v: "q:" + str(parse_quantity(v).exact))
        self.context = self.cel.Context({"device": device}, functions)

    def run(self, expression: str) -> Outcome:
        try:
            program = self.cel.compile(expression)
        except Exception as exc:
            return ("compile", str(exc))
        try:
            result = program.execute(self.context)
        except Exception as exc:
            return ("runtime", str(exc))
        if not isinstance(result, bool):
            return ("runtime", f"result {result!r} could not be converted to bool")
        return ("match", result)

    def compile_and_eval(self, expression: str) -> None:
        self.cel.compile(expression).execute(self.context)

    def eval_compiled(self, expression: str) -> Callable[[], Any]:
        program = self.cel.compile(expression)
        return lambda: program.execute(self.context)


def verdict(case: Case, outcome: Outcome) -> str:
    """ok (kube's answer, kube's text), kind (right kind of failure, other text), or WRONG."""
    if isinstance(case.expect, bool):
        return "ok" if outcome == ("match", case.expect) else "WRONG"
    kind, text = case.expect
    if outcome[0] != kind:
        return "WRONG"
    return "ok" if text in str(outcome[1]) else "kind"


def _per_call_us(call: Callable[[], Any], repeat: int, rounds: int = 5) -> float:
    """The fastest of a few rounds, as timeit reports: the machine is shared, and other work only
    ever adds time."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            call()
        best = min(best, time.perf_counter() - start)
    return best / repeat * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cel-python", help="directory holding cel-python and its dependencies")
    parser.add_argument("--common-expression-language", help="directory holding common-expression-language")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    candidates: list[Candidate] = [CelExprPython()]
    if args.cel_python:
        candidates.append(CelPython(args.cel_python))
    else:
        print("cel-python: not run (no --cel-python directory)")
    if args.common_expression_language:
        candidates.append(CommonExpressionLanguage(args.common_expression_language))
    else:
        print("common-expression-language: not run (no --common-expression-language directory)")

    header = "| case | expression | kube | " + " | ".join(c.name for c in candidates) + " |"
    print(header)
    print("|" + "---|" * (3 + len(candidates)))
    scores = {c.name: 0 for c in candidates}
    for case in CASES:
        cells = []
        for candidate in candidates:
            outcome = candidate.run(case.expression)
            mark = verdict(case, outcome)
            scores[candidate.name] += mark == "ok"
            shown = outcome[1] if outcome[0] == "match" else f"{outcome[0]}: {str(outcome[1]).splitlines()[0][:60]}"
            cells.append(f"{mark} ({shown})")
        expect = case.expect if isinstance(case.expect, bool) else f"{case.expect[0]}: {case.expect[1]}"
        expression = case.expression.replace("|", "\\|")
        print(f"| {case.name} | `{expression}` | {expect} | " + " | ".join(cells) + " |")
    print(
        "| **kube's answer and text** | | | "
        + " | ".join(f"**{scores[c.name]}/{len(CASES)}**" for c in candidates)
        + " |"
    )

    print()
    print("| library | compile + evaluate, µs per selector | evaluate compiled, µs per selector |")
    print("|---|---|---|")
    for candidate in candidates:
        compiles = [partial(candidate.compile_and_eval, expression) for expression in BENCH]
        compile_us = sum(_per_call_us(call, args.repeat) for call in compiles) / len(BENCH)
        evals = [candidate.eval_compiled(e) for e in BENCH]
        eval_us = sum(_per_call_us(call, args.repeat * 10) for call in evals) / len(BENCH)
        print(f"| {candidate.name} | {compile_us:.1f} | {eval_us:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
