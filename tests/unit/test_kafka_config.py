"""The settings every client gets from ``ClusterClient`` (mirrorflow.kafka.config): defaults, and who may change them."""

from __future__ import annotations

from mirrorflow.kafka.config import ClusterClient

NOWHERE = {"bootstrap.servers": "127.0.0.1:9"}


def test_a_consumer_looks_again_soon_after_its_queue_was_full_unless_the_cluster_says_otherwise():
    # librdkafka's default (1 s) stalled a one-partition copy of small records after every full
    # queue (docs/benchmarks.md, "Small records"); a cluster's own ``config`` still decides.
    assert ClusterClient("c1", dict(NOWHERE)).consumer("g")["fetch.queue.backoff.ms"] == 10
    tuned = ClusterClient("c1", {**NOWHERE, "fetch.queue.backoff.ms": 250})
    assert tuned.consumer("g")["fetch.queue.backoff.ms"] == 250
    assert tuned.consumer("g", **{"fetch.queue.backoff.ms": 5})["fetch.queue.backoff.ms"] == 5


def test_producers_and_admin_clients_get_no_consumer_setting():
    # librdkafka warns about a consumer property on a producer: every copy's log would carry the warning.
    client = ClusterClient("c1", dict(NOWHERE))
    assert "fetch.queue.backoff.ms" not in client.producer()
    assert "fetch.queue.backoff.ms" not in client.admin()
