"""Records an application derives from mirrored ones, forwarding their headers, are fresh data where they are written.

Kafka Streams (and most consume-transform-produce code) copies an input record's
headers to what it derives from it. A record derived on c2 from a copy then
carries the copy's flags and origin; it is a copy only if that origin names its
own topic and partition (:mod:`mirrorflow.provenance`), so the derived topic must
reach every cluster, once, while the mirrored topic still never loops.
"""

from __future__ import annotations

import pytest

from mirrorflow import copyflags, provenance
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import (
    FOUR,
    assert_exactly_once,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = pytest.mark.kafka


def test_a_topic_derived_with_forwarded_headers_reaches_every_cluster_once_and_copies_never_loop(
        kafka_clusters, make_topic):
    raw = topic_everywhere(make_topic, partitions=2)
    derived = topic_everywhere(make_topic, partitions=2)
    topo = topology(kafka_clusters, FOUR, [raw, derived])
    settings = clients(kafka_clusters, topo)
    expected_raw = traffic(kafka_clusters, "c1", raw, 30) + traffic(kafka_clusters, "c3", raw, 20)
    assert run_level(topo, 1, settings).ok  # c1's reach c2 (and c3's c4): the application's input

    # the application on c2: reads the mirrored raw topic, writes one derived record per input, headers forwarded
    inputs = read_all(kafka_clusters["c2"].bootstrap, raw, 2)
    assert len(inputs) == 30 and all(copyflags.read_flags(list(r.headers))[0] for r in inputs)  # copies, all
    expected_derived, same_partition = [], 0
    by_partition: dict[int, list] = {0: [], 1: []}
    for i, r in enumerate(inputs):
        value = f"c2|c2-k{i % 5}|{i:06d}"
        expected_derived.append(value)
        partition = i % 5 % 2  # by key; some land in their input's partition number: that proves nothing either
        same_partition += partition == r.partition
        by_partition[partition].append((r.key, value.encode(), list(r.headers), r.timestamp))
    assert 0 < same_partition < len(inputs)
    for partition, records in by_partition.items():
        produce(kafka_clusters["c2"].bootstrap, derived, records, partition=partition)
    results = converge(topo, settings)

    # derived: to c1, c3 and c4; raw: c1's 30 to c3 and c4, c3's 20 to c1 and c2
    assert sum(r.copied for r in results) == 3 * len(expected_derived) + 2 * 30 + 2 * 20
    assert_exactly_once(kafka_clusters, topo.leaves, derived, expected_derived)
    assert_exactly_once(kafka_clusters, topo.leaves, raw, expected_raw)  # mirrored copies still never loop
    for record in read_all(kafka_clusters["c4"].bootstrap, derived, 2):  # a fresh stamp: c2 is where it began
        origin = provenance.find(list(record.headers), derived, record.partition)
        assert origin is not None and (origin.cluster, origin.topic) == ("c2", derived)
        assert [k for k, _ in record.headers].count(provenance.HEADER) == 1
        assert [k for k, _ in record.headers].count(copyflags.HEADER) == 1
