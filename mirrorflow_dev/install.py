"""docs/install.md's steps, as its two checks run them: the built wheel in a fresh venv, and a user's environment.

``tests/dags/test_installed_wheel.py`` (``airflow dags test``) and
``scripts/install_check.py`` (a plain ``airflow standalone``) both install the
wheel this one way and run Airflow in an environment that holds only what the
guide tells a user to set, and both take the guide's own code blocks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "install.md"
#: The tested constraints of each supported Airflow (docs/install.md, section 1).
CONSTRAINTS = {"3.3.0": REPO / "constraints-airflow-3.3.0.txt", "3.3.2": REPO / "constraints.txt"}
#: Where scripts/bootstrap.sh keeps the pyspark wheel it builds (pyspark has no wheel on PyPI): one
#: path for every checkout on the machine, so uv unpacks it once.
PYSPARK_WHEELS = Path(os.environ.get("MIRRORFLOW_WHEELS")
                      or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mirrorflow" / "wheels")
#: Printed by a ``python -c`` in the environment: the plugins Airflow loaded and its plugin import errors.
PLUGINS_PROBE = ("import json; from airflow import plugins_manager as pm; p, e = pm._get_plugins(); "
                 "print(json.dumps({'names': [x.name for x in p], 'errors': e}))")


def guide_blocks(language: str) -> list[str]:
    """The guide's fenced blocks in ``language``, in order: the checks run what a user copies."""
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900, cwd: Path = Path("/")) -> str:
    """``cmd``'s output, or an error with its tail; run outside the checkout, so nothing of it is on a path."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}")
    return done.stdout + done.stderr


def install_wheel(root: Path, airflow: str) -> Path:
    """Section 1: the wheel built from this checkout, with its ``airflow`` extra at ``airflow``'s constraints, in a
    fresh venv under ``root``, the full pyspark put back last; the venv's bin/."""
    uv = Path(sys.executable).parent / "uv"  # scripts/bootstrap.sh installs uv into .venv
    constraints = CONSTRAINTS[airflow]
    run([str(uv), "build", "--wheel", "-o", str(root / "dist"), str(REPO)], timeout=300)
    [wheel] = (root / "dist").glob("mirrorflow-*.whl")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    # pyspark is published as a source distribution only, and uv builds it again on every install into a
    # new cache entry of gigabytes (a CI machine's disk filled up that way); bootstrap's `pip wheel` of it
    # is used instead (made here if it is missing), so nothing is built and the cache stays the same size.
    pyspark = next(line for line in constraints.read_text().splitlines() if line.startswith("pyspark=="))
    if not list(PYSPARK_WHEELS.glob(f"pyspark-{pyspark.split('==')[1]}-*.whl")):
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(PYSPARK_WHEELS), pyspark])
    wheels = ["--find-links", str(PYSPARK_WHEELS)]
    run([str(uv), "pip", "install", "--quiet", "--python", python, *wheels, f"{wheel}[airflow]",
         "-c", str(constraints)])
    run([str(uv), "pip", "install", "--quiet", "--python", python, *wheels, "--no-deps", "--reinstall", pyspark])
    return venv / "bin"


def user_env(bin_dir: Path, home: Path, dags: Path, topology: Path, **extra: str) -> dict[str, str]:
    """What the guide tells a user to set, on a clean environment (nothing of this checkout), plus ``extra``;
    ``spark_default`` is a spark-submit on ``local[2]`` in that venv's Python."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "USER")}
    return {**keep,
            "PATH": f"{bin_dir}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "150",
            "MIRROR_TOPOLOGY": str(topology),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PYSPARK_PYTHON": str(bin_dir / "python"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **extra}


def pool_commands() -> list[str]:
    """Section 4's ``airflow pools set`` lines."""
    return [line for block in guide_blocks("bash") for line in block.splitlines()
            if line.startswith("airflow pools set")]


#: The first release (CHANGELOG.md): named by its commit, which a fresh clone holds.
FIRST_RELEASE = "dda5c22"


def release_tree(dest: Path, commit: str, *paths: str) -> Path:
    """``paths`` of the repository as they were at ``commit``, extracted under ``dest`` (from git's history)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *paths], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest
