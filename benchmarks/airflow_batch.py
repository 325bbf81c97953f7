"""An empty micro-batch through Airflow: ``mirror_level_1`` under ``dag.test()``, in its own process.

Run as ``python -m benchmarks.airflow_batch <src bootstrap> <dst bootstrap> <topic> --runs N``;
prints one JSON object. The process gets a throwaway ``AIRFLOW_HOME`` with a
SQLite database (as ``make demo``), a two-cluster topology (``src`` and ``dst``
paired at level 1) and ``spark_default`` on ``local[*]`` (or, with ``--connect URL``,
a ``spark_connect`` connection to that server). The first run copies
whatever the topic holds; the next ``N`` have nothing to copy and are timed:
the DAG run from start to end, and each task's own duration as Airflow recorded it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _environment(home: Path, connect_url: str | None) -> None:
    host, _, port = (connect_url or "").removeprefix("sc://").partition(":")
    spark = ({"conn_type": "spark_connect", "host": host, "port": int(port)} if connect_url
             else {"conn_type": "spark", "host": "local[*]"})
    os.environ.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    for path in (REPO / "plugins", REPO / "include"):
        sys.path.insert(0, str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.airflow_batch")
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("topic")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connect", default=None, help="run on this Spark Connect server (sc://host:port)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-airflow-"))
    text = (f"clusters:\n  src: {{bootstrap: \"{args.src}\"}}\n  dst: {{bootstrap: \"{args.dst}\"}}\n"
            f"tree: {{level: 1, children: [src, dst]}}\ntopics: [\"{args.topic}\"]\n")
    (home / "topology.yaml").write_text(text)
    _environment(home, args.connect)
    # dag.test() serializes the DAG folder's DAGs first: they must describe these clusters too.
    os.environ["MIRROR_TOPOLOGY"] = str(home / "topology.yaml")
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True)

    from mirrorflow.topology import parse_topology
    from mirrorflow_airflow.factories.levels import build_level_dag

    topo = parse_topology(text, source="bench")
    dag = build_level_dag(topo, 1)
    dag.test()  # the first run copies the topic; what follows has nothing to copy
    runs = []
    for _ in range(args.runs):
        started = time.monotonic()
        run = dag.test()
        wall = time.monotonic() - started
        if run.state != "success":
            raise SystemExit(f"mirror_level_1 ended {run.state}")
        tasks = {ti.task_id: round(ti.duration or 0.0, 3) for ti in run.get_task_instances()}
        runs.append({"dag_run_s": round(wall, 3), "tasks_s": tasks})
    print(json.dumps({"runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
