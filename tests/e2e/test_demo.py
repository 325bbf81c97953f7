"""The README demo command, run as a user would, in an isolated run dir and ports.

It runs on ``topologies/names.yaml`` (MIRRORFLOW_DEMO_TOPOLOGY, README): the demo's tree whose clusters
store topics and groups under three naming patterns, so every check below reads each cluster under its own
names (the default topology, one name everywhere, is the secured demo's and platform mode's).

It must leave four reachable, independent clusters, an S3 server holding the
archive's bucket (its secret only in a 0600 file, never in the output or a
log) and an Airflow UI whose API, logged in as the demo user, lists the
mirrorflow DAGs; its sample traffic, mirrored by the level DAGs it triggers,
must end on every cluster exactly once (its final table says so); the Mirror
page must show it, turn c1's links red past the SLA and name a failed
partition, while a Prometheus server scrapes its metrics (tests/e2e/mirror_page.py);
and `stop` must end it all.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from confluent_kafka.admin import AdminClient

from mirrorflow_dev.process import wait_until
from tests.e2e.demo_run import accepts, demo_env, final_table, free_ports, group_alive, pid_alive
from tests.e2e.mirror_page import (
    LAG_DAG,
    LEVEL_DAGS,
    RED,
    RUN_TIMEOUT,
    MirrorPage,
    Rest,
    create_small_topic,
    produce,
    quiesce_levels,
    refused_anonymously,
)
from tests.fixtures.browser import AirflowUI
from tests.fixtures.prometheus import ScrapeTarget, values

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = ("c1", "c2", "c3", "c4")
LINKS = {f"{c}.L{level}" for c in CLUSTERS for level in (1, 3)}
MESSAGES = 200  # per cluster
#: How topologies/names.yaml's clusters name a mirrored topic: a prefix each (tests/unit/test_topology.py).
PREFIXES = {"c1": "acme-main-prod-", "c2": "acme-prod-", "c3": "", "c4": ""}

pytestmark = pytest.mark.e2e










def test_demo_mirrors_sample_traffic_exactly_once_then_stops(tmp_path, prometheus, ui_page):
    k1, k2, k3, k4, ui, worker_logs, trigger_logs, s3, spark = free_ports(9)
    topology = tmp_path / "topology.yaml"
    # keep_target: the small limit set on c2 below (a message it must refuse) is c2's own, not overwritten by
    # the owner's (docs/topics.md, "Configs kept in sync")
    topology.write_text(
        (REPO / "topologies" / "names.yaml").read_text()
        .replace("19092", str(k1)).replace("19093", str(k2)).replace("19094", str(k3)).replace("19095", str(k4))
        + "topic_configs: {on_local_change: keep_target}\n"
    )
    env = demo_env(tmp_path / "run", topology, MESSAGES, ui=ui, s3=s3, spark=spark, worker_logs=worker_logs,
                   trigger_logs=trigger_logs)
    demo = [sys.executable, str(REPO / "scripts" / "demo.py")]
    try:
        # Start-up, then a few rounds of two level runs on the demo's Spark Connect server.
        started = subprocess.run(demo + ["start"], env=env, capture_output=True, text=True, timeout=1800)
        assert started.returncode == 0, started.stdout[-6000:] + started.stderr[-4000:]
        listed = next((line.split("mirrorflow DAGs:", 1)[1] for line in started.stdout.splitlines()
                       if "mirrorflow DAGs:" in line), "")
        assert {"mirror_level_1", "mirror_level_3", "mirror_offsets", "mirror_failover_consumer_group",
                "mirror_lag_monitor", "mirror_switch_target", "mirror_schemas",
                "mirror_archive"} <= {d.strip() for d in listed.split(",")}, started.stdout

        table = final_table(started.stdout)
        assert set(table) == set(CLUSTERS), started.stdout
        for cluster, row in table.items():
            assert row["duplicates"] == "0" and row["missing"] == "0", (cluster, row)
            assert row["messages"] == row["distinct"] == str(MESSAGES * len(CLUSTERS)), (cluster, row)
            assert all(row[f"from {origin}"] == str(MESSAGES) for origin in CLUSTERS), (cluster, row)
        # ... copied on the warm Spark the demo started, not by a spark-submit per run.
        assert f"Starting the Spark Connect server on sc://127.0.0.1:{spark}" in started.stdout, started.stdout
        assert connect_runs(tmp_path / "run", spark) >= len(LEVEL_DAGS)
        results = [line for line in started.stdout.splitlines() if line.startswith("==> Result:")]
        assert results == [f"==> Result: every cluster holds every message exactly once "
                           f"({MESSAGES * len(CLUSTERS)} messages on each of c1, c2, c3, c4)"], started.stdout[-3000:]

        ids = set()
        for port in (k1, k2, k3, k4):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            ids.add(admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id)
        assert len(ids) == 4

        token_req = urllib.request.Request(
            f"http://127.0.0.1:{ui}/auth/token", method="POST",
            data=json.dumps({"username": "admin", "password": "e2e-only-password"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(token_req, timeout=10) as resp:
            token = json.load(resp)["access_token"]
        dags_req = urllib.request.Request(f"http://127.0.0.1:{ui}/api/v2/dags?dag_id_pattern=mirror_",
                                          headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(dags_req, timeout=10) as resp:
            dags = {d["dag_id"]: d for d in json.load(resp)["dags"]}
        assert {"mirror_level_1", "mirror_level_3"} <= set(dags)
        assert all("mirrorflow" in [t["name"] for t in d["tags"]] for d in dags.values())

        # The archive's S3 server: the bucket exists, reachable with the key kept (0600) in the run dir only.
        secret_file = tmp_path / "run" / "s3" / "secret"
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        secret = secret_file.read_text().strip()
        assert len(secret) >= 16
        leaked = [str(f) for f in (tmp_path / "run").rglob("*.log") if secret in f.read_text(errors="replace")]
        leaked += [name for name, out in (("stdout", started.stdout), ("stderr", started.stderr)) if secret in out]
        assert not leaked, "the S3 secret appears in: " + ", ".join(leaked)
        client = boto3.session.Session().client(
            "s3", endpoint_url=f"http://127.0.0.1:{s3}", region_name="us-east-1",
            aws_access_key_id="mirrorflow-demo", aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
        assert "mirrorflow-demo" in [b["Name"] for b in client.list_buckets()["Buckets"]]

        check_mirror_page(started.stdout, ui, {name: f"127.0.0.1:{port}" for name, port in
                                               zip(CLUSTERS, (k1, k2, k3, k4))}, prometheus, ui_page, tmp_path)
    finally:
        pid_file = tmp_path / "run" / "airflow" / "standalone.pid"
        pgid = int(pid_file.read_text()) if pid_file.exists() else None
        s3_pid_file = tmp_path / "run" / "s3" / "s3proxy.pid"
        s3_pid = int(s3_pid_file.read_text()) if s3_pid_file.exists() else None
        spark_pid_file = tmp_path / "run" / "spark-connect" / "connect-server.pid"
        spark_pid = int(spark_pid_file.read_text()) if spark_pid_file.exists() else None
        stopped = subprocess.run(demo + ["stop"], env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not any(accepts(p) for p in (k1, k2, k3, k4, ui, s3, spark))
    assert pgid is not None and not group_alive(pgid), "processes of Airflow standalone outlived stop"
    assert s3_pid is not None and not pid_alive(s3_pid), "the S3 server outlived stop"
    assert spark_pid is not None and not group_alive(spark_pid), "the Spark Connect server (or a worker) outlived stop"


def connect_runs(run_dir: Path, port: int) -> int:
    """How many Spark jobs the demo's Airflow task logs say ran on the Connect server on ``port``."""
    line = f"on the Spark Connect server sc://127.0.0.1:{port}"
    return sum(f.read_text(errors="replace").count(line) for f in (run_dir / "airflow" / "logs").rglob("*.log"))


def check_mirror_page(stdout: str, ui: int, bootstraps: dict[str, str], prometheus, ui_page, tmp_path) -> None:
    """The Mirror page and its metrics on the demo: refused anonymously; green, then red, then a failed partition.

    Prometheus scrapes the endpoint (with a login) all along, level runs included;
    the page is read in Chromium after logging in to the UI. Screenshots are kept
    in ``tmp_path`` (the README's picture is the red one).
    """
    base = f"http://127.0.0.1:{ui}"
    assert f"Mirror page {base}/plugin/mirror" in stdout, stdout[-2000:]
    for path in ("/mirror/", "/mirror/api/status", "/mirror/api/links", "/mirror/metrics"):
        assert refused_anonymously(base, path) == 401, path
    rest = Rest(base, "admin", "e2e-only-password")
    prom = prometheus([ScrapeTarget(f"127.0.0.1:{ui}", "/mirror/metrics", bearer_token=rest.token,
                                    token_in_file=True)])
    lag = 'sum by (link) (mirrorflow_link_lag_records{topic="orders"})'
    zero = {link: 0.0 for link in LINKS}
    prom.wait_for(lag, lambda r: values(r, "link") == zero, timeout=30)  # the demo measured once it converged

    page = MirrorPage(AirflowUI(ui_page, base))
    page.ui.log_in("admin", "e2e-only-password")
    page.open()
    assert page.edge_states() == {link: "ok" for link in LINKS}
    assert page.names() == {"c1": ("acme-main-prod-{topic}", "acme-main-prod-{group}"),
                            "c2": ("acme-prod-{topic}", "acme-prod-{group}"),
                            "c3": ("{topic}", "{group}"), "c4": ("{topic}", "{group}")}
    page.screenshot(tmp_path / "mirror-page-converged.png")
    page.ui.park()  # the runs below are watched by REST

    # Traffic no level run copies, all in one partition: both links out of c1 fall behind by exactly that, over
    # the SLA of 100 records (a bound per link-partition).
    quiesce_levels(rest)
    produce(bootstraps["c1"], PREFIXES["c1"] + "orders", [f"page|{i}".encode() for i in range(150)])
    measured = rest.run(LAG_DAG)
    snapshot = rest.variable("mirrorflow_lag_snapshot")
    assert measured[1] == "failed", (measured, snapshot["per_link"], snapshot["violations"], snapshot["sla"])
    page.open()
    assert page.edge_states() == {**{link: "ok" for link in LINKS}, "c1.L1": "breach", "c1.L3": "breach"}
    assert page.edge_colour("c1.L1") == page.edge_colour("c1.L3") == RED["breach"]
    assert page.link_records() == {**{link: "0" for link in LINKS}, "c1.L1": "150", "c1.L3": "150"}
    sla = [text for kind, text in page.problems() if kind == "sla"]
    assert any("link c1.L1 (c1 -> c2)" in t and "records > 100" in t for t in sla), sla
    page.screenshot(tmp_path / "mirror-page-breach.png")
    page.ui.park()  # the runs below are watched by REST
    prom.wait_for(lag, lambda r: values(r, "link") == {**zero, "c1.L1": 150.0, "c1.L3": 150.0}, timeout=30)

    # Level runs while Prometheus scrapes: c1's messages reach c3 at level 3, c2 (from c1) and c4 (from c3) at
    # level 1; a second run of each level passes over the offsets those copies added on c2, c3 and c4, which it
    # skips (lag counts offsets not yet passed). Before the last one, c1 gets a message c2 refuses (over its
    # topic's max.message.bytes): that run's copy fails on that partition alone (not retried within the run: a
    # person must act; its failure is what the page shows).
    create_small_topic(bootstraps, "payments.big", small_on="c2", max_bytes=2048, prefixes=PREFIXES)
    for dag_id in LEVEL_DAGS:
        rest.set_paused(dag_id, False)
    run_id = rest.trigger("mirror_level_3")

    def copy_shown_running() -> bool:  # the page's API lists the run's copy task while it runs (a spark-submit)
        running = rest.call("GET", "/mirror/api/status")["running"]
        assert rest.state("mirror_level_3", run_id) in ("queued", "running"), "ended before it was shown running"
        return any((r["dag_id"], r["run_id"], r["task_id"]) == ("mirror_level_3", run_id, "copy") for r in running)

    wait_until("the level-3 copy to show as running", copy_shown_running, RUN_TIMEOUT)
    assert rest.wait("mirror_level_3", run_id) == "success"
    assert rest.run("mirror_level_1")[1] == "success"
    assert rest.run("mirror_level_3")[1] == "success"
    # 20,000 bytes that hardly compress: copies are compressed, and c2's broker checks the compressed batch
    produce(bootstraps["c1"], PREFIXES["c1"] + "payments.big", [base64.b64encode(os.urandom(15_000))])
    run_id = rest.trigger("mirror_level_1")
    wait_until("the last level-1 copy to fail once", lambda: rest.task_state("mirror_level_1", run_id, "copy")
               in ("up_for_retry", "failed"), RUN_TIMEOUT)
    rest.run(LAG_DAG)
    prom.wait_for(lag, lambda r: values(r, "link") == zero, timeout=30)
    peak = prom.query(f"max_over_time(({lag})[10m:1s])")
    assert values(peak, "link")["c1.L1"] == 150.0  # scraped while behind, and 0 after convergence

    page.open()
    failed = [text for kind, text in page.problems() if kind == "failed_partition"]
    assert len(failed) == 1 and "link c1.L1 (c1 -> c2) payments.big[0]" in failed[0], page.problems()
    assert "large" in failed[0].lower(), failed[0]
    assert page.edge_states()["c1.L1"] == "error"
    page.screenshot(tmp_path / "mirror-page-failed-partition.png")

    # A link's pre-filled form, triggered from the page with the user's own login: a dry run of the switch.
    run_id = page.trigger_form("c1.L3", "mirror_switch_target")
    run = rest.call("GET", f"/api/v2/dags/mirror_switch_target/dagRuns/{urllib.parse.quote(run_id, safe='')}")
    assert run["conf"] == {"source_cluster": "c1", "level": 3, "target": "c4", "dry_run": True}, run
    print(f"\n[mirror page] screenshots in {tmp_path}")



