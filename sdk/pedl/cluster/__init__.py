"""Starting and stopping a local pedl cluster (checkpoint store, scheduler, agents) as OS processes."""

from pedl.cluster.launcher import ClusterError, UpOptions, down, up
from pedl.cluster.paths import ClusterPaths, pedl_home

__all__ = ["ClusterError", "ClusterPaths", "UpOptions", "down", "pedl_home", "up"]
