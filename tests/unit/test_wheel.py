"""The wheel (and so the image, which installs it) carries the runtime and nothing of the harness."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_runtime_and_no_harness_code(tmp_path: Path) -> None:
    # Built from a copy of the whole checkout (harness and tests included, so their absence from the
    # wheel is the packaging's doing), so that setuptools' build/ lands outside the checkout.
    source = tmp_path / "source"
    junk = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "bench-results")
    shutil.copytree(ROOT, source, ignore=junk, symlinks=True)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = {n for n in names if n.endswith(".py")}
    assert "scheduler/schedule_one.py" in modules
    assert "plugins/interpodaffinity/__init__.py" in modules
    assert (source / "harness" / "controlplane.py").exists()
    assert not [n for n in names if n.startswith(("harness/", "tests/", "hack/"))]
    assert {n for n in modules if n.startswith("scheduler/testing/")} == {
        "scheduler/testing/__init__.py",
        "scheduler/testing/builders.py",
    }
