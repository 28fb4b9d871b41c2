"""PrioritySort: the default QueueSort. Higher priority first, then earlier queue timestamp."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.timestamp < b.timestamp


def new(args: Mapping[str, Any], handle: Handle) -> PrioritySort:
    return PrioritySort()
