"""Pod-group preemption (kube 1.37's PodGroupPostFilter of DefaultPreemption, podgrouppreemption.go).

What runs after an Unschedulable pod-group cycle: the group's eligibility (a member with
preemptionPolicy Never makes the group ineligible, as kube decides without PodGroupPreemptionPolicy)
and the search for potential victims (pods whose priority, or their own PodGroup's, is below the
group's). Choosing and removing victims for a whole group is not implemented: when potential
victims exist the status says so instead of pretending to have looked. Reads the snapshot and the
pod-group state only; never evicts or deletes.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.interface import Handle
from scheduler.framework.podgroups import PodGroupState, scheduling_group_key
from scheduler.framework.types import Status
from scheduler.model.objects import Pod
from scheduler.model.podgroups import PodGroup

PREFIX = "pod group preemption: "
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming preemptor"


def victim_priority(handle: Handle, pod: Pod) -> int:
    """kube's GetPodPriority: a member of a known PodGroup has its group's priority."""
    key = scheduling_group_key(pod)
    state = handle.pod_groups.get(key) if key is not None else None
    if state is not None and isinstance(state.group, PodGroup):
        return state.group.priority
    return pod.priority


def pod_group_post_filter(handle: Handle, group: PodGroupState, members: Sequence[Pod], plugin: str) -> Status:
    if not isinstance(group.group, PodGroup):
        return Status.unschedulable(f"{PREFIX}pod group {group.key} is not known", plugin=plugin)
    if any(pod.spec.get("preemptionPolicy") == "Never" for pod in members):
        return Status.unschedulable(PREFIX + NOT_ELIGIBLE, plugin=plugin)
    priority = group.group.priority
    victims = sum(
        1 for info in handle.snapshot.list() for pod in info.pods.values() if victim_priority(handle, pod) < priority
    )
    if victims == 0:
        return Status.unresolvable(PREFIX + NO_VICTIMS, plugin=plugin)
    message = f"{victims} lower-priority pod(s) could make room, but this scheduler does not preempt for pod groups yet"
    return Status.unschedulable(PREFIX + message, plugin=plugin)
