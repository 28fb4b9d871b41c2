"""The scheduler cache (nodes, assigned and assumed pods) and the snapshot taken from it."""

from scheduler.cache.cache import Cache, CacheError
from scheduler.cache.snapshot import PlacementNodes, Snapshot

__all__ = ["Cache", "CacheError", "PlacementNodes", "Snapshot"]
