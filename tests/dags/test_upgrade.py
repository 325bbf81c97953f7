"""An upgrade that loses nothing: the first release runs the four-cluster tree, this code takes over the same state.

The first release (commit ``dda5c22``, CHANGELOG.md) comes from this
repository's history: its ``include/``, ``plugins/`` and ``dags/`` on
``PYTHONPATH``, in this environment, since its pinned requirements are this
one's. Under traffic, it runs the level DAGs, ``mirror_offsets``,
``mirror_audit`` and a planned failover, each an ``airflow dags test`` of its
own DAG files. Every Spark job is a spark-submit on ``local[2]``, so the old code
runs on the executors too. Then this code runs the same DAG ids on the same
clusters, with the same Airflow database. The test checks four things:

- every message reaches every cluster exactly once;
- the failed-over group resumes where the failover put it: it skips nothing and
  replays no more than the cut did;
- the windows proven before the upgrade are never announced again, while the
  windows after it are proven;
- a release newer than this one is refused by name. It is simulated by raising
  one format version, and it leaves the clusters as they were.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from mirrorflow.assets import proven_uri
from mirrorflow.completeness.proven import window_key
from mirrorflow_dev.install import FIRST_RELEASE, release_tree
from tests.dags.forms import failover_conf
from tests.fixtures.spark import connect_connection
from tests.integration.groups import committed_offsets, consume_and_commit, read_from_committed
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import FOUR, Traffic, assert_exactly_once, topic_everywhere, topology

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]
NAMES = ["c1", "c2", "c3", "c4"]
#: A window length no other test uses: the audit state of one length is apart from every other length's.
WINDOW_MS = 420_000
AUDIT = "audit: {window_minutes: 7, grace_minutes: 1}\n"

#: A release after this one, simulated: the audit's format one higher (written by sitecustomize at start-up).
NEWER_AUDIT = """
from mirrorflow import formats
formats.FORMATS["audit"] = formats.Format("audit", formats.FORMATS["audit"].version + 1, "simulated newer release")
"""


@pytest.fixture(scope="module")
def first_release(tmp_path_factory) -> Path:
    return release_tree(tmp_path_factory.mktemp("first-release"), FIRST_RELEASE, "include", "plugins", "dags",
                        "spark_jobs")


class Release:
    """One release's Airflow processes on a shared AIRFLOW_HOME: its code first on the path, its DAG files."""

    def __init__(self, name: str, code: Path, home: Path, topology_file: Path, spark: str,
                 extra_path: str = "") -> None:
        self.name = name
        path = os.pathsep.join(p for p in (extra_path, f"{code}/include", f"{code}/plugins") if p)
        self.env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(code / "dags"),
                    "AIRFLOW__CORE__PLUGINS_FOLDER": str(code / "plugins"),
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "MIRROR_TOPOLOGY": str(topology_file),
                    "AIRFLOW_CONN_SPARK_DEFAULT": spark,
                    "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": path}

    def airflow(self, *args: str, ok: bool = True) -> str:
        airflow = str(Path(sys.executable).parent / "airflow")
        done = subprocess.run([airflow, *args], env=self.env, capture_output=True, text=True, timeout=900, cwd="/")
        out = done.stdout + done.stderr
        said = f"{self.name}: airflow {' '.join(args[:3])} exited {done.returncode}:\n"
        assert (done.returncode == 0) == ok, said + out[-5000:]
        return out

    def dag(self, dag_id: str, conf: dict | None = None, ok: bool = True) -> str:
        return self.airflow("dags", "test", dag_id, *(["-c", json.dumps(conf)] if conf else []), ok=ok)

    def levels(self) -> None:
        for level in (1, 3, 1):  # pairs, across, pairs again: everything everywhere
            self.dag(f"mirror_level_{level}")


def _final(kafka_clusters, topic: str, tag: str, count: int, at_ms: int) -> list[str]:
    """``count`` messages on every cluster dated ``at_ms`` on (final windows), under keys of their own
    (``<origin>|<key>|<seq>``, as the traffic's, whose per-key order the exactly-once check holds)."""
    ids = []
    for c in NAMES:
        records = [(f"{c}-{tag}{i % 5}".encode(), f"{c}|{c}-{tag}{i % 5}|{i:06d}".encode(), None, at_ms + i)
                   for i in range(count)]
        produce(kafka_clusters[c].bootstrap, topic, records)
        ids += [r[1].decode() for r in records]
    return ids


def _proven_keys(home: Path, uri: str) -> list[str]:
    """The partition keys of every event of asset ``uri`` in the shared metadata database, in order."""
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute("SELECT e.partition_key FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                          "WHERE a.uri = ? ORDER BY e.id", (uri,)).fetchall()
    return [r[0] for r in rows]


def test_the_first_release_hands_the_tree_to_this_code_and_nothing_is_lost_repeated_or_announced_twice(
        first_release, kafka_clusters, make_topic, spark_connect_server, tmp_path):
    topic = topic_everywhere(make_topic)
    topo_file = tmp_path / "topology.yaml"
    topo_file.write_text(topology(kafka_clusters, FOUR, [topic], extra=AUDIT).to_yaml())
    home = tmp_path / "airflow"
    home.mkdir()
    # the first release on spark-submit (its own code on the executors), this one on the session's Connect server
    old = Release("0.1.0", first_release, home, topo_file, json.dumps({"conn_type": "spark", "host": "local[2]"}))
    new = Release("0.2.0", REPO, home, topo_file, connect_connection(spark_connect_server))
    new.airflow("db", "migrate")

    # final windows (an hour old) before the upgrade, and a group that consumed part of them on c1
    hour_ago = int(time.time() * 1000) - 3_600_000
    before = _final(kafka_clusters, topic, "b", 20, hour_ago)
    with Traffic(kafka_clusters, topic, NAMES, batch=5, interval=0.5) as flowing:
        flowing.wait_for(40)
        done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "upgrade-g", 30)
        old.levels()
        old.dag("mirror_offsets")
        old.dag("mirror_audit")
        windows_before = {c: _proven_keys(home, proven_uri(c, topic)) for c in NAMES}
        assert all(windows_before[c] for c in NAMES), windows_before  # the first release proved its windows
        old.dag("mirror_failover_consumer_group", failover_conf(groups=["upgrade-g"], to_cluster="c2"))
        on_c2 = committed_offsets(kafka_clusters["c2"].bootstrap, topic, "upgrade-g", 2)
        # c2 orders its own messages between c1's, so the cut replays some consumed ones (docs/offsets.md)
        replayed = set(done) & set(read_from_committed(kafka_clusters["c2"].bootstrap, topic, "upgrade-g", 2))

        later = hour_ago + 1_200_000  # a later window, final already
        after = _final(kafka_clusters, topic, "a", 10, later)
        flowing.stop()
    # this code takes over the same clusters and database: what flowed since the first release's last level run,
    # and the later window, are its to copy and to prove
    new.levels()
    new.dag("mirror_offsets")
    new.dag("mirror_audit")

    # exactly once everywhere, across the upgrade
    assert_exactly_once(kafka_clusters, NAMES, topic, before + after + flowing.ids)
    # the group resumes on c2 where the failover put it: nothing skipped, and it replays what the failover's
    # cut replayed then, no more
    assert committed_offsets(kafka_clusters["c2"].bootstrap, topic, "upgrade-g", 2) == on_c2
    rest = read_from_committed(kafka_clusters["c2"].bootstrap, topic, "upgrade-g", 2)
    assert max(Counter(rest).values()) == 1
    assert set(before + after + flowing.ids) - set(done) <= set(rest), "skipped on c2"
    assert set(done) & set(rest) == replayed
    # the windows proven before are not announced again; the later window is proven on every cluster, once
    for c in NAMES:
        keys = _proven_keys(home, proven_uri(c, topic))
        assert len(keys) == len(set(keys)), (c, keys)
        assert keys[:len(windows_before[c])] == windows_before[c]
        assert window_key(later - later % WINDOW_MS) in keys[len(windows_before[c]):], (c, keys)

    # a newer release's audit state: this code's audit stops naming it, and writes nothing
    site = tmp_path / "newer"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NEWER_AUDIT)
    newer = Release("newer", REPO, home, topo_file, new.env["AIRFLOW_CONN_SPARK_DEFAULT"], extra_path=str(site))
    now = int(time.time() * 1000)  # a window still open: nothing to judge, only positions to store
    for c in NAMES:
        produce(kafka_clusters[c].bootstrap, topic, [(f"{c}-n".encode(), f"{c}|{c}-n|000000".encode(), None, now)])
    newer.dag("mirror_audit")
    stored = {c: len(read_all(kafka_clusters[c].bootstrap, "_mirrorflow.audit", 1)) for c in NAMES}
    refused = new.dag("mirror_audit", ok=False)
    assert "audit at topic _mirrorflow.audit on c" in refused and "this mirrorflow reads audit up to format 1" \
        in refused, refused[-4000:]
    assert {c: len(read_all(kafka_clusters[c].bootstrap, "_mirrorflow.audit", 1)) for c in NAMES} == stored
