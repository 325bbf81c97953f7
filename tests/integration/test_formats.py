"""The state mirrorflow keeps on a cluster, across versions: the first release's is read, a newer one refused by name.

The first test is an upgrade at the level of formats. The first release (commit
``dda5c22``, CHANGELOG.md), taken from this repository's history, writes each
kind of state on a real cluster with its own code. This code then reads each back
and must find the same facts. A format changed without a migration fails it.

The second test writes each kind of state as a newer mirrorflow would. Every
reader then stops with :class:`~mirrorflow.formats.NewerFormat`, naming the state
and where it is. None of them guesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.cluster_sync import Grant
from mirrorflow.cluster_sync.acl_sync import read_record
from mirrorflow.cluster_sync.config_memory import read_records
from mirrorflow.completeness.store import Position as AuditPosition
from mirrorflow.completeness.store import read_state
from mirrorflow.copy.state import CheckpointMeta, read_checkpoints
from mirrorflow.formats import NewerFormat
from mirrorflow.internal_names import (
    ACL_GRANTS_TOPIC,
    AUDIT_TOPIC,
    OFFSETS_TOPIC,
    TOPIC_CONFIGS_TOPIC,
    checkpoint_group,
)
from mirrorflow.kafka import ClusterClient
from mirrorflow.offsets.topic import read_positions
from mirrorflow_dev.install import FIRST_RELEASE, release_tree

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
#: What the first release writes, with its own code (run with its include/ first on the path).
OLD_WRITER = """
import json, sys
import mirrorflow
from confluent_kafka import Consumer, TopicPartition
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka import config_memory, grant_sync
from mirrorflow.kafka.grants import Grant
from mirrorflow.offsets import topic as offsets_topic
from mirrorflow.offsets.position import Position
from mirrorflow.completeness import store
from mirrorflow.copy.state.checkpoints import CheckpointMeta
from mirrorflow.internal_names import checkpoint_group

bootstrap, topic, principal, link = sys.argv[1:5]
client = ClusterClient("c5", {"bootstrap.servers": bootstrap})
offsets_topic.ensure_topic(client)
offsets_topic.publish(client, [Position("g-" + topic, topic, 0, "c5", 7, 123, {"c1:" + topic + ":0": 7}, 7, 1, 3)])
store.write_topic(client, 600, topic, {0: store.Position(5, "tid")}, {}, 1000)
store.write_verdicts(client, 600, {}, proven={(topic, 600000): 99})
config_memory.write_records(client, {topic: {"owner": "c1", "applied": {"retention.ms": "1000"}, "local": {}}})
grant = Grant("TOPIC", topic, "LITERAL", principal, "*", "READ", "ALLOW")
grant_sync._write_record(client, [(grant.key().encode(), grant_sync._KINDS["guard"]),
                                  (grant_sync._lifted_key(topic), json.dumps({"groups": ["g1"]}).encode())], 30)
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(link)})
meta = CheckpointMeta("s-id", "t-id", None, 123, (("c3", 4),)).encode()
consumer.commit(offsets=[TopicPartition(topic, 0, 5, meta)], asynchronous=False)
consumer.close()
print(mirrorflow.__file__)
"""


@pytest.fixture(scope="module")
def first_release(tmp_path_factory) -> Path:
    """The first release's ``include/``, from this repository's history (a fresh clone has it)."""
    return release_tree(tmp_path_factory.mktemp("first-release"), FIRST_RELEASE, "include") / "include"


def test_the_state_the_first_release_kept_is_read_by_this_code_as_it_was_meant(first_release, fifth_cluster,
                                                                                make_topic):
    topic = make_topic("c5", partitions=1)
    principal, link = f"User:fmt-{uuid.uuid4().hex[:6]}", f"c9.L{uuid.uuid4().hex[:4]}"
    env = {**os.environ, "PYTHONPATH": str(first_release)}
    done = subprocess.run([sys.executable, "-c", OLD_WRITER, fifth_cluster.bootstrap, topic, principal, link],
                          env=env, capture_output=True, text=True, timeout=180, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().startswith(str(first_release)), done.stdout  # the old code wrote, not this one

    client = ClusterClient("c5", {"bootstrap.servers": fifth_cluster.bootstrap})
    [position] = [p for p in read_positions(client).values() if p.topic == topic]
    assert (position.group, position.offset, position.frontier, position.seq) == (
        f"g-{topic}", 7, {f"c1:{topic}:0": 7}, 3)

    audit = read_state(client, 600)
    assert audit.positions[(topic, 0)] == AuditPosition(5, "tid")
    assert audit.horizons[topic] == 1000
    assert (topic, 600000) in audit.proven and (topic, 600000) not in audit.unannounced  # announced, never again

    assert read_records(client)[topic] == {"owner": "c1", "applied": {"retention.ms": "1000"}, "local": {}}

    grants = read_record(client)
    assert grants.made[Grant("TOPIC", topic, "LITERAL", principal, "*", "READ", "ALLOW")] == "guard"
    assert grants.lifted[topic] == frozenset({"g1"})

    offset, metadata = read_checkpoints(client, link, [TopicPartition(topic, 0)])[(topic, 0)]
    meta = CheckpointMeta.decode(metadata)
    assert offset == 5 and meta is not None
    assert (meta.source_topic_id, meta.target_topic_id, meta.at, meta.held) == ("s-id", "t-id", 123, (("c3", 4),))


def _produce(bootstrap: str, topic: str, key: bytes, value: dict) -> None:
    """One record to partition 0 of ``topic`` (created compacted if missing), as a newer mirrorflow would write it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=key, value=json.dumps(value).encode(), partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None], errors


def test_state_a_newer_mirrorflow_kept_is_refused_by_name_and_never_guessed(fifth_cluster, make_topic):
    # a tree of its own on c5 (a namespace), so that no other test reads these records
    client = ClusterClient("c5", {"bootstrap.servers": fifth_cluster.bootstrap}, namespace=f"f{uuid.uuid4().hex[:6]}")
    bootstrap, topic = fifth_cluster.bootstrap, make_topic("c5", partitions=1)

    _produce(bootstrap, client.own(OFFSETS_TOPIC), b"c5|g|t|0", {"v": 2, "group": "g"})
    with pytest.raises(NewerFormat, match=rf"positions at topic {client.own(OFFSETS_TOPIC)} on c5, offset 0 is "
                                          "format 2; this "
                                          "mirrorflow reads positions up to format 1"):
        read_positions(client)

    _produce(bootstrap, client.own(AUDIT_TOPIC), f"w600|pos|{topic}|0".encode(), {"v": 2, "next": 5})
    with pytest.raises(NewerFormat, match=rf"audit at topic {client.own(AUDIT_TOPIC)} on c5, key w600\|pos\|{topic}"):
        read_state(client, 600)

    _produce(bootstrap, client.own(TOPIC_CONFIGS_TOPIC), topic.encode(), {"v": 2, "applied": {}})
    with pytest.raises(NewerFormat, match=rf"topic-configs at topic .* key {topic} is format 2"):
        read_records(client)

    grant = Grant("TOPIC", topic, "LITERAL", "User:x", "*", "READ", "ALLOW")
    _produce(bootstrap, client.own(ACL_GRANTS_TOPIC), grant.key().encode(), {"by": "policy"})
    with pytest.raises(NewerFormat, match=r"acl-grants at topic .* is format 'by': 'policy'"):
        read_record(client)  # a purpose it does not know: counted as the sync's, the sync could delete it

    link = f"c9.L{uuid.uuid4().hex[:4]}"
    group = client.own(checkpoint_group(link))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 5, "mirrorflow:v2;source=a;floors=x")], asynchronous=False)
    consumer.close()
    with pytest.raises(NewerFormat, match=rf"checkpoint at group {group} on c5, {topic}\[0\] is "
                                          "format 2; this mirrorflow reads checkpoint up to format 1"):
        read_checkpoints(client, link, [TopicPartition(topic, 0)])
