"""What a user sees with the real kubectl: `kubectl describe` of our pods reads as of kube-scheduler's.

One scheduled and one unschedulable pod per scheduler, side by side on one control plane; the
Conditions and Events sections of `kubectl describe pod` must be the same once the parts that
cannot be (ages, the scheduler's own name, the namespace) are replaced by placeholders.
"""

from __future__ import annotations

import functools
import re
import subprocess
import uuid
from typing import Any

import pytest

from scheduler.testing.controlplane import ControlPlane
from scheduler.testing.workload import make_pod, running_scheduler, scheduled_condition, wait_for

pytestmark = pytest.mark.cluster

# kube-scheduler's FailedScheduling message carries its DefaultPreemption verdict; ours has no
# PostFilter plugin yet (see the README's deliberate differences), so that suffix is cut.
PREEMPTION_SUFFIX = re.compile(r" preemption: .*$")


def describe(plane: ControlPlane, namespace: str, pod: str) -> str:
    result = subprocess.run(
        [
            str(plane.bin_dir / "kubectl"),
            "--kubeconfig",
            str(plane.kubeconfig),
            "describe",
            "pod",
            pod,
            "-n",
            namespace,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout


def section(text: str, title: str) -> list[str]:
    """The lines of one top-level section of `kubectl describe` (up to the next top-level key)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{title}:"))
    body = [lines[start].split(":", 1)[1].strip()]
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break
        body.append(line)
    return [line.rstrip() for line in body if line.strip()]


def events(text: str, scheduler: str, namespace: str) -> list[tuple[str, ...]]:
    """Events rows as (type, reason, repeats, from, message): of the Age column only a series'
    count ("x3" from "5s (x3 over 20s)") is kept; our own names become placeholders."""
    rows = section(text, "Events")
    header = rows[0] if rows and rows[0].lstrip().startswith("Type") else None
    assert header is not None, f"no Events table in:\n{text}"
    columns = [header.index(name) for name in ("Type", "Reason", "Age", "From", "Message")]
    out: list[tuple[str, ...]] = []
    for row in rows[2:]:  # header, then the ---- rule
        cells = [row[a:b].strip() for a, b in zip(columns, [*columns[1:], None], strict=True)]
        kind, reason, age, source, message = cells
        repeats = re.search(r"\((x\d+) over", age)
        message = PREEMPTION_SUFFIX.sub("", message.replace(namespace, "<ns>")).replace(f"-{scheduler}", "-<scheduler>")
        out.append(
            (kind, reason, repeats.group(1) if repeats else "", source.replace(scheduler, "<scheduler>"), message)
        )
    return out


def conditions(text: str) -> list[str]:
    return [" ".join(line.split()) for line in section(text, "Conditions")[1:]]


def settled(core: Any, namespace: str, fits: str, stuck: str) -> bool:
    bound = core.read_namespaced_pod(fits, namespace)
    waiting = core.read_namespaced_pod(stuck, namespace)
    rejected = scheduled_condition(waiting)
    running = bound.status.phase == "Running" and all(c.status == "True" for c in bound.status.conditions or ())
    return running and rejected is not None and rejected.reason == "Unschedulable"


def test_describe_reads_the_same_for_our_pods_as_for_kube_schedulers(
    control_plane: ControlPlane, core: Any, nodes: Any, namespace: str
) -> None:
    suffix = uuid.uuid4().hex[:6]
    nodes(f"describe-{suffix}", cpu="2")
    kube_name, our_name = f"kube-{suffix}", f"ours-{suffix}"
    kube = control_plane.start_kube_scheduler(kube_name)
    try:
        with running_scheduler(control_plane, our_name, extra_args=("--no-leader-elect",)):
            for scheduler in (kube_name, our_name):
                core.create_namespaced_pod(namespace, make_pod(f"fits-{scheduler}", scheduler))
                core.create_namespaced_pod(namespace, make_pod(f"stuck-{scheduler}", scheduler, cpu="50"))
            for scheduler in (kube_name, our_name):
                check = functools.partial(settled, core, namespace, f"fits-{scheduler}", f"stuck-{scheduler}")
                wait_for(check, 60, f"{scheduler}'s pods scheduled / rejected")
            described = {
                (scheduler, pod): describe(control_plane, namespace, f"{pod}-{scheduler}")
                for scheduler in (kube_name, our_name)
                for pod in ("fits", "stuck")
            }
    finally:
        control_plane.stop_process(kube)
    for pod in ("fits", "stuck"):
        theirs, ours = described[(kube_name, pod)], described[(our_name, pod)]
        assert conditions(ours) == conditions(theirs), f"{pod} conditions:\n{ours}\n---\n{theirs}"
        our_events, kube_events = events(ours, our_name, namespace), events(theirs, kube_name, namespace)
        assert our_events, f"no events for our {pod} pod:\n{ours}"
        assert our_events == kube_events, f"{pod} events:\n{ours}\n---\n{theirs}"
