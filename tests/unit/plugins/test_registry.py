"""Every in-tree plugin is registered under its NAME and builds from empty args."""

from __future__ import annotations

import pytest

from plugins.registry import IN_TREE, in_tree_registry
from scheduler.testing.builders import make_handle

DEFAULT_PLUGINS = [
    "DynamicResources",
    "ImageLocality",
    "NodeAffinity",
    "NodeDeclaredFeatures",
    "NodeName",
    "NodePorts",
    "NodeResourcesBalancedAllocation",
    "NodeUnschedulable",
    "TaintToleration",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
    "NodeVolumeLimits",
]


@pytest.mark.parametrize("name", DEFAULT_PLUGINS)
def test_registered_and_buildable(name: str) -> None:
    registry = in_tree_registry()
    assert name in registry
    plugin = registry.create(name, {}, make_handle())
    assert plugin.name == name


def test_module_names_match_plugin_names() -> None:
    for module in IN_TREE:
        assert module.__name__.rsplit(".", 1)[-1] == module.NAME.lower()
