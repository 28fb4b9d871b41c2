"""DynamicResources through the real scheduling cycle (fake API client, informers fed by hand):
claims allocated and written in PreBind, kube's messages at PreEnqueue, PreFilter and Filter,
in-flight allocations seen by the next pod, shared claims, PostFilter deallocation, Score over
`firstAvailable`, extended resources backed by a DeviceClass, the queueing hints.

Cases from upstream's dynamicresources_test.go where they test behaviour (kube's messages and
outcomes), not Go plumbing (mock clients, feature-gate off paths, PodGroup cycles, which
v1.37.2's default gates keep off).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from plugins import dynamicresources
from plugins.dynamicresources import claim_ready_for_binding, parse_args
from scheduler.api.fake import FakeApiClient
from scheduler.app import build_scheduler, full_registry
from scheduler.config import default_config
from scheduler.framework.dra import DEVICE_CLASS, FINALIZER, RESOURCE_CLAIM, RESOURCE_SLICE
from scheduler.framework.types import Code, CycleState, QueueingHint
from scheduler.informers import Informers
from scheduler.schedule_one import Scheduler
from scheduler.testing.builders import make_pod

NAME = "secondary-scheduler"
DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
# DefaultPreemption's PostFilter part after every rejection on all nodes.
NOT_HELPFUL = " preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def device_class(name: str = CLASS, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"metadata": {"name": name, "uid": f"class-{name}", "resourceVersion": "1"}, "spec": spec}


def resource_slice(node: str, devices: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-slice", "uid": f"slice-{node}", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)],
        },
    }


def exactly(name: str, count: int = 1, device_class_name: str = CLASS) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {"deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count},
    }


def claim(name: str, *requests: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"devices": {"requests": list(requests) or [exactly("gpu")]}},
    }


def pod_with_claims(name: str, *claims: str) -> Any:
    return (
        make_pod(name)
        .container(cpu="100m")
        .spec(schedulerName=NAME, resourceClaims=[{"name": c, "resourceClaimName": c} for c in claims])
    )


class Cluster:
    """A scheduler over the fake client, with nodes, and the informers fed from the fake's claims."""

    def __init__(self, nodes: int = 2) -> None:
        self.client = FakeApiClient()
        self.sched: Scheduler = build_scheduler(default_config(NAME), full_registry(), self.client, {"default": {}})
        self.informers = Informers(self.sched)
        for i in range(nodes):
            self.informers.on_node(
                "ADDED",
                {
                    "metadata": {"name": f"n{i}", "uid": f"n{i}", "resourceVersion": "1", "labels": {}},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
                },
            )

    def add(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == RESOURCE_CLAIM:
            meta = obj["metadata"]
            self.client.resource_claims[f"{meta['namespace']}/{meta['name']}"] = copy.deepcopy(obj)
        self.informers.on_dra_object(kind, "ADDED", obj)

    def sync_claims(self) -> None:
        """The watch bringing back what the scheduler wrote."""
        for stored in self.client.resource_claims.values():
            self.informers.on_dra_object(RESOURCE_CLAIM, "MODIFIED", copy.deepcopy(stored))

    def add_pod(self, builder: Any) -> None:
        self.informers.on_pod("ADDED", builder.raw)

    def run(self, *, sync: bool = True) -> None:
        async def drain() -> None:
            while (info := self.sched.queue.pop_nowait()) is not None:
                self.sched.schedule_one(info)
                await asyncio.sleep(0)
            await self.sched.drain()

        asyncio.run(drain())
        if sync:
            self.sync_claims()

    def stored(self, name: str) -> dict[str, Any]:
        return self.client.resource_claims[f"default/{name}"]

    def message(self, pod: str) -> str:
        return str(self.client.conditions[f"default/{pod}"]["message"])


def devices_of(stored: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = stored["status"]["allocation"]["devices"]["results"]
    return [(r["request"], r["pool"], r["device"]) for r in results]


def test_claim_is_allocated_reserved_and_pod_bound() -> None:
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 2))
    cluster.add(RESOURCE_CLAIM, claim("gpu"))
    cluster.add_pod(pod_with_claims("p", "gpu"))
    cluster.run()
    assert cluster.client.bindings == {"default/p": "n1"}
    stored = cluster.stored("gpu")
    assert FINALIZER in stored["metadata"]["finalizers"]
    assert devices_of(stored) == [("gpu", "n1", "gpu-0")]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "default/p"}]
    assert stored["status"]["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    }
    # Finalizer (update), then allocation and reservation (status), as kube's PreBind writes them.
    assert [verb for verb, _ in cluster.client.claim_writes] == ["update", "status"]


def test_two_claims_of_two_devices_on_a_node_with_two() -> None:
    """FIELD_NOTES: the second pod gets kube's message for every node."""
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 2))
    cluster.add(RESOURCE_CLAIM, claim("a", exactly("gpu", 2)))
    cluster.add(RESOURCE_CLAIM, claim("b", exactly("gpu", 2)))
    cluster.add_pod(pod_with_claims("p1", "a"))
    cluster.run()
    cluster.add_pod(pod_with_claims("p2", "b"))
    cluster.run()
    assert cluster.client.bindings == {"default/p1": "n1"}
    assert cluster.message("p2") == "0/2 nodes are available: 2 cannot allocate all claims." + NOT_HELPFUL


def test_in_flight_allocation_is_seen_by_the_next_pod() -> None:
    """Both pods' cycles run before either PreBind wrote anything: the second must not get the
    device the first reserved (Reserve makes the allocation visible)."""
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 1))
    cluster.add(RESOURCE_CLAIM, claim("a"))
    cluster.add(RESOURCE_CLAIM, claim("b"))
    cluster.add_pod(pod_with_claims("p1", "a"))
    cluster.add_pod(pod_with_claims("p2", "b"))
    cluster.run()
    assert len(cluster.client.bindings) == 1
    allocated = [name for name in ("a", "b") if cluster.stored(name).get("status", {}).get("allocation")]
    assert len(allocated) == 1


def test_claim_shared_by_two_pods() -> None:
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 1))
    cluster.add(RESOURCE_CLAIM, claim("shared"))
    cluster.add_pod(pod_with_claims("p1", "shared"))
    cluster.run()
    cluster.add_pod(pod_with_claims("p2", "shared"))
    cluster.run()
    assert cluster.client.bindings == {"default/p1": "n1", "default/p2": "n1"}
    assert [e["name"] for e in cluster.stored("shared")["status"]["reservedFor"]] == ["p1", "p2"]


@pytest.mark.parametrize(
    ("pod", "claims", "message"),
    [
        (pod_with_claims("p", "missing"), [], 'could not find ResourceClaim "default/missing"'),
        (
            make_pod("p").spec(
                schedulerName=NAME, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
            ),
            [],
            'pod "default/p": ResourceClaim not created yet',
        ),
        (
            pod_with_claims("p", "gone"),
            [{**claim("gone"), "metadata": {**claim("gone")["metadata"], "deletionTimestamp": "2026-12-02T00:00:00Z"}}],
            'resourceclaim "gone" is being deleted',
        ),
    ],
    ids=["missing", "template-not-created", "being-deleted"],
)
def test_pre_enqueue_holds_pods_whose_claims_are_not_there(pod: Any, claims: list[Any], message: str) -> None:
    cluster = Cluster()
    for c in claims:
        cluster.add(RESOURCE_CLAIM, c)
    plugin = cluster.sched.frameworks[NAME].pre_enqueue_plugins
    status = next(p for p in plugin if p.name == "DynamicResources").pre_enqueue(pod.obj())
    assert status is not None
    assert (status.reasons, status.plugin) == ((message,), "DynamicResources")
    cluster.add_pod(pod)
    cluster.run()
    assert cluster.client.bindings == {}
    assert cluster.client.events == []  # held before any attempt, as kube's queue holds it


def test_template_claim_owned_by_the_pod_is_allocated() -> None:
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n0", 1))
    generated = claim("p-gpu-x1z")
    generated["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "default/p", "controller": True}
    ]
    cluster.add(RESOURCE_CLAIM, generated)
    pod = make_pod("p").spec(schedulerName=NAME, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    pod.raw["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x1z"}]
    cluster.add_pod(pod)
    cluster.run()
    assert cluster.client.bindings == {"default/p": "n0"}


def test_template_claim_of_another_pod_is_refused() -> None:
    cluster = Cluster()
    foreign = claim("other-gpu")
    foreign["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "other", "uid": "u2", "controller": True}]
    cluster.add(RESOURCE_CLAIM, foreign)
    pod = make_pod("p").spec(schedulerName=NAME, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    pod.raw["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "other-gpu"}]
    status = dynamicresources.DynamicResources(parse_args({}), cluster.sched.frameworks[NAME].handle).pre_enqueue(
        pod.obj()
    )
    assert status is not None
    assert status.reasons == ("ResourceClaim default/other-gpu was not created for Pod default/p (Pod is not owner)",)


def test_missing_device_class_is_kubes_message() -> None:
    cluster = Cluster()
    cluster.add(RESOURCE_CLAIM, claim("gpu", exactly("req-1", 1, "no-such-class")))
    cluster.add_pod(pod_with_claims("p", "gpu"))
    cluster.run()
    assert cluster.message("p") == (
        "0/2 nodes are available: request req-1: device class no-such-class does not exist." + NOT_HELPFUL
    )


def test_first_available_alternatives_and_score() -> None:
    """A claim whose first alternative fits only n1 and second only n0: both nodes pass, n1 scores
    higher (position 0 of firstAvailable) and gets the pod."""
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n0", 1))
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 2))
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "two", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2},
            {"name": "one", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1},
        ],
    }
    cluster.add(RESOURCE_CLAIM, claim("gpu", request))
    cluster.add_pod(pod_with_claims("p", "gpu"))
    cluster.run()
    assert cluster.client.bindings == {"default/p": "n1"}
    assert devices_of(cluster.stored("gpu")) == [("gpu/two", "n1", "gpu-0"), ("gpu/two", "n1", "gpu-1")]


def test_post_filter_deallocates_a_claim_that_fits_no_node() -> None:
    """Allocated for a node that is gone, reserved for nobody: PostFilter deallocates it and the
    pod's next attempt allocates afresh."""
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 1))
    stale = claim("gpu")
    stale["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "gone", "device": "gpu-0"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}]
            },
        }
    }
    cluster.add(RESOURCE_CLAIM, stale)
    cluster.add_pod(pod_with_claims("p", "gpu"))
    cluster.run()
    assert cluster.message("p") == (
        "0/2 nodes are available: 2 resourceclaim not available on the node. "
        "deallocation of ResourceClaim completed," + NOT_HELPFUL
    )
    assert "allocation" not in cluster.stored("gpu")["status"]


def test_extended_resource_backed_by_a_device_class() -> None:
    """`example.com/gpu: 1` that no node advertises: NodeResourcesFit hands it to DRA, which creates
    the pod's special claim in PreBind and names it in the pod's status."""
    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class(extended="example.com/gpu"))
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 1))
    pod = make_pod("p").container(cpu="100m", requests={"example.com/gpu": "1"}).spec(schedulerName=NAME)
    cluster.add_pod(pod)

    async def run_with_watch() -> None:
        async def watch() -> None:  # the informer bringing back the created claim
            while not cluster.client.bindings:
                cluster.sync_claims()
                await asyncio.sleep(0.01)

        watcher = asyncio.ensure_future(watch())
        while (info := cluster.sched.queue.pop_nowait()) is not None:
            cluster.sched.schedule_one(info)
            await asyncio.sleep(0)
        await cluster.sched.drain()
        await watcher

    asyncio.run(run_with_watch())
    assert cluster.client.bindings == {"default/p": "n1"}
    # Named by the container's index and the resource's position among its sorted requests (cpu first).
    (key,) = cluster.client.resource_claims
    assert key.startswith("default/p-extended-resources-")
    stored = cluster.client.resource_claims[key]
    assert stored["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1},
        }
    ]
    assert devices_of(stored) == [("container-0-request-1", "n1", "gpu-0")]
    assert cluster.client.pod_status_fields["default/p"] == {
        "extendedResourceClaimStatus": {
            "requestMappings": [
                {"containerName": "c0", "resourceName": "example.com/gpu", "requestName": "container-0-request-1"}
            ],
            "resourceClaimName": key.split("/", 1)[1],
        }
    }


def test_nodes_alike_share_the_special_claim_made_for_the_first() -> None:
    """Filter makes the special claim once per set of DRA-backed amounts in a cycle: a node whose
    device plugins serve one of the resources gets its own, every other node the shared one, each
    equal to what making it afresh for that node gives."""
    from plugins.dynamicresources import extended as ext
    from scheduler.testing.builders import make_node, node_info

    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class(extended="example.com/gpu"))
    cluster.add(DEVICE_CLASS, device_class("fpga-class", extended="example.com/fpga"))
    dra = cluster.sched.frameworks[NAME].handle.dra
    pod = make_pod("p").container(requests={"example.com/gpu": "2", "example.com/fpga": "1"}).obj()
    requests = ext.pod_extended_requests(pod, dra)
    assert requests is not None
    claim = ext.find_or_make_claim(pod, [])
    plain = [node_info(make_node(f"n{i}")) for i in range(3)]
    served = node_info(make_node("fpga-node").capacity({"example.com/fpga": "4"}))
    made: ext.NodeClaims = {}
    results = [ext.node_claim(pod, claim, requests, info, dra, made) for info in (*plain, served, *plain)]
    assert results == [ext.node_claim(pod, claim, requests, info, dra) for info in (*plain, served, *plain)]
    assert len(made) == 2
    assert results[0][0] is results[1][0] is results[4][0]
    assert results[3][0] != results[0][0]
    claims = [c for c, _ in results[2:4] if c is not None]
    names = [[r["exactly"]["deviceClassName"] for r in c["spec"]["devices"]["requests"]] for c in claims]
    assert names == [["fpga-class", CLASS], [CLASS]]


def test_claim_hint() -> None:
    cluster = Cluster()
    plugin = dynamicresources.DynamicResources(parse_args({}), cluster.sched.frameworks[NAME].handle)
    (hint,) = [e.hint for e in plugin.events_to_register() if e.event.resource.value.endswith("ResourceClaim")]
    assert hint is not None
    pod = pod_with_claims("p", "gpu").obj()
    mine, other = claim("gpu"), claim("other")
    cluster.add(RESOURCE_CLAIM, mine)
    assert hint(pod, None, mine) == QueueingHint.QUEUE  # the pod's claim was created
    assert hint(pod, None, other) == QueueingHint.SKIP
    allocated = {**other, "status": {"allocation": {"devices": {"results": []}}}}
    assert hint(pod, allocated, other) == QueueingHint.QUEUE  # deallocated: devices freed
    assert hint(pod, allocated, None) == QueueingHint.QUEUE
    assert hint(pod, other, None) == QueueingHint.SKIP
    finalized = {**mine, "metadata": {**mine["metadata"], "finalizers": ["x"]}}
    assert hint(pod, mine, finalized) == QueueingHint.SKIP  # status unchanged


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"filterTimeout": "-1s"}, 'filterTimeout: Invalid value: "-1s": must be zero or positive'),
        ({"bindingTimeout": "500ms"}, 'bindingTimeout: Invalid value: "500ms": must be at least 1 second'),
        ({"other": 1}, "unknown field(s) ['other']"),
    ],
)
def test_args_validation(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match="^" + error.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_args(args)


def test_binding_conditions() -> None:
    result = {
        "driver": DRIVER,
        "pool": "p",
        "device": "d",
        "bindingConditions": ["Ready"],
        "bindingFailureConditions": ["Failed"],
    }
    allocation = {"devices": {"results": [result]}}

    def with_devices(*devices: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": "c"}, "status": {"allocation": allocation, "devices": list(devices)}}

    assert claim_ready_for_binding(with_devices()) is False  # no device status yet
    device = {"driver": DRIVER, "pool": "p", "device": "d", "conditions": [{"type": "Ready", "status": "True"}]}
    assert claim_ready_for_binding(with_devices(device)) is True
    failed = {**device, "conditions": [{"type": "Failed", "status": "True", "reason": "R", "message": "m"}]}
    with pytest.raises(dynamicresources.DeviceBindingError, match='claim=c, reason=R, message="m"'):
        claim_ready_for_binding(with_devices(failed))


def test_pre_bind_waits_for_binding_conditions_then_times_out() -> None:
    """An allocated claim whose device has binding conditions: PreBind reserves it, then waits; a
    condition that never comes true fails the attempt after bindingTimeout (kube's error)."""
    from scheduler.testing.builders import make_handle, make_node, node_info

    handle = make_handle(node_info(make_node("n0")))
    client = handle.client
    assert isinstance(client, FakeApiClient)
    bound = claim("gpu")
    bound["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "n0",
                        "device": "gpu-0",
                        "bindingConditions": ["ready"],
                    }
                ]
            }
        }
    }
    handle.dra.upsert(RESOURCE_CLAIM, bound)
    client.resource_claims["default/gpu"] = copy.deepcopy(bound)
    plugin = dynamicresources.DynamicResources(parse_args({"bindingTimeout": "1s"}), handle)
    pod = pod_with_claims("p", "gpu").obj()
    state = CycleState()

    async def cycle() -> Any:
        assert plugin.pre_filter(state, pod, [])[1] is None
        assert plugin.reserve(state, pod, "n0") is None
        return await plugin.pre_bind(state, pod, "n0")

    status = asyncio.run(cycle())
    assert status is not None and status.code == Code.ERROR
    assert status.message == "device binding timeout: claim=gpu"  # allocationTimestamp + bindingTimeout passed
    assert [e["name"] for e in client.resource_claims["default/gpu"]["status"]["reservedFor"]] == ["p"]


def test_claim_write_errors_read_as_kubes_and_conflicts_are_retried() -> None:
    """PreBind's status write: a conflict is retried on a re-read claim; any other refusal is the
    pod's error in kube's words (what was written, then the apiserver's message)."""
    from scheduler.api.client import ApiError

    cluster = Cluster()
    cluster.add(DEVICE_CLASS, device_class())
    cluster.add(RESOURCE_SLICE, resource_slice("n1", 2))
    for name in ("a", "b"):
        with_finalizer = claim(name)
        with_finalizer["metadata"]["finalizers"] = [FINALIZER]
        cluster.add(RESOURCE_CLAIM, with_finalizer)
    cluster.client.claim_errors["default/a"] = ApiError(409, "the object has been modified", "Conflict")
    cluster.client.claim_errors["default/b"] = ApiError(
        422, 'ResourceClaim.resource.k8s.io "b" is invalid: status.allocation: Forbidden', "Invalid"
    )
    cluster.add_pod(pod_with_claims("p1", "a"))
    cluster.add_pod(pod_with_claims("p2", "b"))
    cluster.run()
    assert cluster.client.bindings == {"default/p1": "n1"}
    assert [verb for verb, key in cluster.client.claim_writes if key == "default/a"] == ["status", "status"]
    assert cluster.message("p2") == (
        'running PreBind plugin "DynamicResources": add allocation and reservation to claim default/b: '
        'ResourceClaim.resource.k8s.io "b" is invalid: status.allocation: Forbidden'
    )


def test_the_plugin_allocates_with_v1_37_2s_default_gates_not_the_allocators_test_defaults() -> None:
    from plugins.dynamicresources.allocation import allocator_features
    from scheduler.features import FeatureGates

    options = allocator_features(FeatureGates())
    assert options.fractional_capacity_range is False  # beta, off below min-compatibility 1.37
    assert options.consumable_capacity and options.partitionable_devices and options.device_taints


def _reference_claim_hint(cluster: Any, pod: Any, old: Any, new: Any) -> QueueingHint:
    """The hint without its cheap pre-check: resolve the pod's claims for every event."""
    from plugins.dynamicresources.claims import ClaimProblem, pod_resource_claims
    from scheduler.framework.dra import allocation_of, uid_of

    if new is None:
        return QueueingHint.SKIP if old is None or allocation_of(old) is None else QueueingHint.QUEUE
    try:
        claims = pod_resource_claims(pod, cluster.informers.dra.claims)
    except ClaimProblem:
        return QueueingHint.SKIP
    if old is not None and allocation_of(old) is not None and allocation_of(new) is None:
        return QueueingHint.QUEUE
    if not any(uid_of(c) == uid_of(new) for c in claims):
        return QueueingHint.SKIP
    if old is None:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP if (old.get("status") or {}) == (new.get("status") or {}) else QueueingHint.QUEUE


def test_claim_hint_pre_check_never_changes_the_answer() -> None:
    import random

    rng = random.Random(20261202)
    cluster = Cluster()
    plugin = dynamicresources.DynamicResources(parse_args({}), cluster.sched.frameworks[NAME].handle)
    (hint,) = [e.hint for e in plugin.events_to_register() if e.event.resource.value.endswith("ResourceClaim")]
    assert hint is not None
    names = ["a", "b", "c"]
    stored = []
    for name in names:
        for namespace in ("default", "other"):
            made = claim(name, namespace=namespace)
            made["metadata"]["uid"] = f"uid-{namespace}-{name}"
            cluster.add(RESOURCE_CLAIM, made)
            stored.append(made)
    allocated_status: dict[str, Any] = {"allocation": {"devices": {"results": []}}}
    outcomes: set[QueueingHint] = set()
    for i in range(400):
        builder = pod_with_claims(f"p{i}", *rng.sample(names, rng.randint(0, 2)))
        pod = builder.obj()
        if rng.random() < 0.5 and pod.spec.get("resourceClaims"):
            # A template entry, its claim named in the status (or not yet).
            entry = pod.spec["resourceClaims"][0]
            entry.pop("resourceClaimName")
            entry["resourceClaimTemplateName"] = "t"
            if rng.random() < 0.7:
                pod.raw.setdefault("status", {})["resourceClaimStatuses"] = [
                    {"name": entry["name"], "resourceClaimName": rng.choice(names)}
                ]
        base = copy.deepcopy(rng.choice(stored))
        statuses = (pod.raw.get("status") or {}).get("resourceClaimStatuses")
        if statuses and rng.random() < 0.6:
            # The template's claim, made for this pod: the only way such a pod's hint says Queue.
            base = claim(statuses[0]["resourceClaimName"])
            base["metadata"]["uid"] = f"uid-default-{statuses[0]['resourceClaimName']}"
            base["metadata"]["ownerReferences"] = [{"uid": pod.uid, "controller": True, "kind": "Pod"}]
            cluster.add(RESOURCE_CLAIM, copy.deepcopy(base))
        if rng.random() < 0.3:
            base["metadata"]["uid"] = "uid-replaced"
        old_status, new_status = rng.choice([({}, {}), ({}, allocated_status), (allocated_status, {})])
        old = None if rng.random() < 0.3 else {**base, "status": old_status}
        new = None if rng.random() < 0.1 else {**base, "status": new_status}
        want = _reference_claim_hint(cluster, pod, old, new)
        assert hint(pod, old, new) == want, (pod.spec, old, new)
        outcomes.add(want)
    assert outcomes == {QueueingHint.QUEUE, QueueingHint.SKIP}
