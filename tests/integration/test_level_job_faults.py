"""The level job under faults and change: killed mid-batch, two attempts at once, growing topics, a refused message."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JOB_ENV, build_spec
from mirrorflow.topology.routes import effective_links
from tests.fixtures.kafka import wait_for_topic
from tests.integration.kafka_io import produce
from tests.integration.mirroring import (
    FOUR,
    assert_exactly_once,
    checkpointed,
    clients,
    converge,
    partitions_of,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
_pause = threading.Event()


def _stack_of(thread: threading.Thread) -> str:
    """Where ``thread`` is now: the one clue a hang leaves behind."""
    frame = sys._current_frames().get(thread.ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(thread gone)"


def test_job_killed_mid_batch_then_rerun_is_exactly_once(kafka_clusters, make_topic, spark):
    topic = topic_everywhere(make_topic)
    # A byte-rate cap slows this link down so that the kill lands mid-batch, many transactions in.
    topo = topology(kafka_clusters, FOUR, [topic], extra="""
replication:
  links: {c1.L1: {max_bytes_per_second: 40000, txn_records: 200}}
""")
    expected = traffic(kafka_clusters, "c1", topic, 4000)  # ~20 bytes each: about 2 s of copying
    links = [l for l in effective_links(topo, 1) if l.link_id == "c1.L1"]
    spec = build_spec(topo, 1, "killed-run", links, clients(kafka_clusters, topo))
    env = {**os.environ, JOB_ENV: spec.to_json()}
    spark_submit = Path(sys.executable).with_name("spark-submit")
    proc = subprocess.Popen([str(spark_submit), "--master", "local[2]", str(REPO / "spark_jobs" / "mirror_level.py")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    c2 = kafka_clusters["c2"].bootstrap
    deadline = time.monotonic() + 180
    try:
        while checkpointed(c2, "c1.L1", topic, 2, stable=False) < 400:  # a few transactions committed on the target
            assert proc.poll() is None, "the job ended before it could be killed"
            assert time.monotonic() < deadline, "the job never committed a transaction"
            _pause.wait(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole job: driver JVM and Python workers
        proc.wait(30)
    done = checkpointed(c2, "c1.L1", topic, 2, wait=30, stable=False)  # the killed transaction is open
    assert 400 <= done < 4000, f"kill did not land mid-batch (checkpoint {done})"

    converge(topo, clients(kafka_clusters, topo), spark)
    assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)


def test_two_attempts_of_the_same_link_at_once_copy_exactly_once(kafka_clusters, make_topic, spark):
    topic = make_topic("c1", partitions=3)
    make_topic("c2", partitions=3, name=topic)
    topo = topology(kafka_clusters, FOUR, [topic], extra="""
replication:
  links: {c1.L1: {txn_records: 100}}
""")
    expected = traffic(kafka_clusters, "c1", topic, 3000)
    links = [l for l in effective_links(topo, 1) if l.link_id == "c1.L1"]
    settings = clients(kafka_clusters, topo)
    results = []

    def attempt(name: str, use_spark: bool) -> None:
        results.append(run_job(build_spec(topo, 1, name, links, settings), spark if use_spark else None))

    threads = [threading.Thread(target=attempt, args=("attempt-a", True)),
               threading.Thread(target=attempt, args=("attempt-b", False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(results) == 2
    # whichever attempt lost says so: fenced, or (the broker's EndTxn answer in the race, seen in CI) a
    # failed commit of the checkpoint, which held its copies back with it; the next run finishes what is left
    for r in results:
        for e in r.errors:
            text = e.error.lower()
            assert "fenced" in text or "epoch" in text or "while committing the checkpoint" in text, e
    final = run_job(build_spec(topo, 1, "after", links, settings), spark)
    assert final.ok, final.summary()["errors"]
    assert_exactly_once(kafka_clusters, ["c1", "c2"], topic, expected)


def test_partition_added_and_new_topic_are_copied_on_the_next_run(kafka_clusters, make_topic, spark):
    first = make_topic("c1", partitions=1)
    prefix = first.rsplit("-", 1)[0]
    topo = topology(kafka_clusters, FOUR, [f"{prefix}-.*"])
    settings = clients(kafka_clusters, topo)
    expected = {first: traffic(kafka_clusters, "c1", first, 20)}
    assert run_level(topo, 1, settings, spark).ok
    assert partitions_of(kafka_clusters, "c2", first) == 1

    admin = AdminClient({"bootstrap.servers": kafka_clusters["c1"].bootstrap})
    admin.create_partitions([NewPartitions(first, 3)])[first].result(timeout=30)
    wait_for_topic(admin, first, 3)
    for p in (1, 2):
        produce(kafka_clusters["c1"].bootstrap, first,
                [(b"k", f"c1|new-p{p}|{i:06d}".encode(), None, None) for i in range(10)], partition=p)
        expected[first] += [f"c1|new-p{p}|{i:06d}" for i in range(10)]
    second = make_topic("c1", partitions=2, name=f"{prefix}-second")
    expected[second] = traffic(kafka_clusters, "c1", second, 15)

    result = run_level(topo, 1, settings, spark)
    assert result.ok, result.summary()["errors"]
    report = {l.link: l for l in result.links}["c1.L1"]
    assert report.partitions_added == {first: 3} and report.created_topics == [second]
    assert partitions_of(kafka_clusters, "c2", first) == 3
    for topic, ids in expected.items():
        assert_exactly_once(kafka_clusters, ["c1", "c2"], topic, ids)


def _limit(bootstrap: str, topic: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: futures need it
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("max.message.bytes", value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_oversized_message_stops_its_partition_only_and_completes_after_the_limit_is_raised(
        kafka_clusters, make_topic, spark):
    """The owner of the topic's configs (c1) lowers its record limit while a large record waits on it: the next
    run creates the topic on c2 with the new limit, and its copy of that record stops by name (the record hardly
    compresses: copies are compressed, and the broker checks the compressed batch); raised again on c1, the
    limit reaches c2 in the next run (c2 holds the owner's previous value), which copies on from the record."""
    topic = make_topic("c1", partitions=2, config={"max.message.bytes": "2000000"})
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    c1 = kafka_clusters["c1"].bootstrap
    small = [(b"k", f"c1|k|{i:06d}".encode(), None, None) for i in range(5)]
    big = [(b"k", b"c1|k|000005" + base64.b64encode(os.urandom(375_000)), None, None)]  # ~375 KB as zstd
    after = [(b"k", f"c1|k|{i:06d}".encode(), None, None) for i in range(6, 10)]
    for records in (small, big, after):
        produce(c1, topic, records, partition=0)
    other = [(b"o", f"c1|o|{i:06d}".encode(), None, None) for i in range(10)]
    produce(c1, topic, other, partition=1)
    _limit(c1, topic, "100000")

    result = run_level(topo, 1, settings, spark)
    assert not result.ok
    [error] = [e for e in result.errors if e.link == "c1.L1"]
    assert (error.topic, error.partition, error.offset) == (topic, 0, 5)
    assert "c1.L1" in str(error) and f"{topic}[0]" in str(error) and "offset 5" in str(error)
    assert "MSG_SIZE_TOO_LARGE" in error.error or "too large" in error.error.lower(), error.error
    by_partition = {(p["link_id"], p["partition"]): p for p in result.partitions}
    assert by_partition[("c1.L1", 1)]["copied"] == 10 and by_partition[("c1.L1", 1)]["error"] is None
    assert by_partition[("c1.L1", 0)]["next_offset"] == 5  # stays at the refused message

    _limit(c1, topic, "2000000")
    again = run_level(topo, 1, settings, spark)
    assert again.ok, again.summary()["errors"]
    ids = [value.decode() for _, value, _, _ in small + big + after + other]
    assert assert_exactly_once(kafka_clusters, ["c2"], topic, ids) == {"c2": 20}


def test_per_run_limits_and_byte_rate_cap(kafka_clusters, make_topic):
    topic = make_topic("c1", partitions=2)
    topo = topology(kafka_clusters, FOUR, [topic], extra="""
replication:
  defaults: {max_records_per_run: 300}
  links: {c1.L1: {max_bytes_per_second: 2000, max_bytes_per_run: 4000}}
""")
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 600)  # 20-byte messages

    first = run_level(topo, 1, settings)  # in-process copier: no Spark needed for the limits
    assert first.ok, first.summary()["errors"]
    rows = [p for p in first.partitions if p["link_id"] == "c1.L1"]
    for row in rows:
        # max_records_per_run (300) caps the planned range; max_bytes_per_run stops at 4000 bytes (200 records)
        available = row["end_offset"] - row["start_offset"]
        assert available <= 300, row
        assert row["copied"] == min(200, available) and row["bytes"] == 20 * row["copied"], row
        # the cap is shared by the partitions copying at once; never above it, with one second of burst
        assert row["bytes"] <= 2000 * (row["duration_s"] + 1), row
    assert any(row["copied"] == 200 and row["throttled_s"] > 0 for row in rows), rows
    results = converge(topo, settings)
    assert sum(r.copied for r in results) >= 200
    assert_exactly_once(kafka_clusters, ["c1", "c2"], topic, expected)


def test_target_broker_killed_mid_batch_then_next_run_is_exactly_once(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic, ("c1", "c2"))
    topo = topology(kafka_clusters, FOUR, [topic], extra="""
replication:
  links: {c1.L1: {max_bytes_per_second: 20000, txn_records: 100}}
""")
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 3000)  # ~60 KB: about 3 s at the cap
    c2 = kafka_clusters["c2"]
    links = [l for l in effective_links(topo, 1) if l.link_id == "c1.L1"]
    results = []
    run = threading.Thread(target=lambda: results.append(run_job(build_spec(topo, 1, "broker-killed", links,
                                                                            settings))))
    run.start()
    try:
        deadline = time.monotonic() + 120
        while checkpointed(c2.bootstrap, "c1.L1", topic, 2, stable=False) < 300:
            assert run.is_alive(), "the run ended before the broker could be killed"
            assert time.monotonic() < deadline, "the run never committed a transaction"
            _pause.wait(0.05)
        c2.kill()  # SIGKILL: the target's only broker dies mid-transaction
        killed = time.monotonic()
        run.join(300)
        print(f"run ended {time.monotonic() - killed:.1f}s after the kill")
        assert not run.is_alive(), "the run still runs 300 s after the kill, in:\n" + _stack_of(run)
    finally:
        if not c2.is_running():
            c2.start()
    [interrupted] = results
    assert any(e.link == "c1.L1" for e in interrupted.errors), interrupted.summary()["errors"]
    started = time.monotonic()
    while True:
        try:
            converge(topo, settings)
            break
        except AssertionError as exc:
            # Once in a CI run the restarted broker (KRaft, its old registration still alive for a few seconds)
            # kept the link's checkpoints behind the dead attempt's transaction past the planner's fence and
            # re-read: that run fails by name and changes nothing, as an Airflow retry then finds. Anything else,
            # or the same for two minutes, fails the test.
            if "read checkpoints of link c1.L1" not in str(exc) or time.monotonic() - started > 120:
                raise
            print(f"a run {time.monotonic() - started:.1f}s after the restart could not read the checkpoints yet: "
                  f"{exc}")
    print(f"converged {time.monotonic() - started:.1f}s after the restart")
    assert_exactly_once(kafka_clusters, ["c1", "c2"], topic, expected)
