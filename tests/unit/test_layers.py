"""The structure of docs/architecture.md, held against the code's own imports.

Read from the source with ``ast`` (every import: module level, inside functions,
under ``TYPE_CHECKING``), so a lazy import cannot hide a wrong direction:

- the core (``include/mirrorflow``) never imports Airflow, the Airflow glue or the
  development package, and importing all of it loads none of them;
- the core's layers point one way (the table ``LAYERS`` below, the same as the
  architecture document's);
- the copy room's sub-rooms point one way too (``COPY_ROOMS``), and everything
  outside ``mirrorflow.copy`` and ``mirrorflow.actions`` imports them through their
  faces (``COPY_FACES``, ``mirrorflow.actions``) only;
- everything outside ``mirrorflow.kafka`` and ``mirrorflow.cluster_sync`` imports
  them through their faces only (``ROOM_FACES``), the one room the other too;
- no import cycle among the modules of ``include/`` and ``plugins/``;
- no module imports another module's private (underscore) name;
- in the plugin, only the DAG factories import the DAG factories, and its rooms
  point one way too (``PLUGIN_ROOMS``, the same as the architecture document's
  section on the Airflow glue): no step imports another step, and operators,
  sensors and notifiers import no step.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"mirrorflow": REPO / "include", "mirrorflow_airflow": REPO / "plugins"}

#: Layer of each part of the core, lowest first. A module may import its own part and any part of a
#: lower layer; parts of one layer never import each other (the base layer's single modules excepted:
#: they are leaves that may lean on each other, such as ``journal`` on ``secrets``).
LAYERS: list[set[str]] = [
    {"errors", "secrets", "internal_names", "copyflags", "naming", "defaults", "work", "provenance", "journal",
     "cache_root", "progress", "assets", "declined", "faces", "formats", ""},
    {"kafka"},
    # what mirrorflow changes on a cluster's topics, configs and ACLs; the topology validates its settings with its
    # pure rules (ownership, acl_plan)
    {"cluster_sync"},
    # spark: how jobs reach Spark and the Spark-job contract, whose specs build cluster clients (kafka.config)
    {"topology", "spark"},
    {"archive", "schemas"},
    {"copy"},
    {"offsets", "lag", "actions", "completeness", "lineage"},
    {"onboard", "alerts", "status"},
    {"needed_acls"},  # the ACLs mirrorflow's own principal needs
    {"acls"},  # the operators' command that prints them: python -m mirrorflow.acls, forwarded to needed_acls
]
FORBIDDEN_IN_CORE = ("airflow", "mirrorflow_airflow", "mirrorflow_dev")

#: The rooms of ``mirrorflow.copy``, lowest first: a module of one imports its own room and lower ones, never a
#: higher one. Names are the first part under ``copy``: a sub-package, or a module at copy's root (the shared
#: vocabulary below everything, the driver above everything). The face ``mirrorflow.copy`` hands names on and
#: sits above them all.
COPY_ROOMS: list[set[str]] = [
    {"task", "txn_groups", "headers"},  # the vocabulary every room shares
    {"state"},  # what a target holds and where a link stands
    {"heal"},  # a retention gap healed from the archive
    {"engine"},  # what runs a copy, on Spark executors or in this process
    {"spec", "plan", "job"},  # the driver
]
#: What modules outside ``mirrorflow.copy`` may import of it (``mirrorflow.actions``: only its own face).
COPY_FACES = {"mirrorflow.copy", "mirrorflow.copy.state", "mirrorflow.copy.heal", "mirrorflow.copy.engine"}
#: Rooms that modules outside them import through their face only (``mirrorflow.kafka``, not ``mirrorflow.kafka.admin``).
ROOM_FACES = ("mirrorflow.kafka", "mirrorflow.cluster_sync")
#: Outside the core and the plugin: the Spark entry points and the DAG files import faces only too.
ENTRY_POINTS = [*sorted((REPO / "spark_jobs").glob("*.py")), *sorted((REPO / "dags").glob("*.py"))]


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (resolved; a name imported from a package resolves to its submodule)
    name: str | None  # the name taken with ``from target import name``
    line: int


def _modules() -> dict[str, Path]:
    out = {}
    for top, base in ROOTS.items():
        for path in sorted((base / top).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield Import(module, sub, None, node.lineno)
                else:
                    yield Import(module, target, alias.name, node.lineno)


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _part(module: str) -> str:
    """``mirrorflow.copy.engine.partition`` -> ``copy``; ``mirrorflow.journal`` -> ``journal``; root -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(part: str) -> int:
    for i, parts in enumerate(LAYERS):
        if part in parts:
            return i
    raise AssertionError(f"mirrorflow.{part} is in no layer of tests/unit/test_layers.py (and docs/architecture.md): "
                         f"add it to the one it belongs to")


def test_the_core_never_imports_airflow_the_plugin_or_the_development_package():
    wrong = [f"{i.module}:{i.line} imports {i.target}" for i in IMPORTS
             if i.module.split(".")[0] == "mirrorflow" and i.target.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not wrong, "\n".join(wrong)


def test_importing_the_whole_core_loads_none_of_them():
    names = [m for m in MODULES if m.split(".")[0] == "mirrorflow"]
    code = ("import importlib, json, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(FORBIDDEN_IN_CORE)!r})))\n")
    env_path = f"{REPO / 'include'}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/",
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _against_the_layers(top: str, rank: Callable[[str], int], word: str) -> list[str]:
    """Imports inside ``top`` from a part to a higher part, or to another part of the same rank (rank 0 excepted)."""
    wrong = []
    for i in IMPORTS:
        if i.module.split(".")[0] != top or i.target.split(".")[0] != top:
            continue
        mine, theirs = _part(i.module), _part(i.target)
        if mine == theirs:
            continue
        if rank(theirs) > rank(mine) or (rank(theirs) == rank(mine) and rank(mine) != 0):
            wrong.append(f"{i.module}:{i.line} imports {i.target} ({word} {rank(mine)} -> {rank(theirs)})")
    return wrong


def test_the_core_layers_point_one_way():
    wrong = _against_the_layers("mirrorflow", _layer, "layer")
    assert not wrong, "\n".join(wrong)


def _copy_room(module: str) -> int:
    """``mirrorflow.copy.state.held`` -> 1 (its place in ``COPY_ROOMS``); the face ``mirrorflow.copy`` -> above all."""
    parts = module.split(".")
    if len(parts) == 2:
        return len(COPY_ROOMS)
    for i, names in enumerate(COPY_ROOMS):
        if parts[2] in names:
            return i
    raise AssertionError(f"{module} is in no room of COPY_ROOMS in tests/unit/test_layers.py (and "
                         f"docs/architecture.md): add it to the one it belongs to")


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_copy_rooms_point_one_way():
    wrong = []
    for i in IMPORTS:
        if not (_in("mirrorflow.copy", i.module) and _in("mirrorflow.copy", i.target)) or i.module == "mirrorflow.copy":
            continue
        if _copy_room(i.target) > _copy_room(i.module):
            wrong.append(f"{i.module}:{i.line} imports {i.target} (room {_copy_room(i.module)} -> "
                         f"{_copy_room(i.target)})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _in("mirrorflow.copy", m)))
def test_every_copy_module_has_a_room(module):
    _copy_room(module)


def _entry_point_imports() -> Iterator[Import]:
    for path in ENTRY_POINTS:
        yield from _imports(f"{path.parent.name}.{path.stem}", path)


def test_outside_copy_and_actions_only_their_faces_are_imported():
    wrong = []
    for i in [*IMPORTS, *_entry_point_imports()]:
        if _in("mirrorflow.copy", i.target) and not _in("mirrorflow.copy", i.module) and i.target not in COPY_FACES:
            wrong.append(f"{i.module}:{i.line} imports {i.target}: import from one of {sorted(COPY_FACES)}")
        if (_in("mirrorflow.actions", i.target) and not _in("mirrorflow.actions", i.module)
                and i.target != "mirrorflow.actions"):
            wrong.append(f"{i.module}:{i.line} imports {i.target}: import from mirrorflow.actions")
    assert not wrong, "\n".join(wrong)


def test_outside_kafka_and_cluster_sync_only_their_faces_are_imported():
    wrong = [f"{i.module}:{i.line} imports {i.target}: import from {face}"
             for i in [*IMPORTS, *_entry_point_imports()] for face in ROOM_FACES
             if _in(face, i.target) and not _in(face, i.module) and i.target != face]
    assert not wrong, "\n".join(wrong)


def test_the_kafka_and_cluster_sync_faces_hand_on_every_name_and_load_no_client_until_asked():
    code = ("import importlib, json, sys\n"
            f"faces = [importlib.import_module(f) for f in {ROOM_FACES!r}]\n"
            "light = sorted({m.split('.')[0] for m in sys.modules} & {'confluent_kafka', 'pyspark', 'airflow'})\n"
            "missing = [f'{f.__name__}.{n}' for f in faces for n in f.__all__ if getattr(f, n, None) is None]\n"
            "print(json.dumps([light, missing]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/",
                         env={"PYTHONPATH": f"{REPO / 'include'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], []]


def test_the_face_rule_sees_a_submodule_import():
    imp = Import("mirrorflow.onboard.backfill", "mirrorflow.copy.engine.executor", None, 1)
    assert _in("mirrorflow.copy", imp.target) and imp.target not in COPY_FACES
    assert not _in("mirrorflow.copy", "mirrorflow.copyflags")
    held, engine, face = (_copy_room(f"mirrorflow.copy{m}") for m in (".state.held", ".engine", ""))
    assert held < engine < face


#: What modules outside ``mirrorflow.archive`` may import of it: its face, which loads boto3 and pyarrow on first use.
ARCHIVE_FACE = "mirrorflow.archive"


def test_outside_the_archive_only_its_face_is_imported():
    wrong = [f"{i.module}:{i.line} imports {i.target}: import from {ARCHIVE_FACE}"
             for i in [*IMPORTS, *_entry_point_imports()]
             if _in(ARCHIVE_FACE, i.target) and not _in(ARCHIVE_FACE, i.module) and i.target != ARCHIVE_FACE]
    assert not wrong, "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _module_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        target = i.target
        # ``import a.b.c`` also imports ``a`` and ``a.b``; a package's face does not make a cycle of its own
        if target in MODULES and target != i.module and not MODULES[target].name == "__init__.py":
            edges[i.module].add(target)
    return edges


def test_no_import_cycles_in_include_and_plugins():
    cycles = _cycles(_module_edges())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_a_private_name_of_another():
    wrong = [f"{i.module}:{i.line} imports {i.name} from {i.target}" for i in IMPORTS
             if i.name and i.name.startswith("_") and not i.name.startswith("__")
             and i.target.split(".")[0] in ROOTS and i.target != i.module]
    assert not wrong, "\n".join(wrong)


def test_only_the_dag_factories_import_the_dag_factories():
    wrong = [f"{i.module}:{i.line} imports {i.target}" for i in IMPORTS
             if i.target.startswith("mirrorflow_airflow.factories") and not i.module.startswith(
                 "mirrorflow_airflow.factories") and i.module != "mirrorflow_airflow"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] == "mirrorflow"))
def test_every_core_module_has_a_layer(module):
    _layer(_part(module))


#: Rooms of the Airflow glue (``mirrorflow_airflow``), lowest first, ruled like the core's layers: a module
#: imports its own room and lower rooms; rooms of one layer never import each other (the package-wide modules
#: at the root excepted: they are leaves, such as ``topology`` on ``state``). So: factories wire DAGs from steps,
#: operators, sensors and notifiers; those four are what tasks run, and what two of them share lives lower, in a
#: hook or at the root; triggers (the waits sensors defer to) read clusters through hooks; hooks turn Airflow
#: connections into what the core takes.
PLUGIN_ROOMS: list[set[str]] = [
    {"", "state", "topology", "names", "spark", "assets", "lineage"},
    {"hooks"},
    {"triggers"},
    {"steps", "operators", "sensors", "notifiers"},
    {"factories", "ui"},
]


def _room(part: str) -> int:
    for i, parts in enumerate(PLUGIN_ROOMS):
        if part in parts:
            return i
    raise AssertionError(f"mirrorflow_airflow.{part} is in no room of tests/unit/test_layers.py (and "
                         f"docs/architecture.md): add it to the one it belongs to (the root only if every room "
                         f"may use it)")


def test_the_plugin_rooms_point_one_way():
    wrong = _against_the_layers("mirrorflow_airflow", _room, "room")
    assert not wrong, "\n".join(wrong)


def test_no_step_imports_another_step():
    """A step is what one DAG's tasks do; what two DAGs' steps share lives in a hook or at the root."""
    wrong = [f"{i.module}:{i.line} imports {i.target}" for i in IMPORTS
             if _in("mirrorflow_airflow.steps", i.module) and _in("mirrorflow_airflow.steps", i.target)
             and i.target not in (i.module, "mirrorflow_airflow.steps")]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] == "mirrorflow_airflow"))
def test_every_plugin_module_has_a_room(module):
    _room(_part(module))
