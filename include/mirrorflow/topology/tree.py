"""The distribution tree: its rules, its distributors, and edits to it.

Leaves are clusters; inner nodes carry a *level*. For every inner node of level
L and every pair of its children (A, B), each cluster in A runs a level-L
*distributor* that copies fresh-at-level-L messages into B, to any one leaf of B
(the *target*; operators may switch it to any other leaf of B). In a binary
tree that is one distributor per level above the cluster; an n-ary node gives a
cluster one distributor per sibling subtree.

Default targets spread the load: the i-th leaf (document order) of a
distributor's own child subtree targets the (i mod n)-th of the n leaves of the
sibling subtree. With ``{level: 3, children: [{level: 1, children: [c1, c2]},
{level: 1, children: [c3, c4]}]}`` that gives c1->c3, c2->c4, c3->c1, c4->c2 at
level 3, and c1->c2, c2->c1, c3->c4, c4->c3 at level 1.

Link ids name a distributor independently of its current target (switching
targets keeps the id, so checkpoints keyed by it survive): ``<source>.L<level>``
when the node is binary, ``<source>.L<level>.<first leaf of the sibling
subtree>`` when it has more than two children. They contain only characters
valid in Airflow task ids and Kafka ``transactional.id``\\s.

Functions here accept inner nodes as ``TreeNode`` models or as plain mappings
(``{"level": .., "children": [..]}``); leaves are strings.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Distributor:
    """One level-L distributor on one cluster: copies messages into one sibling subtree."""

    source: str
    level: int
    #: Leaves of the sibling subtree, document order: every one is a valid target.
    sibling_leaves: tuple[str, ...]
    #: Where this distributor copies to unless an operator switched it.
    default_target: str
    #: The other leaves of the sibling subtree (valid targets to switch to).
    alternatives: tuple[str, ...]
    #: Stable, unique id (see module docstring): ``c1.L3`` or ``c1.L3.c5`` for n-ary nodes.
    link_id: str
    #: Key path of the inner node this level belongs to, e.g. ``tree.children[0]``.
    node_path: str = field(default="tree", compare=False)
    #: Key path of the sibling subtree, e.g. ``tree.children[1]``.
    sibling_path: str = field(default="", compare=False)

    @property
    def bit(self) -> int:
        """The copy-flags bit this level owns (``1 << (level - 1)``)."""
        return 1 << (self.level - 1)

    @property
    def mask(self) -> int:
        """Bits a message must not carry for this distributor to copy it (``(1 << level) - 1``)."""
        return (1 << self.level) - 1

    def accepts(self, target: str) -> bool:
        """Whether ``target`` is a valid target (any leaf of the sibling subtree)."""
        return target in self.sibling_leaves

    def with_target(self, target: str) -> Distributor:
        """This distributor switched to ``target``; same link id.

        Raises ``ValueError`` for a leaf outside the subtree.
        """
        if not self.accepts(target):
            raise ValueError(
                f"{self.link_id}: {target!r} is not in the level-{self.level} sibling subtree of {self.source} "
                f"(valid targets: {', '.join(self.sibling_leaves)})"
            )
        return replace(self, default_target=target,
                       alternatives=tuple(t for t in self.sibling_leaves if t != target))

    def __str__(self) -> str:
        return f"{self.link_id}: {self.source} -> {self.default_target} (level {self.level})"


# --------------------------------------------------------------------------- walking


def is_leaf(node: Any) -> bool:
    return isinstance(node, str)


def _level(node: Any) -> Any:
    return node["level"] if isinstance(node, Mapping) else node.level


def _children(node: Any) -> list[Any]:
    return list(node["children"] if isinstance(node, Mapping) else node.children)


def iter_leaves(node: Any) -> Iterator[str]:
    """Cluster names below ``node`` in document order."""
    if is_leaf(node):
        yield node
        return
    for child in _children(node):
        yield from iter_leaves(child)


def iter_nodes(node: Any, path: str = "tree") -> Iterator[tuple[str, Any]]:
    """``(key path, inner node)`` for ``node`` and every inner node below it, pre-order."""
    if is_leaf(node):
        return
    yield path, node
    for j, child in enumerate(_children(node)):
        yield from iter_nodes(child, f"{path}.children[{j}]")


# --------------------------------------------------------------------------- rules


def check_tree(tree: Any, clusters: Mapping[str, Any] | set[str], level_min: int = 1,
               level_max: int = 63) -> list[tuple[str, str]]:
    """Every rule of the tree that spans keys, as ``(key path, problem)`` pairs (empty = valid).

    - each leaf is a cluster defined under ``clusters``, and appears once;
    - every defined cluster is a leaf;
    - every inner node has at least two children;
    - levels are within ``level_min..level_max`` and each is larger than every
      level below it (so along any root-to-leaf path levels strictly decrease,
      which is what makes the copy-flags masks work).
    """
    problems: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    known = list(clusters)

    def visit(node: Any, path: str) -> tuple[int, str] | None:
        """Returns the largest level in this subtree and where it is (None for a leaf)."""
        if is_leaf(node):
            if node not in clusters:
                problems.append((path, f"unknown cluster {node!r}: not defined under clusters "
                                       f"(defined: {', '.join(known) or 'none'})"))
            elif node in seen:
                problems.append((path, f"cluster {node!r} is in the tree twice (also at {seen[node]})"))
            else:
                seen[node] = path
            return None
        level = _level(node)
        children = _children(node)
        if not level_min <= level <= level_max:
            problems.append((f"{path}.level", f"level {level} is out of range: levels are integers "
                                              f"{level_min}..{level_max} (level L owns bit L-1 of the "
                                              "copy flags, a signed 64-bit value)"))
        if len(children) < 2:
            problems.append((f"{path}.children", f"an inner node needs at least 2 children, got {len(children)}"))
        below: tuple[int, str] | None = None
        for j, child in enumerate(children):
            found = visit(child, f"{path}.children[{j}]")
            if found is not None and (below is None or found[0] > below[0]):
                below = found
        if below is not None and level <= below[0]:
            problems.append((f"{path}.level", f"level {level} must be larger than every level below it, "
                                              f"but {below[1]}.level is {below[0]}"))
            return below
        return level, path

    visit(tree, "tree")
    for name in clusters:
        if name not in seen:
            problems.append((f"clusters.{name}", "cluster is not in the tree: every cluster must be a "
                                                 "leaf of tree (add it there, or remove it from clusters)"))
    return problems


# --------------------------------------------------------------------------- distributors


def build_distributors(tree: Any) -> dict[str, tuple[Distributor, ...]]:
    """Every cluster's distributors, ordered by level then sibling position.

    Does not validate: call :func:`check_tree` first (the property tests also
    feed it deliberately broken trees to show the checks matter).
    """
    found: dict[str, list[Distributor]] = {leaf: [] for leaf in iter_leaves(tree)}
    for path, node in iter_nodes(tree):
        level = _level(node)
        children = _children(node)
        groups = [tuple(iter_leaves(child)) for child in children]
        nary = len(children) > 2
        for j, own in enumerate(groups):
            for m, siblings in enumerate(groups):
                if m == j or not siblings:
                    continue
                for i, source in enumerate(own):
                    target = siblings[i % len(siblings)]
                    link_id = f"{source}.L{level}.{siblings[0]}" if nary else f"{source}.L{level}"
                    found[source].append(Distributor(
                        source=source,
                        level=level,
                        sibling_leaves=siblings,
                        default_target=target,
                        alternatives=tuple(t for t in siblings if t != target),
                        link_id=link_id,
                        node_path=path,
                        sibling_path=f"{path}.children[{m}]",
                    ))
    # pre-order walk lists a leaf's levels root first; present them ascending
    return {leaf: tuple(sorted(ds, key=lambda d: d.level)) for leaf, ds in found.items()}


# --------------------------------------------------------------------------- edits (plain data)


def add_leaf(tree: Mapping[str, Any], name: str, *, sibling_of: str, level: int) -> dict[str, Any]:
    """A copy of ``tree`` (plain data) with leaf ``name`` placed next to leaf ``sibling_of``.

    If the parent of ``sibling_of`` already has ``level``, ``name`` becomes one
    more child of it (an n-ary node). Otherwise ``sibling_of`` is replaced by a
    new inner node ``{level, children: [sibling_of, name]}``; the level must then
    be below the parent's (the caller validates the result).
    """
    new = copy.deepcopy(dict(tree))

    def visit(node: dict[str, Any]) -> bool:
        children = node["children"]
        for j, child in enumerate(children):
            if child == sibling_of:
                if node["level"] == level:
                    children.insert(j + 1, name)
                else:
                    children[j] = {"level": level, "children": [sibling_of, name]}
                return True
            if not is_leaf(child) and visit(child):
                return True
        return False

    if not visit(new):
        raise ValueError(f"{sibling_of!r} is not a leaf of the tree")
    return new


def remove_leaf(tree: Mapping[str, Any], name: str) -> dict[str, Any] | str:
    """A copy of ``tree`` (plain data) without leaf ``name``; a node left with one child is replaced by it."""
    new = copy.deepcopy(dict(tree))

    def visit(node: dict[str, Any]) -> bool:
        children = node["children"]
        for j, child in enumerate(children):
            if child == name:
                del children[j]
                return True
            if not is_leaf(child) and visit(child):
                if len(child["children"]) == 1:
                    children[j] = child["children"][0]
                return True
        return False

    if not visit(new):
        raise ValueError(f"{name!r} is not a leaf of the tree")
    if len(new["children"]) == 1:
        return new["children"][0]
    return new
