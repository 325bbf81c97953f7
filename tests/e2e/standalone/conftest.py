"""One ``airflow standalone`` for every test of this package (``stack.py`` says why and how they share it).

The fixtures of ``tests/fixtures/standalone.py`` are module-scoped; here they are
overridden package-scoped, so the standalone is started once (by the first test
that asks for it), made ready once, and stopped after the package's last test.
If it cannot start, every test of the package errors naming it: none is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.standalone.stack import FAILOVER_DAG, LEVEL_DAGS, USER_DAG, USER_DAG_FILE, Stack
from tests.fixtures.spark import connect_connection
from tests.fixtures.standalone import REPO, Standalone, launched


@pytest.fixture(scope="package")
def stack(kafka_clusters, tmp_path_factory) -> Stack:
    """The shared topology (the session clusters c1..c4) and each test's topic."""
    return Stack.write(tmp_path_factory.mktemp("e2e-standalone"),
                       {name: kafka_clusters[name].bootstrap for name in kafka_clusters})


@pytest.fixture(scope="package")
def standalone_topology(stack) -> Path:
    """Both trees: ``MIRROR_TOPOLOGY`` is ``first:second`` (the standalone passes it on as it is)."""
    return Path(stack.trees)


@pytest.fixture(scope="package")
def standalone_dags_folder(tmp_path_factory, stack) -> Path:
    """This repo's DAG files, and a user's DAG on the audit's proven asset of c4."""
    dags = tmp_path_factory.mktemp("e2e-standalone-dags")
    for path in (REPO / "dags").glob("*.py"):
        (dags / path.name).write_text(path.read_text())
    (dags / f"{USER_DAG}.py").write_text(USER_DAG_FILE.format(topic=stack.topics.assets, dag_id=USER_DAG))
    return dags


@pytest.fixture(scope="package")
def standalone_env(spark_connect_server) -> dict[str, str]:
    """``spark_default`` on the session's Spark Connect server (a warm Spark, as the demo has) for the level runs.

    The DAG files are parsed at start and then every ten minutes, not every 30 s: the
    parses were the stack's largest cost in CPU. Airflow starts an ``on_data`` level's
    asset watcher only at a parse of its file while the DAG is unpaused (docs/levels.md),
    so :func:`stack.unpaused` asks for a parse of the files it unpauses and pauses.
    """
    return {"AIRFLOW_CONN_SPARK_DEFAULT": connect_connection(spark_connect_server),
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600"}


@pytest.fixture(scope="package")
def standalone_dag_ids() -> tuple[str, ...]:
    return (FAILOVER_DAG, "mirror_audit", *LEVEL_DAGS)


@pytest.fixture(scope="package")
def standalone_launched(tmp_path_factory, standalone_topology, standalone_dags_folder,
                        standalone_env) -> Iterator[Standalone]:
    """Launched once for the package; a test asks for it first so that it boots while the test prepares its data."""
    yield from launched(tmp_path_factory, standalone_topology, standalone_dags_folder, standalone_env)


@pytest.fixture(scope="package")
def airflow_standalone(standalone_launched, standalone_dag_ids) -> Standalone:
    return standalone_launched.wait_ready(standalone_dag_ids)
