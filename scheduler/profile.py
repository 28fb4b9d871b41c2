"""Build one Framework per configured profile from the registry (kube-scheduler's profile.NewMap)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from scheduler.config import (
    ConfigError,
    PluginRef,
    PluginSet,
    ProfileConfig,
    SchedulerConfig,
    default_multi_point,
    merge_plugin_set,
)
from scheduler.features import GENERIC_WORKLOAD
from scheduler.framework.interface import PlacementFeasiblePlugin, Plugin
from scheduler.framework.registry import Registry, RegistryError
from scheduler.framework.runtime import EXTENSION_POINTS, POINT_METHODS, Framework, FrameworkError, FrameworkHandle
from scheduler.framework.types import ActionType, ClusterEvent, ClusterEventWithHint, EventResource

REJECTING_POINTS = ("preEnqueue", "preFilter", "filter", "reserve", "permit")
ALL_EVENTS = ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))


def _implements(plugin: Plugin, point: str) -> bool:
    return callable(getattr(plugin, POINT_METHODS[point], None))


# The order kube's framework fills its extension points in (so the first duplicate it meets is ours too).
KUBE_POINT_ORDER = (
    "preFilter",
    "filter",
    "postFilter",
    "reserve",
    "preScore",
    "score",
    "preBind",
    "bind",
    "postBind",
    "permit",
    "preEnqueue",
    "queueSort",
    "podGroupPostFilter",
)


def _first_repeat(refs: Sequence[PluginRef]) -> tuple[int, str] | None:
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        if ref.name in seen:
            return i, ref.name
        seen.add(ref.name)
    return None


def _refuse_duplicates(where: str, profile: ProfileConfig, instances: Mapping[str, Plugin]) -> None:
    """A plugin enabled twice at one point is refused with kube's message ("already registered as")."""
    multi = _first_repeat(profile.plugins.get("multiPoint", PluginSet()).enabled)
    for point in KUBE_POINT_ORDER:
        repeat, field = _first_repeat(profile.plugins.get(point, PluginSet()).enabled), point
        if repeat is None and multi is not None and _implements(instances[multi[1]], point):
            repeat, field = multi, "multiPoint"
        if repeat is not None:
            i, name = repeat
            kind = f"{point[0].upper()}{point[1:]}Plugin"
            raise ConfigError(
                f'{where}.plugins.{field}.enabled[{i}].name: plugin "{name}" already registered as "{kind}"'
            )


def build_framework(
    index: int, profile: ProfileConfig, registry: Registry, handle: FrameworkHandle, default_pct: int | None
) -> Framework:
    where = f"profiles[{index}]"
    for name in profile.plugin_args:
        if name not in registry:
            raise ConfigError(
                f"{where}.pluginConfig[{name}]: unknown plugin {name!r}; known plugins: {', '.join(sorted(registry))}"
            )
    instances: dict[str, Plugin] = {}

    def instance(name: str, path: str) -> Plugin:
        if name not in registry:
            raise ConfigError(f"{path}: unknown plugin {name!r}; known plugins: {', '.join(sorted(registry))}")
        if name not in instances:
            try:
                instances[name] = registry.create(name, profile.plugin_args.get(name, {}), handle)
            except RegistryError as exc:
                raise ConfigError(f"{path}: {exc}") from exc
            except (ValueError, TypeError, KeyError) as exc:
                raise ConfigError(f"{where}.pluginConfig[{name}].args: {exc}") from exc
        return instances[name]

    gates = handle.feature_gates
    defaults = [PluginRef(name, weight) for name, weight in default_multi_point(gates) if name in registry]
    custom_multi = profile.plugins.get("multiPoint", PluginSet())
    multi = merge_plugin_set(defaults, custom_multi)
    custom_index = {ref.name: i for i, ref in enumerate(custom_multi.enabled)}
    weights: dict[str, int] = {}
    for ref in multi:
        path = (
            f"{where}.plugins.multiPoint.enabled[{custom_index[ref.name]}].name"
            if ref.name in custom_index
            else f"{where}.plugins.multiPoint"
        )
        instance(ref.name, path)
        if ref.weight:
            weights[ref.name] = ref.weight

    per_point: dict[str, list[Plugin]] = {}
    for point in EXTENSION_POINTS:
        pset = profile.plugins.get(point, PluginSet())
        disabled = set(pset.disabled)
        explicit_names = {ref.name for ref in pset.enabled}
        multi_here = [ref.name for ref in multi if _implements(instances[ref.name], point)]
        for i, ref in enumerate(pset.enabled):
            plugin = instance(ref.name, f"{where}.plugins.{point}.enabled[{i}].name")
            if not _implements(plugin, point):
                raise ConfigError(
                    f"{where}.plugins.{point}.enabled[{i}].name: plugin {ref.name!r} does not extend {point}"
                )
            if point == "score" and ref.weight:
                weights[ref.name] = ref.weight
        ordered = [ref.name for ref in pset.enabled if ref.name in multi_here]
        if "*" not in disabled:
            ordered += [n for n in multi_here if n not in explicit_names and n not in disabled]
        ordered += [ref.name for ref in pset.enabled if ref.name not in multi_here]
        per_point[point] = [instances[n] for n in ordered]

    _refuse_duplicates(where, profile, instances)

    # As kube: only plugins that can reject a pod register events; one that registers none hears them all.
    events: dict[str, list[ClusterEventWithHint]] = {}
    for name, plugin in instances.items():
        if not any(_implements(plugin, point) for point in REJECTING_POINTS):
            continue
        register = getattr(plugin, "events_to_register", None)
        events[name] = list(register()) if callable(register) else [ALL_EVENTS]
    # As kube: with GenericWorkload, GangScheduling (when the profile has it) is the PlacementFeasible plugin.
    gang = instances.get("GangScheduling")
    placement_feasible = (
        [cast(PlacementFeasiblePlugin, gang)]
        if gates.enabled(GENERIC_WORKLOAD) and gang is not None and callable(getattr(gang, "placement_feasible", None))
        else []
    )
    pct = profile.percentage_of_nodes_to_score
    try:
        return Framework(
            profile.scheduler_name,
            per_point,
            weights,
            handle,
            percentage_of_nodes_to_score=pct if pct is not None else default_pct,
            events=events,
            placement_feasible=placement_feasible,
        )
    except FrameworkError as exc:
        raise ConfigError(f"{where}.plugins: {exc}") from exc


def build_profiles(config: SchedulerConfig, registry: Registry, handle: FrameworkHandle) -> dict[str, Framework]:
    frameworks: dict[str, Framework] = {}
    for i, profile in enumerate(config.profiles):
        frameworks[profile.scheduler_name] = build_framework(
            i, profile, registry, handle, config.percentage_of_nodes_to_score
        )
    sorters = {type(f.queue_sort) for f in frameworks.values()}
    if len(sorters) > 1:
        raise ConfigError("profiles: queueSort plugins must be the same for all profiles (they share one queue)")
    return frameworks
