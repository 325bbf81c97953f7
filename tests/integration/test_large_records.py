"""A record whose copy does not fit its target stops its partition by name (real brokers).

That records over librdkafka's 1 MB default travel, and one at exactly its topic's
limit too, is shown through the level DAGs in tests/dags/test_level_dags.py.
"""

from __future__ import annotations

import pytest

from mirrorflow.cluster_sync import with_headroom
from tests.integration.kafka_io import read_all
from tests.integration.record_size import LIMIT, produce_large

pytestmark = pytest.mark.kafka

def test_a_record_too_large_for_its_target_stops_its_partition_naming_both_limits(kafka_clusters, make_topic):
    from mirrorflow.copy.engine.partition import copy_partition
    from mirrorflow.copy.task import PartitionTask
    from mirrorflow.kafka.config import ClusterClient

    topic = make_topic("c1", partitions=1, config={"max.message.bytes": str(LIMIT)})
    make_topic("c2", partitions=1, name=topic, config={"max.message.bytes": "1000000"})
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    assert produce_large(c1, topic, b"s" * 1000) is None
    assert produce_large(c1, topic, b"m" * 2_000_000) is None
    task = PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic=topic, partition=0, end_offset=2,
                         max_message_bytes=1000000, source_max_message_bytes=LIMIT)
    # Uncompressed copies (the cluster's own codec): the producer refuses the record itself, before sending,
    # and names its size. Compressed, the broker decides (tests/integration/test_copy_compression.py).
    result = copy_partition(task, ClusterClient("c1", {"bootstrap.servers": c1}),
                            ClusterClient("c2", {"bootstrap.servers": c2, "compression.type": "none"}))
    assert (result.error_offset, result.next_offset, result.copied) == (1, 1, 1)
    assert result.error == (
        f"the copy of the record at c1 {topic}[0] offset 1 (2,000,000 bytes of key and value, plus headers) is too "
        f"large for c2's {topic}, which allows 1,000,000 bytes (max.message.bytes); the source topic on c1 allows "
        f"5,242,880. Raise max.message.bytes of {topic} on c2 to at least the source's plus room for the copy's "
        f"headers, or on the topic's config owner, whose value the next run carries there (docs/topics.md, "
        f"'Record size'); nothing past the record is copied (MSG_SIZE_TOO_LARGE)")
    assert [len(r.value) for r in read_all(c2, topic, 1)] == [1000]


def test_headroom_is_given_once_and_recognised_again():
    assert with_headroom(1_048_588) == 1_053_783 and with_headroom(LIMIT) == 5_248_087
    assert with_headroom(with_headroom(LIMIT)) == with_headroom(LIMIT)
    assert all(with_headroom(n) - n >= 1112 for n in range(4096 * 3, 4096 * 5) if n % 4096 != 1111)
