"""Plugin registry: name -> factory. In-tree plugins plus an entry-point group for out-of-tree ones.

Out-of-tree plugins are installed packages exposing an entry point in the
`secondary_scheduler.plugins` group whose value is a module (with NAME and new()) or a
factory callable; no rebuild of the scheduler is needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from scheduler.framework.interface import Handle, Plugin, PluginFactory

ENTRY_POINT_GROUP = "secondary_scheduler.plugins"


class RegistryError(Exception):
    pass


class Registry(Mapping[str, PluginFactory]):
    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = {}
        for name, factory in (factories or {}).items():
            self.register(name, factory)

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise RegistryError(f"a plugin named {name!r} is already registered")
        self._factories[name] = factory

    def register_module(self, module: ModuleType) -> None:
        """A plugin module exposes NAME and new(args, handle)."""
        self.register(module.NAME, module.new)

    def merge(self, other: Mapping[str, PluginFactory]) -> None:
        for name, factory in other.items():
            self.register(name, factory)

    def __getitem__(self, name: str) -> PluginFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def create(self, name: str, args: Mapping[str, Any], handle: Handle) -> Plugin:
        factory = self._factories.get(name)
        if factory is None:
            known = ", ".join(sorted(self._factories))
            raise RegistryError(f"unknown plugin {name!r}; known plugins: {known}")
        plugin = factory(args, handle)
        if getattr(plugin, "name", None) != name:
            raise RegistryError(f"plugin factory for {name!r} built a plugin named {getattr(plugin, 'name', None)!r}")
        return plugin


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> Registry:
    """Out-of-tree plugins from installed distributions."""
    registry = Registry()
    for ep in entry_points(group=group):
        try:
            target = ep.load()
        except Exception as exc:
            raise RegistryError(f"loading plugin entry point {ep.name!r} ({ep.value}): {exc}") from exc
        if isinstance(target, ModuleType):
            if getattr(target, "NAME", None) != ep.name:
                raise RegistryError(
                    f"plugin entry point {ep.name!r} ({ep.value}) has NAME {getattr(target, 'NAME', None)!r}"
                )
            registry.register_module(target)
        elif callable(target):
            registry.register(ep.name, target)
        else:
            raise RegistryError(f"plugin entry point {ep.name!r} ({ep.value}) is neither a module nor a factory")
    return registry
