"""Schema sync set-ups on the session clusters: example schemas, the four-cluster schemas topology, registry reads.

The example schemas (Avro ``ORDER``/``ORDER_V2``, JSON ``EVENT``, Protobuf
``ADDRESS``/``CUSTOMER``) are registered under the primary's subject prefix ``P``
by :func:`register_all`; :func:`schema_topology` gives every test its own storage
topic, so tests sharing the clusters never see each other's registrations.
"""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Consumer

from mirrorflow.kafka.compacted import ensure_compacted
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.schemas.topic_store import TOPIC_CONFIG
from tests.integration.mirroring import FOUR, topology
from tests.integration.registry import PrimaryRegistry, registry_state

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
ORDER_V2 = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                       "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                                  {"name": "qty", "type": "int", "default": 1}]})
EVENT = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                    "properties": {"kind": {"type": "string"}}})
ADDRESS = 'syntax = "proto3";\npackage acme;\nmessage Address { string city = 1; }\n'
CUSTOMER = ('syntax = "proto3";\npackage acme;\nimport "address.proto";\n'
            'message Customer { string name = 1; acme.Address address = 2; }\n')

P = "acme-main-prod-"   # the primary's subject prefix


def schema_topology(kafka_clusters, topics=("unused",), names=("c1", "c2", "c3", "c4")):
    storage = f"_mirrorflow.test-schemas-{uuid.uuid4().hex[:8]}"
    extra = f"""
schemas:
  primary: c1
  clusters:
    c1: {{topic: "{storage}", subject_format: "{{tenant}}-{{instance}}-{{environment}}-{{topic}}",
          values: {{tenant: acme, instance: main, environment: prod}}}}
    c2: {{topic: "{storage}", subject_format: "{{tenant}}-{{environment}}-{{topic}}",
          values: {{tenant: acme, environment: prod}}}}
    c3: {{topic: "{storage}"}}
    c4: {{topic: "{storage}", subject_format: "{{tenant}}-{{environment}}-{{topic}}",
          values: {{tenant: acme, environment: prod}}}}
"""
    topo = topology(kafka_clusters, FOUR, topics, names, extra=extra)
    ensure_compacted(ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap}), storage,
                     TOPIC_CONFIG)
    return topo, storage, PrimaryRegistry(kafka_clusters["c1"].bootstrap, storage)


def plant(kafka_clusters, cluster: str, storage: str, subject: str, first_id: int) -> None:
    """A registration made on the target itself: a different schema under ``subject`` version 1."""
    bootstrap = kafka_clusters[cluster].bootstrap
    ensure_compacted(ClusterClient(cluster, {"bootstrap.servers": bootstrap}), storage, TOPIC_CONFIG)
    local = PrimaryRegistry(bootstrap, storage)
    local.ids[("planted",)] = first_id - 1
    local.register(subject, json.dumps({"type": "record", "name": "Other", "fields": []}))


def state_of(kafka_clusters, name, storage):
    return registry_state(kafka_clusters[name].bootstrap, name, storage)


def register_all(reg):
    ids = {}
    ids["orders"] = reg.register(P + "orders-value", ORDER)
    ids["events"] = reg.register(P + "events-value", EVENT, "JSON")
    ids["address"] = reg.register(P + "address", ADDRESS, "PROTOBUF")
    ids["customers"] = reg.register(P + "customers-value", CUSTOMER, "PROTOBUF",
                                    [{"name": "address.proto", "subject": P + "address", "version": 1}])
    ids["orders2"] = reg.register(P + "orders-value", ORDER_V2)
    reg.set_config(P + "orders-value", "FULL")
    reg.set_config(None, "BACKWARD")
    return ids


def only_message(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return msg.value()
        raise AssertionError(f"no message on {topic} at {bootstrap}")
    finally:
        consumer.close()
