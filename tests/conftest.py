"""Fixtures shared by every test: the real control plane and clients of it.

Owns: one ControlPlane per test session (started only when a test asks for it, so unit tests never
pay for it), a `kubernetes` ApiClient for it, and throwaway namespaces.
Must never: mock the apiserver, skip a cluster test because the control plane cannot be built or
started (that is an error), or leave a process or an unclosed client behind.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from harness.controlplane import ControlPlane


def api_client(plane: ControlPlane) -> Any:
    """A new `kubernetes.client.ApiClient` from the plane's admin kubeconfig; the caller closes it."""
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(plane.kubeconfig), client_configuration=configuration, persist_config=False
    )
    return k8s_client.ApiClient(configuration)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kwok for the whole session; stopped (no processes left) at its end."""
    with ControlPlane() as plane:
        yield plane


@pytest.fixture(scope="session")
def k8s(control_plane: ControlPlane) -> Iterator[Any]:
    """A `kubernetes.client.ApiClient` with the admin kubeconfig (TLS verified), closed at the end."""
    api = api_client(control_plane)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def namespace(k8s: Any) -> Iterator[str]:
    """A fresh namespace; its pods and then the namespace are deleted afterwards.

    Without a namespace controller the namespace itself stays Terminating; its name is unique, and
    its pods (the objects everything here counts) are force-deleted first.
    """
    core = k8s_client.CoreV1Api(k8s)
    name = f"test-{uuid.uuid4().hex[:10]}"
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)
