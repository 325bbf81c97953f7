"""An open transaction on a source holds its link back; the lag says so, by name and with its age (real brokers).

The copy rightly stops at the last stable offset, the first offset of the open
transaction; the records behind it count as lag, and the lag monitor's SLA fails
naming the partition and the transaction.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.lag import measure
from mirrorflow.topology import parse_topology
from tests.integration.kafka_io import produce
from tests.integration.mirroring import run_level

pytestmark = pytest.mark.kafka

HOUR_MS = 3600_000


def test_records_behind_an_open_transaction_are_lag_and_the_sla_names_the_transaction(kafka_clusters, make_topic):
    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    topo = parse_topology(f"clusters:\n  c1: {{bootstrap: '{c1}'}}\n  c2: {{bootstrap: '{c2}'}}\n"
                          f"tree: {{level: 1, children: [c1, c2]}}\ntopics: ['{topic}']\n"
                          f"lag: {{sla: {{records: 100}}}}\n", source="test")
    settings = {n: {"bootstrap.servers": kafka_clusters[n].bootstrap} for n in ("c1", "c2")}
    opened_ms = int(time.time() * 1000) - HOUR_MS  # the transaction's first record: an hour old
    hung = Producer({"bootstrap.servers": c1, "transactional.id": f"hung-{topic}", "transaction.timeout.ms": 900000})
    hung.init_transactions(30)
    hung.begin_transaction()
    hung.produce(topic, b"in the open transaction", partition=0, timestamp=opened_ms)
    hung.flush(30)  # written, never committed: the partition's last stable offset stays at 0
    try:
        produce(c1, topic, [(None, f"after-{i}".encode(), None, None) for i in range(1000)], partition=0)

        copied = run_level(topo, 1, settings)
        assert copied.ok and copied.copied == 0  # nothing passes the open transaction

        snap = measure(topo, {n: ClusterClient(n, s) for n, s in settings.items()}, topo.all_links())
        [row] = [r for r in snap.links if r.link_id == "c1.L1"]
        assert (row.records, row.end, row.high, row.held) == (1001, 0, 1001, 1001), row
        assert abs(row.open_transaction_s - 3600) < 60 and abs(row.seconds - 3600) < 60, row
        said = (f"1001 records wait behind a transaction open for {row.open_transaction_s:g}s on c1 at offset 0: no "
                f"copy passes it until its producer commits or aborts it (or transaction.timeout.ms aborts it)")
        assert said in row.note
        assert f"link c1.L1 (c1 -> c2) {topic}[0]: 1001 records > 100; {said}" in [str(v) for v in snap.violations]
    finally:
        hung.abort_transaction(30)
    assert run_level(topo, 1, settings).copied == 1000  # the transaction aborted: the 1000 behind it go across
