"""Schema sync through a real registry's REST API (Apicurio Registry, Confluent-compatible), on real clusters.

The primary is the registry process; registrations are made with
confluent-kafka's own client and serializer. Targets are registry storage
topics on real clusters. A REST *target* needs IMPORT mode, which this
registry does not have: the test checks that mirrorflow refuses it by name and
writes nothing there.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from mirrorflow.schemas.records import CONFIG, SCHEMA, Key
from mirrorflow.schemas.sync import stores_for, sync
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology
from tests.integration.registry import decode_avro, registry_state
from tests.integration.schemas import (
    ADDRESS,
    CUSTOMER,
    EVENT,
    ORDER,
    ORDER_V2,
    only_message,
    schema_topology,
)

pytestmark = [pytest.mark.kafka]


def rest_primary_topology(kafka_clusters, registry_url: str, tenant: str, topics=("unused",)):
    storage = f"_mirrorflow.test-schemas-{uuid.uuid4().hex[:8]}"
    extra = f"""
schemas:
  primary: c1
  clusters:
    c1: {{via: rest, url: "{registry_url}", subject_format: "{{tenant}}-{{topic}}", values: {{tenant: {tenant}}}}}
    c2: {{topic: "{storage}", subject_format: "{{tenant}}-prod-{{topic}}", values: {{tenant: {tenant}}}}}
    c3: {{topic: "{storage}", subject_format: "{{topic}}"}}
"""
    return topology(kafka_clusters, FOUR, topics, extra=extra), storage


def test_a_rest_primary_syncs_to_storage_topics_with_ids_and_versions_kept(kafka_clusters, make_topic,
                                                                           schema_registry):
    tenant = f"t{uuid.uuid4().hex[:6]}"   # the registry is shared by the session: own subject names
    topic = topic_everywhere(make_topic, partitions=1)
    topo, storage = rest_primary_topology(kafka_clusters, schema_registry.url, tenant, [topic])
    sr = SchemaRegistryClient({"url": schema_registry.url})
    p = f"{tenant}-"
    order_v1 = sr.register_schema(p + "orders-value", Schema(ORDER, "AVRO"))
    event = sr.register_schema(p + "events-value", Schema(EVENT, "JSON"))
    address = sr.register_schema(p + "address", Schema(ADDRESS, "PROTOBUF"))
    customer = sr.register_schema(p + "customers-value", Schema(
        CUSTOMER, "PROTOBUF", [SchemaReference("address.proto", p + "address", 1)]))
    sr.set_compatibility(p + "orders-value", "FORWARD")
    # A message serialised by confluent-kafka against the primary registry (registers version 2).
    serialize = AvroSerializer(sr, ORDER_V2, conf={"auto.register.schemas": True,
                                                   "subject.name.strategy": lambda ctx, name: p + "orders-value"})
    payload = serialize({"id": 7, "item": "jam", "qty": 2}, SerializationContext(topic, MessageField.VALUE))
    sr.clear_latest_caches()
    order_v2 = sr.get_latest_version(p + "orders-value")
    assert order_v2.version == 2

    primary, naming, targets = stores_for(topo, clients(kafka_clusters, topo))
    result = sync(primary, naming, targets)
    by_cluster = {t.cluster: t for t in result.targets}
    # c4 has no entry in schemas.clusters: its storage topic is the default _schemas, format {topic};
    # this test only checks the two it configured.
    for cluster, prefix in (("c2", f"{tenant}-prod-"), ("c3", "")):
        assert by_cluster[cluster].error is None and by_cluster[cluster].conflicts == []
        st = registry_state(kafka_clusters[cluster].bootstrap, cluster, storage)
        expect = {("orders-value", 1): order_v1, ("events-value", 1): event, ("address", 1): address,
                  ("customers-value", 1): customer, ("orders-value", 2): order_v2.schema_id}
        for (name, version), sid in expect.items():
            value = st.get(Key(SCHEMA, prefix + name, version))
            assert value is not None and value["id"] == sid, (cluster, name, version, value)
        refs = st.get(Key(SCHEMA, prefix + "customers-value", 1))["references"]
        assert refs == [{"name": "address.proto", "subject": prefix + "address", "version": 1}]
        assert st.get(Key(CONFIG, prefix + "orders-value"))["compatibilityLevel"] == "FORWARD"

    again = sync(*stores_for(topo, clients(kafka_clusters, topo)))
    assert sum(len(t.written) for t in again.targets if t.cluster in ("c2", "c3")) == 0, "a rerun changes nothing"

    producer = Producer({"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    producer.produce(topic, key=b"o-7", value=payload)
    assert producer.flush(30) == 0
    converge(topo, clients(kafka_clusters, topo))
    for cluster in ("c2", "c3"):
        state = registry_state(kafka_clusters[cluster].bootstrap, cluster, storage)
        assert decode_avro(only_message(kafka_clusters[cluster].bootstrap, topic), state) == \
            {"id": 7, "item": "jam", "qty": 2}


def test_a_rest_target_without_import_mode_is_refused_by_name_and_left_as_it_was(kafka_clusters, schema_registry):
    topo, storage, reg = schema_topology(kafka_clusters)
    reg.register("acme-main-prod-orders-value", ORDER)
    data = topo.to_dict()
    data["schemas"]["clusters"]["c3"] = {"via": "rest", "url": schema_registry.url}
    from mirrorflow.topology.model import Topology

    topo = Topology.parse(data)
    sr = SchemaRegistryClient({"url": schema_registry.url})
    before = sorted(sr.get_subjects(deleted=True))

    result = sync(*stores_for(topo, clients(kafka_clusters, topo)))
    c3 = next(t for t in result.targets if t.cluster == "c3")
    assert c3.written == []
    assert "has no mode API" in c3.error and "cannot register with explicit ids" in c3.error
    assert any(p.startswith("cluster c3: writing to registry http://127.0.0.1") for p in result.problems)
    assert sorted(sr.get_subjects(deleted=True)) == before, "nothing is written to the refused registry"
    c2 = next(t for t in result.targets if t.cluster == "c2")
    assert c2.error is None and len(c2.written) == 1, "the other targets still sync"
