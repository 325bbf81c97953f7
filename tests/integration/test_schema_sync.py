"""Schema sync through the registries' storage topics, on real clusters.

Each test uses its own storage topic name (``schemas.clusters.<c>.topic``) so
tests sharing the session's clusters never see each other's registrations.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer

from mirrorflow.kafka.compacted import WRITE_CHUNK
from mirrorflow.schemas.plan import plan_target
from mirrorflow.schemas.records import CONFIG, MODE, SCHEMA, Key
from mirrorflow.schemas.sync import SchemaSyncFailed, stores_for, sync
from mirrorflow.topology import Topology
from tests.integration.mirroring import clients, converge, topic_everywhere
from tests.integration.registry import decode_avro, encode_avro
from tests.integration.schemas import ORDER, ORDER_V2, P, only_message, plant, register_all, schema_topology, state_of

pytestmark = [pytest.mark.kafka]

def run_sync(topo, kafka_clusters, dry_run=False):
    primary, naming, targets = stores_for(topo, clients(kafka_clusters, topo))
    return sync(primary, naming, targets, dry_run=dry_run)


def test_registrations_reach_every_target_translated_with_ids_and_versions_kept(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic, partitions=1)
    topo, storage, reg = schema_topology(kafka_clusters, [topic])
    # c4 names its topics acme-prod-<topic> and has no subject_format: its subjects follow its topic names
    data = topo.to_dict()
    data["clusters"]["c4"]["names"] = {"topics": "{tenant}-{environment}-{topic}",
                                       "values": {"tenant": "acme", "environment": "prod"}}
    data["schemas"]["clusters"]["c4"] = {"topic": storage}
    topo = Topology.parse(data)
    ids = register_all(reg)

    result = run_sync(topo, kafka_clusters)
    assert result.problems == []
    assert {t.cluster: len(t.written) for t in result.targets} == {"c2": 7, "c3": 7, "c4": 7}

    names = {"c2": "acme-prod-", "c3": "", "c4": "acme-prod-"}
    for cluster, prefix in names.items():
        st = state_of(kafka_clusters, cluster, storage)
        for logical, (sid, version) in ids.items():
            subject = prefix + {"orders2": "orders-value"}.get(logical, logical if logical == "address"
                                                                   else f"{logical}-value")
            value = st.get(Key(SCHEMA, subject, version))
            assert value is not None, f"{cluster}: {subject} v{version} missing"
            assert (value["id"], value["version"], value["subject"]) == (sid, version, subject)
        customers = st.get(Key(SCHEMA, prefix + "customers-value", 1))
        assert customers["references"] == [{"name": "address.proto", "subject": prefix + "address", "version": 1}]
        assert customers["schemaType"] == "PROTOBUF"
        assert st.get(Key(SCHEMA, prefix + "events-value", 1))["schemaType"] == "JSON"
        assert st.get(Key(CONFIG, prefix + "orders-value")) == {"compatibilityLevel": "FULL"}
        assert st.get(Key(CONFIG, None)) == {"compatibilityLevel": "BACKWARD"}

    again = run_sync(topo, kafka_clusters)
    assert again.problems == [] and again.written == 0, "a rerun must change nothing"

    # A message serialised against the primary travels with the level copy and decodes
    # on every target with nothing but that target's registry state.
    sid = ids["orders2"][0]
    producer_conf = {"bootstrap.servers": kafka_clusters["c1"].bootstrap}
    producer = Producer(producer_conf)
    producer.produce(topic, key=b"o-1", value=encode_avro(sid, ORDER_V2, {"id": 42, "item": "tea", "qty": 3}))
    assert producer.flush(30) == 0
    converge(topo, clients(kafka_clusters, topo))
    for cluster in ("c2", "c3", "c4"):
        payload = only_message(kafka_clusters[cluster].bootstrap, topo.topic_naming(cluster).render(topic))
        decoded = decode_avro(payload, state_of(kafka_clusters, cluster, storage))
        assert decoded == {"id": 42, "item": "tea", "qty": 3}, cluster


def test_deletes_compatibility_and_mode_propagate(kafka_clusters):
    topo, storage, reg = schema_topology(kafka_clusters)
    register_all(reg)
    assert run_sync(topo, kafka_clusters).problems == []

    reg.soft_delete(P + "orders-value", 1)
    reg.soft_delete(P + "events-value", 1)
    reg.hard_delete(P + "events-value", 1)
    reg.set_config(P + "orders-value", "NONE")
    reg.set_mode(P + "orders-value", "READONLY")
    reg.set_mode(None, "READWRITE")
    result = run_sync(topo, kafka_clusters)
    assert result.problems == []
    kinds = sorted(w["kind"] for w in result.targets[0].written)
    assert kinds == ["config", "delete", "delete", "mode", "mode"]

    for cluster, prefix in (("c2", "acme-prod-"), ("c3", "")):
        st = state_of(kafka_clusters, cluster, storage)
        assert st.get(Key(SCHEMA, prefix + "orders-value", 1))["deleted"] is True
        assert st.get(Key(SCHEMA, prefix + "orders-value", 2))["deleted"] is False
        assert Key(SCHEMA, prefix + "events-value", 1) in st and st.get(Key(SCHEMA, prefix + "events-value", 1)) is None
        assert st.get(Key(CONFIG, prefix + "orders-value")) == {"compatibilityLevel": "NONE"}
        assert st.get(Key(MODE, prefix + "orders-value")) == {"mode": "READONLY"}
        assert st.get(Key(MODE, None)) == {"mode": "READWRITE"}

    reg.set_mode(P + "orders-value", None)  # subject mode removed on the primary: removed everywhere
    assert run_sync(topo, kafka_clusters).written == 3
    assert state_of(kafka_clusters, "c2", storage).get(Key(MODE, "acme-prod-orders-value")) is None
    assert run_sync(topo, kafka_clusters).written == 0


def test_a_conflict_stops_only_that_subject_on_that_target(kafka_clusters):
    topo, storage, reg = schema_topology(kafka_clusters)
    register_all(reg)
    plant(kafka_clusters, "c3", storage, "orders-value", first_id=101)  # before any sync
    before = state_of(kafka_clusters, "c3", storage).keys_of("orders-value")

    with pytest.raises(SchemaSyncFailed) as failed:
        run_sync(topo, kafka_clusters).raise_for_problems()
    [problem] = failed.value.problems
    assert problem.startswith("cluster c3: subject 'orders-value' version 1 id 1:")
    assert "different schema" in problem

    c3 = state_of(kafka_clusters, "c3", storage)
    assert c3.keys_of("orders-value") == before, "nothing on the target changes for the conflicting subject"
    assert c3.get(Key(SCHEMA, "orders-value", 1))["schema"] != ORDER
    assert c3.get(Key(SCHEMA, "customers-value", 1)) is not None, "the other subjects still sync"
    assert state_of(kafka_clusters, "c2", storage).get(Key(SCHEMA, "acme-prod-orders-value", 2)) is not None


def test_an_interrupted_sync_completes_on_the_next_run_identical_to_an_uninterrupted_one(kafka_clusters):
    topo, storage, reg = schema_topology(kafka_clusters)
    register_all(reg)
    reg.soft_delete(P + "orders-value", 1)
    primary, naming, targets = stores_for(topo, clients(kafka_clusters, topo))
    by_name = {store.cluster: (store, fmt) for store, fmt in targets}
    # c4 (same naming as c2) is interrupted: a stopped writer leaves a prefix of its records written.
    store, fmt = by_name["c4"]
    plan = plan_target("c4", primary.read(), store.read(), naming, fmt, None)
    assert len(plan.writes) > 4
    store.apply(plan.writes[:3], lambda w: None)
    assert len(state_of(kafka_clusters, "c4", storage).entries) == 3

    result = sync(primary, naming, [by_name["c2"], by_name["c4"]])
    assert result.problems == []
    assert {t.cluster: len(t.written) for t in result.targets} == {"c2": len(plan.writes), "c4": len(plan.writes) - 3}
    assert state_of(kafka_clusters, "c4", storage).entries == state_of(kafka_clusters, "c2", storage).entries


KILLED_SYNC = """
import sys
import mirrorflow.kafka.compacted as compacted
from mirrorflow.topology.load import load_topology
from mirrorflow.schemas.sync import stores_for, sync

STOP_AFTER = int(sys.argv[2])


class PausingProducer(compacted.Producer):
    # Halfway through a chunk, wait until what was sent is acknowledged, say so, and block:
    # the test SIGKILLs the process here, so exactly STOP_AFTER records have landed and the
    # rest of the chunk never leaves the process.
    sent = 0

    def produce(self, *args, **kwargs):
        if PausingProducer.sent == STOP_AFTER:
            assert self.flush(60) == 0
            print("paused", flush=True)
            sys.stdin.read()
        PausingProducer.sent += 1
        return super().produce(*args, **kwargs)


compacted.Producer = PausingProducer
topo = load_topology(sys.argv[1])
primary, naming, targets = stores_for(topo, {n: {"bootstrap.servers": b} for n, b in
                                             (a.split("=", 1) for a in sys.argv[3:])})
sync(primary, naming, [t for t in targets if t[0].cluster == "c4"])
print("finished")
"""


@pytest.mark.timeout(300)  # bounds the blocking read of the writer's output below
def test_a_sync_killed_while_writing_completes_on_rerun_identical_to_an_uninterrupted_one(
        kafka_clusters, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from confluent_kafka import TopicPartition

    topo, storage, reg = schema_topology(kafka_clusters)
    # Several of the writer's chunks (WRITE_CHUNK records, each acknowledged before the next is
    # sent); written straight into the primary's storage topic.
    total = 5 * WRITE_CHUNK
    producer = Producer({"bootstrap.servers": kafka_clusters["c1"].bootstrap, "enable.idempotence": True})
    for i in range(total):
        subject, version = f"{P}bulk{i // 2:05d}-value", i % 2 + 1
        fields = [{"name": "f", "type": "int", "default": 0}] if version == 2 else []
        value = {"subject": subject, "version": version, "id": i + 1, "deleted": False,
                 "schema": json.dumps({"type": "record", "name": f"R{i // 2}", "fields": fields})}
        producer.produce(storage, key=Key(SCHEMA, subject, version).to_bytes(), value=json.dumps(value).encode(),
                         partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    c4 = kafka_clusters["c4"].bootstrap

    def landed() -> int:
        consumer = Consumer({"bootstrap.servers": c4, "group.id": "t-watermark"})
        try:
            return consumer.get_watermark_offsets(TopicPartition(storage, 0), timeout=10, cached=False)[1]
        finally:
            consumer.close()

    # The writer is killed in the middle of its second chunk, with the chunk's first half
    # acknowledged and nothing in flight (a kill with requests in flight lets the broker append
    # them after the process is gone, which makes the count this test checks a race).
    stop_after = WRITE_CHUNK + WRITE_CHUNK // 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    addresses = [f"{n}={kafka_clusters[n].bootstrap}" for n in ("c1", "c2", "c3", "c4")]
    writer = subprocess.Popen([sys.executable, "-c", KILLED_SYNC, str(tmp_path / "topology.yaml"), str(stop_after),
                               *addresses], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    try:
        line = writer.stdout.readline()  # blocks until the writer pauses or exits
        assert line == b"paused\n", f"the sync should pause mid-write, it printed {line!r}"
        os.kill(writer.pid, signal.SIGKILL)
        assert writer.wait(30) == -signal.SIGKILL
    finally:
        if writer.poll() is None:
            writer.kill()
    partial = landed()
    print(f"sync killed after {partial} of {total} records reached c4")
    assert partial == stop_after

    result = run_sync(topo, kafka_clusters)
    assert result.problems == []
    written = {t.cluster: len(t.written) for t in result.targets}
    assert written == {"c2": total, "c3": total, "c4": total - partial}
    assert state_of(kafka_clusters, "c4", storage).entries == state_of(kafka_clusters, "c2", storage).entries
