"""A cluster 100 ms away (mirrorflow_dev/shaper.py): the shaper adds the distance, and the copy stays exact.

The far cluster's broker advertises only the shaper's port, so every client of it
(the test's own, the planner's, the copier's) goes through the shaper and pays the
round trip on every request. The near cluster is the session's c1. One run of the
level-1 pair between them, in process, copies both ways; every message reaches the
other side exactly once, in order per key.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.topology import Topology
from mirrorflow_dev.kafka import SHARED_MACHINE_CONFIG, SHARED_MACHINE_JVM_OPTIONS, LocalCluster
from mirrorflow_dev.process import free_port
from mirrorflow_dev.shaper import Shape, Shaper
from tests.integration.mirroring import assert_exactly_once, clients, run_level, traffic

pytestmark = pytest.mark.kafka

RTT_S = 0.1


@pytest.fixture
def far_cluster(tmp_path: Path, kafka_distribution):
    """A cluster of this test's own, reached through a shaper that adds ``RTT_S`` of round trip."""
    port, proxy = free_port(), free_port()
    with Shaper(proxy, f"127.0.0.1:{port}", Shape(rtt_s=RTT_S)):
        cluster = LocalCluster("far", tmp_path / "far", port, free_port(), kafka_distribution, advertised_port=proxy,
                               config=SHARED_MACHINE_CONFIG, jvm_options=SHARED_MACHINE_JVM_OPTIONS,
                               progress=lambda message: None)  # the session's brokers' lighter settings
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


def _metadata_seconds(bootstrap: str) -> float:
    """One metadata request on a connection already open (the connect's own round trips left out)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)
    started = time.monotonic()
    admin.list_topics(timeout=30)
    return time.monotonic() - started


def test_a_cluster_100_ms_away_gets_every_message_exactly_once_through_the_shaper(far_cluster, kafka_clusters):
    near = kafka_clusters["c1"]
    assert far_cluster.bootstrap != far_cluster.own_bootstrap
    # the distance is there: a request cannot come back sooner than the round trip (a floor, never a ceiling)
    assert _metadata_seconds(far_cluster.bootstrap) >= RTT_S

    topic = f"far-{uuid.uuid4().hex[:8]}"
    pair = {"c1": near, "far": far_cluster}
    for cluster in pair.values():
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept: a collected client cancels its futures
        admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(60)
    topology = Topology.parse({"clusters": {n: {"bootstrap": c.bootstrap} for n, c in pair.items()},
                               "tree": {"level": 1, "children": ["c1", "far"]}, "topics": [topic]})
    from_c1, from_far = traffic(pair, "c1", topic, 20), traffic(pair, "far", topic, 20)
    result = run_level(topology, 1, clients(pair, topology))  # both links of the pair, in one run
    assert result.ok and result.copied == len(from_c1) + len(from_far), result.summary()
    assert_exactly_once(pair, ["c1", "far"], topic, from_c1 + from_far)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(OSError):
            while data := self.request.recv(65536):
                self.request.sendall(data)


def test_the_shaper_keeps_serving_after_hundreds_of_reset_connections():
    """Clients reset connections all the time; the shaper of a long benchmark must not stall on them.

    Once, each reset wrote a traceback to a stderr pipe nobody read: after about a
    hundred the pipe was full, the proxy blocked on its next line, and the far
    cluster looked down to every client (a scheduler benchmark's c4, for minutes).
    """
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo) as echo:
        echo.daemon_threads = True
        threading.Thread(target=echo.serve_forever, daemon=True).start()
        with Shaper(free_port(), f"127.0.0.1:{echo.server_address[1]}", Shape(rtt_s=0.002)) as shaper:
            for _ in range(300):
                with socket.create_connection(("127.0.0.1", shaper.listen), timeout=10) as client:
                    client.sendall(b"x" * 1000)
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
            with socket.create_connection(("127.0.0.1", shaper.listen), timeout=10) as client:
                client.settimeout(10)
                client.sendall(b"still here")
                assert client.recv(100) == b"still here"
        echo.shutdown()
