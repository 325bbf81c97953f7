"""mirror_onboard_cluster killed in the middle of its backfill, then run again: still exactly once.

The first attempt is Airflow's own ``airflow dags test`` in a process group of
its own (the DAG file, the topology file, spark-submit and its Python workers
all inside it); it is SIGKILLed as soon as the backfill has committed part of
the history on c4. The second attempt is the same form under ``dag.test()``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.copy.partition import checkpoint_group
from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.factories.onboard import build_onboard_dag
from mirrorflow_airflow.state import CHANGES_VARIABLE, ONBOARDING_VARIABLE, TARGETS_VARIABLE
from tests.dags.test_level_dags import xcom
from tests.dags.test_onboard_dag import THREE, form
from tests.integration.kafka_io import stable_end_offsets
from tests.integration.mirroring import assert_exactly_once, clients, converge, topic_everywhere, topology, traffic

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def _checkpointed(bootstrap: str, topic: str, partitions: int) -> int:
    """Offsets of ``topic`` the backfill link c3.L1 has committed on c4 so far."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group("c3.L1")})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return sum(max(tp.offset, 0) for tp in got)
    except Exception:
        return 0  # the topic is not there yet
    finally:
        consumer.close()


def test_onboarding_killed_mid_backfill_then_rerun_is_exactly_once(kafka_clusters, make_topic, kafka_distribution,
                                                                    operator_state, tmp_path):
    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"))
    settings = clients(kafka_clusters, topo)
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, topic, 4000, keys=20)
    converge(topo, settings)
    total = sum(stable_end_offsets(kafka_clusters["c3"].bootstrap, topic, 2))
    (tmp_path / "topology.yaml").write_text(topo.to_yaml())
    c4 = kafka_clusters["c4"].bootstrap

    def quota(*args: str) -> None:  # a producer byte-rate quota on c4 slows the backfill enough to kill it mid-way
        subprocess.run(["java", "-cp", kafka_distribution.classpath, "kafka.admin.ConfigCommand",
                        "--bootstrap-server", c4, "--entity-type", "clients", "--entity-default", "--alter", *args],
                       check=True, capture_output=True, timeout=120)

    quota("--add-config", "producer_byte_rate=100000")
    try:
        env = {**os.environ, "MIRROR_TOPOLOGY": str(tmp_path / "topology.yaml")}
        conf = json.dumps({**form(kafka_clusters), "topics": [topic]})
        first = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "airflow"), "dags", "test",
                                  "mirror_onboard_cluster", "-c", conf], env=env, start_new_session=True,
                                 stdout=open(tmp_path / "first.log", "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while _checkpointed(c4, topic, 2) == 0:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the backfill committed nothing within 240 s"
            threading.Event().wait(0.1)  # poll interval of the condition above (it has a deadline)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        quota("--delete-config", "producer_byte_rate")
    partial = _checkpointed(c4, topic, 2)
    print(f"onboarding killed with {partial} of {total} offsets of c3 backfilled")
    assert 0 < partial < total
    assert operator_state(ONBOARDING_VARIABLE)["c4"]["sibling_of"] == "c3"
    assert operator_state(CHANGES_VARIABLE, "[]") == [], "the killed attempt never joined"

    run = build_onboard_dag(topo).test(run_conf={**form(kafka_clusters), "topics": [topic]})
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify")}
    assert xcom(run, "verify")["ok"]

    grown = apply_changes(topo, operator_state(CHANGES_VARIABLE, "[]"))
    expected += traffic(kafka_clusters, "c2", topic, 50, start=5000)
    converge(grown, clients(kafka_clusters, grown), targets=operator_state(TARGETS_VARIABLE))
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)
