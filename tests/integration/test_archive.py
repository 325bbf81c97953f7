"""The S3 archive end to end: real Kafka topics, real Spark, a real S3 server (S3Proxy) over HTTP."""

from __future__ import annotations

import io
import json
import logging
import uuid
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow import provenance
from mirrorflow.archive import layout
from mirrorflow.archive.errors import ArchiveConflict
from mirrorflow.archive.job import _unused_manifest_key, run_archive
from mirrorflow.archive.progress import read_progress, write_progress
from mirrorflow.archive.reader import coverage, iter_archived, lost, read_manifests
from mirrorflow.archive.records import ArchivedRecord, to_table
from mirrorflow.archive.spec import ArchiveSpec
from mirrorflow.archive.writer import ArchiveTask, archive_partition
from mirrorflow.formats import NewerFormat
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce, read_all, stable_end_offsets
from tests.integration.progress_lines import every_update, progress_lines

pytestmark = [pytest.mark.kafka]

DAY1 = 1714607990000  # 2024-05-01T23:59:50Z
DAY2 = 1714608010000  # 2024-05-02T00:00:10Z


def _spec(kafka_clusters, location, topic, run_id, **kw) -> ArchiveSpec:
    return ArchiveSpec(run_id=run_id, clusters={"c1": {"bootstrap.servers": kafka_clusters["c1"].bootstrap}},
                       archived=("c1",), topics=(topic,), location=location, **kw)


def _batch(tag: str, n: int) -> list[tuple]:
    """Keys, null keys and values, headers (repeated, null-valued, provenance) and two UTC dates interleaved."""
    out = []
    for i in range(n):
        headers = [("h", f"{tag}{i}".encode()), ("h", None)] if i % 3 == 0 else []
        if i % 4 == 1:
            headers.append((provenance.HEADER, f"c9:elsewhere:2:{1000 + i}".encode()))
        key = None if i % 5 == 2 else f"k{tag}{i}".encode()
        value = None if i % 7 == 3 else f"value {tag} {i}".encode() * (1 + i % 3)
        out.append((key, value, headers, (DAY1 if i % 2 else DAY2) + i))
    return out


def _transactions(bootstrap: str, topic: str, partition: int) -> None:
    """One committed and one aborted transaction: markers and aborted records take offsets, never rows."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"archive-test-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=b"txn", value=f"{'kept' if commit else 'aborted'} {i}".encode(),
                             partition=partition, timestamp=DAY2 + i)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def _kafka_records(kafka_clusters, topic: str, partitions: int) -> dict[int, list[ArchivedRecord]]:
    out: dict[int, list[ArchivedRecord]] = {p: [] for p in range(partitions)}
    for r in read_all(kafka_clusters["c1"].bootstrap, topic, partitions):
        headers = list(r.headers)
        out[r.partition].append(ArchivedRecord(
            r.offset, r.timestamp, 1, r.key, r.value, headers,
            provenance.find(headers, topic, r.partition) or provenance.Origin("c1", topic, r.partition, r.offset)))
    return out


def _data_objects(location, topic: str) -> dict[str, int]:
    """Every data object of the topic in the bucket (not only what manifests list) -> its row count."""
    s3 = location.client()
    prefix = layout.partition_prefix(location.prefix, "c1", topic, 0).rsplit("partition=", 1)[0]
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            body = s3.get_object(Bucket=location.bucket, Key=item["Key"])["Body"].read()
            out[item["Key"]] = pq.read_metadata(io.BytesIO(body)).num_rows
    return out


def _archived(location, topic: str, partitions: int) -> dict[int, list[ArchivedRecord]]:
    return {p: list(iter_archived(location, "c1", topic, p)) for p in range(partitions)}


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "spark_connect"])  # spark-submit's SparkContext, or a Connect server
def test_archive_runs_incrementally_idempotently_and_reads_back_exactly(kafka_clusters, make_topic, s3_bucket, caplog,
                                                                        engine, request, monkeypatch):
    spark = request.getfixturevalue(engine)
    bootstrap = kafka_clusters["c1"].bootstrap
    # The records carry 2024 timestamps: with time-based retention the broker's periodic check
    # would delete them whenever it next runs, which made this test race it.
    topic = make_topic("c1", partitions=2, config={"retention.ms": "-1"})
    produce(bootstrap, topic, _batch("a", 30), partition=0)
    produce(bootstrap, topic, _batch("b", 12), partition=1)
    _transactions(bootstrap, topic, 1)
    ends = stable_end_offsets(bootstrap, topic, 2)
    assert ends == [30, 12 + 4 + 4]  # each transaction: 3 records and a marker
    every_update(monkeypatch, caplog)

    # run 1, on Spark: everything so far
    first = run_archive(_spec(kafka_clusters, s3_bucket, topic, "scheduled__2024-05-02T00:00:00+00:00", slots=2),
                        spark)
    assert first.ok, first.errors
    assert first.count == 30 + 12 + 3 and first.tasks == 2
    # progress on Spark: finished Spark tasks while it runs (test_spark_connect.py), records and bytes at the end
    final = progress_lines(caplog, "archive", first.run_id)[-1]
    assert (final["final"], final["measured"], final["tasks_done"], final["tasks"]) == (True, "spark_tasks", 2, 2)
    assert (final["records"], final["planned"]) == (30 + 20, 30 + 20)  # offsets, transaction markers included
    assert read_progress(s3_bucket, "c1") == {topic: {"0": {"first": 0, "next": 30}, "1": {"first": 0, "next": 20}}}
    manifest_key = first.manifests["c1"]
    assert manifest_key.startswith("mirrorflow/manifests/cluster=c1/") and \
        manifest_key.endswith("-scheduled__2024-05-02T00_00_00_00_00.json")
    objects = _data_objects(s3_bucket, topic)
    base = f"mirrorflow/data/cluster=c1/topic={topic}"
    assert objects == {
        f"{base}/partition=0/date=2024-05-01/00000000000000000000.parquet": 15,
        f"{base}/partition=0/date=2024-05-02/00000000000000000000.parquet": 15,
        f"{base}/partition=1/date=2024-05-01/00000000000000000000.parquet": 6,
        f"{base}/partition=1/date=2024-05-02/00000000000000000000.parquet": 6 + 3,
    }
    entries = {e["partition"]: e for e in read_manifests(s3_bucket, "c1")[0]["partitions"]}
    assert (entries[1]["start"], entries[1]["next"], entries[1]["count"], entries[1]["lost"]) == (0, 20, 15, None)
    assert entries[1]["checksum"].startswith("crc32:") and len(entries[1]["objects"]) == 2

    expected = _kafka_records(kafka_clusters, topic, 2)
    assert [r.value for r in expected[1][-3:]] == [b"kept 0", b"kept 1", b"kept 2"]
    assert _archived(s3_bucket, topic, 2) == expected  # bytes, headers, timestamps and origins equal

    audits = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
    lines = [a for a in audits if a["event"] == "archive"]
    assert sorted((a["partition"], a["offsets"], a["count"]) for a in lines) == [(0, [0, 30], 30), (1, [0, 20], 15)]
    assert all(a["manifest"] == manifest_key and a["location"] == s3_bucket.uri for a in lines)
    run_line = [a for a in audits if a["event"] == "archive_run"][-1]
    assert run_line["archived"] == 45 and run_line["errors"] == []
    assert s3_bucket.secret_access_key not in caplog.text

    # run 2, in-process, capped: only new messages, in new objects keyed at the previous progress
    produce(bootstrap, topic, _batch("c", 10), partition=0)
    second = run_archive(_spec(kafka_clusters, s3_bucket, topic, "r2", max_records_per_run=6))
    assert second.ok and second.count == 6
    lines = progress_lines(caplog, "archive", "r2")  # in this process: counted per consumed batch
    assert [(l["records"], l["planned"], l["final"]) for l in lines if l["records"]][-1] == (6, 6, True)
    assert any(l["records"] == 6 and not l["final"] for l in lines), lines
    assert [(p["partition"], p["start"], p["next"]) for p in second.partitions] == [(0, 30, 36)]
    before_crash = read_progress(s3_bucket, "c1")
    assert before_crash[topic]["0"] == {"first": 0, "next": 36}

    # run 3 archives the rest, then "crashes" before its progress counted: progress reset to before it
    third = run_archive(_spec(kafka_clusters, s3_bucket, topic, "r3"))
    assert third.ok and third.count == 4
    after_third = _data_objects(s3_bucket, topic)
    write_progress(s3_bucket, "c1", before_crash)
    again = run_archive(_spec(kafka_clusters, s3_bucket, topic, "r3-retry"))
    assert again.ok and [(p["partition"], p["start"], p["next"], p["count"]) for p in again.partitions] == \
        [(0, 36, 40, 4)]
    # the same keys were overwritten: no new object, and no offset stored twice anywhere in the bucket
    assert _data_objects(s3_bucket, topic) == after_third
    assert sum(after_third.values()) == 40 + 15
    assert read_progress(s3_bucket, "c1")[topic]["0"] == {"first": 0, "next": 40}

    expected = _kafka_records(kafka_clusters, topic, 2)
    archived = _archived(s3_bucket, topic, 2)
    assert archived == expected
    assert [r.offset for r in archived[0]] == list(range(40))
    assert coverage(s3_bucket, "c1", topic, 0) == [(0, 40)] and coverage(s3_bucket, "c1", topic, 1) == [(0, 20)]
    assert [r.offset for r in iter_archived(s3_bucket, "c1", topic, 0, 28, 33)] == [28, 29, 30, 31, 32]

    # nothing new: no work, no manifest, progress untouched
    idle = run_archive(_spec(kafka_clusters, s3_bucket, topic, "r5"))
    assert idle.ok and idle.partitions == [] and idle.manifests == {}


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)], request_timeout=30)
    for future in futures.values():
        assert future.result(timeout=60).low_watermark == before


def test_retention_gaps_are_recorded_as_lost_and_holes(kafka_clusters, make_topic, s3_bucket, caplog):
    bootstrap = kafka_clusters["c1"].bootstrap
    topic = make_topic("c1", partitions=2, config={"retention.ms": "-1"})  # gaps only where the test makes them
    for p in (0, 1):
        produce(bootstrap, topic, _batch(f"p{p}", 10), partition=p)
    _delete_records(bootstrap, topic, 1, 4)  # before the archive ever ran

    first = run_archive(_spec(kafka_clusters, s3_bucket, topic, "g1"))
    assert first.ok, first.errors
    assert first.lost == [{"cluster": "c1", "topic": topic, "partition": 1, "lost": [0, 4]}]
    assert read_progress(s3_bucket, "c1")[topic] == {"0": {"first": 0, "next": 10}, "1": {"first": 4, "next": 10}}

    produce(bootstrap, topic, _batch("more", 10), partition=0)
    _delete_records(bootstrap, topic, 0, 15)  # between runs: 10..14 never reached the archive
    caplog.set_level(logging.ERROR, logger="mirrorflow.archive.plan")
    second = run_archive(_spec(kafka_clusters, s3_bucket, topic, "g2"))
    assert second.ok, second.errors
    assert second.lost == [{"cluster": "c1", "topic": topic, "partition": 0, "lost": [10, 15]}]
    assert second.count == 5
    assert "ARCHIVE GAP" in caplog.text and f"{topic}[0]: offsets 10..14" in caplog.text
    assert read_progress(s3_bucket, "c1")[topic]["0"] == {"first": 15, "next": 20}

    assert coverage(s3_bucket, "c1", topic, 0) == [(0, 10), (15, 20)]
    assert lost(s3_bucket, "c1", topic, 0) == [(10, 15)]
    assert coverage(s3_bucket, "c1", topic, 1) == [(4, 10)] and lost(s3_bucket, "c1", topic, 1) == [(0, 4)]
    assert [r.offset for r in iter_archived(s3_bucket, "c1", topic, 0)] == [*range(10), *range(15, 20)]
    assert [r.offset for r in iter_archived(s3_bucket, "c1", topic, 1)] == list(range(4, 10))

    # records deleted after a run was planned, before its executor read them: that partition fails
    # by name (the next run records the gap), it never skips silently
    late = archive_partition(ArchiveTask("c1", topic, 0, start=12, end=20), ClusterClient("c1", {
        "bootstrap.servers": bootstrap}), s3_bucket)
    assert late["error"] and "offset 12" in late["error"] and "no longer on cluster c1" in late["error"]
    assert (late["next"], late["count"], late["objects"]) == (12, 0, [])

    # progress beyond the source's end (a recreated topic): refused by name, nothing overwritten
    progress = read_progress(s3_bucket, "c1")
    progress[topic]["1"] = {"first": 0, "next": 500}
    write_progress(s3_bucket, "c1", progress)
    refused = run_archive(_spec(kafka_clusters, s3_bucket, topic, "g3"))
    assert not refused.ok
    assert any(f"{topic}[1] is at offset 500 but the source ends at 10" in e for e in refused.errors)
    assert read_progress(s3_bucket, "c1")[topic]["1"] == {"first": 0, "next": 500}


def test_two_objects_disagreeing_about_an_offset_are_named(s3_bucket):
    s3 = s3_bucket.client()
    origin = provenance.Origin("c1", "t", 0, 0)
    keys = []
    for start, value in ((0, b"one"), (1, b"two")):
        key = layout.data_key(s3_bucket.prefix, "c1", "t", 0, "2024-05-01", start)
        rows = [ArchivedRecord(o, DAY1, 1, None, value if o == 1 else b"same", [], origin) for o in range(start, 3)]
        buf = io.BytesIO()
        pq.write_table(to_table(rows, "t", 0), buf)
        s3.put_object(Bucket=s3_bucket.bucket, Key=key, Body=buf.getvalue())
        keys.append({"key": key, "date": "2024-05-01", "rows": len(rows), "first": start, "last": 2, "bytes": 1})
    manifest = {"partitions": [{"topic": "t", "partition": 0, "start": 0, "next": 3, "objects": keys,
                                "lost": None, "error": None}]}
    s3.put_object(Bucket=s3_bucket.bucket, Key=layout.manifests_prefix(s3_bucket.prefix, "c1") + "x.json",
                  Body=json.dumps(manifest).encode())
    reader = iter_archived(s3_bucket, "c1", "t", 0)
    assert next(reader).value == b"same"
    with pytest.raises(ArchiveConflict) as conflict:
        list(reader)
    assert conflict.value.offset == 1
    assert keys[0]["key"] in str(conflict.value) and keys[1]["key"] in str(conflict.value)


def test_a_manifest_or_an_object_a_newer_mirrorflow_wrote_is_refused_by_name(s3_bucket):
    s3 = s3_bucket.client()
    origin = provenance.Origin("c1", "t", 0, 0)
    key = layout.data_key(s3_bucket.prefix, "c1", "t", 0, "2024-05-01", 0)
    table = to_table([ArchivedRecord(0, DAY1, 1, None, b"v", [], origin)], "t", 0)
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"mirrorflow.archive.format": b"2"}), buf)
    s3.put_object(Bucket=s3_bucket.bucket, Key=key, Body=buf.getvalue())
    entry = {"topic": "t", "partition": 0, "start": 0, "next": 1, "lost": None, "error": None,
             "objects": [{"key": key, "date": "2024-05-01", "rows": 1, "first": 0, "last": 0, "bytes": 1}]}
    manifest_key = layout.manifests_prefix(s3_bucket.prefix, "c1") + "x.json"
    s3.put_object(Bucket=s3_bucket.bucket, Key=manifest_key, Body=json.dumps({"partitions": [entry]}).encode())
    with pytest.raises(NewerFormat, match=f"archive at archive object s3://{s3_bucket.bucket}/{key} is format 2"):
        list(iter_archived(s3_bucket, "c1", "t", 0))  # a manifest without a version is the first format
    s3.put_object(Bucket=s3_bucket.bucket, Key=manifest_key,
                  Body=json.dumps({"version": 2, "partitions": [entry]}).encode())
    with pytest.raises(NewerFormat, match=f"archive at manifest s3://{s3_bucket.bucket}/{manifest_key} is format 2"):
        read_manifests(s3_bucket, "c1")


def test_a_manifest_key_in_use_is_never_replaced(s3_bucket):
    # a retry of the same run id within the same second must not overwrite a committed manifest
    spec = ArchiveSpec(run_id="manual__x", clusters={}, archived=(), topics=(), location=s3_bucket)
    at = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
    s3 = s3_bucket.client()
    first = _unused_manifest_key(spec, "c1", at, s3)
    assert first == "mirrorflow/manifests/cluster=c1/20240501T100000-manual__x.json"
    s3.put_object(Bucket=s3_bucket.bucket, Key=first, Body=b"{}")
    second = _unused_manifest_key(spec, "c1", at, s3)
    assert second == "mirrorflow/manifests/cluster=c1/20240501T100000-manual__x.2.json"
