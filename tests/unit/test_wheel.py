"""The wheel (and so the image, which installs it) carries the runtime and nothing of the harness."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_runtime_and_no_harness_code(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = {n for n in names if n.endswith(".py")}
    assert "scheduler/schedule_one.py" in modules
    assert "plugins/interpodaffinity/__init__.py" in modules
    assert not [n for n in names if n.startswith(("harness/", "tests/", "hack/"))]
    assert {n for n in modules if n.startswith("scheduler/testing/")} == {
        "scheduler/testing/__init__.py",
        "scheduler/testing/builders.py",
    }
