"""DefaultBinder: writes the Binding subresource through the handle's api client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.client import ApiError
from scheduler.framework.interface import Handle
from scheduler.framework.types import CycleState, Status
from scheduler.model.objects import Pod

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        try:
            await self._handle.client.bind(pod, node_name)
        except ApiError as exc:
            return Status.as_error(exc, NAME)
        return None


def new(args: Mapping[str, Any], handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
