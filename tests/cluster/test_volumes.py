"""VolumeBinding against a real apiserver with kube-controller-manager's PV binder running."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from harness.controlplane import ControlPlane
from harness.workload import (
    api_pod,
    metric_value,
    pod_events,
    running_scheduler,
    scheduled_condition,
    wait_for,
)
from tests.cluster.conftest import NodeFactory

pytestmark = pytest.mark.cluster

HOSTNAME = "kubernetes.io/hostname"
PROVISIONER = "example.com/test-provisioner"
CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


@pytest.fixture
def pv_binder(control_plane: ControlPlane) -> Iterator[None]:
    manager = control_plane.start_kube_controller_manager("persistentvolume-binder-controller")
    try:
        yield
    finally:
        control_plane.stop_process(manager)


@pytest.fixture
def storage(k8s: Any) -> Iterator[tuple[Any, list[str], list[str]]]:
    """StorageApi plus lists of StorageClasses and PVs to delete afterwards."""
    api = k8s_client.StorageV1Api(k8s)
    core = k8s_client.CoreV1Api(k8s)
    classes: list[str] = []
    volumes: list[str] = []
    yield api, classes, volumes
    for name in volumes:
        core.delete_persistent_volume(name)
    for name in classes:
        api.delete_storage_class(name)


def _storage_class(api: Any, name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner") -> None:
    api.create_storage_class(
        k8s_client.V1StorageClass(
            metadata=k8s_client.V1ObjectMeta(name=name), provisioner=provisioner, volume_binding_mode=mode
        )
    )


def _local_pv(core: Any, name: str, storage_class: str, node: str, size: str = "1Gi") -> None:
    core.create_persistent_volume(
        k8s_client.V1PersistentVolume(
            metadata=k8s_client.V1ObjectMeta(name=name),
            spec=k8s_client.V1PersistentVolumeSpec(
                capacity={"storage": size},
                access_modes=["ReadWriteOnce"],
                storage_class_name=storage_class,
                persistent_volume_reclaim_policy="Retain",
                local=k8s_client.V1LocalVolumeSource(path="/mnt/disk"),
                node_affinity=k8s_client.V1VolumeNodeAffinity(
                    required=k8s_client.V1NodeSelector(
                        node_selector_terms=[
                            k8s_client.V1NodeSelectorTerm(
                                match_expressions=[
                                    k8s_client.V1NodeSelectorRequirement(key=HOSTNAME, operator="In", values=[node])
                                ]
                            )
                        ]
                    )
                ),
            ),
        )
    )


def _claim(core: Any, namespace: str, name: str, storage_class: str, size: str = "1Gi") -> None:
    core.create_namespaced_persistent_volume_claim(
        namespace,
        k8s_client.V1PersistentVolumeClaim(
            metadata=k8s_client.V1ObjectMeta(name=name),
            spec=k8s_client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                storage_class_name=storage_class,
                resources=k8s_client.V1VolumeResourceRequirements(requests={"storage": size}),
            ),
        ),
    )


def _pod_with_claim(name: str, scheduler_name: str, claim: str) -> Any:
    pod = api_pod(name, scheduler_name)
    assert pod.spec is not None
    pod.spec.volumes = [
        k8s_client.V1Volume(
            name="data", persistent_volume_claim=k8s_client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
        )
    ]
    return pod


def _nodes(nodes: NodeFactory, namespace: str, count: int) -> list[str]:
    return [nodes(f"{namespace}-n{i}", labels={HOSTNAME: f"{namespace}-n{i}"}) for i in range(count)]


def test_local_pv_binds_and_the_pod_lands_on_its_node(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    api, classes, volumes = storage
    names = _nodes(nodes, namespace, 3)
    sc = f"local-{namespace}"
    _storage_class(api, sc, "WaitForFirstConsumer")
    classes.append(sc)
    pv = f"pv-{namespace}"
    _local_pv(core, pv, sc, names[2])
    volumes.append(pv)
    _claim(core, namespace, "data", sc)
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
        node = wait_for(
            lambda: core.read_namespaced_pod("app-0", namespace).spec.node_name, timeout=60, what="pod bound"
        )
    assert node == names[2]
    claim = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert claim.status.phase == "Bound" and claim.spec.volume_name == pv


def _run_provisioner(core: Any, namespace: str, stop: threading.Event, made: list[str]) -> None:
    """A tiny external provisioner: for each claim of our class annotated with a selected node,
    create a PV with that node's affinity, pre-bound to the claim (the PV binder finishes it)."""
    while not stop.is_set():
        for claim in core.list_namespaced_persistent_volume_claim(namespace).items:
            node = (claim.metadata.annotations or {}).get("volume.kubernetes.io/selected-node")
            if not node or claim.spec.volume_name:
                continue
            name = f"pvc-{claim.metadata.uid}"
            if name in made:
                continue
            _local_pv(core, name, claim.spec.storage_class_name, node)
            core.patch_persistent_volume(
                name,
                {
                    "metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
                    "spec": {
                        "claimRef": {
                            "namespace": namespace,
                            "name": claim.metadata.name,
                            "uid": claim.metadata.uid,
                        }
                    },
                },
            )
            made.append(name)
        stop.wait(0.2)


def test_wait_for_first_consumer_provisioning_on_the_selected_node(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    api, classes, volumes = storage
    names = _nodes(nodes, namespace, 2)
    sc = f"provisioned-{namespace}"
    _storage_class(api, sc, "WaitForFirstConsumer", provisioner=PROVISIONER)
    classes.append(sc)
    _claim(core, namespace, "data", sc)
    stop = threading.Event()
    provisioner = threading.Thread(target=_run_provisioner, args=(core, namespace, stop, volumes), daemon=True)
    provisioner.start()
    try:
        with running_scheduler(control_plane, scheduler_name):
            core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
            node = wait_for(
                lambda: core.read_namespaced_pod("app-0", namespace).spec.node_name, timeout=60, what="pod bound"
            )
    finally:
        stop.set()
        provisioner.join(10)
    claim = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert node in names
    assert claim.metadata.annotations["volume.kubernetes.io/selected-node"] == node
    assert claim.status.phase == "Bound"
    pv = core.read_persistent_volume(claim.spec.volume_name)
    affinity = pv.spec.node_affinity.required.node_selector_terms[0].match_expressions[0]
    assert affinity.values == [node]


def test_two_pods_compete_for_one_pv_one_wins_the_other_is_reported(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    api, classes, volumes = storage
    names = _nodes(nodes, namespace, 2)
    sc = f"one-{namespace}"
    _storage_class(api, sc, "WaitForFirstConsumer")
    classes.append(sc)
    pv = f"pv-{namespace}"
    _local_pv(core, pv, sc, names[0])
    volumes.append(pv)
    _claim(core, namespace, "claim-a", sc)
    _claim(core, namespace, "claim-b", sc)
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, _pod_with_claim("a-0", scheduler_name, "claim-a"))
        core.create_namespaced_pod(namespace, _pod_with_claim("b-0", scheduler_name, "claim-b"))

        def outcome() -> tuple[str, str] | None:
            pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
            bound = [n for n, p in pods.items() if p.spec.node_name]
            failed = [
                n
                for n, p in pods.items()
                if not p.spec.node_name
                and (c := scheduled_condition(p)) is not None
                and c.status == "False"
                and c.reason == "Unschedulable"
            ]
            return (bound[0], failed[0]) if len(bound) == 1 and len(failed) == 1 else None

        winner, loser = wait_for(outcome, timeout=60, what="one pod bound, the other reported")
        condition = scheduled_condition(core.read_namespaced_pod(loser, namespace))
        assert condition is not None
        message = condition.message
    assert core.read_namespaced_pod(winner, namespace).spec.node_name == names[0]
    assert message == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_unbound_immediate_claim_gives_upstreams_message(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    api, classes, _ = storage
    _nodes(nodes, namespace, 2)
    sc = f"immediate-{uuid.uuid4().hex[:6]}"
    _storage_class(api, sc, "Immediate")
    classes.append(sc)
    _claim(core, namespace, "data", sc)
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
        condition = wait_for(
            lambda: scheduled_condition(core.read_namespaced_pod("app-0", namespace)),
            timeout=60,
            what="PodScheduled condition",
        )
    assert condition.status == "False" and condition.reason == "Unschedulable"
    # A PreFilter rejection: DynamicResources' PostFilter then finds no state of its own and ends
    # the message with its error, as kube-scheduler v1.37.2's does.
    assert condition.message == "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"


def test_volume_bind_timeout_is_reported_then_the_retry_binds(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
    tmp_path: Path,
) -> None:
    """No provisioner at first: PreBind times out, Unreserve runs and the pod is reported with
    kube's SchedulerError and requeued; once a provisioner runs, the retry binds it."""
    api, classes, volumes = storage
    names = _nodes(nodes, namespace, 2)
    sc = f"slow-{namespace}"
    _storage_class(api, sc, "WaitForFirstConsumer", provisioner=PROVISIONER)
    classes.append(sc)
    _claim(core, namespace, "data", sc)
    config = tmp_path / "config.yaml"
    profile = {
        "schedulerName": scheduler_name,
        "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 2}}],
    }
    config.write_text(yaml.safe_dump({**CONFIG, "profiles": [profile]}))
    stop = threading.Event()
    provisioner = threading.Thread(target=_run_provisioner, args=(core, namespace, stop, volumes), daemon=True)
    try:
        with running_scheduler(control_plane, scheduler_name, config=config):
            core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
            condition = wait_for(
                lambda: scheduled_condition(core.read_namespaced_pod("app-0", namespace)),
                timeout=60,
                what="PodScheduled condition",
            )
            assert condition.status == "False" and condition.reason == "SchedulerError"
            assert (
                condition.message
                == 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
            )
            assert not core.read_namespaced_pod("app-0", namespace).spec.node_name
            events = [e for e in pod_events(core, namespace, "app-0") if e.reason == "FailedScheduling"]
            assert events and events[0].message == condition.message
            provisioner.start()
            node = wait_for(
                lambda: core.read_namespaced_pod("app-0", namespace).spec.node_name, timeout=90, what="pod bound"
            )
    finally:
        stop.set()
        if provisioner.is_alive():
            provisioner.join(10)
    claim = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert node in names and claim.status.phase == "Bound"
    assert claim.metadata.annotations["volume.kubernetes.io/selected-node"] == node


def test_pod_deleted_while_prebind_waits_ends_the_wait(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    """No provisioner and the default 600 s bindTimeoutSeconds: PreBind waits on the claim until the
    pod is deleted, then stops at its next poll (kube's checkBindings reads its pod lister), and the
    claim keeps the selected-node annotation it was given (as in kube: the provisioner owns it now)."""
    api, classes, _ = storage
    _nodes(nodes, namespace, 2)
    sc = f"never-{namespace}"
    _storage_class(api, sc, "WaitForFirstConsumer", provisioner=PROVISIONER)
    classes.append(sc)
    _claim(core, namespace, "data", sc)
    with running_scheduler(control_plane, scheduler_name) as port:
        core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
        wait_for(
            lambda: (core.read_namespaced_persistent_volume_claim("data", namespace).metadata.annotations or {}).get(
                "volume.kubernetes.io/selected-node"
            ),
            timeout=60,
            what="PreBind asked for provisioning",
        )
        assert metric_value(port, "scheduler_goroutines", operation="binding") == 1
        core.delete_namespaced_pod("app-0", namespace, grace_period_seconds=0)
        wait_for(
            lambda: metric_value(port, "scheduler_goroutines", operation="binding") == 0,
            timeout=15,
            what="the binding cycle ended",
        )
        assert metric_value(port, "scheduler_volume_scheduling_stage_error_total", operation="bind") == 1
        assert metric_value(port, "scheduler_schedule_attempts_total", result="scheduled") == 0


def test_pod_waiting_on_an_immediate_claim_is_requeued_when_the_pv_binder_binds_it(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    nodes: NodeFactory,
    scheduler_name: str,
    pv_binder: None,
    storage: tuple[Any, list[str], list[str]],
) -> None:
    """The PVC update the PV binder makes is a cluster event VolumeBinding's hint queues the pod on."""
    api, classes, volumes = storage
    names = _nodes(nodes, namespace, 2)
    sc = f"later-{namespace}"
    _storage_class(api, sc, "Immediate")
    classes.append(sc)
    _claim(core, namespace, "data", sc)
    with running_scheduler(control_plane, scheduler_name):
        core.create_namespaced_pod(namespace, _pod_with_claim("app-0", scheduler_name, "data"))
        wait_for(
            lambda: (
                (c := scheduled_condition(core.read_namespaced_pod("app-0", namespace))) is not None
                and c.message.startswith("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
            ),
            timeout=60,
            what="pod reported unschedulable",
        )
        pv = f"pv-{namespace}"
        _local_pv(core, pv, sc, names[1])
        volumes.append(pv)
        node = wait_for(
            lambda: core.read_namespaced_pod("app-0", namespace).spec.node_name, timeout=90, what="pod bound"
        )
    assert node == names[1]
