"""The queueing-hint helpers: objects narrowed to the kind a hint expects, anything else Queue."""

from __future__ import annotations

from plugins.helper import api_hint, changed_objects, event_objects
from scheduler.framework.types import ApiObject, QueueingHint
from scheduler.model.objects import Node, Pod
from scheduler.testing.builders import NodeBuilder, PodBuilder

POD = PodBuilder("p").obj()
OTHER_POD = PodBuilder("q").obj()
NODE = NodeBuilder("n").obj()
CLAIM: ApiObject = {"metadata": {"name": "c", "namespace": "default"}}


def test_event_objects_narrows_an_add_and_an_update() -> None:
    assert event_objects(Pod, None, POD) == (None, POD)
    assert event_objects(Pod, OTHER_POD, POD) == (OTHER_POD, POD)


def test_event_objects_refuses_other_kinds_and_a_delete() -> None:
    assert event_objects(Pod, None, NODE) is None
    assert event_objects(Node, POD, NODE) is None
    assert event_objects(Pod, POD, None) is None
    assert event_objects(Pod, None, CLAIM) is None


def test_changed_objects_also_takes_a_delete() -> None:
    assert changed_objects(Pod, POD, None) == (POD, None)
    assert changed_objects(Pod, None, POD) == (None, POD)
    assert changed_objects(Pod, NODE, None) is None
    assert changed_objects(Pod, None, None) is None


def test_api_hint_queues_a_pod_or_a_node_and_passes_mappings_on() -> None:
    seen: list[tuple[ApiObject | None, ApiObject | None]] = []

    @api_hint
    def hint(pod: Pod, old: ApiObject | None, new: ApiObject | None) -> QueueingHint:
        seen.append((old, new))
        return QueueingHint.SKIP

    assert hint(POD, None, CLAIM) == QueueingHint.SKIP
    assert hint(POD, CLAIM, None) == QueueingHint.SKIP
    assert hint(POD, None, OTHER_POD) == QueueingHint.QUEUE
    assert hint(POD, NODE, CLAIM) == QueueingHint.QUEUE
    assert seen == [(None, CLAIM), (CLAIM, None)]
