"""PermitGate: a test-only out-of-tree Permit plugin, loaded through the entry-point group.

Holds every pod at Permit until a file named after the pod appears in `allowDir` (the test
creates it), or rejects it after `timeoutSeconds`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import Code, CycleState, Status
from scheduler.model.objects import Pod

NAME = "PermitGate"


class PermitGate:
    name = NAME

    def __init__(self, allow_dir: Path, timeout: float, handle: Handle) -> None:
        self.allow_dir = allow_dir
        self.timeout = timeout
        self.handle = handle
        self._watchers: set[asyncio.Task[None]] = set()

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        task = asyncio.get_running_loop().create_task(self._allow_when_file_appears(pod))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return Status(Code.WAIT, ("waiting for the test to allow it",)), self.timeout

    async def _allow_when_file_appears(self, pod: Pod) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if (self.allow_dir / pod.name).exists():
                self.handle.allow_waiting_pod(pod.uid, NAME)
                return
            await asyncio.sleep(0.1)


def new(args: Mapping[str, Any], handle: Handle) -> PermitGate:
    return PermitGate(Path(args["allowDir"]), float(args.get("timeoutSeconds", 60)), handle)
