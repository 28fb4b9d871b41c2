"""A lean list+watch for the pod, node and storage streams: raw JSON lines straight to a handler.

kopf stays in charge of the low-volume kinds; pods (and with them claims and PVs) grow with the
scheduling rate and nodes with the cluster (heartbeats, CSINodes), and kopf's per-event
machinery (a worker task per object, diff-base deep copies, handler bookkeeping, sync handlers
in a thread pool) cost about a fifth to a third of the scheduler's CPU there (see the README's
benchmark notes). Semantics of a client-go reflector: list, then watch from the list's
resourceVersion with bookmarks; a watch that breaks (connection refused or reset, 429) is
resumed from the last resourceVersion seen; on "410 Gone" or any other error, list again and
report objects that vanished meanwhile as DELETED.

A watch never stalls and never dies: every watch request asks the server to end it after
`timeout_seconds`, and gives up when nothing (not even a bookmark, which the apiserver sends
every minute) arrives for `read_timeout` seconds; any failure, including a failing relist, is
retried with capped exponential backoff until the task is cancelled.

A relist never holds the event loop, which the Lease renewal shares. It asks for pages of
LIST_PAGE_SIZE objects (`limit`/`continue`, as client-go's pager) so that no one answer takes long
to decode, and hands the objects to the handler in slices of at most DISPATCH_SLICE_SECONDS,
yielding between slices; so does a watch read that brought a burst of events. Pages are asked for
without a resourceVersion: the watch cache ignores `limit` for resourceVersion "0" (client-go's
first list), and client-go lists unpaged when it names the last resourceVersion (its relists) —
affordable there, where a goroutine of its own decodes.
A 1.37 apiserver serves these pages from its watch cache's snapshots, older ones from etcd.
(kube-scheduler 1.37's client-go streams the list as a watch with sendInitialEvents instead,
WatchListClient.) The handler hears of the list only once the last page has arrived, so a list that
fails half-way changes nothing; the watch resumes from the list's resourceVersion. An expired
continue token (the paging outlived etcd's compaction) falls back to one full list, as client-go's
pager does.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from scheduler import codec
from scheduler.api.client import ApiError, ListWatchClient
from scheduler.pacing import Pacer

log = structlog.get_logger("watch")

Handler = Callable[[str, Mapping[str, Any]], None]

# The apiserver's watch cache sends a bookmark to every watcher about once a minute.
WATCH_READ_TIMEOUT_SECONDS = 90.0
INITIAL_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 5.0
# client-go's pager default.
LIST_PAGE_SIZE = 500
# The longest stretch a relist hands objects to the handler before it lets other tasks (the Lease
# renewal, the scheduling loop, other watches) run.
DISPATCH_SLICE_SECONDS = 0.005


class Reflector:
    def __init__(
        self,
        client: ListWatchClient,
        path: str,
        handler: Handler,
        timeout_seconds: int = 300,
        read_timeout: float = WATCH_READ_TIMEOUT_SECONDS,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        self.client = client
        self.path = path  # collection path, may carry a query (e.g. a field selector)
        self.handler = handler
        self.timeout_seconds = timeout_seconds
        self.read_timeout = read_timeout
        self.page_size = page_size
        self.relists = 0
        self.resource_version = ""
        self._known: dict[str, Mapping[str, Any]] = {}  # uid -> last object seen

    def _sep(self) -> str:
        return "&" if "?" in self.path else "?"

    async def list(self) -> None:
        """(Re)list: ADDED for every object, DELETED for known objects no longer there."""
        items, resource_version = await self._list_pages()
        self.relists += 1
        pacer = Pacer(DISPATCH_SLICE_SECONDS)
        seen: dict[str, Mapping[str, Any]] = {}
        for item in items:
            uid = (item.get("metadata") or {}).get("uid", "")
            seen[uid] = item
            self.handler("ADDED", item)
            await pacer.pace()
        # Emptied one object at a time: dropping the last list's objects at once frees them all in
        # one go (about 0.1 s for 15000 nodes), which would hold the loop as long as one slice never may.
        known, self._known = self._known, seen
        while known:
            uid, gone = known.popitem()
            if uid not in seen:
                self.handler("DELETED", gone)
            await pacer.pace()
        self.resource_version = resource_version

    async def _list_pages(self) -> tuple[Sequence[Mapping[str, Any]], str]:
        """Every object of the collection, page by page, and the list's resourceVersion (the same on every page)."""
        items: list[Mapping[str, Any]] = []
        token = ""
        while True:
            query = f"limit={self.page_size}"
            if token:
                query += f"&continue={urllib.parse.quote(token, safe='')}"
            try:
                body = await self.client.request("GET", f"{self.path}{self._sep()}{query}")
            except ApiError as exc:
                if not (token and exc.status == 410):
                    raise
                log.info("list continuation expired; listing in full", path=self.path)
                body = await self.client.request("GET", self.path)
                return list(body.get("items") or ()), (body.get("metadata") or {}).get("resourceVersion", "")
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, meta.get("resourceVersion", "")

    def _dispatch(self, event: Mapping[str, Any]) -> bool:
        """Handle one watch event; False when the watch must restart from a fresh list."""
        kind = event.get("type", "")
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if kind == "ERROR":
            log.info("watch expired; relisting", path=self.path, code=obj.get("code"), message=obj.get("message"))
            return False
        if kind == "BOOKMARK":
            self.resource_version = meta.get("resourceVersion", self.resource_version)
            return True
        uid = meta.get("uid", "")
        if kind == "DELETED":
            self._known.pop(uid, None)
        else:
            self._known[uid] = obj
        self.resource_version = meta.get("resourceVersion", self.resource_version)
        self.handler(kind, obj)
        return True

    async def watch_once(self) -> bool:
        """One watch request until the server closes it; False when a relist is needed."""
        query = f"watch=1&allowWatchBookmarks=true&timeoutSeconds={self.timeout_seconds}"
        if self.resource_version:
            query += f"&resourceVersion={self.resource_version}"
        buffer = b""
        # A burst of events (a read that brought hundreds) is handed over in slices too: each
        # handler may be costly (a bound pod's event runs hints over the waiting pods).
        pacer = Pacer(DISPATCH_SLICE_SECONDS)
        # aclosing: leaving the loop early (a relist) must close the response now, not at garbage collection.
        async with contextlib.aclosing(
            self.client.stream("GET", f"{self.path}{self._sep()}{query}", self.read_timeout)
        ) as chunks:
            async for chunk in chunks:
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip() and not self._dispatch(codec.loads(line)):
                        return False
                    await pacer.pace()
        return True

    async def run(self, listed: bool = False) -> None:
        """Watch forever (until cancelled); `listed` when list() already ran."""
        must_list = not listed
        backoff = INITIAL_BACKOFF_SECONDS
        while True:
            try:
                if must_list:
                    await self.list()
                    must_list = False
                must_list = not await self.watch_once()
                backoff = INITIAL_BACKOFF_SECONDS
            except (ApiError, ValueError) as exc:
                if isinstance(exc, ApiError) and exc.status == 410:
                    must_list = True
                    log.info("watch expired; relisting", path=self.path)
                    continue
                resumable = isinstance(exc, ApiError) and exc.status in (0, 429) and self.resource_version
                must_list = must_list or not resumable
                log.warning("watch failed; retrying", path=self.path, error=str(exc), retry_in=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
