"""How long the event loop is held: a ticker task for tests and benchmarks.

Owns: one task that wakes every `interval` seconds and records how late it woke (wall clock) and how
much CPU this thread spent between two of its wake-ups (everything else that ran on the loop in
between), with and without the cyclic garbage collector's share. The CPU figures are what a test
can assert on a loaded machine: time the process spends descheduled, or waiting for the GIL held by
another thread, is not counted; a collection, which no code can slice, is reported apart
(`max_gc_cpu`) so that a test of slicing does not depend on where the collector happens to run.

Must never: be started by the scheduler itself (it costs a wake-up every few milliseconds).
"""

from __future__ import annotations

import asyncio
import gc
import time
from types import TracebackType
from typing import Self


class LoopMonitor:
    """`async with LoopMonitor() as monitor:` … then `monitor.max_lag`, `monitor.max_held_cpu`, …"""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.max_lag = 0.0  # seconds a wake-up came later than asked for
        self.max_held_cpu = 0.0  # thread CPU seconds between two wake-ups
        self.max_held_cpu_without_gc = 0.0  # the same less the collector's share
        self.max_gc_cpu = 0.0  # the longest single collection
        self._gc_cpu = 0.0  # all collections so far
        self._gc_began = 0.0
        # When (wall clock, thread CPU, collections' CPU) the last wake-up happened.
        self._wall = self._cpu = self._gc_at = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        gc.callbacks.append(self._on_gc)
        self._wall, self._cpu, self._gc_at = time.perf_counter(), time.thread_time(), self._gc_cpu
        self._task = asyncio.create_task(self._tick(), name="loop-monitor")
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        # The stretch since the last wake-up counts too: work that ends the measured block (a list
        # decoded and handled in one go) finishes before the ticker could wake again.
        self._sample()
        gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _on_gc(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_began = time.thread_time()
        else:
            pause = time.thread_time() - self._gc_began
            self._gc_cpu += pause
            self.max_gc_cpu = max(self.max_gc_cpu, pause)

    def _sample(self) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        self.max_lag = max(self.max_lag, wall - self._wall - self.interval)
        self.max_held_cpu = max(self.max_held_cpu, cpu - self._cpu)
        self.max_held_cpu_without_gc = max(self.max_held_cpu_without_gc, cpu - self._cpu - (self._gc_cpu - self._gc_at))
        self._wall, self._cpu, self._gc_at = wall, cpu, self._gc_cpu

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self._sample()
