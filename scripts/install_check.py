"""docs/install.md, followed by hand on this machine: the wheel under a plain ``airflow standalone``.

    .venv/bin/python scripts/install_check.py --airflow 3.3.0     # or 3.3.2 (make install-check runs both)

1. It builds the wheel from this checkout and installs it with its ``airflow``
   extra in a fresh virtual environment, at the tested constraints of that
   Airflow, and puts the full pyspark back last, as section 1 says.
2. It starts four local Kafka clusters, a tree of two pairs, with a two-partition
   topic on each and 50 messages produced on each cluster.
3. It writes the guide's DAG file, a topology, ``spark_default`` (spark-submit
   on ``local[2]``) and the guide's pools, then starts ``airflow standalone`` in a
   fresh ``AIRFLOW_HOME``: Airflow's own defaults, its own admin login, nothing of
   this repository's Airflow settings.
4. Through the REST API, as a user would, it unpauses ``mirror_level_1`` and
   ``mirror_level_3`` and triggers levels 1, 3, 1, each after the last one
   succeeded. The scheduler and a LocalExecutor worker run them.
5. It checks that every cluster holds every message exactly once, and prints
   the versions and what each run took.

Everything stays under ``.run/install-check/<airflow>/``. Nothing outside it is
touched, and the clusters and Airflow are stopped at the end (``--keep`` leaves
them running). This is a check by hand, not a test: a standalone boot costs
minutes the suite cannot pay. tests/dags/test_installed_wheel.py covers the same
wheel under ``airflow dags test`` on every run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "include")]

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.airflow_api import AirflowApi, healthy, listed_dags, run_state, trigger, unpause  # noqa: E402
from mirrorflow_dev.install import CONSTRAINTS, guide_blocks, install_wheel, pool_commands, run, user_env  # noqa: E402
from mirrorflow_dev.kafka import KafkaDistribution, LocalKafka  # noqa: E402
from mirrorflow_dev.process import free_port, stop_group, wait_until  # noqa: E402

NAMES = ("c1", "c2", "c3", "c4")
TOPIC = "orders"
PER_CLUSTER = 50


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def produce_everywhere(kafka: LocalKafka) -> list[str]:
    ids = []
    for c in NAMES:
        producer = Producer({"bootstrap.servers": kafka[c].bootstrap})
        for i in range(PER_CLUSTER):
            value = f"{c}|{i}"
            producer.produce(TOPIC, key=f"{c}-k{i % 5}".encode(), value=value.encode())
            ids.append(value)
        assert producer.flush(30) == 0
    return ids


def held(bootstrap: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "install-check-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in (0, 1)}
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    out: list[str] = []
    deadline = time.monotonic() + 60
    positions = {0: 0, 1: 0}
    while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
        for msg in consumer.consume(100, timeout=1.0):
            if msg.error():
                continue
            positions[msg.partition()] = msg.offset() + 1
            out.append(msg.value().decode())
    consumer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--airflow", choices=sorted(CONSTRAINTS), required=True)
    parser.add_argument("--keep", action="store_true", help="leave the clusters and Airflow running")
    args = parser.parse_args(argv)
    root = REPO / ".run" / "install-check" / args.airflow
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    times: dict[str, float] = {}

    started = time.monotonic()
    say(f"installing the wheel with apache-airflow {args.airflow} in {root / 'venv'}")
    bin_dir = install_wheel(root, args.airflow)
    times["install"] = time.monotonic() - started
    versions = run([str(bin_dir / "python"), "-c", "import airflow, pyspark, confluent_kafka, importlib.metadata as m;"
                   "print(airflow.__version__, pyspark.__version__, confluent_kafka.__version__, "
                   "m.version('mirrorflow'), m.version('apache-airflow-providers-apache-spark'))"]).split()

    say("starting four Kafka clusters")
    kafka = LocalKafka(root / "kafka", names=list(NAMES), distribution=KafkaDistribution.fetch())
    kafka.start(list(NAMES))
    standalone = None
    try:
        for c in NAMES:
            admin = AdminClient({"bootstrap.servers": kafka[c].bootstrap})
            admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        clusters = "\n".join(f'  {c}: {{bootstrap: "{kafka[c].bootstrap}"}}' for c in NAMES)
        topology = root / "topology.yaml"
        topology.write_text(f"name: install-check\nclusters:\n{clusters}\ntree:\n  level: 3\n  children:\n"
                            f"    - {{level: 1, children: [c1, c2]}}\n    - {{level: 1, children: [c3, c4]}}\n"
                            f'topics: ["{TOPIC}"]\n')
        dags = root / "dags"
        dags.mkdir()
        (dags / "mirrorflow_dags.py").write_text(guide_blocks("python")[0])
        home = root / "airflow"
        port = free_port()
        env = user_env(bin_dir, home, dags, topology, AIRFLOW__API__PORT=str(port),
                       AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/")
        airflow = str(bin_dir / "airflow")
        run([airflow, "db", "migrate"], env=env)
        for line in pool_commands():
            run(["bash", "-c", line], env=env)
        expected = produce_everywhere(kafka)

        say(f"airflow standalone on port {port} (log: {home / 'standalone.log'})")
        log = (home / "standalone.log").open("w")
        standalone = subprocess.Popen([airflow, "standalone"], env=env, cwd=str(root), stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        booted = time.monotonic()
        wait_until("the API server", lambda: healthy(base), 600, 2.0)
        passwords = home / "simple_auth_manager_passwords.json.generated"
        wait_until("the admin password", lambda: passwords.exists() and json.loads(passwords.read_text()), 120, 1.0)
        user, password = next(iter(json.loads(passwords.read_text()).items()))
        api = AirflowApi(base, user, password)
        wanted = {"mirror_level_1", "mirror_level_3"}
        wait_until("the level DAGs", lambda: wanted <= listed_dags(api), 600, 3.0)
        times["standalone ready"] = time.monotonic() - booted
        for dag_id in sorted(wanted):
            unpause(api, dag_id)
        for n, level in enumerate((1, 3, 1)):
            begun = time.monotonic()
            run_id = trigger(api, f"mirror_level_{level}", note="install check")
            state = wait_until(f"mirror_level_{level} run {run_id}",
                               lambda: (s := run_state(api, f"mirror_level_{level}", run_id)) in ("success", "failed")
                               and s, 900, 3.0)
            if state != "success":
                raise SystemExit(f"install check: mirror_level_{level} run {run_id} {state} (task logs under "
                                 f"{home / 'logs'})")
            times[f"run {n + 1}: mirror_level_{level}"] = time.monotonic() - begun

        counts = {}
        for c in NAMES:
            found = Counter(held(kafka[c].bootstrap))
            missing = set(expected) - set(found)
            twice = {v for v, k in found.items() if k > 1}
            if missing or twice:
                raise SystemExit(f"install check: {c} misses {len(missing)} and holds {len(twice)} twice")
            counts[c] = sum(found.values())
        print(json.dumps({"airflow": versions[0], "pyspark": versions[1], "confluent_kafka": versions[2],
                          "mirrorflow": versions[3], "spark_provider": versions[4], "held": counts,
                          "expected_each": len(expected), "seconds": {k: round(v, 1) for k, v in times.items()},
                          "result": "every cluster holds every message exactly once"}, indent=1))
        return 0
    finally:
        if not args.keep:
            if standalone is not None:
                stop_group(standalone.pid, [(signal.SIGTERM, 30), (signal.SIGKILL, 10)])
            kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
