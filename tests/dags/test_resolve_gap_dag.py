"""mirror_resolve_gap under dag.test(): a level run under traffic stops on a retention gap, the operator skips it,
copying goes on, and every cluster holds every message that was not lost exactly once."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow_airflow.factories.resolve_gap import build_resolve_gap_dag
from tests.dags.test_level_dags import xcom
from tests.integration.kafka_io import read_all, stable_end_offsets
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

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


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
    [ti] = again.get_task_instances()
    assert ti.try_number == 1  # a refusal is not retried: the same decision cannot change
