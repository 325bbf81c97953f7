"""The errors of a bounded read (mirrorflow.kafka.ranges): what they name, and that they cross processes."""

from __future__ import annotations

import pickle

from confluent_kafka import KafkaError

from mirrorflow.errors import KafkaOperationError, MirrorflowError, OffsetGone, ReadStalled


def test_offset_gone_names_cluster_topic_partition_and_offset_and_pickles():
    error = OffsetGone("c1", "audit read of orders[3]", KafkaError(KafkaError._AUTO_OFFSET_RESET, "fetch failed"),
                       "orders", 3, 1200)
    assert isinstance(error, KafkaOperationError) and isinstance(error, MirrorflowError)
    assert str(error).startswith("cluster c1: offset 1200 of orders[3] is no longer on the cluster")
    assert "audit read of orders[3] stopped there" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.cluster, again.topic, again.partition, again.offset, again.code_name) == (
        OffsetGone, str(error), "c1", "orders", 3, 1200, "_AUTO_OFFSET_RESET")


def test_read_stalled_names_where_it_stood_and_pickles():
    error = ReadStalled("c2", "read t[0]", KafkaError(KafkaError._TIMED_OUT, "nothing for 30s"), "t", 0, 7)
    assert str(error) == "cluster c2: read t[0] failed [_TIMED_OUT]: nothing for 30s"
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.topic, again.partition, again.offset) == (ReadStalled, str(error), "t", 0, 7)
