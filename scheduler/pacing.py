"""Slices of synchronous work on the event loop.

One event loop runs the watches, the Lease renewal, the HTTP probes and the scheduling loop; work
that may run long (a relist's objects, a watch read's burst of events, a pod-group cycle over its
members) calls `Pacer.pace()` after each unit and so lets the other tasks in at least every
`budget` seconds.
"""

from __future__ import annotations

import asyncio
import time


class Pacer:
    """pace() after each unit of work yields to the loop once `budget` seconds have run since the
    last yield."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self._since = time.perf_counter()

    async def pace(self) -> None:
        if time.perf_counter() - self._since >= self.budget:
            await asyncio.sleep(0)
            self._since = time.perf_counter()
