"""requirements/*.lock against pyproject.toml: the locks CI and the image install must cover exactly
what pyproject asks for, pinned with hashes, or a dependency added to pyproject without `make lock`
would be installed unpinned (or not at all) and a removed one would linger in the image.

The dependency closure is read from the metadata of the installed distributions (this virtualenv is
installed from dev.lock, `make install`), with markers evaluated for this interpreter: the locks are
resolved for Python 3.11 on Linux, what CI and the image run.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = REPO_ROOT / "requirements" / "runtime.lock"
DEV_LOCK = REPO_ROOT / "requirements" / "dev.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def _pyproject() -> dict[str, object]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _requirements(*, dev: bool) -> list[Requirement]:
    """pyproject's runtime dependencies and its build backend (the image builds the project with
    it), plus the dev extra when `dev`."""
    data = _pyproject()
    project = data["project"]
    build = data["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    raw = [*project["dependencies"], *build["requires"]]
    if dev:
        raw += project["optional-dependencies"]["dev"]
    return [Requirement(r) for r in raw]


def read_lock(path: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of sha256 hashes) of a pip-compile lock file."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if match := _PIN.match(line):
            current = canonicalize_name(match[1])
            assert current not in pins, f"{path.name}: {current} pinned twice"
            pins[current] = (match[2], 0)
        elif current and (hashes := _HASH.findall(line)):
            version, count = pins[current]
            pins[current] = (version, count + len(hashes))
        elif line.strip() and not line.lstrip().startswith("#"):
            current = ""
            assert line.startswith(("-c ", "--")), f"{path.name}: unexpected line {line!r}"
    return pins


def _closure(roots: Iterable[Requirement]) -> set[str]:
    """The names of `roots` and of everything they require, transitively, on this interpreter."""
    names: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [r for r in roots if r.marker is None or r.marker.evaluate({"extra": ""})]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        names.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue  # new in pyproject and not locked yet: reported as missing from the lock
        for raw in requires:
            dep = Requirement(raw)
            extras = req.extras or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": extra}) for extra in extras):
                todo.append(dep)
    return names


def test_each_lock_pins_exactly_the_dependency_closure_of_pyproject_with_hashes() -> None:
    for path, dev in ((RUNTIME_LOCK, False), (DEV_LOCK, True)):
        pins = read_lock(path)
        expected = _closure(_requirements(dev=dev))
        assert set(pins) == expected, (
            f"{path.name} drifted from pyproject.toml (run `make lock`): "
            f"missing {sorted(expected - set(pins))}, not needed {sorted(set(pins) - expected)}"
        )
        unhashed = sorted(name for name, (_, hashes) in pins.items() if hashes == 0)
        assert not unhashed, f"{path.name}: no --hash for {unhashed}"
        for req in _requirements(dev=dev):
            version = pins[canonicalize_name(req.name)][0]
            assert req.specifier.contains(version, prereleases=True), (
                f"{path.name}: {req.name}=={version} is outside pyproject's {req}"
            )


def test_the_image_runs_the_versions_ci_tests() -> None:
    runtime, dev = read_lock(RUNTIME_LOCK), read_lock(DEV_LOCK)
    differ = {name: (runtime[name][0], dev[name][0]) for name in runtime if runtime[name][0] != dev[name][0]}
    assert not differ, f"runtime.lock and dev.lock pin different versions (runtime, dev): {differ}"


def test_this_virtualenv_is_installed_from_the_dev_lock() -> None:
    drifted = {
        name: (version, installed)
        for name, (version, _) in read_lock(DEV_LOCK).items()
        if (installed := importlib.metadata.version(name)) != version
    }
    assert not drifted, f"installed packages differ from dev.lock (locked, installed): {drifted}; run `make install`"
