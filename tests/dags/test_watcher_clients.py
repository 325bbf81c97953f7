"""The ``on_data`` watcher keeps its Kafka clients between polls: idle, it opens no connection (issue 44, part 7).

Counted by the kernel, not by the code under test: the TCP connections this
process holds to the brokers' ports, sampled every 2 ms while the trigger polls
(mirrorflow_dev.sockets). Its cost at 1,000 partitions: benchmarks/watcher_cost.py.
"""

from __future__ import annotations

import logging
import time

import pytest

from mirrorflow_airflow.triggers.data import LevelDataTrigger
from mirrorflow_dev.sockets import ConnectionWatch, own_connections
from tests.dags.watcher import ON_DATA, Fired
from tests.integration.kafka_io import produce
from tests.integration.mirroring import topic_everywhere, topology

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.usefixtures("airflow_home", "operator_state")]


def test_an_idle_watcher_opens_no_connection_per_poll_and_still_sees_new_records(
        kafka_clusters, make_topic, monkeypatch, tmp_path, caplog):
    topic = topic_everywhere(make_topic, ("c1", "c2"), partitions=8)
    topo = topology(kafka_clusters, "\n  level: 1\n  children: [c1, c2]\n", [topic], names=("c1", "c2"),
                    extra=ON_DATA)
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(path))
    ports = {int(kafka_clusters[c].bootstrap.rsplit(":", 1)[1]) for c in ("c1", "c2")}
    caplog.set_level(logging.DEBUG, logger="mirrorflow_airflow.triggers.data")

    fired = Fired(LevelDataTrigger(level=1, dag_id="mirror_level_1", poll_s=0.1, floor_s=2.0))
    try:
        assert fired.next(1.5) is None  # started: its clients are made and connected
        # ... and settled: on a busy machine a client made at the first polls may still be connecting to the
        # partitions' leader after them. A watcher that kept opening connections would never settle.
        before, still_since, deadline = own_connections(ports), time.monotonic(), time.monotonic() + 30
        while time.monotonic() - still_since < 1.0:
            assert fired.next(0.2) is None
            now = own_connections(ports)
            if now != before:
                before, still_since = now, time.monotonic()
            assert time.monotonic() < deadline, f"the watcher's connections changed for 30 s: {sorted(now)}"
        polls = caplog.text.count("no run yet: nothing waits")
        with ConnectionWatch(ports) as watch:
            assert fired.next(3.0) is None  # idle: some 30 polls
        polled = caplog.text.count("no run yet: nothing waits") - polls
        assert polled >= 10, polled
        assert watch.opened_since(before) == set(), (f"{len(watch.opened_since(before))} connections opened in "
                                                     f"{polled} idle polls")
        # the kept clients still measure: a new record starts a run
        produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"v", None, None)], partition=3)
        event = fired.next(5.0)
        assert event is not None and event.payload["records"] == {"c1.L1": 1}, event
    finally:
        fired.close()
