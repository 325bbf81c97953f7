"""The embedded default: four local Kafka clusters, Airflow standalone (SQLite), and a mirrored batch.

``make demo`` runs ``start``, which shows the whole product working, not just running:

1. it starts the clusters of topologies/demo.yaml on their loopback ports, a
   local S3 server (S3Proxy) with the bucket ``mirrorflow-demo`` for the
   archive (``mirror_archive``, through the Airflow connection
   ``mirrorflow_archive``), and ``airflow standalone`` with this repo's DAGs
   and plugins, and waits until the UI answers and lists the mirrorflow DAGs;
2. it creates the topic ``orders`` on every cluster and produces a fresh batch of
   uniquely identified messages on each (the values carry this start's run tag,
   so a second start on the same state adds a new batch instead of colliding);
3. it unpauses the ``mirror_level_<L>`` DAGs and triggers them through Airflow's
   REST API, lowest level first, round after round, until a whole round copies
   nothing (the tree needs several rounds for a message to reach every leaf);
4. it runs ``mirror_lag_monitor`` once (and unpauses it: it measures every
   minute), so the Mirror page (``/plugin/mirror`` in the UI) shows every link's lag;
5. it reads ``orders`` back from every cluster (read_committed, up to the last
   stable offsets) and prints a per-cluster table; it exits non-zero unless
   every cluster holds every message exactly once.

Everything runs detached and keeps its state and logs under ``.run/demo/``.
``make stop`` (``stop``) ends it all.

``MIRRORFLOW_SECURED=1`` runs the same demo on secured clusters (their own data in
``.run/demo/kafka-secured/``): SASL_SSL with SCRAM-SHA-512 on the topology's ports,
mutual TLS on a second port, and the standard authorizer refusing whatever no ACL
allows. mirrorflow logs in as the SCRAM user ``mirrorflow`` (its password generated
once, kept in a 0600 file, never printed) through the Airflow connections
``kafka_<cluster>`` (``AIRFLOW_CONN_*`` variables of ``airflow standalone``), named by a
topology generated from the demo's, with ``conn_id`` instead of ``bootstrap``; it
holds exactly the ACLs ``python -m mirrorflow.acls`` derives for that topology. The
demo's own topic, traffic and check use the harness's super user (a certificate).
One mode runs at a time: a start refuses while the other mode's demo runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The core (include/) and the development package (mirrorflow_dev/, at the repository root).
for _path in (REPO / "include", REPO):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from mirrorflow.topology import load_topology  # noqa: E402
from mirrorflow_dev.airflow_api import ApiError  # noqa: E402
from mirrorflow_dev.demo import secured, servers, standalone, traffic  # noqa: E402
from mirrorflow_dev.demo.mirroring import measure_lag, mirror_until_quiet  # noqa: E402
from mirrorflow_dev.demo.settings import (  # noqa: E402
    PAGE_PATH,
    PRINCIPAL,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_CONN_ID,
    SPARK_MODES,
    USER,
    DemoSettings,
    say,
)


def start(demo: DemoSettings) -> None:
    """Everything up, detached; then traffic, mirrored, checked; then where to look."""
    if demo.spark_mode not in SPARK_MODES:
        raise SystemExit(f"mirrorflow demo: MIRRORFLOW_DEMO_SPARK={demo.spark_mode!r}: expected one of "
                         f"{', '.join(SPARK_MODES)} (connect, the default: every Spark job on one Connect server)")
    demo.run.mkdir(parents=True, exist_ok=True)
    standalone.refuse_platform(demo)
    standalone.refuse_other_mode(demo)
    standalone.refuse_other_spark_mode(demo)
    servers.start_kafka(demo)
    if demo.secured:
        secured.set_up_principal(demo)
    servers.start_s3(demo)
    servers.start_spark(demo)
    password = standalone.start_airflow(demo)
    run_demo(demo, password)
    print_where_to_look(demo, password)


def run_demo(demo: DemoSettings, password: str) -> None:
    """Sample traffic on every cluster, mirrored by the level DAGs, then checked on every cluster."""
    topology = load_topology(demo.topology)
    tag = traffic.batch_tag()
    produced = traffic.produce_traffic(demo, topology, tag)
    started = time.monotonic()
    try:
        mirror_until_quiet(demo, standalone.api(demo, password), topology.levels)
    except ApiError as exc:
        raise SystemExit(f"mirrorflow demo: Airflow's REST API: {exc}") from None
    say(f"Mirroring settled in {time.monotonic() - started:.0f}s")
    measure_lag(standalone.api(demo, password))
    if not traffic.report(demo, topology, produced, tag):
        raise SystemExit("mirrorflow demo: the clusters do not all hold every message exactly once "
                         f"(the demo is left running for a look; logs under {demo.run}; make stop ends it)")


def print_where_to_look(demo: DemoSettings, password: str) -> None:
    say(f"S3 (mirror_archive, connection {S3_CONN_ID}): {servers.demo_s3(demo).endpoint_url} bucket {S3_BUCKET}, "
        f"access key {S3_ACCESS_KEY}, secret in {demo.s3_run / 'secret'}")
    if demo.spark_mode == "connect":
        connect = servers.demo_connect(demo)
        say(f"Spark (connection spark_default): the Connect server on {connect.url}, log in {connect.log_path}")
    if demo.secured:
        pki = demo.secured_kafka_run / "pki"
        say(f"Kafka (secured): mirrorflow logs in as User:{PRINCIPAL} (SASL_SSL, SCRAM-SHA-512) through the "
            f"connections kafka_<cluster>; password in {demo.scram_password_file}, CA {pki / 'ca.pem'}; "
            f"the demo's own admin logs in by certificate ({pki / 'admin.pem'})")
    say(f"Demo running: UI http://127.0.0.1:{demo.ui_port} (login {USER} / {password}); Mirror page "
        f"http://127.0.0.1:{demo.ui_port}{PAGE_PATH}. Stop it with: make stop")


def stop(demo: DemoSettings) -> None:
    """Airflow, the Spark Connect server, the S3 server, then the clusters of either mode."""
    standalone.stop_airflow(demo)
    spark_stopped = servers.stop_spark(demo)
    s3_stopped = servers.stop_s3(demo)
    servers.stop_kafka(demo.plain_kafka_run)
    servers.stop_kafka(demo.secured_kafka_run, "secured Kafka clusters")
    if not s3_stopped:
        raise SystemExit("mirrorflow demo: the S3 server outlived stop; run it again")
    if not spark_stopped:
        raise SystemExit("mirrorflow demo: the Spark Connect server outlived stop; run it again")
    say(f"Stopped. State and logs stay in {demo.run} (delete it for a clean slate).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    args = parser.parse_args()
    demo = DemoSettings.from_env()
    stop(demo) if args.action == "stop" else start(demo)


if __name__ == "__main__":
    main()
