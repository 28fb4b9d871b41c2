"""The image test uses the cluster tests' node and client fixtures."""

from tests.cluster.conftest import core, nodes

__all__ = ["core", "nodes"]
