"""mirror_resolve_gap under dag.test(): a level run under traffic stops on a retention gap, the operator skips it,
copying goes on, and every cluster holds every message that was not lost exactly once. With ``on_gap: restore``
the level run heals a gap from the S3 archive, and the operator restores what the archive holds of the rest."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow_airflow.factories.resolve_gap import build_resolve_gap_dag
from tests.dags.dag_runs import asset_events, xcom
from tests.integration.kafka_io import produce, read_all, stable_end_offsets
from tests.integration.mirroring import (
    FOUR,
    Traffic,
    assert_exactly_once,
    checkpointed,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.usefixtures("spark_default_connect")]


def test_a_gap_fails_the_level_run_by_name_and_mirror_resolve_gap_skips_it(kafka_clusters, make_topic,
                                                                           airflow_home):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    first = traffic(kafka_clusters, "c1", topic, 40)
    assert run_level(topo, 1, settings).ok
    copied_to = stable_end_offsets(c1, topic, 2)[0]  # c1.L1's checkpoint of partition 0

    later = traffic(kafka_clusters, "c1", topic, 40, start=40)
    cut = copied_to + 5  # retention takes 5 offsets c1.L1 never copied
    lost = {r.value.decode() for r in read_all(c1, topic, 2) if r.partition == 0 and copied_to <= r.offset < cut}
    deleted = {r.value.decode() for r in read_all(c1, topic, 2) if r.partition == 0 and r.offset < cut}  # on c1
    assert len(lost) == 5
    admin = AdminClient({"bootstrap.servers": c1})
    for future in admin.delete_records([TopicPartition(topic, 0, cut)], request_timeout=30).values():
        future.result(timeout=30)

    with Traffic(kafka_clusters, topic, ["c2", "c3", "c4"], batch=5, interval=0.2) as flowing:  # under traffic
        stopped = run_level(topo, 1, settings)
        flowing.wait_for(len(flowing.ids) + 20)
    [error] = [e for e in stopped.errors if e.link == "c1.L1"]
    assert (error.topic, error.partition, error.offset) == (topic, 0, copied_to)
    assert f"retention gap: offsets {copied_to}..{cut - 1} (5) are no longer on c1" in error.error
    assert not [e for e in stopped.errors if e.link != "c1.L1"]  # every other link and partition went on

    dag = build_resolve_gap_dag(topo)
    assert {"link", "topic", "partition", "action", "offset", "dry_run"} <= set(dag.params)
    form = {"link": "c1.L1", "topic": topic, "partition": 0, "action": "skip"}
    dry = dag.test(run_conf={**form, "dry_run": True})
    assert dry.state == "success"
    assert xcom(dry, "resolve")["position"] == cut and xcom(dry, "resolve")["lost"] == [copied_to, cut - 1]
    assert run_level(topo, 1, settings).errors  # a dry run changes nothing: still stopped

    done = dag.test(run_conf={**form, "dry_run": False})
    assert done.state == "success"
    assert run_level(topo, 1, settings).ok
    converge(topo, settings)
    every = first + later + flowing.ids
    assert_exactly_once(kafka_clusters, ["c2"], topic, [m for m in every if m not in lost])
    # c1.L3 had not run before the deletion: c3 and c4 never had what c1 deleted (a new link starts at the first offset)
    assert_exactly_once(kafka_clusters, ["c1", "c3", "c4"], topic, [m for m in every if m not in deleted])
    on_c2 = [r.value.decode() for r in read_all(c2, topic, 2)]
    from_c1 = [v for v in on_c2 if v.startswith("c1|")]
    assert sorted(from_c1) == sorted(set(first + later) - lost) and len(from_c1) == len(set(from_c1))
    assert checkpointed(c2, "c1.L1", topic, 2, wait=30) == sum(stable_end_offsets(c1, topic, 2))

    again = dag.test(run_conf={**form, "dry_run": False})  # nothing left to skip: refused, nothing changed
    assert again.state == "failed"
    [ti] = [ti for ti in again.get_task_instances() if ti.task_id == "resolve"]
    assert ti.try_number == 1  # a refusal is not retried: the same decision cannot change


def _delete(bootstrap, cuts):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records(cuts, request_timeout=30).values():
        future.result(timeout=30)


def test_on_gap_restore_heals_from_the_archive_and_a_gap_it_lacks_stops_by_name_until_skipped(
        kafka_clusters, make_topic, airflow_home, s3_bucket, monkeypatch):
    from mirrorflow_airflow.factories.archive import build_archive_dag
    from mirrorflow_airflow.factories.levels import build_level_dags

    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic], extra=(
        "replication: {links: {c1.L1: {on_gap: restore}, c1.L3: {on_gap: restore}}}\n"
        "archive: {clusters: [c1], schedule: 1h}\n"))
    settings = clients(kafka_clusters, topo)
    monkeypatch.setenv("AIRFLOW_CONN_MIRRORFLOW_ARCHIVE", json.dumps({
        "conn_type": "aws", "login": s3_bucket.access_key_id, "password": s3_bucket.secret_access_key,
        "extra": {"endpoint_url": s3_bucket.endpoint_url, "region_name": s3_bucket.region,
                  "bucket": s3_bucket.bucket, "prefix": "heal"}}))
    location = dataclasses.replace(s3_bucket, prefix="heal").to_dict()
    c1 = kafka_clusters["c1"].bootstrap
    every = traffic(kafka_clusters, "c1", topic, 40) + traffic(kafka_clusters, "c3", topic, 20)
    converge(topo, settings)
    copied_to = stable_end_offsets(c1, topic, 2)  # where c1.L1 and c1.L3 stand
    every += traffic(kafka_clusters, "c1", topic, 40, start=40) + traffic(kafka_clusters, "c3", topic, 20, start=20)
    assert run_level(topo, 3, settings).ok  # c3's new messages reach c1 (c1.L1 passes them on); c1.L3 copies on
    archived = build_archive_dag(topo).test()
    assert archived.state == "success"
    archive_end = stable_end_offsets(c1, topic, 2)
    now = int(time.time() * 1000)
    unarchived = [f"c1|c1-k9|{i:06d}" for i in range(80, 86)]  # partition 1 only, after the archive ran
    produce(c1, topic, [(b"c1-k9", v.encode(), [("test.id", v.encode())], now) for v in unarchived], partition=1)
    every += unarchived
    cuts = [copied_to[0] + 5, archive_end[1] + 3]  # 0: inside the archive; 1: 3 offsets past its end
    lost = {r.value.decode() for r in read_all(c1, topic, 2) if r.partition == 1 and archive_end[1] <= r.offset < cuts[1]}
    assert len(lost) == 3
    _delete(c1, [TopicPartition(topic, p, cut) for p, cut in enumerate(cuts)])

    level1 = build_level_dags(topo)["mirror_level_1"]
    for t in level1.tasks:  # production retries; here one attempt shows the failure
        t.retries = 0
    run = level1.test()
    assert run.state == "failed"
    [error] = xcom(run, "copy")["errors"]
    assert error.startswith(f"c1.L1 (c1 -> c2) {topic}[1] at source offset {copied_to[1]}")
    assert (f"offsets {archive_end[1]}..{cuts[1] - 1} (3) of c1 {topic}[1] are in no archive (the archive of c1 "
            f"holds {copied_to[1]}..{archive_end[1] - 1} of the lost {copied_to[1]}..{cuts[1] - 1})") in error
    assert {l["link"]: l["copied"] for l in xcom(run, "copy")["links"]}["c1.L1"] > 0  # partition 0 healed, copied on
    level3 = run_level(topo, 3, settings, archive=location)
    assert [(e.link, e.partition) for e in level3.errors] == [("c1.L3", 1)]

    dag = build_resolve_gap_dag(topo)
    refused = dag.test(run_conf={"link": "c1.L1", "topic": topic, "partition": 1, "action": "restore"})
    assert refused.state == "failed"
    [ti] = [ti for ti in refused.get_task_instances() if ti.task_id == "resolve"]
    assert ti.try_number == 1
    for link in ("c1.L1", "c1.L3"):  # each restores what the archive holds of its own gap, loses only the rest
        run = dag.test(run_conf={"link": link, "topic": topic, "partition": 1, "action": "restore_and_skip"})
        assert run.state == "success"
        done = xcom(run, "resolve")
        assert done["missing"] == [[archive_end[1], cuts[1] - 1]] and done["position"] == cuts[1]
        assert done["restored"] > 0
        # the restored records reached the link's target: an asset event of the restore
        target = topo.link(link).default_target
        [(_, extra)] = asset_events(f"kafka://{kafka_clusters[target].bootstrap}/{topic}", run)
        assert extra["by"] == "restore" and extra["records"] == done["restored"]
    converge(topo, settings, archive=location)
    # c1 itself lost what retention took; everywhere else holds every message but the 3 no archive held, once
    assert_exactly_once(kafka_clusters, ["c2", "c3", "c4"], topic, [m for m in every if m not in lost])
