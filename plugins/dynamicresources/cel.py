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
harness/bench/cel_compare.py: it alone type-checks at compile time like cel-go (so a bad selector
fails to compile with cel-go's wording: "undeclared reference", "found no matching overload",
"Syntax error"), it ships the strings, bindings and optional-types extensions, and it compiles about
5x and evaluates about 40x faster than cel-python. Kubernetes' Quantity and Semver are declared as
message types of a tiny descriptor pool, because the binding cannot pass an opaque Python object
through cel-cpp; each message holds only the canonical value, so CEL's message equality is kube's
`Equal`. What cel-cpp does not give (the runtime cost budget, the lists/sets/regex/ip/url
libraries) is listed in plugins/dynamicresources/README.md.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from threading import Lock
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from scheduler.model.quantity import INT64_MAX, INT64_MIN, Quantity, QuantityError
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

# resource.ErrFormatWrong, the error of resource.ParseQuantity for anything it cannot read.
_QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def _quantity_message(value: Quantity | Decimal) -> Any:
    exact = value.exact if isinstance(value, Quantity) else value
    return _QuantityMessage(value=format(exact.normalize(), "f"))


def _quantity(message: Any) -> Quantity:
    return parse_quantity(message.value)


def _parse_quantity(text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError:
        raise ValueError(_QUANTITY_FORMAT_ERROR) from None


def _sign(value: Decimal) -> int:
    return (value > 0) - (value < 0)


def _compare(a: Any, b: Any) -> int:
    return _sign(_quantity(a).exact - _quantity(b).exact)


def _as_integer(message: Any) -> int:
    # Quantity.AsInt64: only an integral value within int64 converts.
    exact = _quantity(message).exact
    if exact != exact.to_integral_value() or not INT64_MIN <= exact <= INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return int(exact)


def _is_integer(message: Any) -> bool:
    exact = _quantity(message).exact
    return exact == exact.to_integral_value() and INT64_MIN <= exact <= INT64_MAX


def _add(a: Any, b: Any) -> Any:
    return _quantity_message(_quantity(a) + _quantity(b))


def _add_int(a: Any, b: int) -> Any:
    return _quantity_message(_quantity(a).exact + b)


def _sub(a: Any, b: Any) -> Any:
    return _quantity_message(_quantity(a).exact - _quantity(b).exact)


def _sub_int(a: Any, b: int) -> Any:
    return _quantity_message(_quantity(a).exact - b)


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
            raise ValueError(f"Invalid character(s) found in {name} number {part!r}".replace("'", '"'))
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


def _functions() -> list[Any]:
    t = cel.Type
    q, s = _QUANTITY, _SEMVER
    declarations: dict[str, list[Any]] = {
        # library.Quantity
        "quantity": [_overload("string_to_quantity", q, [t.STRING], lambda x: _quantity_message(_parse_quantity(x)))],
        "isQuantity": [_overload("is_quantity_string", t.BOOL, [t.STRING], _is_quantity)],
        "sign": [_overload("quantity_sign", t.INT, [q], lambda x: _sign(_quantity(x).exact), True)],
        "isInteger": [_overload("quantity_is_integer", t.BOOL, [q], _is_integer, True)],
        "asInteger": [_overload("quantity_get_int", t.INT, [q], _as_integer, True)],
        "asApproximateFloat": [
            _overload("quantity_get_float", t.DOUBLE, [q], lambda x: float(_quantity(x).exact), True)
        ],
        "add": [
            _overload("quantity_add", q, [q, q], _add, True),
            _overload("quantity_add_int", q, [q, t.INT], _add_int, True),
        ],
        "sub": [
            _overload("quantity_sub", q, [q, q], _sub, True),
            _overload("quantity_sub_int", q, [q, t.INT], _sub_int, True),
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
    (re.compile(r'^Key not found in map : "?(.*?)"?$'), lambda m: f"no such key: {m.group(1)}"),
    (re.compile(r"^divide by zero$"), lambda m: "division by zero"),
    (re.compile(r"^modulus by zero$"), lambda m: "modulus by zero"),
    (re.compile(r"^No matching overloads found.*$"), lambda m: "no such overload"),
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


# ---- compiled expressions ----------------------------------------------------------------------


@dataclass(frozen=True)
class CompilationResult:
    """One selector, compiled once; `error` is set instead when it does not compile."""

    expression: str
    error: CELError | None
    _program: Any = field(default=None, repr=False, compare=False)

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
        if self.error is not None:
            raise self.error
        data = {
            _DRIVER: driver,
            _MULTI_ALLOC: allow_multiple_allocations,
            _ATTRIBUTES: _DomainMap(_attribute_domains(driver, attributes)),
            _CAPACITY: _DomainMap(_capacity_domains(driver, capacity)),
        }
        result = self._program.eval(data=data)
        result_type = result.type()
        if result_type == cel.Type.ERROR:
            raise CELError(_runtime_message(str(result.value())))
        if result_type != cel.Type.BOOL:
            type_name = _runtime_type_name(result_type)
            reason = _NOT_BOOL.get(type_name, f"type conversion error from '{type_name}' to 'bool'")
            raise CELError(f"CEL result of type {type_name} could not be converted to bool: {reason}")
        return bool(result.value())


class _DomainMap(dict[str, dict[str, Any]]):
    """device.attributes / device.capacity: a lookup of a domain the device lacks is an empty map
    (upstream's newStringInterfaceMapWithDefault), while `in`, size() and iteration see only the
    domains it has."""

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attribute: Mapping[str, Any]) -> Any:
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
        try:
            value = parse_quantity(entry.get("value", "0"))
        except QuantityError:
            raise CELError(f"capacity {name}: {_QUANTITY_FORMAT_ERROR}") from None
        domains.setdefault(domain, {})[ident] = _quantity_message(value)
    return domains


def _compile(expression: str) -> CompilationResult:
    try:
        program = _ENV.compile(expression)
    except RuntimeError as exc:
        return CompilationResult(expression, CELError(f"compilation failed: {_strip_status(str(exc))}"))
    result_type = program.return_type()
    if not (result_type == cel.Type.BOOL or result_type == cel.Type.DYN):
        detail = f"must evaluate to bool or the unknown type, not {_type_name(result_type)}"
        return CompilationResult(expression, CELError(detail))
    return CompilationResult(expression, None, program)


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
