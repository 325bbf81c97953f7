"""What one more Airflow task costs a DAG run under ``dag.test()``: chains of 1, 2 and 6 empty tasks.

Asked before cutting a level run's plan into tasks of their own (docs/architecture.md,
"The rooms of copy/"): ``dag.test()`` runs each task in this process, so the figure
is Airflow's own bookkeeping per task (task instance, state, XCom), without the task
process's start that the scheduler adds (about 1.3 s a task: docs/benchmarks.md).

    .venv/bin/python -m benchmarks.task_cost --runs 8

A throwaway ``AIRFLOW_HOME`` (SQLite) is made and migrated first, which takes a while.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

CHAINS = (1, 2, 6)


def _airflow_home() -> None:
    """A fresh home and database, in the environment before Airflow is first imported."""
    home = Path(tempfile.mkdtemp(prefix="task-cost-"))
    (home / "dags").mkdir()
    os.environ.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
    })
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                   capture_output=True)


def _chain(n: int) -> Any:
    """A DAG of ``n`` empty tasks, one after another, written to the database as the dag-processor would."""
    from airflow.sdk import DAG, task

    from mirrorflow_dev.dag_parsing import parsed

    with DAG(f"chain_{n}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        previous = None
        for i in range(n):
            @task(task_id=f"t{i}")
            def empty() -> None:
                return None

            current = empty()
            if previous is not None:
                previous >> current
            previous = current
    return parsed(dag)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each chain (after one warm-up run)")
    args = parser.parse_args(argv)
    _airflow_home()
    medians = {}
    for n in CHAINS:
        dag = _chain(n)
        dag.test()  # warm-up: imports loaded, the first run's rows made
        seconds = []
        for _ in range(args.runs):
            started = time.monotonic()
            run = dag.test()
            seconds.append(time.monotonic() - started)
            if run.state != "success":
                raise SystemExit(f"chain of {n}: the run ended {run.state}")
        medians[n] = statistics.median(seconds)
        print(f"{n} task(s): median {medians[n]:.3f} s, min {min(seconds):.3f} s, max {max(seconds):.3f} s")
    per_task = (medians[CHAINS[-1]] - medians[CHAINS[0]]) / (CHAINS[-1] - CHAINS[0])
    print(f"one more task: {medians[2] - medians[1]:.3f} s (1 -> 2), {per_task:.3f} s a task (1 -> {CHAINS[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
