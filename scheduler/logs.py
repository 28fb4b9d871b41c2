"""structlog setup: JSON lines in production, readable console output for people; stdlib logs
(kopf, aiohttp) rendered through the same processors."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", json_output: bool = True) -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        # filter_by_level first: a disabled debug call then costs one level check, not the whole chain.
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(processor=renderer, foreign_pre_chain=shared))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf is chatty at INFO about every watch; keep it to warnings unless debugging.
    if level.lower() != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)
        logging.getLogger("aiohttp").setLevel(logging.WARNING)


class Repeats:
    """Counts a failure that repeats per key (e.g. an HTTP status every write gets) and says which
    occurrences to log: the first of each key, then every `every`th, so a denied verb is logged
    once rather than once per pod."""

    def __init__(self, every: int = 100) -> None:
        self._every = every
        self._seen: dict[object, int] = {}

    def count(self, key: object) -> int | None:
        """This occurrence's number when it should be logged, else None."""
        seen = self._seen.get(key, 0) + 1
        self._seen[key] = seen
        return seen if seen == 1 or seen % self._every == 0 else None
