"""In-tree scheduling plugins. Each module exposes NAME and new(args, handle).

Plugins import framework and model types only: never the API client directly, never the
queue, never the cache.
"""
