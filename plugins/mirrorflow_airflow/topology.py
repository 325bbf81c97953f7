"""The topologies as DAG files see them: the files at ``MIRROR_TOPOLOGY`` plus the operators' cluster changes.

A broken file makes the DAG file fail to import, so the error (which names the
key) shows up in the Airflow UI's import errors before anything is copied.
Clusters added by ``mirror_onboard_cluster`` and removed by
``mirror_decommission_cluster`` are applied on top (Airflow Variable
``mirrorflow_topology_changes``, one per tree), so every DAG sees them from its
next parse. ``MIRROR_TOPOLOGY`` may name several trees
(:mod:`mirrorflow.topology.trees`); each DAG file then builds every tree's DAGs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mirrorflow.errors import TopologyError
from mirrorflow.topology import TOPOLOGY_ENV, Topology, check_trees, load_trees_from_env
from mirrorflow.topology.changes import apply_changes

if TYPE_CHECKING:
    from airflow.sdk import DAG


def current_trees() -> list[Topology]:
    """Every tree of ``MIRROR_TOPOLOGY``, each with its own stored cluster changes applied.

    Checked against each other again with those changes: a cluster onboarded into one
    tree may be one the other tree has.
    """
    from mirrorflow_airflow.state import cluster_changes

    trees = [apply_changes(tree, cluster_changes(tree.namespace)) for tree in load_trees_from_env()]
    if len(trees) > 1:
        check_trees({f"{t.name} (namespace {t.namespace!r}, with its onboarded clusters)": t for t in trees})
    return trees


def current_topology(changes: list[dict] | None = None, ns: str = "") -> Topology:
    """The effective topology of the tree with namespace ``ns`` (``""``: the only tree).

    ``changes`` overrides the stored cluster changes (tests, dry runs).
    """
    trees = {tree.namespace: tree for tree in load_trees_from_env()}
    if ns not in trees:
        known = ", ".join(repr(t) for t in sorted(trees))
        raise TopologyError(TOPOLOGY_ENV, f"no tree with namespace {ns!r} among the topologies it names (namespaces: "
                                          f"{known}); with several trees, name the tree (tree=...)")
    if changes is None:
        from mirrorflow_airflow.state import cluster_changes

        changes = cluster_changes(ns)
    return apply_changes(trees[ns], changes)


def every_tree(build: Callable[[Topology], DAG | Mapping[str, DAG]]) -> dict[str, DAG]:
    """What a DAG file puts in its globals: ``build``'s DAG (or DAGs) of every tree, by DAG id."""
    dags: dict[str, DAG] = {}
    for tree in current_trees():
        built = build(tree)
        dags.update(built if isinstance(built, Mapping) else {built.dag_id: built})
    return dags
