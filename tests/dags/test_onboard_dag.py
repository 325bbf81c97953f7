"""mirror_onboard_cluster under dag.test(): c4 joins c1..c3 under traffic (killed once), from the archive, a clash."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.sync import publish_owned
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.topology import Topology
from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.factories.levels import build_level_dags
from mirrorflow_airflow.factories.onboard import build_onboard_dag
from mirrorflow_airflow.state import CHANGES_VARIABLE, ONBOARDING_VARIABLE, OWNERS_VARIABLE, TARGETS_VARIABLE
from tests.dags.dag_runs import asset_events, task_output, xcom
from tests.dags.forms import onboard_form
from tests.fixtures.kafka import topic_name_for
from tests.fixtures.spark import connect_connection
from tests.integration.groups import consume_and_commit, read_from_committed
from tests.integration.kafka_io import read_all, stable_end_offsets
from tests.integration.mirroring import (
    THREE,
    LevelRuns,
    Traffic,
    assert_exactly_once,
    clients,
    converge,
    partitions_of,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def _checkpointed(bootstrap: str, topic: str, partitions: int) -> int:
    """Offsets of ``topic`` the backfill link c3.L1 has committed on c4 so far.

    Read uncommitted: a read_committed consumer asks for stable offsets, which the broker
    withholds while a transaction holding offsets of the group is open, as the killed
    attempt's is until the next attempt fences it.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group("c3.L1"),
                         "isolation.level": "read_uncommitted"})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return sum(max(tp.offset, 0) for tp in got)
    except Exception:
        return 0  # the topic is not there yet
    finally:
        consumer.close()


def test_onboarding_under_traffic_killed_mid_backfill_and_rerun_is_exactly_once(
        kafka_clusters, make_topic, kafka_distribution, operator_state, tmp_path, spark_connect_server, monkeypatch):
    """The acceptance scenario: c1..c3 keep producing and mirroring while c4 is onboarded with ``retained``.

    The first attempt is Airflow's own ``airflow dags test`` in a process group of its
    own (DAG file, topology file, spark-submit and its Python workers inside it),
    SIGKILLed as soon as the backfill has committed part of the history on c4. The
    second attempt is the same form under ``dag.test()``, its backfill on a warm Spark
    Connect server (the killed one was a ``spark-submit``: what a kill must stop is in
    the killed process group). Then the grown tree's level
    runs take over: every cluster holds every message once, and a consumer group
    positioned on c4 skips nothing.
    """
    from airflow.models import Variable

    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    # Transactions of at most 500 records (the backfill takes the link's setting too): the
    # history is about 3,000 records, which a copier reads and enqueues well inside one
    # time-bounded transaction, so without this the killed attempt would have nothing to
    # commit before its end, and there would be no "mid-way" to kill it at.
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"),
                    extra="replication:\n  defaults:\n    txn_records: 500\n")
    settings = clients(kafka_clusters, topo)
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, topic, 1000, keys=20)
    converge(topo, settings)

    # a consumer group on c1 with a known position, distributed as mirror_offsets would
    taken = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "onboard-g", 600)
    cl = {n: ClusterClient(n, s) for n, s in settings.items()}
    for c in cl.values():
        ensure_topic(c)
    publish_owned(cl["c1"], ["onboard-g"], topo.selects)
    assert not distribute({lv: topo.links(lv) for lv in topo.levels}, cl).errors
    Variable.set(OWNERS_VARIABLE, json.dumps({"onboard-g": "c1"}))

    dag = build_onboard_dag(topo)
    assert {"cluster", "bootstrap", "conn_id", "sibling_of", "level", "topics", "backfill", "since", "schemas",
            "dry_run"} <= set(dag.params)
    dry = dag.test(run_conf=onboard_form(kafka_clusters, dry_run=True))
    assert dry.state == "success"
    plan = xcom(dry, "preflight")
    assert plan["link_id"] == "c3.L1" and plan["pins"] == {"c2.L3": "c3"} and plan["bits"] == 0b101
    assert partitions_of(kafka_clusters, "c4", topic) == 0, "a dry run creates nothing"
    assert operator_state(CHANGES_VARIABLE, "[]") == []

    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    c4 = kafka_clusters["c4"].bootstrap

    def quota(*args: str) -> None:  # a producer byte-rate quota on c4 slows the backfill enough to kill it mid-way
        subprocess.run(["java", "-cp", kafka_distribution.classpath, "kafka.admin.ConfigCommand",
                        "--bootstrap-server", c4, "--entity-type", "clients", "--entity-default", "--alter", *args],
                       check=True, capture_output=True, timeout=120)

    with Traffic(kafka_clusters, topic, ["c1", "c2", "c3"], batch=5, interval=0.2) as flowing, \
            LevelRuns(lambda: (topo, {}), settings) as runs:
        quota("--add-config", "producer_byte_rate=10000")
        try:
            env = {**os.environ, "MIRROR_TOPOLOGY": str(tmp_path / "topology.yaml")}
            first = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "airflow"), "dags", "test",
                                      "mirror_onboard_cluster", "-c", json.dumps(onboard_form(kafka_clusters))],
                                     env=env, start_new_session=True, stdout=open(tmp_path / "first.log", "wb"),
                                     stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 240
            while _checkpointed(c4, topic, 2) == 0:
                assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the backfill committed nothing within 240 s"
                threading.Event().wait(0.1)  # poll interval of the condition above (it has a deadline)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        finally:
            quota("--delete-config", "producer_byte_rate")
        partial = _checkpointed(c4, topic, 2)
        # c3's end now, not before the traffic: the backfill's range ends where c3 stood when
        # it started, which under a slow start is well past the history produced above.
        total = sum(stable_end_offsets(kafka_clusters["c3"].bootstrap, topic, 2))
        print(f"onboarding killed with {partial} of {total} offsets of c3 backfilled")
        assert 0 < partial < total
        assert operator_state(ONBOARDING_VARIABLE)["c4"]["sibling_of"] == "c3"
        assert operator_state(CHANGES_VARIABLE, "[]") == [], "the killed attempt never joined"

        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connect_connection(spark_connect_server))
        run = dag.test(run_conf=onboard_form(kafka_clusters))
        flowing.wait_for(len(flowing.ids) + 60)
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify", "summary")}
    # The killed attempt's open transaction held the link's checkpoints; the rerun fenced it
    # at once instead of failing its first try on the wait (mirrorflow.copy.engine.fencing).
    tries = {ti.task_id: ti.try_number for ti in run.get_task_instances()}
    assert tries["backfill"] == 1, tries
    print(f"level rounds during onboarding: {runs.rounds}; messages produced meanwhile: {len(flowing.ids)}")
    expected += flowing.ids
    backfill = xcom(run, "backfill")
    assert backfill["ok"] and backfill["copied"] > 0
    verified = xcom(run, "verify")
    assert verified["ok"] and verified["compared"] >= 3000
    assert xcom(run, "positions")["groups"] == ["onboard-g"]

    # the change is durable: the effective topology has c4 where the form said, c2.L3 pinned to c3
    changes = operator_state(CHANGES_VARIABLE, "[]")
    assert [(e["op"], e["cluster"], e["sibling_of"], e["level"]) for e in changes] == [("add", "c4", "c3", 1)]
    targets = operator_state(TARGETS_VARIABLE)
    assert targets == {"c2.L3": "c3"}
    grown = apply_changes(topo, changes)
    assert grown.levels == [1, 3] and {l.link_id for l in grown.links(1)} >= {"c3.L1", "c4.L1"}
    assert operator_state(ONBOARDING_VARIABLE) == {}, "a finished onboarding leaves no record behind"

    # from here on the regular level runs of the grown tree take over: nothing lost, nothing twice
    expected += traffic(kafka_clusters, "c4", topic, 60)
    converge(grown, clients(kafka_clusters, grown), targets=targets)
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)

    # the group positioned on c4 skips nothing it had not consumed on c1
    after = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "onboard-g", 2)
    skipped = set(expected) - set(taken) - set(after)
    assert not skipped, f"{len(skipped)} messages skipped by the group on c4, e.g. {sorted(skipped)[:3]}"


def test_a_topic_clash_stops_preflight_and_nothing_is_created(kafka_clusters, make_topic, operator_state):
    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    other = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=1)
    make_topic("c4", partitions=3, name=topic)  # same name, different partition count
    topo = topology(kafka_clusters, THREE, [topic, other], names=("c1", "c2", "c3"))
    dag = build_onboard_dag(topo)
    run = dag.test(run_conf=onboard_form(kafka_clusters))
    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed" and states["create_topics"] == "upstream_failed", states

    from mirrorflow_airflow.steps.onboard import run_preflight

    with pytest.raises(Exception) as refused:
        run_preflight(topo, onboard_form(kafka_clusters), "t")
    message = str(refused.value)
    assert f"{topic}: 3 partitions on c4, 2 on c3" in message and "nothing was created" in message
    names = AdminClient({"bootstrap.servers": kafka_clusters["c4"].bootstrap}).list_topics(timeout=10).topics
    assert other not in names and partitions_of(kafka_clusters, "c4", topic) == 3
    assert operator_state(CHANGES_VARIABLE, "[]") == [] and operator_state(ONBOARDING_VARIABLE) == {}


def _delete_before(bootstrap: str, topic: str, partitions: int, keep: float) -> int:
    """Retention, by hand: delete the first part of every partition (all but ``keep`` of it); returns how many."""
    from confluent_kafka import TopicPartition

    from tests.integration.kafka_io import stable_end_offsets

    ends = stable_end_offsets(bootstrap, topic, partitions)
    cuts = [TopicPartition(topic, p, int(ends[p] * (1 - keep))) for p in range(partitions)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for tp, future in admin.delete_records(cuts, request_timeout=30).items():
        future.result(timeout=60)
    return sum(tp.offset for tp in cuts)


@pytest.mark.usefixtures("spark_default_connect")
def test_onboarding_with_names_of_its_own_from_the_archive_restores_history_the_peers_deleted_under_them(
        kafka_clusters, make_topic, s3_bucket, operator_state, monkeypatch, caplog, capfd):
    """c3 names topics ``acme-prod-<topic>`` and is archived (under logical names); c4 joins next to it with
    ``{tenant}.{region}.<topic>`` given in the form, from the archive: history the peers deleted is restored under
    c4's names, the grown tree carries on under them, and no topic of c4 has the logical name or c3's. Then c4's
    names change in the topology: its level's run copies nothing and names the key (docs/naming.md, "Changing a
    live cluster's names")."""
    from mirrorflow.archive.reader import coverage
    from mirrorflow_airflow.factories.archive import build_archive_dag

    topic = topic_name_for("onboard-names")
    on = {"c1": topic, "c2": topic, "c3": f"acme-prod-{topic}", "c4": f"acme.eu.{topic}"}
    for cluster in ("c1", "c2", "c3"):
        make_topic(cluster, partitions=2, name=on[cluster])
    data = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"),
                    extra="archive: {clusters: [c3], schedule: 1h}\n").to_dict()
    data["clusters"]["c3"]["names"] = {"topic_prefix": "acme-prod-"}
    topo = Topology.parse(data)
    settings = clients(kafka_clusters, topo)
    monkeypatch.setenv("AIRFLOW_CONN_MIRRORFLOW_ARCHIVE", json.dumps({
        "conn_type": "aws", "login": s3_bucket.access_key_id, "password": s3_bucket.secret_access_key,
        "extra": {"endpoint_url": s3_bucket.endpoint_url, "region_name": s3_bucket.region,
                  "bucket": s3_bucket.bucket, "prefix": "history"}}))
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, on[origin], 100)
    converge(topo, settings)

    archived = build_archive_dag(topo).test()
    assert archived.state == "success"
    assert xcom(archived, "archive")["archived"] == 300
    location = dataclasses.replace(s3_bucket, prefix="history")
    assert all(coverage(location, "c3", topic, p) for p in (0, 1))  # the logical name: any cluster can restore it

    # retention takes the older half on every peer; only the archive still has it
    deleted = {c: _delete_before(kafka_clusters[c].bootstrap, on[c], 2, keep=0.5) for c in ("c1", "c2", "c3")}
    assert all(deleted.values())
    expected += traffic(kafka_clusters, "c1", topic, 40, start=100)
    converge(topo, settings)

    form = onboard_form(kafka_clusters, backfill="archive", names={"topics": "{tenant}.{region}.{topic}",
                                                                  "values": {"tenant": "acme", "region": "eu"}})
    run = build_onboard_dag(topo).test(run_conf=form)
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify")}
    backfill = xcom(run, "backfill")
    # the archive restores its whole range (up to where it ends), then Kafka continues on c3
    assert backfill["restored"] == 300 and backfill["lost_to_retention"] == 0
    # what reached c4 is an asset event of the backfill under c4's name, saying how far each partition reaches
    uri = f"kafka://{kafka_clusters['c4'].bootstrap}/{on['c4']}"
    [(_, extra)] = asset_events(uri, run)
    assert backfill["arrived"] == [uri] and extra["by"] == "backfill" and sorted(extra["partitions"]) == ["0", "1"]
    assert extra["topic"] == topic
    # verify counts what only c4 holds now (offsets deleted on c3 include transaction markers)
    assert 0 < xcom(run, "verify")["history_only_on_new"] <= deleted["c3"]

    grown = apply_changes(topo, operator_state(CHANGES_VARIABLE, "[]"))
    assert grown.topic_naming("c4").render(topic) == on["c4"]
    from_c4 = traffic(kafka_clusters, "c4", on["c4"], 20)
    converge(grown, clients(kafka_clusters, grown), targets=operator_state(TARGETS_VARIABLE))
    assert_exactly_once(kafka_clusters, ["c4"], on["c4"], expected + from_c4)  # the whole history, once
    for cluster in ("c1", "c2", "c3"):  # c4's own records reached the others under their names, once
        got = Counter(r.value.decode() for r in read_all(kafka_clusters[cluster].client_config(), on[cluster], 2))
        assert [got[m] for m in from_c4] == [1] * len(from_c4), cluster
    listed = AdminClient({"bootstrap.servers": kafka_clusters["c4"].bootstrap}).list_topics(timeout=10).topics
    assert {t for t in listed if t.endswith(topic)} == {on["c4"]}

    # c4's names changed on the live tree: its level's run copies nothing and says what to do
    data = grown.to_dict()
    data["clusters"]["c4"]["names"] = {"topic_prefix": "acme-eu-"}
    renamed = Topology.parse(data)
    level = next(lv for lv in renamed.levels if any("c4" in (d.source, d.default_target) for d in renamed.links(lv)))
    traffic(kafka_clusters, "c3", on["c3"], 5)
    caplog.clear()
    run = build_level_dags(renamed)[f"mirror_level_{level}"].test()
    assert run.state == "failed"
    assert "clusters.c4.names changed on a live cluster: topics from 'acme.eu.{topic}' to 'acme-eu-{topic}'" \
        in task_output(caplog, capfd)
    listed = AdminClient({"bootstrap.servers": kafka_clusters["c4"].bootstrap}).list_topics(timeout=10).topics
    assert {t for t in listed if t.endswith(topic)} == {on["c4"]}  # nothing made under the new names
    # and so do the offsets and failover runs: no position is committed under the new names
    from mirrorflow_airflow.names import NamesChanged
    from mirrorflow_airflow.steps.failover import preflight
    from mirrorflow_airflow.steps.offsets import find_owners

    with pytest.raises(NamesChanged, match="no position was published or committed:\n  clusters.c4.names changed"):
        find_owners(renamed)
    with pytest.raises(NamesChanged, match="nothing was changed:\n  clusters.c4.names changed"):
        preflight(renamed, {"from_cluster": "c3", "to_cluster": "c4", "groups": ["g"], "mode": "planned",
                            "precision": "exact", "dry_run": True, "force": False})
