"""The in-tree registry: every plugin shipped in this package."""

from __future__ import annotations

from plugins import (
    coscheduling,
    defaultbinder,
    defaultpreemption,
    dynamicresources,
    gangscheduling,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesourcesbalancedallocation,
    noderesourcesfit,
    nodeunschedulable,
    nodevolumelimits,
    podgrouppodscount,
    podtopologyspread,
    prioritysort,
    schedulinggates,
    tainttoleration,
    topologyplacementgenerator,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from scheduler.framework.registry import Registry

IN_TREE = (
    prioritysort,
    schedulinggates,
    noderesourcesfit,
    defaultbinder,
    nodeunschedulable,
    nodename,
    tainttoleration,
    nodeaffinity,
    nodeports,
    noderesourcesbalancedallocation,
    imagelocality,
    podtopologyspread,
    interpodaffinity,
    nodedeclaredfeatures,
    dynamicresources,
    defaultpreemption,
    volumebinding,
    volumerestrictions,
    volumezone,
    nodevolumelimits,
    gangscheduling,
    topologyplacementgenerator,
    podgrouppodscount,
    coscheduling,
)


def in_tree_registry() -> Registry:
    registry = Registry()
    for module in IN_TREE:
        registry.register_module(module)
    return registry
