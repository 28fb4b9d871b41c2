"""`make demo` as a newcomer's first run has it (the gang's story included: waits whole, binds whole):
from a control-plane cache that holds etcd, kube-apiserver and kwok and nothing else, with no Go
toolchain to build anything more. A demo that asked for more (kube-scheduler, kubectl, helm, ...)
would cost a fresh clone minutes of Go builds; here it fails at once instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.controlplane import BUILD_SCRIPT, REPO_ROOT, ensure_binaries

pytestmark = pytest.mark.cluster

DEMO_BINARIES = ("etcd", "kube-apiserver", "kwok")


def test_demo_runs_from_etcd_apiserver_and_kwok_alone(tmp_path: Path) -> None:
    built = ensure_binaries(*DEMO_BINARIES)
    cache = tmp_path / "cache"
    bin_dir = cache / built.parent.name / "bin"  # the same pins, hence the same cache key
    bin_dir.mkdir(parents=True)
    files = (*DEMO_BINARIES, "kwok-stages.yaml")
    for name in files:
        (bin_dir / name).symlink_to(built / name)
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "go").exists())
    proc = subprocess.run(
        [sys.executable, "-m", "harness.demo", "--timeout", "90"],
        cwd=REPO_ROOT,
        env={**os.environ, "PATH": path, "SECONDARY_SCHEDULER_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "cleaned up; demo took" in proc.stdout
    # The gang waits whole (kube's PodGroup condition, explain naming the blocking member), then binds whole.
    lines = proc.stdout.splitlines()
    assert (
        "gang training (PodGroup, minCount 4): 0/4 bound, waiting whole -- Unschedulable: minCount (4) cannot be "
        "satisfied: 2 scheduled, 1 remaining, pod group preemption: No preemption victims found for incoming preemptor"
    ) in lines
    assert "  members: 4 exist, 0 bound, 2 would be assumed, 0 gated" in lines
    assert any(line.startswith("    demo/training-2: 0/20 nodes are available: 1 Insufficient cpu") for line in lines)
    assert any(line.startswith("gang training bound whole in ") for line in lines), proc.stdout[-3000:]
    assert "pod group training: 4/4 members bound, PodGroupInitiallyScheduled=True (Scheduled)" in lines
    assert sorted(p.name for p in bin_dir.iterdir() if not p.name.startswith(".")) == sorted(files)


def test_build_script_names_an_unknown_binary_in_one_line() -> None:
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "etcd", "kube-schedular"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "build.sh: unknown binary 'kube-schedular' (known: all etcd kube-apiserver kube-scheduler "
        "kube-controller-manager kubectl null-binder kube-apiserver-compat kwok helm)"
    ]
