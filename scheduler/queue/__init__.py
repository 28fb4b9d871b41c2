"""The scheduling queue (activeQ, backoffQ, unschedulable pods) and the nominator."""

from scheduler.queue.scheduling_queue import Clock, MonotonicClock, PriorityQueue

__all__ = ["Clock", "MonotonicClock", "PriorityQueue"]
