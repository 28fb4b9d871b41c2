"""The import contracts of ARCHITECTURE.md, checked on every import statement of the runtime.

Layers, highest first: test support for plugin authors (scheduler.testing) > entry points >
controller > plugins > backend (queue, cache) > framework > api > model > base (leaf utilities that
import nothing of the project). A module may import its own layer or any layer below it, never one
above. Plugins are independent of each other except through
`plugins.helper`; the runtime never imports the harness. Imports under `if TYPE_CHECKING:` and inside
functions count too: they are arrows all the same, and a function-local import is how a circle hides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (layer, module prefixes); a module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Test support shipped for plugin authors: it may use anything; nothing of the runtime uses it.
    ("testing", ("scheduler.testing",)),
    (
        "entry",
        (
            "scheduler.__main__",
            "scheduler.cli",
            "scheduler.app",
            "scheduler.explain",
            "scheduler.serving",
            "scheduler.profile",
            "scheduler.config",
            "scheduler.gctune",
            "plugins.registry",
        ),
    ),
    (
        "controller",
        ("scheduler.informers", "scheduler.schedule_one", "scheduler.schedule_one_podgroup", "scheduler.nominator"),
    ),
    ("plugins", ("plugins",)),
    ("backend", ("scheduler.queue", "scheduler.cache")),
    ("framework", ("scheduler.framework",)),
    ("api", ("scheduler.api",)),
    ("model", ("scheduler.model",)),
    ("base", ("scheduler.metrics", "scheduler.logs", "scheduler.codec", "scheduler.pacing", "scheduler")),
)
HARNESS = ("harness",)
RUNTIME_PACKAGES = ("scheduler", "plugins")


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def runtime_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in RUNTIME_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if not within(name, HARNESS):
                modules[name] = path
    return modules


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every project import, relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from scheduler import metrics` imports the module scheduler.metrics.
            found.append((node.lineno, target))
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return [(line, name) for line, name in found if within(name, RUNTIME_PACKAGES + HARNESS)]


def violations(modules: dict[str, Path]) -> list[str]:
    problems: list[str] = []
    for module, path in sorted(modules.items()):
        own = layer_of(module)
        assert own is not None, f"{module} belongs to no layer: add it to LAYERS"
        for line, target in imports_of(module, path):
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"
            if within(target, HARNESS):
                problems.append(f"{where}: the runtime imports the harness ({target})")
                continue
            if target not in modules and target.rpartition(".")[0] in modules:
                continue  # `from package import name` where name is not a module
            if target not in modules:
                continue
            theirs = layer_of(target)
            assert theirs is not None
            if theirs < own:
                problems.append(f"{where}: {module} ({LAYERS[own][0]}) imports {target} ({LAYERS[theirs][0]})")
            if LAYERS[own][0] == "base" and module != "scheduler" and target != "scheduler":
                problems.append(f"{where}: base module {module} imports {target}")
            if (
                LAYERS[own][0] == "plugins"
                and within(target, ("plugins",))
                and not within(target, ("plugins.helper",))
                and target.split(".")[:2] != module.split(".")[:2]
            ):
                problems.append(f"{where}: plugin {module} imports another plugin ({target})")
    return problems


def test_imports_only_point_down_and_plugins_stand_alone() -> None:
    assert violations(runtime_modules()) == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("scheduler.model.fake_objects", "from scheduler.api import client\n", "imports scheduler.api.client (api)"),
        ("scheduler.framework.fake_rt", "def f():\n    from scheduler import schedule_one\n", "(controller)"),
        ("plugins.fakeplugin", "from plugins.nodeaffinity import NAME\n", "imports another plugin"),
        ("scheduler.fake_entry", "import harness.controlplane\n", "imports the harness"),
        ("scheduler.cli_fake", "from scheduler.testing import builders\n", "(testing)"),
    ],
)
def test_the_check_catches_an_arrow_the_wrong_way(tmp_path: Path, module: str, source: str, expected: str) -> None:
    """Each contract fails on a planted import (so the check above cannot pass vacuously)."""
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    modules = runtime_modules() | {module: planted}
    found = [p for p in violations(modules) if p.startswith(str(planted))]
    assert any(expected in p for p in found), found
