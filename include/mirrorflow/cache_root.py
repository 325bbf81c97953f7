"""Where this machine keeps what mirrorflow builds or fetches: the Spark driver's class archive, and jars.

The core needs it at run time (the Airflow plugin looks for the driver's class
archive there, :mod:`mirrorflow.spark.driver`); the development tooling
(``mirrorflow_dev``, outside this package) puts its fetched jars and servers
there too, so both agree on one place.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Overrides the cache directory (e.g. one shared by several checkouts).
CACHE_DIR_ENV = "MIRRORFLOW_CACHE_DIR"


def default_cache_root() -> Path:
    """``$MIRRORFLOW_CACHE_DIR``, else ``<repo>/.cache`` of this checkout, else ``~/.cache/mirrorflow``.

    The repo's ``.cache/`` is gitignored and shared by every worktree user of one checkout;
    outside a checkout (an installed wheel) fall back to ``~/.cache/mirrorflow``.
    """
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "include" / "mirrorflow").is_dir():
            return parent / ".cache"
    return Path.home() / ".cache" / "mirrorflow"
