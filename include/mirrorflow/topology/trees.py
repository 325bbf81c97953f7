"""Several trees in one Airflow: which topology files are loaded, and what two trees may not share.

``MIRROR_TOPOLOGY`` names one topology file, as it always did, or several
(separated by ``:``, or a directory of ``*.yaml`` files). A tree is told apart by
its ``namespace`` (topology key; default ``""``): its DAG ids, pools, Variables
and assets in Airflow start with ``<namespace>.`` (:func:`in_tree`) and its own
topics, groups and transactional ids on clusters with ``_mirrorflow.<namespace>.``
(:func:`mirrorflow.internal_names.in_namespace`). The tree without one keeps every
name it had: a deployment that adds a second tree renames nothing of its first,
whose checkpoints and Variables are on real clusters and in Airflow. So the
namespace is a key, never implied by how many files are loaded.

Two trees may share a cluster (the same ``conn_id``, or a bootstrap address in
common). Refused when the files load, naming both trees and keys, because
something would otherwise be shared by accident:

- two trees with one namespace (at most one tree keeps the plain names);
- on a shared cluster, topic names that can meet, so one tree would copy the
  other's topics: formats whose fixed prefixes agree as far as both go, and so
  do their suffixes (the identity, no renaming, meets everything), unless one
  tree selects only plain names and none of them, as it stores them there, is
  a name of the other tree;
- the same for group formats when both trees carry consumer groups
  (``offsets.groups`` not empty), so both would commit a group's positions;
- both trees syncing schemas with a shared cluster: a registry keeps one set of
  ids, and two primaries would give one id two schemas.

Airflow's side of a tree is named by :func:`in_tree`. A tree with a namespace
archives under ``<archive prefix>/<namespace>`` (the Airflow plugin's archive
location), so two trees with one bucket never read each other's archive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from itertools import combinations
from pathlib import Path

from mirrorflow.errors import TopologyError
from mirrorflow.naming import NameFormat
from mirrorflow.topology.audit import plain_name
from mirrorflow.topology.load import TOPOLOGY_ENV, load_topology
from mirrorflow.topology.model import ClusterConfig, Topology


def topology_paths(value: str) -> list[Path]:
    """The files ``MIRROR_TOPOLOGY``'s value names: ``:``-separated paths, a directory meaning its ``*.yaml``."""
    paths: list[Path] = []
    for part in (p.strip() for p in value.split(":")):
        if not part:
            continue
        path = Path(part).expanduser()
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise TopologyError(str(path), "a directory with no *.yaml topology file in it")
            paths += found
        else:
            paths.append(path)
    return paths


def load_trees(paths: Iterable[str | os.PathLike[str]]) -> list[Topology]:
    """Every topology of ``paths``, checked against each other (:func:`check_trees`)."""
    files = [Path(p) for p in paths]
    trees = [load_topology(p) for p in files]
    if len(trees) > 1:
        check_trees(dict(zip([str(f) for f in files], trees, strict=True)))
    return trees


def load_trees_from_env(var: str = TOPOLOGY_ENV, environ: Mapping[str, str] | None = None) -> list[Topology]:
    """The trees ``$MIRROR_TOPOLOGY`` names (one file, several, or a directory)."""
    env = os.environ if environ is None else environ
    value = (env.get(var) or "").strip()
    if not value:
        raise TopologyError(var, "environment variable is not set; set it to the path of the topology "
                                 "YAML file (for example topologies/demo.yaml), or to several (a:b, or a directory)")
    return load_trees(topology_paths(value))


def check_trees(trees: Mapping[str, Topology]) -> None:
    """Raise :class:`TopologyError` naming every way two of ``trees`` (file -> topology) would meet."""
    problems: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for file, tree in trees.items():
        if tree.namespace in seen:
            problems.append((f"{file}: namespace", f"{tree.namespace!r} is also the namespace of "
                             f"{seen[tree.namespace]}; each tree of one Airflow needs one of its own (it starts the "
                             "tree's DAG ids, Variables and own names on clusters), and at most one may have none"))
        seen.setdefault(tree.namespace, file)
    for (file_a, a), (file_b, b) in combinations(trees.items(), 2):
        shared = shared_clusters(a, b)
        for ca, cb in shared:
            where = f"{a.name}'s {ca} and {b.name}'s {cb} ({file_a}, {file_b})"
            if topics_meet(a, ca, b, cb):
                problems.append((f"{file_b}: clusters.{cb}.names", f"{where} are one cluster, and their topic names "
                                 f"can meet ({_shown(a.topic_naming(ca))} and {_shown(b.topic_naming(cb))}): one tree "
                                 "would copy the other's topics; give each tree a prefix of its own there"))
            if a.offsets.groups and b.offsets.groups and meet(a.group_naming(ca), b.group_naming(cb)):
                problems.append((f"{file_b}: clusters.{cb}.names", f"{where} are one cluster, and their consumer "
                                 f"group names can meet ({_shown(a.group_naming(ca))} and "
                                 f"{_shown(b.group_naming(cb))}): both trees would commit one group's positions; "
                                 "give each tree a group_prefix there, or carry no groups in one (offsets.groups: [])"))
        if shared and a.schemas.enabled and b.schemas.enabled:
            ca, cb = shared[0]
            problems.append((f"{file_b}: schemas.primary", f"{a.name}'s {ca} and {b.name}'s {cb} ({file_a}, {file_b}) "
                             "are one cluster, and both trees sync schemas: one registry keeps one set of ids, and "
                             "two primaries would give an id two schemas; sync schemas in one of them"))
    if problems:
        raise TopologyError(problems)


def shared_clusters(a: Topology, b: Topology) -> list[tuple[str, str]]:
    """(name in ``a``, name in ``b``) of every cluster both trees reach: one ``conn_id``, or a bootstrap in common."""
    return [(ca, cb) for ca, x in a.clusters.items() for cb, y in b.clusters.items() if _same(x, y)]


def topics_meet(a: Topology, ca: str, b: Topology, cb: str) -> bool:
    """Whether a topic of cluster ``ca`` of ``a`` can be one of cluster ``cb`` of ``b`` (the same cluster).

    When the formats can meet (:func:`meet`) and one tree selects only plain names, the
    names it stores there are known: they meet the other tree only when one of them is
    in the other's format and selected by it. Regular expressions on both sides: refused.
    """
    if not meet(a.topic_naming(ca), b.topic_naming(cb)):
        return False
    for x, cx, y, cy in ((a, ca, b, cb), (b, cb, a, ca)):
        names = [plain_name(p) for p in x.topics]
        if all(n is not None for n in names):
            stored = [x.topic_naming(cx).render(n) for n in names if n is not None]
            return any((logical := y.topic_naming(cy).parse(n)) is not None and y.selects(logical) for n in stored)
    return True


def meet(x: NameFormat, y: NameFormat) -> bool:
    """Whether some name is in both formats: their fixed prefixes agree as far as both go, and so do the suffixes."""
    prefixes = x.prefix.startswith(y.prefix) or y.prefix.startswith(x.prefix)
    suffixes = x.suffix.endswith(y.suffix) or y.suffix.endswith(x.suffix)
    return prefixes and suffixes


def _same(x: ClusterConfig, y: ClusterConfig) -> bool:
    if x.conn_id or y.conn_id:
        return x.conn_id == y.conn_id
    return bool(_addresses(x.bootstrap) & _addresses(y.bootstrap))


def _addresses(bootstrap: str | None) -> set[str]:
    return {a.strip().lower().removeprefix("plaintext://") for a in (bootstrap or "").split(",") if a.strip()}


def _shown(naming: NameFormat) -> str:
    return "no renaming" if naming.is_identity else repr(f"{naming.prefix}<name>{naming.suffix}")


# --------------------------------------------------------------------------- names in Airflow

#: What separates a tree's name from the single-tree name of a DAG id, pool, Variable or asset.
SEPARATOR = "."


def in_tree(ns: str, name: str) -> str:
    """``name`` (a DAG id, pool, Variable or asset name) as the tree with namespace ``ns`` has it in Airflow.

    The only tree (``ns == ""``) keeps every name: they are contracts. One of several
    prefixes its name: ``prod.mirror_level_1``, Variable ``prod.mirrorflow_link_targets``.
    """
    return f"{ns}{SEPARATOR}{name}" if ns else name


def tree_of(name: str, base: str) -> str | None:
    """The namespace of ``name`` when it is ``base`` of some tree (``""``: the only tree), else ``None``."""
    if name == base:
        return ""
    head, sep, tail = name.rpartition(SEPARATOR)
    return head if sep and tail == base else None
