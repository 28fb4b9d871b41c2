"""The subset of Go's text/template that upstream scheduler_perf templates use, rendered in Python.

Owns: parsing a template once (text, `{{ }}` actions with `{{-`/`-}}` trimming and comments,
pipelines with `|`, parenthesised sub-pipelines, variables `$x :=`/`$x =`, `.Field` chains on the
data, `if`/`else if`/`else`, `range` over integers (Go 1.22), lists and maps, `with`) and
executing it against a dict as Go does: missing map keys are "no value" (falsy, printed
`<no value>`), truthiness as Go's, `or`/`and`/`not`/`eq`/`ne`/`lt`/`le`/`gt`/`ge`/`len`/`index`/
`print`/`printf`/`println` builtins and scheduler_perf's FuncMap (operations.go
getTemplateFuncs: AddInt, SubtractInt, MultiplyInt, DivideInt, Mod, Int, JSON and the Float
forms, with the same conversions).

Must never: guess. An action, function or construct outside this subset raises TemplateError
naming the template and the construct, so a workload that needs more says so instead of creating
objects that differ from upstream's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class TemplateError(ValueError):
    """A template this renderer cannot parse or execute, with the template's name."""


class _NoValue:
    """What a missing map key evaluates to in Go templates: falsy, printed `<no value>`."""

    _instance: _NoValue | None = None

    def __new__(cls) -> _NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE = _NoValue()


# ---- values -------------------------------------------------------------------------------------


def truth(value: Any) -> bool:
    if value is None or value is NO_VALUE:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, (str, Sequence, Mapping)):
        return len(value) > 0
    return True


def _go_float(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    # Go's %v writes exponents with a sign and at least two digits: 1e+21, 1e-05.
    match = re.fullmatch(r"(-?[\d.]+)e([+-]?)(\d+)", text)
    if match:
        mantissa, sign, digits = match.groups()
        return f"{mantissa}e{sign or '+'}{int(digits):02d}"
    return text


def show(value: Any) -> str:
    """A value as Go's fmt %v prints it inside a template."""
    if value is NO_VALUE:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{show(k)}:{show(value[k])}" for k in sorted(value, key=str)) + "]"
    if isinstance(value, Sequence):
        return "[" + " ".join(show(v) for v in value) + "]"
    return str(value)


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TemplateError(f"cannot cast {show(value)} to float64")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise TemplateError(f"cannot cast {show(value)} to float64")


def to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TemplateError(f"cannot cast {show(value)} to int")
    if isinstance(value, float):
        return math.trunc(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            pass
    raise TemplateError(f"cannot cast {show(value)} to int")


def _go_mod(a: int, b: int) -> int:
    if b == 0:
        raise TemplateError("integer divide by zero")
    return int(math.fmod(a, b))


def _divide_float(i: Any, j: Any) -> float:
    divisor = to_float(j)
    if divisor == 0:
        raise TemplateError("division by zero")
    return to_float(i) / divisor


def _to_json(value: Any) -> str:
    plain = None if value is NO_VALUE else value
    return json.dumps(plain, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _compare(a: Any, b: Any, op: str) -> bool:
    numeric = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        if op not in ("eq", "ne") or not (isinstance(a, bool) and isinstance(b, bool)):
            raise TemplateError(f"incompatible types for comparison: {show(a)} {op} {show(b)}")
    elif (isinstance(a, numeric) and isinstance(b, numeric)) or (isinstance(a, str) and isinstance(b, str)):
        pass
    elif op in ("eq", "ne") and (a is None or a is NO_VALUE or b is None or b is NO_VALUE):
        both_nil = a in (None, NO_VALUE) and b in (None, NO_VALUE)
        return both_nil if op == "eq" else not both_nil
    else:
        raise TemplateError(f"incompatible types for comparison: {show(a)} {op} {show(b)}")
    if op == "eq":
        return bool(a == b)
    if op == "ne":
        return bool(a != b)
    if op == "lt":
        return bool(a < b)
    if op == "le":
        return bool(a <= b)
    if op == "gt":
        return bool(a > b)
    return bool(a >= b)


def _eq(first: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("missing argument for comparison")
    return any(_compare(first, other, "eq") for other in others)


def _index(item: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(item, Mapping):
            item = item.get(key, NO_VALUE)
        elif isinstance(item, Sequence) and not isinstance(item, str):
            position = to_int(key)
            if not 0 <= position < len(item):
                raise TemplateError(f"index out of range: {position}")
            item = item[position]
        else:
            raise TemplateError(f"can't index item of type {type(item).__name__}")
    return item


def _printf(pattern: str, *args: Any) -> str:
    values = iter(args)

    def verb(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        value = next(values, NO_VALUE)
        kind = match.group(0)[-1]
        if kind == "d":
            return str(to_int(value))
        if kind == "q":
            return json.dumps(value if isinstance(value, str) else show(value))
        return show(value)

    return re.sub(r"%%|%[-+ #0]*\d*(?:\.\d+)?[vdsq]", verb, pattern)


def _sprint(values: Sequence[Any]) -> str:
    """fmt.Sprint: a space between two operands only when neither is a string."""
    out: list[str] = []
    for position, value in enumerate(values):
        if position and not isinstance(value, str) and not isinstance(values[position - 1], str):
            out.append(" ")
        out.append(show(value))
    return "".join(out)


FUNCS: Mapping[str, Callable[..., Any]] = {
    # scheduler_perf's FuncMap
    "AddFloat": lambda *n: math.fsum(to_float(x) for x in n),
    "AddInt": lambda *n: math.trunc(math.fsum(to_float(x) for x in n)),
    "SubtractFloat": lambda i, j: to_float(i) - to_float(j),
    "SubtractInt": lambda i, j: math.trunc(to_float(i) - to_float(j)),
    "MultiplyFloat": lambda *n: math.prod(to_float(x) for x in n),
    "MultiplyInt": lambda *n: math.trunc(math.prod(to_float(x) for x in n)),
    "DivideFloat": _divide_float,
    "DivideInt": lambda i, j: math.trunc(_divide_float(i, j)),
    "Mod": lambda a, b: _go_mod(math.trunc(to_float(a)), math.trunc(to_float(b))),
    "Int": to_int,
    "JSON": _to_json,
    # text/template builtins (and/or are lazy and handled by the evaluator)
    "not": lambda v: not truth(v),
    "eq": _eq,
    "ne": lambda a, b: _compare(a, b, "ne"),
    "lt": lambda a, b: _compare(a, b, "lt"),
    "le": lambda a, b: _compare(a, b, "le"),
    "gt": lambda a, b: _compare(a, b, "gt"),
    "ge": lambda a, b: _compare(a, b, "ge"),
    "len": len,
    "index": _index,
    "print": lambda *a: _sprint(a),
    "println": lambda *a: " ".join(show(v) for v in a) + "\n",
    "printf": _printf,
}


# ---- parsing ------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<raw>`[^`]*`)
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
      | (?P<declare>:=)
      | (?P<assign>=)
      | (?P<pipe>\|)
      | (?P<comma>,)
      | (?P<open>\()
      | (?P<close>\))
      | (?P<variable>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
      | (?P<field>(?:\.[A-Za-z0-9_]+)+|\.)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _tokens(source: str, name: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    stripped = source.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if not match or match.end() == position:
            raise TemplateError(f"{name}: cannot parse {stripped[position:]!r} in {{{{{source}}}}}")
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind)))
        position = match.end()
    return tokens


@dataclass
class _Command:
    operands: list[Any]  # _Token or _Pipeline (parenthesised)


@dataclass
class _Pipeline:
    declare: list[str] = field(default_factory=list)
    assign: bool = False  # `$x = ...` sets an existing variable
    commands: list[_Command] = field(default_factory=list)


@dataclass
class _Text:
    text: str


@dataclass
class _Output:
    pipeline: _Pipeline


@dataclass
class _Branch:
    kind: str  # if, range, with
    pipeline: _Pipeline
    body: list[Any] = field(default_factory=list)
    otherwise: list[Any] = field(default_factory=list)


class _Parser:
    def __init__(self, tokens: list[_Token], name: str, source: str) -> None:
        self.tokens = tokens
        self.at = 0
        self.name = name
        self.source = source

    def fail(self, why: str) -> TemplateError:
        return TemplateError(f"{self.name}: {why} in {{{{{self.source.strip()}}}}}")

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end of action")
        self.at += 1
        return token

    def pipeline(self, closing: str | None = None) -> _Pipeline:
        result = _Pipeline()
        # A declaration: `$x :=`, `$i, $v :=` or an assignment `$x =`.
        mark = self.at
        names: list[str] = []
        while (token := self.peek()) is not None and token.kind == "variable" and "." not in token.text:
            names.append(self.take().text)
            after = self.peek()
            if after is not None and after.kind == "comma":
                self.take()
                continue
            break
        after = self.peek()
        if names and after is not None and after.kind in ("declare", "assign"):
            self.take()
            result.declare = names
            result.assign = after.kind == "assign"
        else:
            self.at = mark
        while True:
            result.commands.append(self.command(closing))
            token = self.peek()
            if token is None or (closing and token.kind == closing):
                break
            if token.kind != "pipe":
                raise self.fail(f"unexpected {token.text!r}")
            self.take()
        return result

    def command(self, closing: str | None) -> _Command:
        operands: list[Any] = []
        while (token := self.peek()) is not None and token.kind != "pipe" and not (closing and token.kind == closing):
            if token.kind == "open":
                self.take()
                operands.append(self.pipeline("close"))
                self.take()
            elif token.kind in ("declare", "assign", "comma", "close"):
                raise self.fail(f"unexpected {token.text!r}")
            else:
                operands.append(self.take())
        if not operands:
            raise self.fail("empty command")
        return _Command(operands)


def _parse_action(body: str, name: str) -> tuple[str, _Pipeline | None]:
    """(keyword, pipeline) of one action: keyword '' for an output action."""
    text = body.strip()
    keyword = text.split(None, 1)[0] if text else ""
    if keyword in ("end",):
        return keyword, None
    if keyword == "else":
        rest = text[len("else") :].strip()
        if rest.startswith("if ") or rest.startswith("if("):
            parser = _Parser(_tokens(rest[2:], name), name, body)
            return "else if", parser.pipeline()
        if rest:
            raise TemplateError(f"{name}: unsupported {{{{else {rest}}}}}")
        return "else", None
    if keyword in ("if", "range", "with"):
        parser = _Parser(_tokens(text[len(keyword) :], name), name, body)
        return keyword, parser.pipeline()
    if keyword in ("define", "template", "block", "break", "continue"):
        raise TemplateError(f"{name}: {{{{{keyword}}}}} is not supported by this renderer")
    parser = _Parser(_tokens(text, name), name, body)
    return "", parser.pipeline()


def _target(stack: Sequence[tuple[_Branch, bool]], root: list[Any]) -> list[Any]:
    if not stack:
        return root
    branch, in_else = stack[-1]
    return branch.otherwise if in_else else branch.body


def _parse(source: str, name: str) -> list[Any]:
    root: list[Any] = []
    stack: list[tuple[_Branch, bool]] = []  # (branch, in_else)
    target = root
    position = 0
    trim_next = False
    for match in _ACTION.finditer(source):
        text = source[position : match.start()]
        if trim_next:
            text = text.lstrip()
        if match.group(1):
            text = text.rstrip()
        if text:
            target.append(_Text(text))
        trim_next = bool(match.group(3))
        position = match.end()
        body = match.group(2)
        if body.strip().startswith("/*"):
            continue
        keyword, pipeline = _parse_action(body, name)
        if keyword == "":
            assert pipeline is not None
            target.append(_Output(pipeline))
        elif keyword in ("if", "range", "with"):
            assert pipeline is not None
            branch = _Branch(keyword, pipeline)
            target.append(branch)
            stack.append((branch, False))
            target = branch.body
        elif keyword in ("else", "else if"):
            if not stack or stack[-1][1]:
                raise TemplateError(f"{name}: unexpected {{{{else}}}}")
            branch, _ = stack.pop()
            if keyword == "else":
                stack.append((branch, True))
                target = branch.otherwise
            else:
                assert pipeline is not None
                # `else if` nests an `if` that shares the outer `end`: closing it closes both.
                nested = _Branch("elif", pipeline)
                branch.otherwise.append(nested)
                stack.append((branch, True))
                stack.append((nested, False))
                target = nested.body
        else:  # end
            if not stack:
                raise TemplateError(f"{name}: unexpected {{{{end}}}}")
            branch, _ = stack.pop()
            while branch.kind == "elif":
                branch, _ = stack.pop()
            target = _target(stack, root)
    if stack:
        raise TemplateError(f"{name}: unexpected EOF (missing {{{{end}}}})")
    tail = source[position:]
    if trim_next:
        tail = tail.lstrip()
    if tail:
        root.append(_Text(tail))
    return root


# ---- execution ----------------------------------------------------------------------------------


def _string_literal(token: _Token) -> str:
    if token.kind == "raw":
        return token.text[1:-1]
    value: str = json.loads(token.text)
    return value


class _Scope:
    def __init__(self, root: Any, name: str) -> None:
        self.frames: list[dict[str, Any]] = [{"$": root}]
        self.name = name

    def lookup(self, variable: str) -> Any:
        for frame in reversed(self.frames):
            if variable in frame:
                return frame[variable]
        raise TemplateError(f"{self.name}: undefined variable {variable}")

    def set(self, variable: str, value: Any) -> None:
        for frame in reversed(self.frames):
            if variable in frame:
                frame[variable] = value
                return
        raise TemplateError(f"{self.name}: undefined variable {variable}")


def _field(value: Any, path: Sequence[str], name: str) -> Any:
    for part in path:
        if isinstance(value, Mapping):
            value = value.get(part, NO_VALUE)
        elif value is NO_VALUE or value is None:
            raise TemplateError(f"{name}: nil pointer evaluating .{part}")
        else:
            raise TemplateError(f"{name}: can't evaluate field {part} in type {type(value).__name__}")
    return value


class Template:
    """A parsed template; render(data) executes it as Go's text/template would."""

    def __init__(self, source: str, name: str = "template") -> None:
        self.name = name
        self.source = source
        self.nodes = _parse(source, name)

    def render(self, data: Mapping[str, Any]) -> str:
        out: list[str] = []
        scope = _Scope(data, self.name)
        self._run(self.nodes, data, scope, out)
        return "".join(out)

    def _run(self, nodes: Sequence[Any], dot: Any, scope: _Scope, out: list[str]) -> None:
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Output):
                value = self._pipeline(node.pipeline, dot, scope)
                if not node.pipeline.declare:
                    out.append(show(value))
            else:
                self._branch(node, dot, scope, out)

    def _branch(self, branch: _Branch, dot: Any, scope: _Scope, out: list[str]) -> None:
        scope.frames.append({})
        try:
            if branch.kind == "range":
                self._range(branch, dot, scope, out)
                return
            value = self._pipeline(branch.pipeline, dot, scope)
            if truth(value):
                self._run(branch.body, value if branch.kind == "with" else dot, scope, out)
            else:
                self._run(branch.otherwise, dot, scope, out)
        finally:
            scope.frames.pop()

    def _range(self, branch: _Branch, dot: Any, scope: _Scope, out: list[str]) -> None:
        names = branch.pipeline.declare
        value = self._pipeline(_Pipeline(commands=branch.pipeline.commands), dot, scope)
        items: list[tuple[Any, Any]]
        if isinstance(value, bool):
            raise TemplateError(f"{self.name}: range can't iterate over {show(value)}")
        if isinstance(value, int):
            items = [(i, i) for i in range(value)]
            if len(names) > 1:
                raise TemplateError(f"{self.name}: can't use {show(value)} to iterate over more than one variable")
        elif isinstance(value, Mapping):
            items = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, Sequence) and not isinstance(value, str):
            items = list(enumerate(value))
        elif value is None or value is NO_VALUE:
            items = []
        else:
            raise TemplateError(f"{self.name}: range can't iterate over {show(value)}")
        if not items:
            self._run(branch.otherwise, dot, scope, out)
            return
        for key, element in items:
            frame = scope.frames[-1]
            if len(names) == 1:
                frame[names[0]] = element
            elif len(names) == 2:
                frame[names[0]], frame[names[1]] = key, element
            self._run(branch.body, element, scope, out)

    def _pipeline(self, pipeline: _Pipeline, dot: Any, scope: _Scope) -> Any:
        value: Any = NO_VALUE
        for position, command in enumerate(pipeline.commands):
            value = self._command(command, dot, scope, value if position else None, position > 0)
        if pipeline.declare:
            if len(pipeline.declare) != 1:
                raise TemplateError(f"{self.name}: too many declarations in {pipeline.declare}")
            if pipeline.assign:
                scope.set(pipeline.declare[0], value)
            else:
                scope.frames[-1][pipeline.declare[0]] = value
        return value

    def _command(self, command: _Command, dot: Any, scope: _Scope, piped: Any, has_piped: bool) -> Any:
        head, *rest = command.operands
        if isinstance(head, _Token) and head.kind == "ident" and head.text not in ("nil", "true", "false"):
            name = head.text
            if name in ("and", "or"):
                return self._lazy_logic(name, rest, dot, scope, piped, has_piped)
            function = FUNCS.get(name)
            if function is None:
                raise TemplateError(f"{self.name}: function {name!r} not defined")
            values = [self._operand(operand, dot, scope) for operand in rest]
            if has_piped:
                values.append(piped)
            try:
                return function(*values)
            except TemplateError as error:
                raise TemplateError(f"{self.name}: error calling {name}: {error}") from None
            except TypeError as error:
                raise TemplateError(f"{self.name}: wrong number of args for {name}: {error}") from None
        if rest or has_piped:
            raise TemplateError(f"{self.name}: can't give argument to non-function {self._describe(head)}")
        return self._operand(head, dot, scope)

    def _lazy_logic(
        self, name: str, operands: Sequence[Any], dot: Any, scope: _Scope, piped: Any, has_piped: bool
    ) -> Any:
        """`and`/`or` evaluate their arguments in order and stop at the first that decides."""
        if not operands and not has_piped:
            raise TemplateError(f"{self.name}: missing argument to {name}")
        result: Any = NO_VALUE
        for position in range(len(operands) + int(has_piped)):
            result = self._operand(operands[position], dot, scope) if position < len(operands) else piped
            if truth(result) == (name == "or"):
                return result
        return result

    @staticmethod
    def _describe(operand: Any) -> str:
        return operand.text if isinstance(operand, _Token) else "(...)"

    def _operand(self, operand: Any, dot: Any, scope: _Scope) -> Any:
        if isinstance(operand, _Pipeline):
            return self._pipeline(operand, dot, scope)
        token: _Token = operand
        if token.kind == "field":
            return dot if token.text == "." else _field(dot, token.text[1:].split("."), self.name)
        if token.kind == "variable":
            variable, *path = token.text.split(".")
            return _field(scope.lookup(variable), path, self.name)
        if token.kind in ("string", "raw"):
            return _string_literal(token)
        if token.kind == "number":
            return float(token.text) if any(c in token.text for c in ".eE") else int(token.text)
        if token.kind == "ident":
            if token.text == "nil":
                return None
            if token.text in ("true", "false"):
                return token.text == "true"
            return self._command(_Command([token]), dot, scope, None, False)
        raise TemplateError(f"{self.name}: unexpected {token.text!r}")


def is_template(source: str) -> bool:
    return "{{" in source
