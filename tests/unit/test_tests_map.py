"""tests/README.md's map from each code module to its tests stays true, and no test module imports another.

The map (section "Where a module's tests are") has one table row per code module:
its path, then the test files that test it (or "covered by ..." naming the tests
that exercise it). A module added, moved or removed, or a test file added or
renamed, fails here naming the row to add or change. Pure: reads files only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "tests" / "README.md"
CODE_ROOTS = ("include/mirrorflow", "plugins/mirrorflow_airflow", "spark_jobs", "dags", "mirrorflow_dev")
TEST_KINDS = ("unit", "integration", "dags", "e2e")
MAP = "## Where a module's tests are"
OTHERS = "## Other things the tests test"

ROW = re.compile(r"^\| `(?P<subject>[^`]+)` \|(?P<cell>.*)\|\s*$")
PATH = re.compile(r"`([A-Za-z0-9_./-]+(?:\.py|\.md|/))`")


def _docstring_only(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def code_modules() -> set[str]:
    """Every code module the map must name: .py files under CODE_ROOTS, less docstring-only ``__init__.py``."""
    found = set()
    for root in CODE_ROOTS:
        for path in (REPO / root).rglob("*.py"):
            if "__pycache__" in path.parts or (path.name == "__init__.py" and _docstring_only(path)):
                continue
            found.add(path.relative_to(REPO).as_posix())
    return found


def files_of_tests() -> set[str]:
    return {p.relative_to(REPO).as_posix() for kind in TEST_KINDS for p in (REPO / "tests" / kind).glob("test_*.py")}


def rows(section: str) -> list[tuple[int, str, str]]:
    """``(line number, subject, tests cell)`` of the table rows of ``section`` in tests/README.md."""
    out, inside = [], False
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            inside = line.strip() == section
        elif inside and (m := ROW.match(line)):
            out.append((number, m["subject"], m["cell"]))
    return out


def test_the_readme_has_the_map_and_its_rows_read():
    assert len(rows(MAP)) > 100, f"tests/README.md: no section {MAP!r} with a table row per module"
    assert rows(OTHERS), f"tests/README.md: no section {OTHERS!r}"


def test_every_code_module_is_in_the_map():
    mapped = {subject for _, subject, _ in rows(MAP)}
    missing = sorted(code_modules() - mapped)
    assert not missing, "code modules missing from the map in tests/README.md (section \"Where a module's tests " \
        "are\"): add a row `| `<module>` | `tests/<kind>/test_<...>.py`, ... |` (or \"covered by ...\") for:\n" + \
        "\n".join(f"  {m}" for m in missing)


def test_every_module_of_the_map_is_a_code_module_named_once():
    modules = code_modules()
    seen: dict[str, int] = {}
    problems = []
    for number, subject, _ in rows(MAP):
        if subject in seen:
            problems.append(f"tests/README.md:{number}: {subject} has a row already (line {seen[subject]})")
        seen[subject] = number
        if not (REPO / subject).exists():
            problems.append(f"tests/README.md:{number}: {subject} does not exist (moved or removed? change the row)")
        elif subject not in modules:
            problems.append(f"tests/README.md:{number}: {subject} is no code module of {', '.join(CODE_ROOTS)}")
    assert not problems, "\n".join(problems)


def test_every_path_the_map_names_exists():
    stale = []
    for number, subject, cell in rows(MAP) + rows(OTHERS):
        if not (REPO / subject).exists():
            stale.append(f"tests/README.md:{number}: {subject} does not exist")
        named = PATH.findall(cell)
        if not named:
            stale.append(f"tests/README.md:{number}: the row of {subject} names no test file")
        stale += [f"tests/README.md:{number}: the row of {subject} names {path}, which does not exist "
                  f"(renamed or moved? change the row)" for path in named if not (REPO / path).exists()]
    assert not stale, "\n".join(stale)


def test_every_test_file_is_in_the_map():
    named = {path for _, _, cell in rows(MAP) + rows(OTHERS) for path in PATH.findall(cell)}
    unnamed = sorted(files_of_tests() - named)
    assert not unnamed, "test files tests/README.md does not name: add each to the rows of the modules it tests:\n" + \
        "\n".join(f"  {t}" for t in unnamed)


def test_no_test_module_imports_another_test_module():
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                is_test_module = name.rsplit(".", 1)[-1].startswith("test_") \
                    and (REPO / (name.replace(".", "/") + ".py")).is_file()
                if name.startswith("tests.") and is_test_module:
                    found.append(f"{rel}:{node.lineno} imports {name}")
    assert not found, "a test module imports another test module; move what it needs into a helper module " \
        "(or a fixture into tests/fixtures/, see tests/README.md):\n" + "\n".join(f"  {f}" for f in found)
