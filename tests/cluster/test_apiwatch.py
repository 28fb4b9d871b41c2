"""The agreement harness's keep-alive client and pod watch against the real apiserver."""

from __future__ import annotations

import json

import pytest

from harness.apiwatch import KeepAliveClient, PodWatch
from harness.controlplane import ControlPlane

pytestmark = pytest.mark.cluster


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"step": "created"}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


def test_the_watch_follows_a_pod_from_create_to_delete(control_plane: ControlPlane, namespace: str) -> None:
    client = KeepAliveClient(control_plane)
    watch = PodWatch(control_plane).start()
    try:
        path = f"/api/v1/namespaces/{namespace}/pods"
        status, body = client.request("POST", path, _pod("w"))
        assert status == 201, body
        uid = json.loads(body)["metadata"]["uid"]

        def labelled(step: str) -> bool | None:
            pod = watch.get(namespace, "w")
            ok = pod is not None and pod["metadata"]["uid"] == uid and pod["metadata"]["labels"]["step"] == step
            return True if ok else None

        assert watch.wait_until(lambda: labelled("created"), 30)
        patch = {"metadata": {"labels": {"step": "patched"}}}
        status, body = client.request(
            "PATCH", f"{path}/w", patch, headers={"Content-Type": "application/merge-patch+json"}
        )
        assert status == 200, body
        assert watch.wait_until(lambda: labelled("patched"), 30)
        status, _ = client.request("DELETE", f"{path}/w?gracePeriodSeconds=0")
        assert status == 200
        assert watch.wait_until(lambda: True if watch.deleted(uid) else None, 30)
        assert watch.get(namespace, "w") is None
        # Nothing changes: the wait gives up after its timeout.
        assert watch.wait_until(lambda: labelled("never"), 0.2) is None
    finally:
        watch.stop()
        client.close()


def test_the_client_reconnects_when_the_server_closed_its_connection(control_plane: ControlPlane) -> None:
    client = KeepAliveClient(control_plane)
    try:
        assert client.request("GET", "/api/v1/namespaces/default")[0] == 200
        connection = client._connection
        assert connection is not None and connection.sock is not None
        connection.sock.close()  # as a server's idle timeout would
        assert client.request("GET", "/api/v1/namespaces/default")[0] == 200
    finally:
        client.close()
