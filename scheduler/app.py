"""Wiring: config → registry → profiles → queue, cache, scheduler → informers → servers.

kopf runs the watches of namespaces and workloads (on.event handlers only: nothing is ever
written onto watched objects; event posting is off; no peering), of PodDisruptionBudgets
for preemption and of DeviceClasses and DeviceTaintRules for DRA; the pod, node, storage and
ResourceClaim/ResourceSlice streams, whose volume grows with the scheduling rate (pods, their
claims and PVs) and the cluster size (node heartbeats, CSINodes, slices), go through the
lean Reflector (scheduler.api.watch).
The scheduling loop, the queue's flush loops, the assumed-pod expiry and the metrics/health
server run beside them on the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import structlog
from aiohttp import web

from plugins import coscheduling
from plugins.registry import in_tree_registry
from scheduler import gctune, metrics, serving
from scheduler.api.client import ApiClient, ApiError
from scheduler.api.events import EVENT_WRITERS, EventBroadcaster
from scheduler.api.http import Connection, HttpApiClient, TokenBucket, load_connection
from scheduler.api.leaderelection import LeaseElector, run_as_leader
from scheduler.api.watch import Reflector
from scheduler.cache import Cache, Snapshot
from scheduler.config import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    ClientConnectionConfig,
    LeaderElectionConfig,
    SchedulerConfig,
    client_connection,
    default_config,
    load_config,
    validate_leader_election,
)
from scheduler.features import DEFAULT_FEATURE_GATES, GENERIC_WORKLOAD, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING, FeatureGates
from scheduler.framework.dra import DEVICE_CLASS, DEVICE_TAINT_RULE, RESOURCE_CLAIM, RESOURCE_SLICE
from scheduler.framework.podgroups import scheduling_group_key
from scheduler.framework.registry import Registry, load_entry_points
from scheduler.framework.runtime import Framework, FrameworkHandle, StaticNamespaces
from scheduler.framework.volumes import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
)
from scheduler.informers import Informers
from scheduler.profile import build_profiles
from scheduler.queue.scheduling_queue import PriorityQueue, QueueProfile
from scheduler.schedule_one import Scheduler

log = structlog.get_logger("app")


@dataclass
class Options:
    kubeconfig: str | None = None
    config: str | None = None
    scheduler_name: str = "secondary-scheduler"
    metrics_port: int = 10259
    metrics_address: str = "0.0.0.0"
    plain_http: bool = False
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    batch_window: float = 0.01
    assumed_pod_ttl: float = 900.0
    # Flags that were given (None: not given); they override the config file's leaderElection.
    leader_elect: bool | None = None
    lease_namespace: str | None = None
    lease_name: str | None = None
    lease_duration: float | None = None
    renew_deadline: float | None = None
    retry_period: float | None = None
    # kube-scheduler's deprecated --kube-api-* flags: used only without a config file.
    kube_api_qps: float | None = None
    kube_api_burst: int | None = None
    kube_api_content_type: str | None = None
    feature_gates: FeatureGates = DEFAULT_FEATURE_GATES


POD_GROUP_COLLECTION = "/apis/scheduling.k8s.io/v1beta1/podgroups"
# scheduler-plugins' PodGroup CRD, listed and watched when a profile runs Coscheduling.
SCHEDULER_PLUGINS_POD_GROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")

# Watched for PodTopologySpread's system default constraints (their selectors spread pods).
WORKLOAD_KINDS = (
    ("", "v1", "services", "Service"),
    ("", "v1", "replicationcontrollers", "ReplicationController"),
    ("apps", "v1", "replicasets", "ReplicaSet"),
    ("apps", "v1", "statefulsets", "StatefulSet"),
)

# The volume plugins' listers (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits).
VOLUME_KINDS = (
    ("storage.k8s.io", "v1", "storageclasses", STORAGE_CLASS),
    ("", "v1", "persistentvolumes", PERSISTENT_VOLUME),
    ("", "v1", "persistentvolumeclaims", PERSISTENT_VOLUME_CLAIM),
    ("storage.k8s.io", "v1", "csinodes", CSI_NODE),
    ("storage.k8s.io", "v1", "csidrivers", CSI_DRIVER),
    ("storage.k8s.io", "v1", "csistoragecapacities", CSI_STORAGE_CAPACITY),
    ("storage.k8s.io", "v1", "volumeattachments", VOLUME_ATTACHMENT),
)

# DynamicResources' listers. Claims (one or more per pod) and slices (several per node) grow with
# the scheduling rate and the cluster: the Reflector. Classes and taint rules are few: kopf.
DRA_REFLECTED_KINDS = (
    ("resource.k8s.io", "v1", "resourceclaims", RESOURCE_CLAIM),
    ("resource.k8s.io", "v1", "resourceslices", RESOURCE_SLICE),
)
DRA_KOPF_KINDS = (
    ("resource.k8s.io", "v1", "deviceclasses", DEVICE_CLASS),
    ("resource.k8s.io", "v1", "devicetaintrules", DEVICE_TAINT_RULE),
)


def collection_path(group: str, version: str, plural: str) -> str:
    """The API path of a built-in kind's collection (core group under /api)."""
    return f"/apis/{group}/{version}/{plural}" if group else f"/api/{version}/{plural}"


def full_registry() -> Registry:
    registry = in_tree_registry()
    registry.merge(load_entry_points())
    return registry


def load_scheduler_config(options: Options) -> SchedulerConfig:
    """The file (or the defaults) with the command line's feature gates, which no file carries."""
    if options.config:
        config = load_config(options.config, options.scheduler_name)
    else:
        config = default_config(options.scheduler_name)
    return dataclasses.replace(config, feature_gates=options.feature_gates)


def leader_election_config(options: Options, config: SchedulerConfig) -> LeaderElectionConfig:
    """The file's leaderElection with every given --leader-elect* flag applied, then validated."""
    file = config.leader_election
    given: dict[str, Any] = {
        "leader_elect": options.leader_elect,
        "resource_namespace": options.lease_namespace,
        "resource_name": options.lease_name,
        "lease_duration": options.lease_duration,
        "renew_deadline": options.renew_deadline,
        "retry_period": options.retry_period,
    }
    merged = dataclasses.replace(file, **{k: v for k, v in given.items() if v is not None})
    if not merged.resource_namespace:
        merged = dataclasses.replace(merged, resource_namespace=os.environ.get("POD_NAMESPACE", "kube-system"))
    validate_leader_election(merged)
    return merged


def client_connection_config(options: Options, config: SchedulerConfig) -> ClientConnectionConfig:
    """The file's clientConnection; without a file, the --kube-api-* flags (kube-scheduler's rule)."""
    flags = (options.kube_api_qps, options.kube_api_burst, options.kube_api_content_type)
    if options.config:
        if any(flag is not None for flag in flags):
            log.warning("--kube-api-qps/--kube-api-burst/--kube-api-content-type are ignored with --config")
        return config.client_connection
    qps, burst, content_type = flags
    return client_connection(
        "", qps if qps is not None else DEFAULT_QPS, burst or DEFAULT_BURST, content_type or "", "flags"
    )


def _cache_size(cache: Cache, kind: str) -> int:
    return cache.sizes()[kind]


def build_scheduler(
    config: SchedulerConfig,
    registry: Registry,
    client: ApiClient,
    namespaces: dict[str, Mapping[str, str]],
    assumed_pod_ttl: float = 900.0,
    event_client: ApiClient | None = None,
) -> Scheduler:
    """Everything but the watches: usable with the fake client in tests.

    Events go through `event_client` when given (kube-scheduler too has a client of its own for
    events), else through `client`.
    """
    cache = Cache(assumed_ttl=assumed_pod_ttl)
    # GenericWorkload: pods join PodGroups through spec.schedulingGroup, and the queue hands a
    # group to the pod-group cycle as one entity.
    generic_workload = config.feature_gates.enabled(GENERIC_WORKLOAD)
    if generic_workload:
        cache.pod_groups.add_membership(scheduling_group_key)
        metrics.register_pod_group_metrics(config.feature_gates.enabled(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING))
    handle = FrameworkHandle(
        client,
        Snapshot(),
        StaticNamespaces(namespaces),
        feature_gates=config.feature_gates,
        pod_groups=cache.pod_groups,
    )
    frameworks: dict[str, Framework] = build_profiles(config, registry, handle)
    queue = PriorityQueue(
        {
            name: QueueProfile(fw.less, fw.run_pre_enqueue, fw.events, fw.sign_pod if fw.batch is not None else None)
            for name, fw in frameworks.items()
        },
        initial_backoff=config.pod_initial_backoff_seconds,
        max_backoff=config.pod_max_backoff_seconds,
        group_of=scheduling_group_key if generic_workload else None,
    )
    for kind in ("nodes", "pods", "assumed_pods"):
        metrics.cache_size.labels(kind).set_function(functools.partial(_cache_size, cache, kind))
    metrics.unschedulable_pods.set_source(queue.unschedulable_pods_by_plugin)
    metrics.inflight_events.set_source(queue.in_flight_events)
    return Scheduler(frameworks, queue, cache, client, event_broadcaster=EventBroadcaster(event_client or client))


def runs_coscheduling(scheduler: Scheduler) -> bool:
    """Whether some profile enables Coscheduling (at any extension point)."""
    return any(
        coscheduling.NAME in names for fw in scheduler.frameworks.values() for names in fw.plugin_names().values()
    )


def _kopf_registry(
    informers: Informers, connection: Connection, gates: FeatureGates, dra_served: frozenset[str]
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        cfg = connection.configuration
        token = None
        auth = connection.auth_header()
        if auth and auth.lower().startswith("bearer "):
            token = auth.split(" ", 1)[1]
        return kopf.ConnectionInfo(
            server=connection.host,
            ca_path=cfg.ssl_ca_cert,
            insecure=not cfg.verify_ssl,
            scheme="Bearer" if token else None,
            token=token,
            certificate_path=cfg.cert_file,
            private_key_path=cfg.key_file,
        )

    # Handlers are coroutines on purpose: kopf runs plain functions in a thread pool, which would
    # race with the scheduling loop over the cache and queue (and costs a thread hop per event).
    @kopf.on.event("", "v1", "namespaces", registry=registry)
    async def namespace_event(event: Mapping[str, Any], **_: Any) -> None:
        informers.on_namespace(event.get("type"), event["object"])

    @kopf.on.event("policy", "v1", "poddisruptionbudgets", registry=registry)
    async def pdb_event(event: Mapping[str, Any], **_: Any) -> None:
        informers.on_pdb(event.get("type"), event["object"])

    if gates.enabled(GENERIC_WORKLOAD):
        # PodGroups are few (one per job): kopf, as the other low-volume kinds.
        @kopf.on.event("scheduling.k8s.io", "v1beta1", "podgroups", registry=registry)
        async def pod_group_event(event: Mapping[str, Any], **_: Any) -> None:
            informers.on_pod_group(event.get("type"), event["object"])

    if runs_coscheduling(informers.sched):

        @kopf.on.event(*SCHEDULER_PLUGINS_POD_GROUPS, registry=registry)
        async def scheduler_plugins_pod_group_event(event: Mapping[str, Any], **_: Any) -> None:
            informers.on_scheduler_plugins_pod_group(event.get("type"), event["object"])

    for group, version, plural, kind in WORKLOAD_KINDS:
        api_version = f"{group}/{version}" if group else version

        async def workload_event(
            event: Mapping[str, Any], _api_version: str = api_version, _kind: str = kind, **_: Any
        ) -> None:
            informers.on_workload(_api_version, _kind, event.get("type"), event["object"])

        kopf.on.event(group, version, plural, registry=registry, id=f"{plural}-event")(workload_event)

    for group, version, plural, kind in DRA_KOPF_KINDS:
        if plural not in dra_served:
            continue

        async def dra_event(event: Mapping[str, Any], _kind: str = kind, **_: Any) -> None:
            informers.on_dra_object(_kind, event.get("type"), event["object"])

        kopf.on.event(group, version, plural, registry=registry, id=f"{plural}-event")(dra_event)

    return registry


def _kopf_settings(batch_window: float) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.peering.standalone = True
    # No watch on CustomResourceDefinitions (kopf's resource scanning): every kind watched here is
    # built in, or scheduler-plugins' PodGroup CRD, which must be served at start (discovery finds it
    # once; _prime refuses to start without it), and the chart's RBAC grants no CRD reads
    # (tests/cluster/test_rbac.py).
    settings.scanning.disabled = True
    settings.batching.batch_window = batch_window
    settings.watching.server_timeout = 300
    return settings


# Shutdown waits this long for in-flight binding cycles and writes, then cancels them.
DRAIN_TIMEOUT_SECONDS = 5.0

# Terminal pods hold no resources: like kube-scheduler's informer, never see them (a pod that
# finishes arrives as DELETED).
POD_COLLECTION = "/api/v1/pods?fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed"


async def _served_dra_kinds(client: HttpApiClient) -> frozenset[str]:
    """The resource.k8s.io/v1 kinds this apiserver serves: an older one may lack some (DeviceTaintRule
    is GA only since 1.37) or the group, and the scheduler still runs without them."""
    try:
        found = await client.request("GET", "/apis/resource.k8s.io/v1")
    except ApiError as exc:
        if not exc.not_found:
            raise
        found = {}
    served = frozenset(str(r.get("name") or "") for r in found.get("resources") or ())
    missing = [plural for _, _, plural, _ in (*DRA_REFLECTED_KINDS, *DRA_KOPF_KINDS) if plural not in served]
    if missing:
        log.warning("resource.k8s.io/v1 kinds not served; DynamicResources sees none of them", kinds=missing)
    return served


def _volume_reflectors(client: HttpApiClient, informers: Informers, dra_served: frozenset[str]) -> list[Reflector]:
    """One lean list+watch per storage kind: with per-pod claims and PVs these streams grow with the
    scheduling rate like pods do (four events per pod in upstream's volume workloads)."""
    reflectors = []
    for group, version, plural, kind in VOLUME_KINDS:
        path = collection_path(group, version, plural)
        reflectors.append(Reflector(client, path, functools.partial(informers.on_volume_object, kind)))
    for group, version, plural, kind in DRA_REFLECTED_KINDS:
        if plural not in dra_served:
            continue
        path = collection_path(group, version, plural)
        reflectors.append(Reflector(client, path, functools.partial(informers.on_dra_object, kind)))
    return reflectors


async def _prime(
    client: HttpApiClient,
    informers: Informers,
    nodes: Reflector,
    pods: Reflector,
    volumes: list[Reflector],
    dra_served: frozenset[str] = frozenset(),
    generic_workload: bool = False,
) -> None:
    """List everything once before scheduling starts (kube's WaitForCacheSync)."""
    for item in (await client.request("GET", "/api/v1/namespaces"))["items"]:
        informers.on_namespace("ADDED", item)
    if generic_workload:
        try:
            listed = await client.request("GET", POD_GROUP_COLLECTION)
        except ApiError as exc:
            if not exc.not_found:
                raise
            raise ApiError(
                exc.status,
                "GenericWorkload is enabled but the apiserver does not serve scheduling.k8s.io/v1beta1 podgroups "
                "(start it with --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true)",
                exc.reason,
            ) from exc
        for item in listed["items"]:
            informers.on_pod_group("ADDED", item)
    if runs_coscheduling(informers.sched):
        try:
            listed = await client.request("GET", collection_path(*SCHEDULER_PLUGINS_POD_GROUPS))
        except ApiError as exc:
            if not exc.not_found:
                raise
            raise ApiError(
                exc.status,
                "a profile enables Coscheduling but the apiserver does not serve scheduling.x-k8s.io/v1alpha1 "
                "podgroups (install scheduler-plugins' PodGroup CRD: the chart's coscheduling.installCRD)",
                exc.reason,
            ) from exc
        for item in listed["items"]:
            informers.on_scheduler_plugins_pod_group("ADDED", item)
    for group, version, plural, kind in WORKLOAD_KINDS:
        api_version = f"{group}/{version}" if group else version
        for item in (await client.request("GET", collection_path(group, version, plural)))["items"]:
            informers.on_workload(api_version, kind, "ADDED", item)
    for item in (await client.request("GET", "/apis/policy/v1/poddisruptionbudgets"))["items"]:
        informers.on_pdb("ADDED", item)
    for group, version, plural, kind in DRA_KOPF_KINDS:
        if plural not in dra_served:
            continue
        for item in (await client.request("GET", collection_path(group, version, plural)))["items"]:
            informers.on_dra_object(kind, "ADDED", item)
    for reflector in volumes:
        await reflector.list()
    await nodes.list()
    # Scheduling starts only after this returns, so the order pods arrive in does not matter.
    await pods.list()


async def _serve(
    options: Options,
    connection: Connection | None,
    ready: asyncio.Event,
    stop: asyncio.Event,
    leading: list[asyncio.Task[Any]],
    leader_elect: bool,
) -> web.AppRunner:
    """kube-scheduler's endpoints: /livez (ping), /healthz and /readyz (plus the elector's watchdog
    and, for /readyz, shutdown and informer sync). A standby is ready: it only waits for the lease.

    Reviews of scrapers' tokens go through clients of their own (as kube-scheduler's delegating
    authentication and authorization): never through the scheduling client, whose rate limit binds
    wait for and whose write fence would refuse a standby's reviews. `connection` None: plain HTTP only.
    """

    def leader_election() -> str | None:
        return "leader election is not running" if any(task.done() for task in leading) else None

    def shutdown() -> str | None:
        return "process is shutting down" if stop.is_set() else None

    def handler_sync() -> str | None:
        return None if ready.is_set() else "handlers are not fully synchronized"

    ping: dict[str, serving.Check] = {"ping": lambda: None}
    election = {"leaderElection": leader_election} if leader_elect else {}
    auth = None
    if not options.plain_http and connection is not None:
        auth = serving.DelegatingAuth(serving.delegation_client(connection), serving.delegation_client(connection))
    return await serving.serve(
        serving.ServingOptions(
            address=options.metrics_address,
            port=options.metrics_port,
            plain_http=options.plain_http,
            cert_file=options.tls_cert_file,
            key_file=options.tls_key_file,
        ),
        auth,
        livez=ping,
        healthz={**ping, **election},
        readyz={**ping, **election, "shutdown": shutdown, "sched-handler-sync": handler_sync},
    )


async def _cleanup_assumed(scheduler: Scheduler) -> None:
    while True:
        await asyncio.sleep(1.0)
        for pod in scheduler.cache.cleanup_expired_assumed_pods():
            log.warning("assumed pod expired without confirmation", pod=pod.key, node=pod.node_name)


async def run(options: Options, stop: asyncio.Event | None = None) -> None:
    config = load_scheduler_config(options)
    leader_election = leader_election_config(options, config)
    connection_config = client_connection_config(options, config)
    registry = full_registry()
    # --kubeconfig wins over clientConnection.kubeconfig (kube-scheduler would ignore the flag with --config).
    connection = load_connection(options.kubeconfig or connection_config.kubeconfig or None)

    def rate_limiter() -> TokenBucket | None:
        return TokenBucket(connection_config.qps, connection_config.burst) if connection_config.qps > 0 else None

    # Binds get a pool and a limiter of their own inside it: evictions, deletions and status patches
    # never hold the connection or the token a bind waits for.
    client = HttpApiClient(connection, rate_limiter=rate_limiter(), bind_rate_limiter=rate_limiter())
    # Its own small pool and limiter (as kube-scheduler's event client): Events never take a
    # connection or a token a bind or status patch is waiting for.
    event_client = HttpApiClient(
        connection,
        max_connections=EVENT_WRITERS,
        rate_limiter=rate_limiter(),
    )
    # And one for the Lease (kube-scheduler's leader-election client): a renewal must never queue
    # behind binds for a token or a connection, or a busy leader misses its renew deadline.
    lease_client = HttpApiClient(connection, max_connections=2, rate_limiter=rate_limiter())
    namespaces: dict[str, Mapping[str, str]] = {}
    scheduler = build_scheduler(config, registry, client, namespaces, options.assumed_pod_ttl, event_client)
    informers = Informers(scheduler, namespaces)
    stop = stop or asyncio.Event()
    ready = asyncio.Event()
    leading_tasks: list[asyncio.Task[Any]] = []
    runner = await _serve(options, connection, ready, stop, leading_tasks, leader_election.leader_elect)
    log.info(
        "starting",
        profiles=[p.scheduler_name for p in config.profiles],
        server=connection.host,
        metrics_port=options.metrics_port,
        feature_gates=config.feature_gates.flag(),
    )
    for message, gate, value in config.feature_gates.warnings():
        log.warning(message, featureGate=gate, value=value)
    tasks: list[asyncio.Task[Any]] = []
    pods = Reflector(client, POD_COLLECTION, informers.on_pod)
    nodes = Reflector(client, "/api/v1/nodes", informers.on_node)
    try:
        dra_served = await _served_dra_kinds(client)
        volumes = _volume_reflectors(client, informers, dra_served)
        await _prime(
            client,
            informers,
            nodes,
            pods,
            volumes,
            dra_served,
            generic_workload=config.feature_gates.enabled(GENERIC_WORKLOAD),
        )
        gctune.freeze_startup_heap()
        tasks.append(asyncio.create_task(pods.run(listed=True), name="pod-watch"))
        tasks.append(asyncio.create_task(nodes.run(listed=True), name="node-watch"))
        for reflector in volumes:
            tasks.append(asyncio.create_task(reflector.run(listed=True), name=f"watch {reflector.path}"))
        tasks.append(
            asyncio.create_task(
                kopf.operator(
                    registry=_kopf_registry(informers, connection, config.feature_gates, dra_served),
                    settings=_kopf_settings(options.batch_window),
                    clusterwide=True,
                    standalone=True,
                    stop_flag=stop,
                ),
                name="kopf",
            )
        )
        ready.set()
        if leader_election.leader_elect:
            elector = LeaseElector(
                lease_client,
                leader_election.resource_namespace,
                leader_election.resource_name,
                identity=f"{socket.gethostname()}_{uuid.uuid4()}",
                lease_duration=leader_election.lease_duration,
                renew_deadline=leader_election.renew_deadline,
                retry_period=leader_election.retry_period,
            )
            # A deposed leader writes nothing: the fence refuses every write, and binding cycles still
            # in flight drop their pod before Bind (scheduler.may_write), the moment the renew deadline passes.
            client.write_fence = elector.leading
            event_client.write_fence = elector.leading
            scheduler.may_write = elector.leading
            leading = run_as_leader(elector, stop, scheduler.run)
        else:
            leading = scheduler.run()
        tasks.append(asyncio.create_task(leading, name="schedule-loop"))
        leading_tasks.append(tasks[-1])
        tasks.append(asyncio.create_task(scheduler.queue.run_flush_loops(), name="queue-flush"))
        tasks.append(asyncio.create_task(_cleanup_assumed(scheduler), name="assumed-expiry"))
        tasks.append(asyncio.create_task(scheduler.event_broadcaster.run(), name="event-series"))
        tasks.append(asyncio.create_task(metrics.recorder.run(), name="metrics-flush"))
        waiter = asyncio.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            error = None if task is waiter else task.exception()
            if error is not None:
                raise error
    finally:
        stop.set()
        scheduler.queue.close()
        # kopf stops on the stop flag; the schedule loop too, and it must: cancelled, a leader would
        # not release its Lease and the standby would wait out a whole lease duration.
        for task in tasks:
            if task.get_name() not in ("kopf", "schedule-loop"):
                task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=10)
        scheduler.event_broadcaster.close()
        await scheduler.drain(grace=DRAIN_TIMEOUT_SECONDS)
        await client.close()
        await event_client.close()
        await lease_client.close()
        await runner.cleanup()
        logging.getLogger("app").info("stopped")
