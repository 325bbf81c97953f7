"""Reading the topology file: from a path, from text, or from ``MIRROR_TOPOLOGY``.

Every way this can go wrong (no variable, no file, not YAML, not a mapping, a
key repeated in one mapping, any model rule) ends in a single
:class:`~mirrorflow.errors.TopologyError` naming the file and the key, so an
Airflow import error or a CLI message tells the user what to fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mirrorflow.errors import TopologyError
from mirrorflow.topology.model import Topology

#: The environment variable holding the topology file's path (contract).
TOPOLOGY_ENV = "MIRROR_TOPOLOGY"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping.

    Plain PyYAML keeps the last value silently, so a cluster defined twice would
    quietly lose its first definition.
    """


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # unhashable key: let the default constructor report it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_topology(text: str, source: str = "<string>") -> Topology:
    """Validate topology YAML text; ``source`` names it in error messages."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise TopologyError(source, f"not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        raise TopologyError(source, "the file is empty; it needs clusters, tree and topics")
    if not isinstance(data, Mapping):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__} value"
        raise TopologyError(source, f"the top level must be a mapping with keys clusters, tree and topics, got {kind}")
    return Topology.parse(data, source=source)


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read and validate the topology file at ``path``."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(str(file), "file not found") from None
    except IsADirectoryError:
        raise TopologyError(str(file), "is a directory, not a topology file") from None
    except PermissionError:
        raise TopologyError(str(file), "cannot read the file: permission denied") from None
    except UnicodeDecodeError as exc:
        raise TopologyError(str(file), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise TopologyError(str(file), f"cannot read the file: {exc.strerror or exc}") from None
    return parse_topology(text, source=str(file))


def load_topology_from_env(var: str = TOPOLOGY_ENV, environ: Mapping[str, str] | None = None) -> Topology:
    """Load the topology file named by ``$MIRROR_TOPOLOGY`` (or ``var``)."""
    env = os.environ if environ is None else environ
    path = (env.get(var) or "").strip()
    if not path:
        raise TopologyError(var, "environment variable is not set; set it to the path of the topology "
                                 "YAML file (for example topologies/demo.yaml)")
    if ":" in path or Path(path).expanduser().is_dir():
        raise TopologyError(var, f"{path!r} names several topologies, and this reads one: "
                                 "mirrorflow.topology.load_trees_from_env reads every tree")
    return load_topology(path)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem
