"""How long the event loop is held: a ticker task for tests and benchmarks.

Owns: one task that wakes every `interval` seconds and records how late it woke (wall clock) and how
much CPU this thread spent between two of its wake-ups (everything else that ran on the loop in
between). The CPU figure is what a test can assert on a loaded machine: time the process spends
descheduled, or waiting for the GIL held by another thread, is not counted.

Must never: be started by the scheduler itself (it costs a wake-up every few milliseconds).
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Self


class LoopMonitor:
    """`async with LoopMonitor() as monitor:` … then `monitor.max_lag`, `monitor.max_held_cpu`."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.max_lag = 0.0  # seconds a wake-up came later than asked for
        self.max_held_cpu = 0.0  # thread CPU seconds between two wake-ups
        self._wall = self._cpu = 0.0  # when (wall clock, thread CPU) the last wake-up happened
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._wall, self._cpu = time.perf_counter(), time.thread_time()
        self._task = asyncio.create_task(self._tick(), name="loop-monitor")
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        # The stretch since the last wake-up counts too: work that ends the measured block (a list
        # decoded and handled in one go) finishes before the ticker could wake again.
        self._sample()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _sample(self) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        self.max_lag = max(self.max_lag, wall - self._wall - self.interval)
        self.max_held_cpu = max(self.max_held_cpu, cpu - self._cpu)
        self._wall, self._cpu = wall, cpu

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self._sample()
