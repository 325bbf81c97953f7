"""``replication.on_malformed: fail``: a flags header mirrorflow did not write stops its partition at it, by name."""

from __future__ import annotations

import uuid

import pytest

from mirrorflow import copyflags
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import build_spec
from mirrorflow.copy.txn_groups import TXN_GROUPS
from mirrorflow.topology import parse_topology
from mirrorflow.topology.routes import effective_links
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import checkpointed

pytestmark = pytest.mark.kafka


def test_on_malformed_fail_stops_the_partition_at_the_record_and_the_rest_of_its_group_copies(
        kafka_clusters, make_topic):
    partitions = TXN_GROUPS + 1  # 0 and TXN_GROUPS share a transaction group: the group's path, then one by one
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    for p in (0, TXN_GROUPS):
        produce(c1, topic, [(b"k", f"{p}-{i}".encode(),
                             [(copyflags.HEADER, b"07")] if (p, i) == (0, 5) else None, None) for i in range(10)],
                partition=p)
    topo = parse_topology(f"clusters:\n  c1: {{bootstrap: '{c1}'}}\n  c2: {{bootstrap: '{c2}'}}\n"
                          f"tree: {{level: 1, children: [c1, c2]}}\ntopics: ['{topic}']\n"
                          f"replication: {{on_malformed: fail}}\n", source="test")
    links = [link for link in effective_links(topo, 1) if link.source == "c1"]
    settings = {n: {"bootstrap.servers": kafka_clusters[n].bootstrap} for n in ("c1", "c2")}
    result = run_job(build_spec(topo, 1, f"malformed-{uuid.uuid4().hex[:6]}", links, settings))

    [error] = result.errors
    assert (error.partition, error.offset) == (0, 5)
    assert error.error == (f"the record at c1 {topic}[0] offset 5 carries a malformed copy flags header b'07': leading "
                           f"zero; flags are written in canonical decimal (replication.on_malformed: fail); nothing "
                           f"past it is copied (fix its producer, then set on_malformed: fresh, or skip the record)")
    copied = read_all(c2, topic, partitions)
    assert [r.value.decode() for r in copied if r.partition == 0] == [f"0-{i}" for i in range(5)]
    assert [r.value.decode() for r in copied if r.partition == TXN_GROUPS] == [f"{TXN_GROUPS}-{i}" for i in range(10)]
    # partition 0 stopped at 5, the other reached its end
    assert checkpointed(c2, links[0].link_id, topic, partitions, wait=10) == 5 + 10


def test_a_header_key_that_is_not_utf8_stops_its_partition_by_name_and_leaves_no_transaction_open(
        kafka_clusters, make_topic):
    from tests.integration.kafka_io import stable_end_offsets
    from tests.integration.raw_produce import produce_with_header_keys

    partitions = TXN_GROUPS + 1  # 0 and TXN_GROUPS share a transaction group
    topic = make_topic("c1", partitions=partitions)
    make_topic("c2", partitions=partitions, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    produce_with_header_keys(c1, topic, 0, [(f"0-{i}".encode(), b"trace\xff\xfe" if i == 3 else b"trace")
                                            for i in range(6)])
    produce(c1, topic, [(b"k", f"{TXN_GROUPS}-{i}".encode(), None, None) for i in range(6)], partition=TXN_GROUPS)
    topo = parse_topology(f"clusters:\n  c1: {{bootstrap: '{c1}'}}\n  c2: {{bootstrap: '{c2}'}}\n"
                          f"tree: {{level: 1, children: [c1, c2]}}\ntopics: ['{topic}']\n", source="test")
    links = [link for link in effective_links(topo, 1) if link.source == "c1"]
    settings = {n: {"bootstrap.servers": kafka_clusters[n].bootstrap} for n in ("c1", "c2")}
    result = run_job(build_spec(topo, 1, f"utf8-{uuid.uuid4().hex[:6]}", links, settings))

    [error] = result.errors
    assert (error.partition, error.offset) == (0, 3)
    assert error.error == (f"the record at c1 {topic}[0] offset 3 has a header key that is not valid UTF-8, which "
                           f"the Kafka client cannot read; nothing past it is copied (fix its producer, then skip "
                           f"the record: mirror_resolve_gap)")
    stable_end_offsets(c2, topic, partitions, timeout=5)  # no transaction left open on the target
    copied = read_all(c2, topic, partitions)
    assert [r.value.decode() for r in copied if r.partition == 0] == [f"0-{i}" for i in range(3)]
    assert [r.value.decode() for r in copied if r.partition == TXN_GROUPS] == [f"{TXN_GROUPS}-{i}" for i in range(6)]
    assert checkpointed(c2, links[0].link_id, topic, partitions, wait=10) == 3 + 6

    # A reader that is not the copier (here the scan that heals and recovers links) names it too.
    from mirrorflow.copy.state.copies import CopyScanner
    from mirrorflow.errors import UnreadableRecord
    from mirrorflow.kafka.config import ClusterClient

    with CopyScanner(ClusterClient("c1", {"bootstrap.servers": c1})) as scanner:
        with pytest.raises(UnreadableRecord) as raised:
            list(scanner.records(topic, 0, timeout=10))
    assert str(raised.value) == (f"cluster c1: the record at {topic}[0] offset 3 has a header key that is not valid "
                                 f"UTF-8, which the Kafka client cannot read")
