"""SchedulingGates: PreEnqueue keeps pods with spec.schedulingGates out of activeQ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.interface import Handle
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventObject,
    EventResource,
    QueueingHint,
    Status,
)
from scheduler.model.objects import Pod

NAME = "SchedulingGates"


def _gates_removed(pod: Pod, old: EventObject | None, new: EventObject | None) -> QueueingHint:
    if isinstance(new, Pod) and new.uid == pod.uid and not new.scheduling_gates:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        gates = " ".join(pod.scheduling_gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{gates}]", plugin=NAME)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.TARGET_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                _gates_removed,
            )
        ]


def new(args: Mapping[str, Any], handle: Handle) -> SchedulingGates:
    return SchedulingGates()
