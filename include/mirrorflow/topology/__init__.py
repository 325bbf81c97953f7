"""The topology: which clusters exist, how they form the distribution tree, which topics to mirror.

Contract (docs/architecture.md, "Contracts"; reference in docs/topology.md)::

    from mirrorflow.topology import Topology, load_topology, load_topology_from_env

    topology = load_topology_from_env()          # $MIRROR_TOPOLOGY
    topology.levels                              # [1, 3]
    topology.distributors("c1")                  # what runs on c1
    topology.links(3)                            # every level-3 distributor
    topology.selects("orders")                   # is this topic mirrored?

Which links a level copies and where they point once the operator's switches
and the replication windows apply: :func:`effective_links`, :func:`split_by_window`
(:mod:`mirrorflow.topology.routes`). Whether a live cluster's names changed since the
level runs recorded them: :func:`renamed_live` (:mod:`mirrorflow.topology.names`).
Several trees in one Airflow (``MIRROR_TOPOLOGY`` naming several files), each with
its namespace, and what two of them may not share: :func:`load_trees_from_env`,
:func:`check_trees` (:mod:`mirrorflow.topology.trees`).
"""

from mirrorflow.copyflags import LEVEL_MAX, LEVEL_MIN
from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX, is_internal_topic
from mirrorflow.topology.load import TOPOLOGY_ENV, load_topology, load_topology_from_env, parse_topology
from mirrorflow.topology.model import ClusterConfig, Topology, TreeNode
from mirrorflow.topology.names import renamed_live
from mirrorflow.topology.routes import ClosedLink, effective_links, split_by_window
from mirrorflow.topology.tree import Distributor
from mirrorflow.topology.trees import check_trees, in_tree, load_trees, load_trees_from_env, topology_paths, tree_of

__all__ = [
    "INTERNAL_TOPIC_PREFIX",
    "LEVEL_MAX",
    "LEVEL_MIN",
    "TOPOLOGY_ENV",
    "ClosedLink",
    "ClusterConfig",
    "Distributor",
    "Topology",
    "TreeNode",
    "check_trees",
    "effective_links",
    "in_tree",
    "is_internal_topic",
    "load_topology",
    "load_topology_from_env",
    "load_trees",
    "load_trees_from_env",
    "parse_topology",
    "renamed_live",
    "split_by_window",
    "topology_paths",
    "tree_of",
]
