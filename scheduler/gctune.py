"""The interpreter's cyclic garbage collector, set for a long-running scheduler.

Owns: the collector's thresholds (set at start-up) and freezing what start-up built. With
CPython's defaults (700, 10, 10) a scheduler holding thousands of nodes and pods runs a full
collection every few thousand pod events, each one walking the whole heap: on upstream's
SchedulingBasic at 1500 nodes that was ~3 s of collector time while 3300 pods were bound (the
profile showed it inside json decoding and object construction, where the allocations happen).
Almost all of the scheduler's garbage is freed by reference counting; the collector only has to
find the rare cycles, so it can run far less often. SECONDARY_SCHEDULER_GC=python keeps the
interpreter's defaults (the benchmark compares the two in one run).

Must never: disable the collector (cycles must still be freed).
"""

from __future__ import annotations

import gc
import os

ENV = "SECONDARY_SCHEDULER_GC"
# A young collection every 50 000 net allocations; a middle one every 20 of those; a full one every
# 100 middle ones (and, as always in CPython, only once the survivors grew by a quarter).
THRESHOLDS = (50_000, 20, 100)


def tuned() -> bool:
    return os.environ.get(ENV, "").lower() != "python"


def configure() -> None:
    if tuned():
        gc.set_threshold(*THRESHOLDS)


def freeze_startup_heap() -> None:
    """After the informers' first lists: move everything alive into the permanent generation, which
    no collection walks again (its objects are still freed by reference counting)."""
    if tuned():
        gc.collect()
        gc.freeze()
