"""The scheduling framework: statuses, cycle state, node info, extension points, runtime, registry.

Knows framework and model types only. Never talks to the API server and never touches the
queue; plugins see the cluster only through the handle's listers over the snapshot.
"""
