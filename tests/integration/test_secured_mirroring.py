"""The tree mirrors on secured clusters with exactly the ACLs ``mirrorflow.acls`` prints, and no more.

Four secured KRaft clusters: c1..c3 reached over SASL_SSL/SCRAM-SHA-512 as
``User:mirrorflow``, c4 over mutual TLS as ``User:CN=mirrorflow`` (Kafka's
default principal of a certificate). The principal starts with no ACL at all;
the test grants what :func:`mirrorflow.acls.required_acls` derives from the
topology, each cluster's principal read from its connection settings.
"""

from __future__ import annotations

import uuid

from mirrorflow.acls import principal_of, required_acls
from mirrorflow.topology import parse_topology
from tests.fixtures.secured import bindings
from tests.integration.mirroring import FOUR, assert_exactly_once, converge, traffic


def _secured_tree(secured, prefix: str):
    settings = {name: secured.scram(name) for name in ("c1", "c2", "c3")}
    settings["c4"] = secured.mtls("c4")
    clusters = "\n".join(f'  {n}: {{bootstrap: "{s["bootstrap.servers"]}"}}' for n, s in settings.items())
    topology = parse_topology(f"clusters:\n{clusters}\ntree:{FOUR}\ntopics: [\"{prefix}\\\\..*\"]\n", source="test")
    return topology, settings


def _create(secured, topic: str, names, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    for name in names:
        admin = AdminClient(secured.admin(name))
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_the_tree_converges_with_exactly_the_documented_acls(mirrorflow_acls):
    secured = mirrorflow_acls
    prefix = f"sec{uuid.uuid4().hex[:6]}"
    topology, settings = _secured_tree(secured, prefix)
    principals = {name: principal_of(s) for name, s in settings.items()}
    assert principals == {"c1": "User:mirrorflow", "c2": "User:mirrorflow", "c3": "User:mirrorflow",
                          "c4": "User:CN=mirrorflow"}
    acls = required_acls(topology, principals, roles=["source", "target"])
    for cluster, granted in bindings(acls).items():
        secured.grant(cluster, granted)

    # The topic exists on c1 and c3 only: the copies create it on c2 and c4 (CREATE, and the
    # source's configuration read with DESCRIBE_CONFIGS), then those two produce as well.
    topic = f"{prefix}.orders"
    _create(secured, topic, ["c1", "c3"])
    ids = [i for origin in ("c1", "c3") for i in traffic(secured.kafka, origin, topic, 30)]
    converge(topology, settings)
    ids += [i for origin in ("c2", "c4") for i in traffic(secured.kafka, origin, topic, 30)]
    converge(topology, settings)
    assert_exactly_once(secured.kafka, ["c1", "c2", "c3", "c4"], topic, ids)
