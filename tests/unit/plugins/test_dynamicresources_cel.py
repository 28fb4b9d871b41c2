"""DRA CEL selectors against upstream's own cases.

The first table ports k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile_test.go (`testcases`)
for the environment kube-scheduler compiles with: stored expressions, DRAConsumableCapacity on,
DRAListTypeAttributes off. Left out: `expectCost` (the scheduler's cache compiles without cost
estimation, and cel-cpp has no estimator to compare), and the three cases that need the
new-expressions environment the apiserver validates with and the scheduler never uses
(macro-compilation-error-new-expressions, includes-function-compilation-error,
allow_multiple_allocations_disabled). The quantity and semver tables port
k8s.io/apiserver@v0.37.2/pkg/cel/library/{quantity,semver}_test.go, each value-returning
expression compared with its expected value, since a selector must be a bool.
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.dynamicresources import cel
from plugins.dynamicresources.cel import CELError, compile_expression

DRIVER = "dra.example.com"
MAX_ID_LENGTH = 64  # resourceapi.DeviceMaxIDLength
MAX_ATTRIBUTES = 32  # resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice
TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"


def _expensive_attributes() -> dict[str, dict[str, Any]]:
    attributes = {}
    for i in range(MAX_ATTRIBUTES):
        suffix = f"-{i}"
        attributes[f"{DRIVER}/" + "x" * (MAX_ID_LENGTH - len(suffix)) + suffix] = {"string": "abc"}
    return attributes


# name: (expression, driver, attributes, capacity, allowMultipleAllocations, expected)
# expected: a bool, ("compile", text) or ("runtime", text) — the text kube's message contains.
COMPILE_TEST: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], bool, Any]] = {
    "true": ("true", "", {}, {}, False, True),
    "false": ("false", "", {}, {}, False, False),
    "syntax-error": ("?!", "", {}, {}, False, ("compile", "Syntax error")),
    "type-error": ("1", "", {}, {}, False, ("compile", "must evaluate to bool or the unknown type, not int")),
    "runtime-error-lookup-identifier": (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        "",
        {},
        {},
        False,
        ("runtime", "no such key: noSuchAttr"),
    ),
    "runtime-error-lookup-map": (
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        "",
        {},
        {},
        False,
        ("runtime", "no such key: noSuchAttr"),
    ),
    "domain-check-negative": ('"no-such-domain" in device.attributes', "", {}, {}, False, False),
    "domain-check-positive": (
        '"dra.example.com" in device.attributes',
        "",
        {"dra.example.com/something": {"bool": True}},
        {},
        False,
        True,
    ),
    "empty-driver-name": ('device.driver == ""', "", {}, {}, False, True),
    "real-driver-name": ('device.driver == "dra.example.com"', DRIVER, {}, {}, False, True),
    "driver-name-qualifier": (
        'device.attributes["dra.example.com"].name',
        DRIVER,
        {"name": {"bool": True}},
        {},
        False,
        True,
    ),
    "driver-name-qualifier-map-lookup": (
        'device.attributes["dra.example.com"]["name"]',
        DRIVER,
        {"name": {"bool": True}},
        {},
        False,
        True,
    ),
    "bind": (
        'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
        DRIVER,
        {"name": {"bool": True}},
        {},
        False,
        True,
    ),
    "qualified-attribute-name": (
        'device.attributes["other.example.com"].name',
        DRIVER,
        {"other.example.com/name": {"bool": True}},
        {},
        False,
        True,
    ),
    "bool": ('device.attributes["dra.example.com"].name', DRIVER, {"name": {"bool": True}}, {}, False, True),
    "int": ('device.attributes["dra.example.com"].name > 0', DRIVER, {"name": {"int": 1}}, {}, False, True),
    "string": (
        'device.attributes["dra.example.com"].name == "fish"',
        DRIVER,
        {"name": {"string": "fish"}},
        {},
        False,
        True,
    ),
    # cel-go names the range's Go type ("got 'types.Int', ..."); cel-cpp does not report it.
    "macro-exists-on-int": (
        'device.attributes["dra.example.com"].name.exists(x, x > 0)',
        DRIVER,
        {"name": {"int": 1}},
        {},
        False,
        ("runtime", "expected iterable type"),
    ),
    "macro-exists-on-bool": (
        'device.attributes["dra.example.com"].name.exists(x, x == true)',
        DRIVER,
        {"name": {"bool": True}},
        {},
        False,
        ("runtime", "expected iterable type"),
    ),
    "macro-exists-on-string": (
        'device.attributes["dra.example.com"].name.exists(x, x == "fish")',
        DRIVER,
        {"name": {"string": "fish"}},
        {},
        False,
        ("runtime", "expected iterable type"),
    ),
    "list-result-type-causes-match-error": (
        'device.attributes["dra.example.com"].names',
        DRIVER,
        {"names": {"strings": ["fish", "bird"]}},
        {},
        False,
        ("runtime", "CEL result of type list could not be converted to bool"),
    ),
    "includes-function-can-evaluate": (
        'device.attributes["dra.example.com"].name.includes("fish")',
        DRIVER,
        {"name": {"strings": ["fish", "bird"]}},
        {},
        False,
        True,
    ),
    "list-of-bool": (
        'device.attributes["dra.example.com"].names.size() == 2',
        DRIVER,
        {"names": {"bools": [True, False]}},
        {},
        False,
        True,
    ),
    "list-of-int": (
        'device.attributes["dra.example.com"].names.size() == 2',
        DRIVER,
        {"names": {"ints": [1, 2]}},
        {},
        False,
        True,
    ),
    "list-of-string": (
        'device.attributes["dra.example.com"].names.size() == 2',
        DRIVER,
        {"names": {"strings": ["fish", "bird"]}},
        {},
        False,
        True,
    ),
    "list-of-semver": (
        'device.attributes["dra.example.com"].names.size() == 2',
        DRIVER,
        {"names": {"versions": ["1.0.0", "2.0.0"]}},
        {},
        False,
        True,
    ),
    "macro-on-list-of-int": (
        'device.attributes["dra.example.com"].names.exists(x, x > 0)',
        DRIVER,
        {"names": {"ints": [1, 2]}},
        {},
        False,
        True,
    ),
    "macro-on-list-of-string": (
        'device.attributes["dra.example.com"].names.all(x, x != "")',
        DRIVER,
        {"names": {"strings": ["fish", "bird"]}},
        {},
        False,
        True,
    ),
    "macro-on-list-of-semver": (
        'device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))',
        DRIVER,
        {"names": {"versions": ["1.0.0", "2.0.0"]}},
        {},
        False,
        True,
    ),
    "includes-function-compilation-and-eval-success": (
        'device.attributes["dra.example.com"].attr.includes("fish")',
        DRIVER,
        {"attr": {"string": "fish"}},
        {},
        False,
        True,
    ),
    **{
        f"includes-function-on-{kind}-{sign}": (
            f'device.attributes["dra.example.com"].name.includes({argument})',
            DRIVER,
            {"name": attribute},
            {},
            False,
            sign == "positive",
        )
        for kind, sign, attribute, argument in [
            ("bool-scalar", "positive", {"bool": True}, "true"),
            ("bool-scalar", "negative", {"bool": False}, "true"),
            ("bool-list", "positive", {"bools": [True, False]}, "true"),
            ("bool-list", "negative", {"bools": [True, True]}, "false"),
            ("int-scalar", "positive", {"int": 1}, "1"),
            ("int-scalar", "negative", {"int": 2}, "1"),
            ("int-list", "positive", {"ints": [1, 2]}, "1"),
            ("int-list", "negative", {"ints": [1, 2]}, "3"),
            ("string-scalar", "positive", {"string": "fish"}, '"fish"'),
            ("string-scalar", "negative", {"string": "fish"}, '"bird"'),
            ("string-list", "positive", {"strings": ["fish", "bird"]}, '"fish"'),
            ("string-list", "negative", {"strings": ["fish", "bird"]}, '"cat"'),
            ("semver-scalar", "positive", {"version": "1.0.0"}, 'semver("1.0.0")'),
            ("semver-scalar", "negative", {"version": "1.0.0"}, 'semver("2.0.0")'),
            ("semver-list", "positive", {"versions": ["1.0.0", "2.0.0"]}, 'semver("1.0.0")'),
            ("semver-list", "negative", {"versions": ["1.0.0", "2.0.0"]}, 'semver("3.0.0")'),
        ]
    },
    "includes-function-on-very-long-list-positive": (
        'device.attributes["dra.example.com"].name.includes("value-64")',
        DRIVER,
        {"name": {"strings": [f"value-{i}" for i in range(64)]}},
        {},
        False,
        False,
    ),
    "in-operator-on-list": (
        '1 in device.attributes["dra.example.com"].names',
        DRIVER,
        {"names": {"ints": [1, 2, 3]}},
        {},
        False,
        True,
    ),
    "version": (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        DRIVER,
        {"name": {"version": "1.0.0"}},
        {},
        False,
        True,
    ),
    "version_v": (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
        DRIVER,
        {"name": {"version": "1.0.0"}},
        {},
        False,
        True,
    ),
    "macro-exists-on-version": (
        'device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))',
        DRIVER,
        {"name": {"version": "1.0.0"}},
        {},
        False,
        ("runtime", "expected iterable type"),
    ),
    "quantity": (
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        DRIVER,
        {},
        {"name": {"value": "1Mi"}},
        False,
        True,
    ),
    "check-positive": (
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        DRIVER,
        {},
        {"name": {"value": "1Mi"}},
        False,
        True,
    ),
    "check-negative": (
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        "",
        {},
        {},
        False,
        True,
    ),
    "all": (
        """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""",
        DRIVER,
        {"bool": {"bool": True}, "int": {"int": 1}, "string": {"string": "fish"}, "version": {"version": "1.0.0"}},
        {"quantity": {"value": "1Mi"}},
        False,
        True,
    ),
    "many": (
        'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
        'device.attributes["dra.example.com"].c',
        DRIVER,
        {"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}},
        {},
        False,
        True,
    ),
    "check_attribute_domains": (
        'device.attributes.exists_one(x, x == "dra.example.com")',
        DRIVER,
        {"services": {"string": "some_example_value"}},
        {},
        False,
        True,
    ),
    "check_attribute_ids": (
        'device.attributes["dra.example.com"].exists_one(x, x == "services")',
        DRIVER,
        {"services": {"string": "some_example_value"}},
        {},
        False,
        True,
    ),
    "split_attribute": (
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        DRIVER,
        {"services": {"string": "some_example_value"}},
        {},
        False,
        True,
    ),
    "regexp_attribute": (
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        DRIVER,
        {"services": {"string": "asymetric"}},
        {},
        False,
        True,
    ),
    "check_capacity_domains": (
        'device.capacity.exists_one(x, x == "dra.example.com")',
        DRIVER,
        {},
        {"memory": {"value": "1Mi"}},
        False,
        True,
    ),
    "check_capacity_ids": (
        'device.capacity["dra.example.com"].exists_one(x, x == "memory")',
        DRIVER,
        {},
        {"memory": {"value": "1Mi"}},
        False,
        True,
    ),
    "expensive": (
        f"{TEN}.all(x, {TEN}.all(y, {TEN}.all(z, {TEN}.all(z2, {TEN}.all(z3, {TEN}.all(z4, "
        f"{TEN}.all(z5, int('1'.find('[0-9]*')) < 100)))))))",
        DRIVER,
        _expensive_attributes(),
        {},
        False,
        ("runtime", "actual cost limit exceeded"),
    ),
    "allow_multiple_allocations": ("device.allowMultipleAllocations == true", DRIVER, {}, {}, True, True),
    "allow_multiple_allocations_default": ("device.allowMultipleAllocations == false", DRIVER, {}, {}, False, True),
}


def _outcome(expression: str, driver: str, attributes: dict[str, Any], capacity: dict[str, Any], multi: bool) -> Any:
    compiled = compile_expression(expression)
    if compiled.error is not None:
        return ("compile", str(compiled.error))
    try:
        return compiled.device_matches(driver, attributes, capacity, allow_multiple_allocations=multi)
    except CELError as exc:
        return ("runtime", str(exc))


def _check(outcome: Any, expected: Any) -> None:
    if isinstance(expected, bool):
        assert outcome is expected
    else:
        assert isinstance(outcome, tuple), outcome
        assert outcome[0] == expected[0], outcome
        assert expected[1] in outcome[1], outcome


@pytest.mark.parametrize("name", sorted(COMPILE_TEST))
def test_compile_test_cases(name: str) -> None:
    expression, driver, attributes, capacity, multi, expected = COMPILE_TEST[name]
    _check(_outcome(expression, driver, attributes, capacity, multi), expected)


QUANTITY_TEST = [
    ('quantity("12Mi") == quantity("12582912")', True),
    ('quantity("10Mo") == quantity("1")', ("runtime", "quantities must match the regular expression")),
    ('quantity("10Mm") == quantity("1")', ("runtime", "unable to parse quantity's suffix")),
    ('isQuantity("20")', True),
    ('isQuantity("20M")', True),
    ('isQuantity("20Mi")', True),
    ('isQuantity("20Mo")', False),
    ('isQuantity("10Mm")', False),
    ("isQuantity([1, 2, 3])", ("compile", "found no matching overload for 'isQuantity' applied to")),
    ('quantity("200M") == quantity("200M")', True),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
        'quantity("0.002G") == quantity("2000k")',
        True,
    ),
    ('quantity("200M") == quantity("0.3G")', False),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True),
    ('quantity("50M").isLessThan(quantity("100M"))', True),
    ('quantity("100M").isLessThan(quantity("50M"))', False),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ('quantity("50M").isGreaterThan(quantity("100M"))', False),
    ('quantity("200M").compareTo(quantity("0.2G")) == 0', True),
    ('quantity("50M").compareTo(quantity("50Mi")) == -1', True),
    ('quantity("50Mi").compareTo(quantity("50M")) == 1', True),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ('quantity("50k").sub(20) == quantity("49980")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980', True),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20', True),
    ('quantity("50k").asInteger() == 50000', True),
    (
        'quantity("9999999999999999999999999999999999999G").asInteger() == 0',
        ("runtime", "cannot convert value to integer"),
    ),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ('quantity("50").isInteger()', True),
    ('quantity("50.703k").asApproximateFloat() == 50703.0', True),
    (
        '[quantity("9999999999999999999999999999999999999")].all(x, '
        'x.add(quantity("1")).compareTo(x.add(quantity("2"))) == -1)',
        True,
    ),
]

SEMVER_TEST = [
    ('semver("1.2.3") == semver("1.2.3")', True),
    ('semver("v1.0") == semver("1.0.0")', ("runtime", "No Major.Minor.Patch elements found")),
    ('isSemver("1.2.3-beta.1+build.1")', True),
    ('isSemver("")', False),
    ('isSemver("v1.0.0")', False),
    ('isSemver(" 1.0.0")', False),
    ('isSemver("1. 0.0")', False),
    ('isSemver("1.0.0 ")', False),
    ('isSemver("01.01.01")', False),
    ('isSemver("1")', False),
    ('isSemver("1.1")', False),
    ('isSemver("", true)', False),
    ('isSemver(" 1.0.0", true)', False),
    ('isSemver("1. 0.0", true)', False),
    ('isSemver("1.0.0 ", true)', False),
    ('isSemver("v1.0.0", true)', True),
    ('isSemver("01.01.01", true)', True),
    ('isSemver("1", true)', True),
    ('isSemver("1.1", true)', True),
    ("isSemver([1, 2, 3])", ("compile", "found no matching overload for 'isSemver' applied to")),
    ('semver("v01.01", true) == semver("1.1.0")', True),
    ('semver("1.2.3") == semver("1.0.0")', False),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ('semver("1.2.3").compareTo(semver("1.2.3")) == 0', True),
    ('semver("1.0.0").compareTo(semver("1.2.3")) == -1', True),
    ('semver("1.2.3").compareTo(semver("1.0.0")) == 1', True),
    ('semver("1.2.3").major() == 1', True),
    ('semver("1.2.3").minor() == 2', True),
    ('semver("1.2.3").patch() == 3', True),
    # semver's precedence rules beyond upstream's table: prereleases, build metadata.
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', True),
    ('semver("1.0.0-alpha.beta").isLessThan(semver("1.0.0-beta.2"))', True),
    ('semver("1.0.0-beta.2").isLessThan(semver("1.0.0-beta.11"))', True),
    ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
    ('semver("1.0.0+build.1") == semver("1.0.0+build.2")', True),
]


@pytest.mark.parametrize(("expression", "expected"), QUANTITY_TEST + SEMVER_TEST)
def test_library_cases(expression: str, expected: Any) -> None:
    _check(_outcome(expression, DRIVER, {}, {}, False), expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # An absent domain is an empty map to a lookup, absent to `in`, has() and iteration.
        ('device.attributes["gpu.example.com"].size() == 0', True),
        ('has(device.attributes["gpu.example.com"].model)', False),
        ('device.attributes["gpu.example.com"].?model.orValue("none") == "none"', True),
        ('"gpu.example.com" in device.attributes', False),
        ("device.attributes.size() == 1 && device.capacity.size() == 1", True),
        ('device.capacity["gpu.example.com"].size() == 0', True),
        # field selection reaches a domain without dots the same way
        ("device.attributes.gpu.size() == 0", True),
        ('device.attributes["a.com"].size() == 0 && device.attributes["b.com"].size() == 0', True),
        # a present domain's missing key stays an error, with kube's hint added by the allocator
        ('device.attributes["dra.example.com"].memory == 1', ("runtime", "no such key: memory")),
        ('{"a": 1}["b"] == 1', ("runtime", "no such key: b")),
        ("1 / 0 == 1", ("runtime", "division by zero")),
        ("1 % 0 == 1", ("runtime", "modulus by zero")),
        ('device.capacity["dra.example.com"].memory', ("compile", "not kubernetes.Quantity")),
        (
            'device.attributes["dra.example.com"].model',
            ("runtime", "CEL result of type string could not be converted to bool"),
        ),
        (
            'device.attributes["dra.example.com"].index',
            ("runtime", "CEL result of type int could not be converted to bool"),
        ),
        ("device.foo == 1", ("compile", "undefined field 'foo'")),
        ('device.capacity["dra.example.com"].memory.isGreaterThan(1)', ("compile", "found no matching overload")),
        ('device.attributes["dra.example.com"].model.upperAscii() == "A100"', True),
        ('"a,b".split(",") == ["a", "b"] && "abc".indexOf("c") == 2', True),
        ('"abc123".find("[0-9]+") == "123" && "a1b2".findAll("[0-9]") == ["1", "2"]', True),
        (
            '"a".find("(") == ""',
            ("compile", "program instantiation failed: error parsing regexp: missing closing ): `(`"),
        ),
        ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1, 2].sum() == 3 && [1, 2].isSorted()", True),
        ("[].min() == 1", ("runtime", "min called on empty list")),
        ('device.attributes["dra.example.com"].index == 3 && device.attributes["dra.example.com"].healthy', True),
        ('device.attributes["dra.example.com"].driverVersion.major() == 535', True),
    ],
)
def test_kubernetes_semantics(expression: str, expected: Any) -> None:
    attributes = {
        "model": {"string": "a100"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "535.104.5"},
    }
    _check(_outcome(expression, DRIVER, attributes, {"memory": {"value": "80Gi"}}, False), expected)


def test_bad_attribute_is_the_devices_error() -> None:
    compiled = compile_expression('device.driver == "x"')
    with pytest.raises(CELError, match=r"^attribute v: parse semantic version: "):
        compiled.device_matches(DRIVER, {"v": {"version": "1.0"}}, {})
    with pytest.raises(CELError, match=r"^attribute empty: unsupported attribute value$"):
        compiled.device_matches(DRIVER, {"empty": {}}, {})
    with pytest.raises(CELError, match=r"^attribute null: unsupported attribute value$"):
        compiled.device_matches(DRIVER, {"null": None}, {})  # type: ignore[dict-item]
    with pytest.raises(CELError, match=r"^capacity memory: quantities must match the regular expression"):
        compiled.device_matches(DRIVER, {}, {"memory": {"value": "lots"}})
    with pytest.raises(CELError, match=r"^capacity memory: quantities must match the regular expression"):
        compiled.device_matches(DRIVER, {}, {"memory": None})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "expression", ["", "device.", "(((", '"unterminated', "a" * 5000 + " ==", "device.driver == 1"]
)
def test_no_expression_crashes(expression: str) -> None:
    compiled = compile_expression(expression)
    assert compiled.error is not None
    assert str(compiled.error).startswith("compilation failed: ERROR: <input>:")
    with pytest.raises(CELError) as raised:
        compiled.device_matches(DRIVER, {}, {})
    assert raised.value is compiled.error


def test_cache_returns_the_same_compiled_object() -> None:
    expression = 'device.driver == "cache.example.com"'
    first = compile_expression(expression)
    assert compile_expression(expression) is first


def test_cache_is_bounded_and_keeps_only_successes() -> None:
    bad = "device.attributes["
    assert compile_expression(bad) is not compile_expression(bad)
    first = compile_expression("device.driver == 'evicted-0'")
    for i in range(1, cel.CACHE_SIZE + 1):
        compile_expression(f"device.driver == 'evicted-{i}'")
    assert compile_expression("device.driver == 'evicted-0'") is not first


def test_enhance_runtime_error() -> None:
    hint = (
        "no such key: x. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields"
    )
    assert cel.enhance_runtime_error("no such key: x") == hint
    assert cel.enhance_runtime_error(hint) == hint
    assert cel.enhance_runtime_error("division by zero") == "division by zero"


def test_one_converted_device_serves_every_selector() -> None:
    device = cel.CELDevice(DRIVER, {"model": {"string": "a100"}}, {"memory": {"value": "80Gi"}})
    # The first selector's lookup of an absent domain must not make it present for the next.
    assert compile_expression('device.attributes["gpu.example.com"].size() == 0').matches(device)
    assert not compile_expression('"gpu.example.com" in device.attributes').matches(device)
    absent_twice = 'device.attributes["other.example.com"].size() == 0 && !("gpu.example.com" in device.attributes)'
    assert compile_expression(absent_twice).matches(device)
    assert compile_expression('device.capacity["dra.example.com"].memory == quantity("80Gi")').matches(device)
    assert compile_expression('device.attributes["dra.example.com"].model == "a100"').matches(device)


def test_a_device_that_cannot_be_converted_fails_every_selector_alike() -> None:
    device = cel.CELDevice(DRIVER, {"v": {"version": "one"}}, {})
    errors = []
    for expression in ("true", 'device.driver == "x"'):
        with pytest.raises(CELError) as raised:
            compile_expression(expression).matches(device)
        errors.append(str(raised.value))
    assert errors == ["attribute v: parse semantic version: No Major.Minor.Patch elements found"] * 2
