"""A keep-alive HTTPS client and a pod watch for harnesses that drive a test apiserver directly.

KeepAliveClient sends every request of one thread over one TLS connection (ControlPlane's
http_request opens a new one each time, which costs more than the request on a busy machine).
PodWatch lists then watches every pod (bookmarks, resume from the last resourceVersion, relist on
410 Gone) into a store that callers wait on with a condition (wait_until), so a harness reacts to
a pod's change when the apiserver reports it rather than polling.

Owns: the connection handling and the store. Must never: write to the API from the watch, or
hide a request's HTTP status from the caller (every status is returned as is).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from harness.controlplane import ControlPlane

Raw = dict[str, Any]
T = TypeVar("T")

# A watch read that sees nothing for this long reconnects from the last resourceVersion; it also
# bounds how long stop() waits for the thread.
WATCH_READ_TIMEOUT = 10.0
WATCH_SECONDS = 240


class KeepAliveClient:
    """Requests over one persistent connection; use from one thread at a time."""

    def __init__(self, plane: ControlPlane, timeout: float = 30.0) -> None:
        url = urllib.parse.urlsplit(plane.server)
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 443
        self._plane = plane
        self._timeout = timeout
        self._connection: http.client.HTTPSConnection | None = None

    def connect(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        """A new connection (not the kept one), e.g. for a watch."""
        return http.client.HTTPSConnection(
            self._host, self._port, context=self._plane.ssl_context(), timeout=timeout or self._timeout
        )

    def headers(self, extra: Mapping[str, str] | None = None, *, body: bool = False) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self._plane.token}", "Accept": "application/json"}
        if body:
            out["Content-Type"] = "application/json"
        out.update(extra or {})
        return out

    def request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        all_headers = self.headers(headers, body=data is not None)
        for attempt in (1, 2):
            reused = self._connection is not None
            if self._connection is None:
                self._connection = self.connect()
            try:
                self._connection.request(method, path, body=data, headers=all_headers)
                response = self._connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError):
                self.close()
                # Only a kept connection the server closed meanwhile is worth a second try.
                if attempt == 2 or not reused:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class PodWatch:
    """Every pod of a cluster as the apiserver last reported it, kept by a watch thread."""

    def __init__(self, plane: ControlPlane, name: str = "pods") -> None:
        self._client = KeepAliveClient(plane)
        self._pods: dict[tuple[str, str], Raw] = {}
        self._deleted: set[str] = set()  # uids
        self._resource_version = ""
        self._condition = threading.Condition()
        self._stopping = threading.Event()
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{name}", daemon=True)
        self.error = ""  # the last failure of the watch thread (it retries), for a caller's timeout message

    def start(self) -> PodWatch:
        self._list()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(WATCH_READ_TIMEOUT + 5)
        self._client.close()

    # ---- reading -------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Raw | None:
        with self._condition:
            return self._pods.get((namespace, name))

    def pods(self) -> list[Raw]:
        """Every pod in the store (call inside wait_until's check, or accept a moment's copy)."""
        with self._condition:
            return list(self._pods.values())

    def deleted(self, uid: str) -> bool:
        with self._condition:
            return uid in self._deleted

    def wait_until(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """Call `check` (under the store's lock) after every change until it returns non-None, or
        return None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                result = check()
                if result is not None:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._condition.wait(remaining)

    # ---- the thread ----------------------------------------------------------------------

    def _list(self) -> None:
        status, data = self._client.request("GET", "/api/v1/pods")
        if status != 200:
            raise OSError(f"list pods: HTTP {status}: {data[:300]!r}")
        listed = json.loads(data)
        with self._condition:
            self._pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed["items"]}
            self._resource_version = listed["metadata"]["resourceVersion"]
            self._condition.notify_all()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if not self._watch():
                    self._list()
            except (http.client.HTTPException, OSError, ValueError) as err:
                if self._stopping.is_set():
                    return
                self.error = repr(err)
                time.sleep(0.2)  # the apiserver is restarting or overloaded: do not spin

    def _watch(self) -> bool:
        """One watch request; False when the resourceVersion is too old (relist)."""
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "allowWatchBookmarks": "true",
                "resourceVersion": self._resource_version,
                "timeoutSeconds": str(WATCH_SECONDS),
            }
        )
        connection = self._client.connect(timeout=WATCH_READ_TIMEOUT)
        try:
            connection.request("GET", f"/api/v1/pods?{query}", headers=self._client.headers())
            self._socket = connection.sock
            response = connection.getresponse()
            if response.status == 410:
                return False
            if response.status != 200:
                raise OSError(f"watch pods: HTTP {response.status}: {response.read()[:300]!r}")
            while not self._stopping.is_set():
                try:
                    line = response.readline()
                except TimeoutError:
                    return True  # quiet for a while: reconnect from where we are
                if not line:
                    return True
                if not self._apply(json.loads(line)):
                    return False
            return True
        finally:
            self._socket = None
            connection.close()

    def _apply(self, event: Raw) -> bool:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            return obj.get("code") != 410
        metadata = obj.get("metadata") or {}
        with self._condition:
            self._resource_version = metadata.get("resourceVersion", self._resource_version)
            if kind == "BOOKMARK":
                return True
            key = (metadata.get("namespace", ""), metadata.get("name", ""))
            if kind == "DELETED":
                self._deleted.add(metadata.get("uid", ""))
                if (current := self._pods.get(key)) is not None and current["metadata"]["uid"] == metadata.get("uid"):
                    del self._pods[key]
            else:
                self._pods[key] = obj
            self._condition.notify_all()
        return True
