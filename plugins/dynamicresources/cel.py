"""CEL device selectors of Dynamic Resource Allocation, as k8s.io/dynamic-resource-allocation/cel.

Owns compiling a DeviceClass or claim request selector (`spec.selectors[].cel.expression`), the
cache of compiled expressions, and evaluating one against one device of a ResourceSlice with the
variables and Kubernetes functions kube-scheduler v1.37.2's DRA environment declares: `device.driver`,
`device.allowMultipleAllocations`, `device.attributes[domain][id]` (an unknown domain is an empty
map, as upstream's defaulting mapper makes it), `device.capacity[domain][id]` as quantities, the
quantity and semver libraries, the strings extension, `cel.bind` and optional types. Every failure
is a CELError whose text is kube's message; nothing here raises anything else for an expression
or a device, whatever they hold.

Must never know which claim, class or device an expression belongs to (the allocator names them in
its own wrapping, as upstream's selectorsMatch does), and never hold scheduler state.

The runtime is `cel-expr-python`, the CEL project's own Python binding of cel-cpp, chosen over
`common-expression-language` (cel-rust) and `cel-python` (pure Python) on the comparison in
harness/bench/cel_compare.py: it alone type-checks at compile time like cel-go, so a bad selector
fails to compile with cel-go's wording ("undeclared reference", "found no matching overload",
"Syntax error"); it alone ships the strings, bindings and optional-types extensions; it answers
32 of 32 DRA selectors as kube does (the others 22 and 21) and evaluates 30x faster than
cel-python, in about 1.5x cel-rust's time. Kubernetes' Quantity and Semver are message types of a tiny
descriptor pool, because the binding cannot pass an opaque Python object through cel-cpp; each
message holds only the canonical value, so CEL's message equality is kube's `Equal`. What cel-cpp
cannot give the same way (the running cost, a defaulting map, some libraries) and how this module
stands in for it is in plugins/dynamicresources/CEL.md.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from functools import lru_cache
from threading import Lock
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from scheduler.model.quantity import INT64_MAX, INT64_MIN, QuantityError
from scheduler.model.quantity import parse as parse_quantity

# kube-scheduler's cache of compiled expressions holds the 10 most recently used ones
# (dynamicresources.go, cel.NewCache(10, ...)); a busy cluster's distinct selectors exceed that
# quickly and recompiling costs far more than an entry, so ours keeps more.
CACHE_SIZE = 256
# resourceapi.CELSelectorExpressionMaxCost.
MAX_COST = 1_000_000

_DRIVER = "device.driver"
_MULTI_ALLOC = "device.allowMultipleAllocations"
_ATTRIBUTES = "device.attributes"
_CAPACITY = "device.capacity"


class CELError(Exception):
    """A compile or runtime failure of a selector; str() is kube's message for it."""


# ---- Kubernetes' Quantity and Semver as CEL values ---------------------------------------------


def _type_pool() -> descriptor_pool.DescriptorPool:
    proto = descriptor_pb2.FileDescriptorProto(name="kubernetes_cel.proto", package="kubernetes", syntax="proto3")
    field_type = descriptor_pb2.FieldDescriptorProto
    quantity = proto.message_type.add(name="Quantity")
    # The exact value as a plain decimal string: equal quantities, equal messages.
    quantity.field.add(name="value", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    semver = proto.message_type.add(name="Semver")
    for number, name in enumerate(("major", "minor", "patch"), start=1):
        semver.field.add(name=name, number=number, type=field_type.TYPE_UINT64, label=field_type.LABEL_OPTIONAL)
    # Build metadata is left out: semver's EQ ignores it, and so does kube's Semver equality.
    semver.field.add(name="pre", number=4, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


_POOL = _type_pool()
_QuantityMessage: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kubernetes.Quantity"))
_SemverMessage: Any = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kubernetes.Semver"))
_QUANTITY = cel.Type("kubernetes.Quantity")
_SEMVER = cel.Type("kubernetes.Semver")

# resource.ParseQuantity's errors: ErrFormatWrong for text outside its pattern, ErrNumeric and
# ErrSuffix for text the pattern admits but whose number or suffix is not one.
_QUANTITY_PATTERN = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_QUANTITY_FORMAT_ERROR = f"quantities must match the regular expression '{_QUANTITY_PATTERN.pattern}'"
_QUANTITY_NUMERIC_ERROR = "unable to parse numeric part of quantity"
_QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix"


def _quantity_error(text: str) -> str:
    match = _QUANTITY_PATTERN.match(text)
    if match is None:
        return _QUANTITY_FORMAT_ERROR
    number = match.group(1).lstrip("+-")
    if number.count(".") > 1 or not any(char.isdigit() for char in number):
        return _QUANTITY_NUMERIC_ERROR
    return _QUANTITY_SUFFIX_ERROR


# Quantity arithmetic is exact in kube (inf.Dec past int64); the default context's 28 digits are not.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _quantity_message(exact: Decimal) -> Any:
    return _QuantityMessage(value=format(exact.normalize(_EXACT), "f"))


@lru_cache(maxsize=4096)
def _capacity_message(text: str) -> Any:
    """The CEL value of a device's capacity; devices of one driver repeat the same few."""
    return _quantity_message(parse_quantity(text).exact)


@lru_cache(maxsize=4096)
def _exact(text: str) -> Decimal:
    return Decimal(text)


def _value(message: Any) -> Decimal:
    return _exact(message.value)


@lru_cache(maxsize=4096)
def _parse_quantity(text: str) -> Any:
    """quantity(): selectors name the same few literals, evaluated once per device."""
    try:
        return _quantity_message(parse_quantity(text).exact)
    except QuantityError:
        raise ValueError(_quantity_error(text)) from None


def _sign(value: Decimal) -> int:
    return (value > 0) - (value < 0)


def _compare(a: Any, b: Any) -> int:
    a_value, b_value = _value(a), _value(b)
    return (a_value > b_value) - (a_value < b_value)


def _is_integer(message: Any) -> bool:
    # Quantity.AsInt64 converts only an integral value within int64.
    exact = _value(message)
    return exact == exact.to_integral_value() and INT64_MIN <= exact <= INT64_MAX


def _as_integer(message: Any) -> int:
    if not _is_integer(message):
        raise ValueError("cannot convert value to integer")
    return int(_value(message))


def _add(a: Any, b: Any) -> Any:
    return _quantity_message(_EXACT.add(_value(a), _value(b)))


def _add_int(a: Any, b: int) -> Any:
    return _quantity_message(_EXACT.add(_value(a), Decimal(b)))


def _sub(a: Any, b: Any) -> Any:
    return _quantity_message(_EXACT.subtract(_value(a), _value(b)))


def _sub_int(a: Any, b: int) -> Any:
    return _quantity_message(_EXACT.subtract(_value(a), Decimal(b)))


# blang/semver v4's grammar, with its error wording.
_NUMERIC = re.compile(r"^[0-9]+$")
_ALPHANUMERIC = re.compile(r"^[0-9A-Za-z-]+$")


def _parse_semver(text: str) -> tuple[int, int, int, tuple[str, ...]]:
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    names = ("major", "minor")
    numbers = []
    for name, part in zip(names, parts[:2], strict=True):
        if not _NUMERIC.match(part):
            raise ValueError(f'Invalid character(s) found in {name} number "{part}"')
        if len(part) > 1 and part[0] == "0":
            raise ValueError(f'{name.capitalize()} number must not contain leading zeroes "{part}"')
        numbers.append(int(part))
    rest = parts[2]
    cut = len(rest)
    for i, char in enumerate(rest):
        if char in "+-":
            cut = i
            break
    patch_text = rest[:cut]
    if not _NUMERIC.match(patch_text):
        raise ValueError(f'Invalid character(s) found in patch number "{patch_text}"')
    if len(patch_text) > 1 and patch_text[0] == "0":
        raise ValueError(f'Patch number must not contain leading zeroes "{patch_text}"')
    build = ""
    pre = ""
    tail = rest[cut:]
    if "+" in tail:
        tail, build = tail.split("+", 1)
        if not build:
            raise ValueError("Build meta data is empty")
        for part in build.split("."):
            if not _ALPHANUMERIC.match(part):
                raise ValueError(f'Invalid character(s) found in build meta data "{part}"')
    if tail:
        pre = tail[1:]
        for part in pre.split("."):
            if not part:
                raise ValueError("Prerelease is empty")
            if not _ALPHANUMERIC.match(part):
                raise ValueError(f'Invalid character(s) found in prerelease "{part}"')
            if _NUMERIC.match(part) and len(part) > 1 and part[0] == "0":
                raise ValueError(f'Version contains prerelease with leading zeroes "{part}"')
    return numbers[0], numbers[1], int(patch_text), tuple(pre.split(".")) if pre else ()


def _normalize_semver(text: str) -> str:
    # library.normalizeAndParse: drop a "v", leading zeroes, fill up a short version.
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            parts[i] = part if part and part[0].isdigit() else "0" + part
    if len(parts) < 3:
        if any(char in parts[-1] for char in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


@lru_cache(maxsize=4096)
def _semver_message(text: str, normalize: bool = False) -> Any:
    major, minor, patch, pre = _parse_semver(_normalize_semver(text) if normalize else text)
    return _SemverMessage(major=major, minor=minor, patch=patch, pre=".".join(pre))


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _parse_semver(_normalize_semver(text) if normalize else text)
    except ValueError:
        return False
    return True


def _prerelease_key(pre: str) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, int(part), "") if _NUMERIC.match(part) else (1, 0, part) for part in pre.split("."))


def _semver_compare(a: Any, b: Any) -> int:
    left, right = (a.major, a.minor, a.patch), (b.major, b.minor, b.patch)
    if left != right:
        return 1 if left > right else -1
    if a.pre == b.pre:
        return 0
    if not a.pre or not b.pre:  # a release is greater than any of its prereleases
        return 1 if not a.pre else -1
    return 1 if _prerelease_key(a.pre) > _prerelease_key(b.pre) else -1


# ---- the environment ---------------------------------------------------------------------------


def _overload(
    overload_id: str, result: Any, parameters: list[Any], impl: Callable[..., Any], member: bool = False
) -> Any:
    return cel.Overload(overload_id, return_type=result, parameters=parameters, is_member=member, impl=impl)


def _declaration(overload_id: str, result: Any, parameters: list[Any]) -> Any:
    return cel.Overload(overload_id, return_type=result, parameters=parameters, is_member=True)


def _compare_any(a: Any, b: Any) -> int:
    if isinstance(a, _SemverMessage):
        return _semver_compare(a, b)
    return _compare(a, b)


def _cel_equal(a: Any, b: Any) -> bool:
    """CEL's `==` on two values of any type: a bool is never a number, numbers compare across types."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_cel_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _includes(target: Any, value: Any) -> bool:
    # library.IncludesOption: membership in a list attribute, equality with a scalar one.
    if isinstance(target, list):
        return any(_cel_equal(item, value) for item in target)
    return _cel_equal(target, value)


def _sets_contains(items: list[Any], others: list[Any]) -> bool:
    return all(_includes(items, other) for other in others)


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def extreme(items: list[Any]) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return pick(items)

    return extreme


@lru_cache(maxsize=1)
def _re2_check() -> Any:
    """cel-cpp's own `matches`, to have RE2 (Go's regexp dialect) judge a pattern."""
    return _ENV.compile('"".matches(device.driver)')


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    # RE2 decides what is a valid pattern, with Go's wording; Python's re then searches, as the
    # two agree on the syntax RE2 accepts apart from a few classes ([[:alpha:]], \pL).
    result = _re2_check().eval(data={_DRIVER: pattern})
    if result.type() == cel.Type.ERROR:
        raise ValueError(f"Illegal regex: {_runtime_message(str(result.value()))}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Illegal regex: error parsing regexp: {exc}") from None


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [match.group(0) for match in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _includes_overloads() -> list[Any]:
    """includes(dyn, dyn), spelled out per runtime kind: cel-cpp's binding dispatches a Python
    implementation only on concrete parameter types. The two message types share one runtime
    kind, so the second of each pair is declared for the checker and served by the first."""
    t = cel.Type
    kinds = [
        ("int", t.INT),
        ("uint", t.UINT),
        ("double", t.DOUBLE),
        ("string", t.STRING),
        ("bool", t.BOOL),
        ("bytes", t.BYTES),
        ("list", t.List(t.DYN)),
        ("message", _SEMVER),
        ("message", _QUANTITY),
    ]
    overloads = []
    implemented: set[tuple[str, str]] = set()
    for i, (target_kind, target) in enumerate(kinds):
        for j, (arg_kind, arg) in enumerate(kinds):
            overload_id = f"list_includes_{i}_{j}"
            if (target_kind, arg_kind) in implemented:
                overloads.append(_declaration(overload_id, t.BOOL, [target, arg]))
            else:
                implemented.add((target_kind, arg_kind))
                overloads.append(_overload(overload_id, t.BOOL, [target, arg], _includes, True))
    return overloads


def _functions() -> list[Any]:
    t = cel.Type
    q, s = _QUANTITY, _SEMVER
    dyn_list = t.List(t.DYN)
    declarations: dict[str, list[Any]] = {
        # library.Quantity
        "quantity": [_overload("string_to_quantity", q, [t.STRING], _parse_quantity)],
        "isQuantity": [_overload("is_quantity_string", t.BOOL, [t.STRING], _is_quantity)],
        "sign": [_overload("quantity_sign", t.INT, [q], lambda x: _sign(_value(x)), True)],
        "isInteger": [_overload("quantity_is_integer", t.BOOL, [q], _is_integer, True)],
        "asInteger": [_overload("quantity_get_int", t.INT, [q], _as_integer, True)],
        "asApproximateFloat": [_overload("quantity_get_float", t.DOUBLE, [q], lambda x: float(_value(x)), True)],
        "add": [
            _overload("quantity_add", q, [q, q], _add, True),
            _overload("quantity_add_int", q, [q, t.INT], _add_int, True),
        ],
        "sub": [
            _overload("quantity_sub", q, [q, q], _sub, True),
            _overload("quantity_sub_int", q, [q, t.INT], _sub_int, True),
        ],
        # library.IncludesOption (the stored-expressions environment declares it)
        "includes": _includes_overloads(),
        # library.Lists(version 1), on lists of any element type; its indexOf and lastIndexOf
        # are left out, cel-cpp cannot add overloads to the strings extension's functions.
        "isSorted": [_overload("list_is_sorted", t.BOOL, [dyn_list], lambda x: x == sorted(x), True)],
        "sum": [_overload("list_sum", t.DYN, [dyn_list], sum, True)],
        "min": [_overload("list_min", t.DYN, [dyn_list], _extreme("min", min), True)],
        "max": [_overload("list_max", t.DYN, [dyn_list], _extreme("max", max), True)],
        # ext.Sets
        "sets.contains": [
            _overload("list_sets_contains_list", t.BOOL, [dyn_list, dyn_list], _sets_contains),
        ],
        "sets.equivalent": [
            _overload(
                "list_sets_equivalent_list",
                t.BOOL,
                [dyn_list, dyn_list],
                lambda a, b: _sets_contains(a, b) and _sets_contains(b, a),
            ),
        ],
        "sets.intersects": [
            _overload(
                "list_sets_intersects_list",
                t.BOOL,
                [dyn_list, dyn_list],
                lambda a, b: any(_includes(a, item) for item in b),
            ),
        ],
        # library.Regex
        "find": [_overload("string_find_string", t.STRING, [t.STRING, t.STRING], _find, True)],
        "findAll": [
            _overload("string_find_all_string", t.LIST, [t.STRING, t.STRING], _find_all, True),
            _overload("string_find_all_string_int", t.LIST, [t.STRING, t.STRING, t.INT], _find_all, True),
        ],
        # library.SemverLib(version 1)
        "semver": [
            _overload("string_to_semver", s, [t.STRING], _semver_message),
            _overload("string_bool_to_semver", s, [t.STRING, t.BOOL], _semver_message),
        ],
        "isSemver": [
            _overload("is_semver_string", t.BOOL, [t.STRING], _is_semver),
            _overload("is_semver_string_bool", t.BOOL, [t.STRING, t.BOOL], _is_semver),
        ],
        "major": [_overload("semver_major", t.INT, [s], lambda x: x.major, True)],
        "minor": [_overload("semver_minor", t.INT, [s], lambda x: x.minor, True)],
        "patch": [_overload("semver_patch", t.INT, [s], lambda x: x.patch, True)],
        # Both libraries declare the comparisons, each for its own type; cel-cpp's runtime sees two
        # message arguments either way, so one implementation serves both declarations.
        "isGreaterThan": [
            _overload("quantity_is_greater_than", t.BOOL, [q, q], lambda a, b: _compare_any(a, b) == 1, True),
            _declaration("semver_is_greater_than", t.BOOL, [s, s]),
        ],
        "isLessThan": [
            _overload("quantity_less_than", t.BOOL, [q, q], lambda a, b: _compare_any(a, b) == -1, True),
            _declaration("semver_less_than", t.BOOL, [s, s]),
        ],
        "compareTo": [
            _overload("quantity_compare_to", t.INT, [q, q], _compare_any, True),
            _declaration("semver_compare_to", t.INT, [s, s]),
        ],
    }
    return [cel.FunctionDecl(name, overloads) for name, overloads in declarations.items()]


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _new_env() -> Any:
    attributes = cel.Type.Map(cel.Type.STRING, cel.Type.Map(cel.Type.STRING, cel.Type.DYN))
    capacity = cel.Type.Map(cel.Type.STRING, cel.Type.Map(cel.Type.STRING, _QUANTITY))
    # `device` is declared through its qualified fields: cel-cpp cannot declare an object type
    # whose fields are nested maps, and kube's environment has only these four.
    variables = {
        _DRIVER: cel.Type.STRING,
        _MULTI_ALLOC: cel.Type.BOOL,
        _ATTRIBUTES: attributes,
        _CAPACITY: capacity,
    }
    extensions = [ext_strings.ExtStrings(), ext_bindings.ExtBindings(), ext_optional.ExtOptional()]
    return cel.NewEnv(_POOL, variables=variables, extensions=extensions, functions=_functions())


_ENV = _new_env()


# ---- kube's messages ---------------------------------------------------------------------------

_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")
# cel-cpp runtime messages and cel-go's for the same failure.
_RUNTIME_MESSAGES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        re.compile(r"""^Key not found in map : (?:"(.*)"|'(.*)'|(.*))$""", re.DOTALL),
        lambda m: f"no such key: {_first(m)}",
    ),
    (re.compile(r"^divide by zero$"), lambda m: "division by zero"),
    (re.compile(r"^modulus by zero$"), lambda m: "modulus by zero"),
    (re.compile(r"^No matching overloads found.*$"), lambda m: "no such overload"),
    (re.compile(r"^invalid regular expression: (.*)$", re.DOTALL), lambda m: _go_regex_error(m.group(1))),
]
# cel-go's ConvertToNative(bool) message per result type (DeviceMatches wraps it).
_NOT_BOOL = {
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "string": "unsupported native conversion from string to 'bool'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "null_type": "type conversion error from 'null_type' to 'bool'",
    "kubernetes.Quantity": "type conversion error from 'Quantity' to 'bool'",
    "kubernetes.Semver": "type conversion error from 'Semver' to 'bool'",
}
# cel-cpp's spelling of a type and cel-go's (kube prints the latter).
_TYPE_NAMES = {
    "NULL": "null_type",
    "DURATION": "google.protobuf.Duration",
    "TIMESTAMP": "google.protobuf.Timestamp",
    "optional_type": "optional_type",
}
_TYPE_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|[<>,]")


def _type_name(cel_type: Any) -> str:
    """cel-go's Type.String() for a cel-cpp type: `map(string, list(int))`."""
    punctuation = {"<": "(", ">": ")", ",": ", "}
    return "".join(
        punctuation.get(token) or _TYPE_NAMES.get(token, token.lower() if token.isupper() else token)
        for token in _TYPE_TOKEN.findall(cel_type.name())
    )


def _runtime_type_name(cel_type: Any) -> str:
    """cel-go's TypeName() of a value's type: the name without parameters."""
    return _type_name(cel_type).split("(", 1)[0]


# RE2's error codes and Go regexp's for the same mistake.
_RE2_ERROR_CODES = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
}


def _go_regex_error(detail: str) -> str:
    """regexp.Error's text ("error parsing regexp: missing closing ): `(`") for RE2's."""
    if detail.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    code, _, argument = detail.partition(": ")
    return f"error parsing regexp: {_RE2_ERROR_CODES.get(code, code)}: `{argument}`"


def _first(match: re.Match[str]) -> str:
    return next(group for group in match.groups() if group is not None)


def _strip_status(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip(), count=1))


def _runtime_message(message: str) -> str:
    message = _strip_status(message)
    for pattern, rewrite in _RUNTIME_MESSAGES:
        match = pattern.match(message)
        if match:
            return rewrite(match)
    return message


def enhance_runtime_error(message: str) -> str:
    """cel.EnhanceRuntimeError: the hint upstream's allocator adds to a missing-key failure."""
    if "no such key:" in message and "consider using CEL optional chaining" not in message:
        return (
            f"{message}. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields"
        )
    return message


# ---- the cost budget ---------------------------------------------------------------------------
#
# kube stops an evaluation whose running cost passes resourceapi.CELSelectorExpressionMaxCost.
# cel-cpp keeps no such count, so the cost is bounded from the checked syntax tree instead: the
# same unit costs as cel-go's tracker (one per variable, field, call and comparison; ten per list
# literal) with every comprehension charged for all its iterations, a literal range by its length
# and any other range by the longest list or map a device can hold. Only nesting of comprehensions
# makes a selector expensive, and there the bound is what kube's tracker counts when no iteration
# short-circuits; the apiserver refuses an expression whose estimate passes the budget, so one that
# gets here is the scheduler's to refuse, per device, with kube's message.

COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"
# resourceapi.ResourceSliceMaxAttributeValuesPerDevice and DeviceAttributeMaxValueLength: the
# largest range a device's data can give a comprehension.
_UNKNOWN_RANGE = 64
_LIST_LITERAL_COST = 10
_MAP_LITERAL_COST = 30


def _wire_fields(buffer: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one protobuf message: varints as int, others as bytes."""
    fields: list[tuple[int, int | bytes]] = []
    position = 0

    def varint() -> int:
        nonlocal position
        value = shift = 0
        while True:
            byte = buffer[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    while position < len(buffer):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            fields.append((number, varint()))
        elif wire_type == 2:
            length = varint()
            fields.append((number, buffer[position : position + length]))
            position += length
        else:  # fixed 64/32-bit: doubles in constants, never a sub-expression
            width = 8 if wire_type == 1 else 4
            fields.append((number, buffer[position : position + width]))
            position += width
    return fields


def _messages(fields: list[tuple[int, int | bytes]], number: int) -> list[bytes]:
    return [value for field_number, value in fields if field_number == number and isinstance(value, bytes)]


# cel.expr.Expr's oneof members and the fields of each that hold sub-expressions.
_SELECT, _CALL, _LIST, _STRUCT, _COMPREHENSION = 5, 6, 7, 8, 9
_SUB_EXPRESSIONS = {_SELECT: (1,), _CALL: (1, 3), _LIST: (1,), _COMPREHENSION: (2, 4, 5, 6, 7)}
_COMPOSITE = {*_SUB_EXPRESSIONS, _STRUCT}


def _children(kind: int, fields: list[tuple[int, int | bytes]]) -> list[bytes]:
    """The sub-expressions of one composite expression (a struct's through its entries)."""
    if kind == _STRUCT:
        entries = _messages(fields, 2)
        return [sub for entry in entries for key in (3, 4) for sub in _messages(_wire_fields(entry), key)]
    return [sub for key in _SUB_EXPRESSIONS[kind] for sub in _messages(fields, key)]


def _cost(expr: bytes) -> tuple[int, int]:
    """(worst-case cost, element count when a literal list or map, else the unknown range)."""
    for number, body in _wire_fields(expr):
        if not isinstance(body, bytes):
            continue
        if number == 4:  # identifier
            return 1, _UNKNOWN_RANGE
        fields = _wire_fields(body)
        if number in (_SELECT, _CALL, _LIST, _STRUCT):
            own = {_LIST: _LIST_LITERAL_COST, _STRUCT: _MAP_LITERAL_COST}.get(number, 1)
            size = len(_messages(fields, 1 if number == _LIST else 2)) if number in (_LIST, _STRUCT) else _UNKNOWN_RANGE
            return own + sum(_cost(sub)[0] for sub in _children(number, fields)), size
        if number == _COMPREHENSION:
            range_cost, iterations = _cost(_messages(fields, 2)[0])
            once = sum(_cost(sub)[0] for key in (4, 7) for sub in _messages(fields, key))
            per_iteration = sum(_cost(sub)[0] for key in (5, 6) for sub in _messages(fields, key))
            return range_cost + once + iterations * per_iteration, _UNKNOWN_RANGE
    return 0, _UNKNOWN_RANGE  # a constant


def _max_cost(program: Any) -> int:
    """The bound on a compiled expression's runtime cost (Any → CheckedExpr → expr, field 4)."""
    checked = _messages(_wire_fields(program.serialize()), 2)[0]
    return _cost(_messages(_wire_fields(checked), 4)[0])[0]


# ---- which value a comprehension could not iterate ------------------------------------------------
#
# cel-go's message names the Go type of the range ("got 'types.Int', expected iterable type");
# cel-cpp only says no overload matched `<iter_range>`. On that failure, each comprehension's range
# is evaluated on its own (a checked expression with that sub-tree as its root) to find the value.

_GO_VALUE_TYPES = {
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "bool": "types.Bool",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
    "kubernetes.Semver": "cel.Semver",
    "kubernetes.Quantity": "cel.Quantity",
    "google.protobuf.Duration": "types.Duration",
    "google.protobuf.Timestamp": "types.Timestamp",
    "optional_type": "*types.Optional",
}
_ITERABLE = ("list", "map")


def _length_delimited(number: int, payload: bytes) -> bytes:
    key, length, out = (number << 3) | 2, len(payload), bytearray()
    for value in (key, length):
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out) + payload


def _ranges(expr: bytes, enclosing: tuple[tuple[str, bytes], ...] = ()) -> list[tuple[bytes, bytes | None]]:
    """Every comprehension's range, outermost first: (range, None), or (the enclosing range,
    b"element") when the range is an enclosing comprehension's variable, whose value is then one
    of that range's elements."""
    found: list[tuple[bytes, bytes | None]] = []
    for number, body in _wire_fields(expr):
        if not isinstance(body, bytes) or number not in _COMPOSITE:
            continue
        fields = _wire_fields(body)
        scope = enclosing
        if number == _COMPREHENSION:
            range_expr = _messages(fields, 2)[0]
            variable = _ident(range_expr)
            outer = dict(enclosing).get(variable) if variable else None
            found.append((outer, b"element") if outer is not None else (range_expr, None))
            names = [v.decode() for n, v in fields if n in (1, 8) and isinstance(v, bytes)]
            scope = enclosing + tuple((name, range_expr) for name in names[:1])
        for child in _children(number, fields):
            found += _ranges(child, scope)
    return found


def _ident(expr: bytes) -> str | None:
    for number, body in _wire_fields(expr):
        if number == 4 and isinstance(body, bytes):
            names = _messages(_wire_fields(body), 1)
            return names[0].decode() if names else None
    return None


def _not_iterable(program: Any, data: Mapping[str, Any]) -> str:
    """cel-go's message for a comprehension over a value that is neither a list nor a map."""
    envelope = _wire_fields(program.serialize())
    type_url = _messages(envelope, 1)[0]
    checked = _wire_fields(_messages(envelope, 2)[0])
    for range_expr, element in _ranges(_messages(checked, 4)[0]):
        rebuilt = b"".join(
            _length_delimited(number, range_expr if number == 4 else value)
            for number, value in checked
            if isinstance(value, bytes)
        )
        try:
            value = _ENV.deserialize(_length_delimited(1, type_url) + _length_delimited(2, rebuilt)).eval(data=data)
        except RuntimeError:
            continue
        types = [value.type()]
        if element is not None and _runtime_type_name(value.type()) == "list":
            # The range is an enclosing comprehension's variable: one of that list's elements.
            types = [item.type() if hasattr(item, "type") else _python_type(item) for item in value.value()]
        for value_type in types:
            name = value_type if isinstance(value_type, str) else _runtime_type_name(value_type)
            if name not in _ITERABLE and name != "error":
                return f"got '{_GO_VALUE_TYPES.get(name, name)}', expected iterable type"
    return "no such overload"


def _python_type(item: Any) -> str:
    for python_type, name in ((bool, "bool"), (int, "int"), (float, "double"), (str, "string"), (bytes, "bytes")):
        if isinstance(item, python_type):
            return name
    if isinstance(item, list | dict):
        return "list"
    return "kubernetes.Semver" if isinstance(item, _SemverMessage) else "kubernetes.Quantity"


# ---- compiled expressions ----------------------------------------------------------------------


@dataclass(frozen=True)
class CompilationResult:
    """One selector, compiled once; `error` is set instead when it does not compile."""

    expression: str
    error: CELError | None
    _program: Any = field(default=None, repr=False, compare=False)
    max_cost: int = 0

    def device_matches(
        self,
        driver: str,
        attributes: Mapping[str, Mapping[str, Any]],
        capacity: Mapping[str, Mapping[str, Any]],
        *,
        allow_multiple_allocations: bool = False,
    ) -> bool:
        """Whether the device satisfies the selector; CELError on a compile or runtime failure.

        `attributes` and `capacity` are the resource.k8s.io/v1 Device fields as the API serves
        them; a name without a domain belongs to the driver's domain.
        """
        return self.matches(CELDevice(driver, attributes, capacity, allow_multiple_allocations))

    def matches(self, device: CELDevice) -> bool:
        """device_matches for a device converted once, to evaluate several selectors on it."""
        if self.error is not None:
            raise self.error
        if self.max_cost > MAX_COST:
            raise CELError(COST_LIMIT_EXCEEDED)
        data, activation = device.variables()
        defaulted: dict[str, Any] | None = None
        for _ in range(_MAX_DEFAULTED_DOMAINS + 1):
            result = self._program.eval(activation)
            result_type = result.type()
            if result_type != cel.Type.ERROR:
                break
            message = str(result.value())
            domain = _missing_key(message)
            attribute_domains, capacity_domains = data[_ATTRIBUTES], data[_CAPACITY]
            if domain is None or (domain in attribute_domains and domain in capacity_domains):
                if message.endswith("No matching overloads found : <iter_range>"):
                    raise CELError(_not_iterable(self._program, data))
                raise CELError(_runtime_message(message))
            # Upstream's maps answer a lookup of an absent domain with an empty map; cel-cpp takes
            # plain maps, so a lookup that failed on an absent domain is evaluated again with that
            # domain present and empty (in a copy: the device's variables serve other selectors).
            if defaulted is None:
                defaulted = {**data, _ATTRIBUTES: dict(attribute_domains), _CAPACITY: dict(capacity_domains)}
                data = defaulted
            data[_ATTRIBUTES].setdefault(domain, {})
            data[_CAPACITY].setdefault(domain, {})
            activation = _ENV.Activation(data)
        else:
            raise CELError(_runtime_message(message))
        if result_type != cel.Type.BOOL:
            type_name = _runtime_type_name(result_type)
            reason = _NOT_BOOL.get(type_name, f"type conversion error from '{type_name}' to 'bool'")
            raise CELError(f"CEL result of type {type_name} could not be converted to bool: {reason}")
        return bool(result.value())


class CELDevice:
    """One device as the selectors see it, converted on first use and then shared by every
    selector evaluated on it; a device whose attribute cannot be converted fails each of them
    with the same CELError, as upstream's DeviceMatches does."""

    __slots__ = ("_activation", "_data", "_error", "_fields")

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, Mapping[str, Any]],
        capacity: Mapping[str, Mapping[str, Any]],
        allow_multiple_allocations: bool = False,
    ) -> None:
        self._fields = (driver, attributes, capacity, allow_multiple_allocations)
        self._data: dict[str, Any] | None = None
        self._activation: Any = None
        self._error: CELError | None = None

    def variables(self) -> tuple[dict[str, Any], Any]:
        """The CEL variables and the binding's activation holding them."""
        if self._error is not None:
            raise self._error
        if self._data is None:
            driver, attributes, capacity, allow_multiple_allocations = self._fields
            try:
                data = {
                    _DRIVER: driver,
                    _MULTI_ALLOC: allow_multiple_allocations,
                    _ATTRIBUTES: _attribute_domains(driver, attributes),
                    _CAPACITY: _capacity_domains(driver, capacity),
                }
            except CELError as exc:
                self._error = exc
                raise
            self._data, self._activation = data, _ENV.Activation(data)
        return self._data, self._activation


# A device has at most 32 attributes and capacities; an expression that looks up more absent
# domains than that is not one a driver's device can satisfy, and each lookup costs an evaluation.
_MAX_DEFAULTED_DOMAINS = 32
_MISSING_KEY = re.compile(r"""^NOT_FOUND: Key not found in map : (?:"(.*)"|'(.*)')$""", re.DOTALL)


def _missing_key(message: str) -> str | None:
    """The string key of a failed map lookup in cel-cpp's message, if that is what failed."""
    match = _MISSING_KEY.match(message.strip())
    if match is None:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attribute: Mapping[str, Any]) -> Any:
    if not isinstance(attribute, Mapping):
        raise CELError(f"attribute {name}: unsupported attribute value")
    for key in ("int", "bool", "string"):
        if key in attribute and attribute[key] is not None:
            return attribute[key]
    if attribute.get("version") is not None:
        try:
            return _semver_message(str(attribute["version"]))
        except ValueError as exc:
            raise CELError(f"attribute {name}: parse semantic version: {exc}") from None
    for key in ("ints", "bools", "strings"):
        if attribute.get(key) is not None:
            return list(attribute[key])
    if attribute.get("versions") is not None:
        try:
            return [_semver_message(str(v)) for v in attribute["versions"]]
        except ValueError as exc:
            raise CELError(f"attribute {name}: parse semantic version: {exc}") from None
    raise CELError(f"attribute {name}: unsupported attribute value")


def _attribute_domains(driver: str, attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    domains: dict[str, dict[str, Any]] = {}
    for name, attribute in attributes.items():
        domain, ident = _split(name, driver)
        domains.setdefault(domain, {})[ident] = _attribute_value(name, attribute)
    return domains


def _capacity_domains(driver: str, capacity: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    domains: dict[str, dict[str, Any]] = {}
    for name, entry in capacity.items():
        domain, ident = _split(name, driver)
        text = str(entry.get("value", "0")) if isinstance(entry, Mapping) else ""
        try:
            value = _capacity_message(text)
        except QuantityError:
            raise CELError(f"capacity {name}: {_quantity_error(text)}") from None
        domains.setdefault(domain, {})[ident] = value
    return domains


_ERROR_LINE = re.compile(r"^ERROR: <input>:(\d+):(\d+): (.*)$")
_NO_OVERLOAD = re.compile(r"^found no matching overload for '([^']+)' applied to '\((.*)\)'$")
_UNDECLARED_FIELD = re.compile(r"^undeclared reference to 'device\.([A-Za-z_][A-Za-z0-9_]*)[^']*' \(in container ''\)$")


_DEVICE_SELECTION = re.compile(r"\bdevice\s*\.")


def _split_types(types: str) -> list[str]:
    """`kubernetes.Quantity, map(string, int)` → its top-level type names."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(types):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(types[start:i].strip())
            start = i + 1
    parts.append(types[start:].strip())
    return parts


def _is_member_call(expression: str, line: int, column: int, function: str) -> bool:
    """Whether the call cel-cpp reports at line:column (its `(`) has a receiver: `x.f(...)`."""
    lines = expression.split("\n")
    if "." in function or not 0 < line <= len(lines):
        return False
    before = lines[line - 1][: column - 1].rstrip()
    return before.endswith(function) and before[: -len(function)].rstrip().endswith(".")


def _go_compile_errors(expression: str, text: str) -> str:
    """cel-cpp's issues with cel-go's wording where the two differ: a member call's argument
    types (`'kubernetes.Quantity.(int)'`) and a field `device` does not have."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        match = _ERROR_LINE.match(line)
        if match is None:
            continue
        row, column, message = int(match.group(1)), int(match.group(2)), match.group(3)
        overload = _NO_OVERLOAD.match(message)
        if overload and _is_member_call(expression, row, column, overload.group(1)):
            target, *arguments = _split_types(overload.group(2))
            message = (
                f"found no matching overload for '{overload.group(1)}' applied to '{target}.({', '.join(arguments)})'"
            )
        field_match = _UNDECLARED_FIELD.match(message)
        if field_match:
            message = f"undefined field '{field_match.group(1)}'"
            # cel-go points at the first selection after `device`, cel-cpp at the last one.
            source_lines = expression.split("\n")
            if 0 < row <= len(source_lines):
                first = list(_DEVICE_SELECTION.finditer(source_lines[row - 1][:column]))
                if first and i + 2 < len(lines):
                    column = first[-1].end()
                    lines[i + 2] = f" | {'.' * (column - 1)}^"
        message = message.replace("cannot be the range of a comprehension", "cannot be range of a comprehension")
        lines[i] = f"ERROR: <input>:{row}:{column}: {message}"
    return "\n".join(lines)


def _regex_literals(expr: bytes) -> list[tuple[bool, int, str]]:
    """Every matches/find/findAll call whose pattern is a string literal: (a receiver's
    `matches`, the pattern's node id, the pattern), in source order."""
    found: list[tuple[bool, int, str]] = []
    for number, body in _wire_fields(expr):
        if not isinstance(body, bytes) or number not in _COMPOSITE:
            continue
        fields = _wire_fields(body)
        if number == _CALL:
            function = next((v for n, v in fields if n == 2 and isinstance(v, bytes)), b"").decode()
            target, arguments = _messages(fields, 1), _messages(fields, 3)
            position = 0 if target else 1
            if function in ("matches", "find", "findAll") and len(arguments) > position:
                pattern_fields = _wire_fields(arguments[position])
                constant = _messages(pattern_fields, 3)
                text = _messages(_wire_fields(constant[0]), 6) if constant else []
                if text:
                    node = next((v for n, v in pattern_fields if n == 2 and isinstance(v, int)), 0)
                    found.append((bool(target) and function == "matches", node, text[0].decode()))
        for child in _children(number, fields):
            found += _regex_literals(child)
    return found


def _node_offsets(checked: list[tuple[int, int | bytes]]) -> dict[int, int]:
    """SourceInfo.positions: node id → code-point offset in the expression."""
    offsets: dict[int, int] = {}
    for source_info in _messages(checked, 5)[:1]:
        for entry in _messages(_wire_fields(source_info), 4):
            values = dict(_wire_fields(entry))
            if isinstance(values.get(1), int) and isinstance(values.get(2), int):
                offsets[int(values[1])] = int(values[2])
    return offsets


def _regex_error(pattern: str) -> str | None:
    result = _re2_check().eval(data={_DRIVER: pattern})
    return _runtime_message(str(result.value())) if result.type() == cel.Type.ERROR else None


def _literal_regex_errors(expression: str, program: Any) -> CELError | None:
    """What cel-go refuses before evaluation: a receiver's `matches` with an invalid literal
    pattern fails the environment's regex validator, any other literal pattern fails building
    the program (cel-go precompiles them)."""
    checked = _wire_fields(_messages(_wire_fields(program.serialize()), 2)[0])
    literals = _regex_literals(_messages(checked, 4)[0])
    invalid = [(member, node, error) for member, node, pattern in literals if (error := _regex_error(pattern))]
    if not invalid:
        return None
    offsets = _node_offsets(checked)
    issues = []
    for member, node, _ in invalid:
        if member:
            offset = offsets.get(node, 0)
            row = expression.count("\n", 0, offset) + 1
            line_start = expression.rfind("\n", 0, offset) + 1
            line = expression[line_start:].split("\n", 1)[0]
            column = offset - line_start + 1
            issues.append(
                f"ERROR: <input>:{row}:{column}: invalid matches argument\n | {line}\n | {'.' * (column - 1)}^"
            )
    if issues:
        return CELError("compilation failed: " + "\n".join(issues))
    return CELError(f"program instantiation failed: {invalid[0][2]}")


def _compile(expression: str) -> CompilationResult:
    try:
        program = _ENV.compile(expression)
    except RuntimeError as exc:
        detail = _go_compile_errors(expression, _strip_status(str(exc)))
        return CompilationResult(expression, CELError(f"compilation failed: {detail}"))
    regex_error = _literal_regex_errors(expression, program)
    if regex_error is not None and str(regex_error).startswith("compilation failed"):
        return CompilationResult(expression, regex_error)
    result_type = program.return_type()
    if result_type not in (cel.Type.BOOL, cel.Type.DYN):
        detail = f"must evaluate to bool or the unknown type, not {_type_name(result_type)}"
        return CompilationResult(expression, CELError(detail))
    if regex_error is not None:
        return CompilationResult(expression, regex_error)
    return CompilationResult(expression, None, program, _max_cost(program))


_cache: OrderedDict[str, CompilationResult] = OrderedDict()
_cache_lock = Lock()


def compile_expression(expression: str) -> CompilationResult:
    """The compiled selector, from a bounded LRU cache; never raises (a failure is in `.error`).

    Like upstream's Cache.GetOrCompile, only successful compilations are kept.
    """
    with _cache_lock:
        cached = _cache.get(expression)
        if cached is not None:
            _cache.move_to_end(expression)
            return cached
    result = _compile(expression)
    if result.error is None:
        with _cache_lock:
            _cache[expression] = result
            if len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return result
