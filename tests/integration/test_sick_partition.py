"""One target partition without a leader fails alone; the rest of its transaction group copies (real brokers).

The target is a three-node KRaft cluster of its own (each node broker and controller);
the topic's partitions have one replica each, so stopping a node leaves its partitions
without a leader while the quorum (two of three) goes on.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.group import copy_group
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import TXN_GROUPS
from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.kafka import LocalCluster, new_cluster_id
from mirrorflow_dev.process import HOST, free_port
from tests.fixtures.kafka import TEST_BROKERS, _runs_root
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka

_pause = threading.Event()  # never set: .wait(t) paces the watch loop


@pytest.fixture(scope="module")
def three_nodes(kafka_distribution):
    """A three-node cluster (ids 1..3), started together (a quorum needs two of them), killed at the end."""
    run_dir = Path(_runs_root()) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-three"
    ports = [(free_port(), free_port()) for _ in range(3)]
    voters = ",".join(f"{i + 1}@{HOST}:{controller}" for i, (_, controller) in enumerate(ports))
    cluster_id = new_cluster_id()
    config = {**TEST_BROKERS["broker_config"], "offsets.topic.replication.factor": "1",
              "transaction.state.log.replication.factor": "1"}
    nodes = [LocalCluster(f"n{i + 1}", run_dir / f"n{i + 1}", port, controller, kafka_distribution, config=config,
                          jvm_options=TEST_BROKERS["jvm_options"], node_id=i + 1, quorum_voters=voters,
                          cluster_id=cluster_id, heap_max="512m")
             for i, (port, controller) in enumerate(ports)]
    try:
        for node in nodes:
            node.launch()
        for node in nodes:
            node.wait_ready()
        yield nodes
    finally:
        for node in nodes:
            node.kill()  # its data is thrown away: no controlled shutdown (one node alone has no quorum for it)


def test_a_partition_without_a_leader_fails_alone_and_the_rest_of_its_group_copies(
        kafka_clusters, make_topic, three_nodes):
    bootstrap = ",".join(n.bootstrap for n in three_nodes)
    partitions = TXN_GROUPS + 1  # 0 and TXN_GROUPS share transaction group 0
    topic = make_topic("c1", partitions=partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # partition 0 on node 1, partition TXN_GROUPS on node 2, the rest anywhere but node 2
    assignment = [[1], [3], [1], [3], [2]][:partitions] if partitions == 5 else None
    assert assignment is not None, "the test's assignment is written for four transaction groups"
    for future in admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)]).values():
        future.result(timeout=30)
    c1 = kafka_clusters["c1"].bootstrap
    for p in (0, TXN_GROUPS):
        produce(c1, topic, [(b"k", f"{p}-{i}".encode(), None, None) for i in range(50)], partition=p)

    three_nodes[1].stop()  # node 2: partition TXN_GROUPS has no leader now
    deadline = time.monotonic() + 60
    while admin.list_topics(topic, timeout=10).topics[topic].partitions[TXN_GROUPS].leader != -1:
        assert time.monotonic() < deadline, "the controller never took the leader away"
        _pause.wait(0.2)

    tasks = [PartitionTask(link_id="c1.L1", level=1, source="c1", target="three", topic=topic, partition=p,
                           end_offset=50) for p in (0, TXN_GROUPS)]
    pool = CopyClients()
    try:
        fine, sick = copy_group(tasks, ClusterClient("c1", {"bootstrap.servers": c1}),
                                ClusterClient("three", {"bootstrap.servers": bootstrap}), clients=pool)
    finally:
        pool.close()
    assert fine.ok and (fine.copied, fine.next_offset) == (50, 50), fine.error
    assert sick.error == (f"three {topic}[{TXN_GROUPS}] has no leader (its broker is down?): not copied in this run, "
                          f"nothing written; the other partitions of its transaction group copy on")
    assert sick.error_code == KafkaError.LEADER_NOT_AVAILABLE and sick.copied == 0
    assert [r.value.decode() for r in read_all(bootstrap, topic, 1)] == [f"0-{i}" for i in range(50)]
