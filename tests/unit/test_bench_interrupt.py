"""A benchmark started in a script's background (where SIGINT arrives ignored) still stops on
SIGINT, through KeyboardInterrupt, so its control plane is closed and the rows written are kept."""

from __future__ import annotations

import signal
import subprocess
import sys

from harness.controlplane import REPO_ROOT

# As a background job of a script starts: with SIGINT ignored. The real entry point runs
# (`python -m harness.bench upstream ...`), its upstream runner replaced by one that waits.
PROGRAM = """
import runpy, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
import harness.bench.upstream_run as upstream_run
def waiting(argv):
    print("ready", flush=True)
    time.sleep(60)
    return 0
upstream_run.main = waiting
sys.argv = ["harness.bench", "upstream", "--list"]
runpy.run_module("harness.bench", run_name="__main__", alter_sys=True)
"""


def test_sigint_stops_a_benchmark_started_with_sigint_ignored() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", PROGRAM],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert "KeyboardInterrupt" in err
    assert proc.returncode != 0
