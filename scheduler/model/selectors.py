"""Label selectors, node selectors and tolerations: the matching rules the plugins share.

Semantics follow apimachinery's label/field selectors, component-helpers' nodeaffinity and
core/v1's toleration helpers as of Kubernetes 1.34:

- a label selector (metav1.LabelSelector) with neither matchLabels nor matchExpressions
  selects everything, a missing one selects nothing;
- node selector terms are ORed, the requirements inside a term ANDed, an empty term
  selects nothing; matchFields only knows `metadata.name` and only In/NotIn with one value;
- a term that fails to parse never matches in a pod's own affinity (parsing is "lazy" there,
  for backwards compatibility), while plugin arguments are parsed strictly.

Malformed input is reported by SelectorError, whose message names the field the way
Kubernetes field errors do: `path: Invalid value: "x": detail`.

Pure data and functions: no framework, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.model.objects import Node, Pod, Taint, Toleration

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
# matchLabels and spec.nodeSelector entries: the label must be present with exactly this value.
EQUALS = "="

NODE_SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
LABEL_SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)
FIELD_SELECTOR_OPERATORS = (IN, NOT_IN)

NODE_NAME_FIELD = "metadata.name"

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_PART_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS1123_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_NAME_PART_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


class SelectorError(ValueError):
    """A selector that cannot be interpreted; the message names the field(s).

    `errors` keeps the individual messages so callers can merge several into one aggregate.
    """

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__(aggregate(self.errors))


# ---- validation messages (the wording of apimachinery's validation package) ---------------


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def qualified_name_errors(value: str) -> list[str]:
    """Why `value` is not a qualified name (optional DNS subdomain prefix, '/', name), or []."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                errors.append(
                    "prefix part " + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                )
    else:
        return [
            "a qualified name "
            + _regex_error(_NAME_PART_MSG, _NAME_PART_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _NAME_PART.fullmatch(name):
        errors.append("name part " + _regex_error(_NAME_PART_MSG, _NAME_PART_FMT, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    errors: list[str] = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if value and not _NAME_PART.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_MSG, f"({_NAME_PART_FMT})?", "MyValue", "my_value", "12345"))
    return errors


def _render(value: Any) -> str:
    """A bad value as Go's field errors print it: numbers bare, everything else as JSON."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def invalid_value(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_render(value)}: {detail}"


def unsupported_value(path: str, value: Any, supported: Iterable[str]) -> str:
    quoted = ", ".join(f'"{s}"' for s in supported)
    return f"{path}: Unsupported value: {_render(value)}: supported values: {quoted}"


def required_value(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def duplicate_value(path: str, value: Any) -> str:
    return f"{path}: Duplicate value: {_render(value)}"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def aggregate(messages: Sequence[str]) -> str:
    """One message, or several as `[a, b]` without repeats (apimachinery's error aggregate)."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _parse_int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _strings(value: Any) -> tuple[str, ...] | None:
    """A JSON list of strings as a tuple; None for null/missing."""
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise SelectorError([f"expected a list of strings, got {value!r}"])
    return tuple(str(v) for v in value)


# ---- requirements and label selectors -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` condition on a label set."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op == NOT_IN:
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GT, LT):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GT else have < want
        return False


def new_requirement(key: str, operator: str, values: tuple[str, ...] | None, path: str = "") -> Requirement:
    """A validated requirement (labels.NewRequirement); raises SelectorError listing every problem."""
    errors = _requirement_errors(key, operator, values, path)
    if errors:
        raise SelectorError(errors)
    return Requirement(key, operator, values or ())


def _requirement_errors(key: str, operator: str, values: tuple[str, ...] | None, path: str) -> list[str]:
    errors: list[str] = []
    key_errors = qualified_name_errors(key)
    if key_errors:
        errors.append(invalid_value(_child(path, "key"), key, "; ".join(key_errors)))
    vals = values or ()
    values_path = _child(path, "values")
    shown: Any = list(values) if values is not None else None
    if operator in (IN, NOT_IN):
        if not vals:
            errors.append(invalid_value(values_path, shown, "for 'in', 'notin' operators, values set can't be empty"))
    elif operator == EQUALS:
        if len(vals) != 1:
            errors.append(invalid_value(values_path, shown, "exact-match compatibility requires one single value"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errors.append(invalid_value(values_path, shown, "values set must be empty for exists and does not exist"))
    elif operator in (GT, LT):
        if len(vals) != 1:
            errors.append(invalid_value(values_path, shown, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(vals):
            if _parse_int64(value) is None:
                errors.append(
                    invalid_value(
                        f"{values_path}[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                )
    else:
        errors.append(unsupported_value(_child(path, "operator"), operator, (*NODE_SELECTOR_OPERATORS, EQUALS)))
    for i, value in enumerate(vals):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(invalid_value(f"{values_path}[{i}][{key}]", value, "; ".join(value_errors)))
    return errors


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements ANDed together; `nothing` selects no label set at all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        # A plain loop, not all(...): measurably faster, and this runs for every pod of every node
        # in the spreading and affinity plugins.
        for requirement in self.requirements:  # noqa: SIM110
            if not requirement.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        """Selects everything."""
        return not self.nothing and not self.requirements

    def canonical(self) -> tuple[bool, tuple[tuple[str, str, tuple[str, ...]], ...]]:
        """Equal for selectors written differently that match alike (requirements in any order or
        repeated, `key=v` or `key In [v]`, values in any order): for caches keyed on what a selector
        selects, so a Service's matchLabels and the same pod's explicit matchExpressions share one."""
        written = {
            (r.key, IN if r.operator == EQUALS else r.operator, tuple(sorted(set(r.values)))) for r in self.requirements
        }
        return self.nothing, tuple(sorted(written))


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def label_selector(raw: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels + matchExpressions In/NotIn/Exists/DoesNotExist).

    None selects nothing, an empty selector everything. Raises SelectorError on the first
    malformed entry, as metav1.LabelSelectorAsSelector does.
    """
    if raw is None:
        return NOTHING
    match_labels: Mapping[str, Any] = raw.get("matchLabels") or {}
    expressions: Sequence[Mapping[str, Any]] = raw.get("matchExpressions") or ()
    if not match_labels and not expressions:
        return EVERYTHING
    requirements = [new_requirement(key, EQUALS, (str(value),)) for key, value in match_labels.items()]
    for expr in expressions:
        operator = expr.get("operator") or ""
        if operator not in LABEL_SELECTOR_OPERATORS:
            raise SelectorError([f"{json.dumps(operator)} is not a valid label selector operator"])
        requirements.append(new_requirement(expr.get("key") or "", operator, _strings(expr.get("values"))))
    return LabelSelector(tuple(requirements))


def selector_from_set(labels: Mapping[str, str]) -> LabelSelector:
    """Exact match on every given label, without validation (labels.SelectorFromSet)."""
    return LabelSelector(tuple(Requirement(k, EQUALS, (v,)) for k, v in labels.items()))


# ---- node selectors --------------------------------------------------------------------


def _node_fields(node: Node) -> dict[str, str]:
    return {NODE_NAME_FIELD: node.name} if node.name else {}


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """matchExpressions (on labels) and matchFields (on metadata.name), ANDed.

    A term with parse errors keeps them and matches no node.
    """

    expressions: tuple[Requirement, ...] | None = None
    fields: tuple[Requirement, ...] | None = None
    errors: tuple[str, ...] = ()

    def matches(self, node: Node) -> bool:
        if self.errors:
            return False
        if self.expressions is not None and not all(r.matches(node.labels) for r in self.expressions):
            return False
        if self.fields is not None:
            fields = _node_fields(node)
            # A node without a name has no fields to check, so matchFields cannot reject it.
            if fields and not all(_field_matches(r, fields) for r in self.fields):
                return False
        return True


def _field_matches(requirement: Requirement, fields: Mapping[str, str]) -> bool:
    value = fields.get(requirement.key, "")
    if requirement.operator == IN:
        return value == requirement.values[0]
    return value != requirement.values[0]


def _is_empty_term(raw: Mapping[str, Any]) -> bool:
    return not raw.get("matchExpressions") and not raw.get("matchFields")


def parse_node_selector_term(raw: Mapping[str, Any], path: str = "") -> NodeSelectorTerm:
    """Parse one NodeSelectorTerm, keeping (not raising) its errors."""
    errors: list[str] = []
    expressions: list[Requirement] | None = None
    fields: list[Requirement] | None = None
    if raw.get("matchExpressions"):
        expressions = []
        base = _child(path, "matchExpressions")
        for i, expr in enumerate(raw["matchExpressions"]):
            expr_path = f"{base}[{i}]"
            operator = expr.get("operator") or ""
            if operator not in NODE_SELECTOR_OPERATORS:
                errors.append(unsupported_value(_child(expr_path, "operator"), operator, NODE_SELECTOR_OPERATORS))
                continue
            key = expr.get("key") or ""
            values = _strings(expr.get("values"))
            problems = _requirement_errors(key, operator, values, expr_path)
            if problems:
                errors.extend(problems)
            else:
                expressions.append(Requirement(key, operator, values or ()))
    if raw.get("matchFields"):
        fields = []
        base = _child(path, "matchFields")
        for i, expr in enumerate(raw["matchFields"]):
            expr_path = f"{base}[{i}]"
            operator = expr.get("operator") or ""
            values = _strings(expr.get("values"))
            if operator not in FIELD_SELECTOR_OPERATORS:
                errors.append(unsupported_value(_child(expr_path, "operator"), operator, FIELD_SELECTOR_OPERATORS))
            elif len(values or ()) != 1:
                shown = list(values) if values is not None else None
                errors.append(invalid_value(_child(expr_path, "values"), shown, "must have one element"))
            else:
                fields.append(Requirement(expr.get("key") or "", operator, values or ()))
    if errors:
        return NodeSelectorTerm(errors=tuple(errors))
    return NodeSelectorTerm(
        tuple(expressions) if expressions is not None else None,
        tuple(fields) if fields is not None else None,
    )


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Terms ORed together; no terms matches no node."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node: Node) -> bool:
        return any(term.matches(node) for term in self.terms)

    def match_with_errors(self, node: Node) -> tuple[bool, tuple[str, ...]]:
        """Whether a term matches; when none does, the parse errors of the broken terms."""
        if self.matches(node):
            return True, ()
        return False, self.errors

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(e for term in self.terms for e in term.errors)


def parse_node_selector(raw: Mapping[str, Any], path: str = "", *, strict: bool = False) -> NodeSelector:
    """A v1.NodeSelector. Empty terms are dropped (they select nothing).

    strict=False keeps broken terms (they match nothing) as a pod's own affinity requires;
    strict=True raises SelectorError naming every broken field, as plugin arguments require.
    """
    base = _child(path, "nodeSelectorTerms")
    terms = tuple(
        parse_node_selector_term(term, f"{base}[{i}]")
        for i, term in enumerate(raw.get("nodeSelectorTerms") or ())
        if not _is_empty_term(term)
    )
    selector = NodeSelector(terms)
    if strict and selector.errors:
        raise SelectorError(selector.errors)
    return selector


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerms:
    """Weighted terms; a node scores the sum of the weights of the terms it matches."""

    terms: tuple[tuple[int, NodeSelectorTerm], ...]

    def score(self, node: Node) -> int:
        return sum(weight for weight, term in self.terms if term.matches(node))


def parse_preferred_terms(raw: Sequence[Mapping[str, Any]], path: str = "") -> PreferredSchedulingTerms:
    """[]v1.PreferredSchedulingTerm; terms of weight 0 or with an empty preference are ignored.

    Raises SelectorError naming every broken field.
    """
    terms: list[tuple[int, NodeSelectorTerm]] = []
    errors: list[str] = []
    for i, item in enumerate(raw):
        weight = int(item.get("weight") or 0)
        preference: Mapping[str, Any] = item.get("preference") or {}
        if weight == 0 or _is_empty_term(preference):
            continue
        term = parse_node_selector_term(preference, f"{path}[{i}]")
        if term.errors:
            errors.extend(term.errors)
        else:
            terms.append((weight, term))
    if errors:
        raise SelectorError(errors)
    return PreferredSchedulingTerms(tuple(terms))


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's spec.nodeSelector plus its required node affinity, both of which must match."""

    node_selector: LabelSelector | None
    affinity: NodeSelector | None

    def match_with_errors(self, node: Node) -> tuple[bool, tuple[str, ...]]:
        if self.node_selector is not None and not self.node_selector.matches(node.labels):
            return False, ()
        if self.affinity is not None:
            return self.affinity.match_with_errors(node)
        return True, ()

    def matches(self, node: Node) -> bool:
        return self.match_with_errors(node)[0]


def pod_node_affinity(pod: Pod) -> Mapping[str, Any]:
    """spec.affinity.nodeAffinity, or {}."""
    affinity: Mapping[str, Any] = pod.spec.get("affinity") or {}
    node_affinity: Mapping[str, Any] = affinity.get("nodeAffinity") or {}
    return node_affinity


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    node_selector: Mapping[str, Any] = pod.spec.get("nodeSelector") or {}
    required = pod_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    return RequiredNodeAffinity(
        selector_from_set({k: str(v) for k, v in node_selector.items()}) if node_selector else None,
        parse_node_selector(required) if required is not None else None,
    )


# ---- tolerations -----------------------------------------------------------------------


def tolerations_of(pod: Pod) -> tuple[Toleration, ...]:
    """spec.tolerations, parsed once when the Pod was built."""
    return pod.tolerations


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates the taint.

    An empty effect matches every effect and an empty key (with Exists) every key; Exists
    ignores the value, Equal (or no operator) demands the same value. Any other operator
    tolerates nothing: 1.34 has no numeric comparison operators.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], include: Callable[[Taint], bool] | None = None
) -> Taint | None:
    """The first taint (among those `include` accepts) that no toleration tolerates."""
    for taint in taints:
        if include is not None and not include(taint):
            continue
        if not tolerations_tolerate(tolerations, taint):
            return taint
    return None


def is_do_not_schedule(taint: Taint) -> bool:
    """NoSchedule and NoExecute taints keep pods that don't tolerate them off the node."""
    return taint.effect in (NO_SCHEDULE, NO_EXECUTE)
