"""Archive keys, run-id sanitising, the Parquet schema round trip, locations and specs (no servers)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pyarrow.parquet as pq
import pytest

from mirrorflow import provenance
from mirrorflow.archive import layout
from mirrorflow.archive.errors import ArchiveError
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.progress import validate
from mirrorflow.archive.records import SCHEMA, ArchivedRecord, from_table, to_table
from mirrorflow.archive.spec import ARCHIVE_ENV, ArchiveSpec
from mirrorflow.errors import MirrorflowError
from mirrorflow.provenance import origin_of


def test_data_key_is_hive_style_and_sorts_by_offset():
    key = layout.data_key("mirrorflow", "c1", "orders.eu", 3, "2024-05-01", 42)
    assert key == ("mirrorflow/data/cluster=c1/topic=orders.eu/partition=3/date=2024-05-01/"
                   "00000000000000000042.parquet")
    keys = [layout.data_key("p", "c1", "t", 0, "2024-05-01", o) for o in (10, 9, 100, 2**40)]
    assert sorted(keys) == [keys[1], keys[0], keys[2], keys[3]]
    parsed = layout.parse_data_key(key)
    assert (parsed.prefix, parsed.cluster, parsed.topic, parsed.partition, parsed.date, parsed.start) == \
        ("mirrorflow", "c1", "orders.eu", 3, "2024-05-01", 42)
    assert layout.data_key("", "c1", "t", 0, "2024-05-01", 0).startswith("data/cluster=c1/")
    assert layout.partition_prefix("a/b/", "c1", "t", 7) == "a/b/data/cluster=c1/topic=t/partition=7/"


def test_keys_refuse_names_that_would_break_them():
    with pytest.raises(ArchiveError, match="topic name 'a/b'"):
        layout.data_key("p", "c1", "a/b", 0, "2024-05-01", 0)
    with pytest.raises(ArchiveError, match="cluster name 'x=y'"):
        layout.progress_key("p", "x=y")
    with pytest.raises(ArchiveError, match="not YYYY-MM-DD"):
        layout.data_key("p", "c1", "t", 0, "May 1st", 0)
    with pytest.raises(ArchiveError, match="not an archive data key"):
        layout.parse_data_key("p/data/cluster=c1/topic=t/partition=0/x.parquet")


def test_manifest_and_progress_keys():
    at = datetime(2024, 5, 1, 12, 34, 56, tzinfo=timezone(timedelta(hours=2)))
    assert layout.manifest_key("mf", "c1", at, "scheduled__2024-05-01T10:00:00+00:00") == \
        "mf/manifests/cluster=c1/20240501T103456-scheduled__2024-05-01T10_00_00_00_00.json"
    assert layout.progress_key("mf", "c1") == "mf/progress/cluster=c1.json"


@pytest.mark.parametrize("run_id, expected", [
    ("manual__2024-05-01T10:00:00.123+00:00", "manual__2024-05-01T10_00_00.123_00_00"),
    ("a b/c\\d", "a_b_c_d"),
    ("", "run"),
    ("...", "run"),
    ("ok-id_1.2", "ok-id_1.2"),
])
def test_sanitise_run_id(run_id, expected):
    assert layout.sanitise_run_id(run_id) == expected


def test_long_run_ids_are_cut():
    assert len(layout.sanitise_run_id("x" * 500)) == 120


def test_utc_date():
    assert layout.utc_date(0) == "1970-01-01"
    assert layout.utc_date(1714607999999) == "2024-05-01"  # 23:59:59.999 UTC
    assert layout.utc_date(1714608000000) == "2024-05-02"
    assert layout.utc_date(-1) == layout.NO_TIMESTAMP_DATE
    assert layout.utc_date(2**62) == "9999-12-31"


def _records():
    return [
        ArchivedRecord(5, 1714607999999, 1, b"k", b"v", [("a", b"1"), ("a", None), ("b", b"")],
                       origin_of([("a", b"1")], "c1", "t", 0, 5)),
        ArchivedRecord(6, 1714608000000, 2, None, None, [],
                       origin_of([("mirror.origin", b"c3:t:0:99")], "c1", "t", 0, 6)),
        ArchivedRecord(9, -1, 0, b"", b"\x00\xff", [("mirror.origin", b"c3:t:0:100")],
                       origin_of([("mirror.origin", b"c3:t:0:100")], "c1", "t", 0, 9)),
    ]


def test_schema_round_trip_through_parquet():
    records = _records()
    table = to_table(records, "t", 0, metadata={"mirrorflow.archive.cluster": "c1"})
    assert table.schema.equals(SCHEMA, check_metadata=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    back = pq.read_table(io.BytesIO(buf.getvalue()))
    assert back.schema.equals(SCHEMA, check_metadata=False)
    assert back.schema.metadata[b"mirrorflow.archive.cluster"] == b"c1"
    assert back.schema.metadata[b"mirrorflow.archive.format"] == b"1"
    assert list(from_table(back)) == records
    assert back.column("topic").to_pylist() == ["t"] * 3
    assert back.column("partition").to_pylist() == [0] * 3


def test_origin_is_the_provenance_header_or_the_archived_position():
    assert _records()[0].origin == provenance.Origin("c1", "t", 0, 5)
    assert _records()[1].origin == provenance.Origin("c3", "t", 0, 99)
    # a header mirrorflow did not write is not an origin; nor is one forwarded from another topic or partition
    for value in (b"garbage", b"c3:other:0:5", b"c3:t:2:5"):
        assert origin_of([("mirror.origin", value)], "c1", "t", 0, 7) == provenance.Origin("c1", "t", 0, 7)


def test_location_hides_credentials_and_round_trips():
    loc = ArchiveLocation("my-bucket", "/arch/ive/", "http://127.0.0.1:9000", "us-east-1", "AKID", "s3cr3t", "tok")
    assert loc.prefix == "arch/ive"
    assert loc.uri == "s3://my-bucket/arch/ive" == str(loc)
    for secret in ("AKID", "s3cr3t", "tok"):
        assert secret not in repr(loc)
    assert ArchiveLocation.from_dict(loc.to_dict()) == loc
    with pytest.raises(ArchiveError, match="bucket 's3://my-bucket'"):
        ArchiveLocation("s3://my-bucket")
    with pytest.raises(ArchiveError, match="location: unknown key.*secret_key"):
        ArchiveLocation.from_dict({"bucket": "my-bucket", "secret_key": "x"})
    with pytest.raises(ArchiveError, match="both access_key_id and secret_access_key"):
        ArchiveLocation("my-bucket", access_key_id="AKID")


def test_spec_round_trips_and_hides_secrets():
    loc = ArchiveLocation("my-bucket", endpoint_url="http://127.0.0.1:9000", access_key_id="AKID",
                          secret_access_key="s3cr3t")
    spec = ArchiveSpec(run_id="r1", clusters={"c1": {"bootstrap.servers": "h:1", "sasl.password": "pw"}},
                       archived=("c1",), topics=("orders", "pay\\..*"), location=loc, slots=2,
                       max_records_per_run=100)
    text = spec.to_json()
    assert ArchiveSpec.from_env({ARCHIVE_ENV: text}) == spec
    for secret in ("pw", "s3cr3t", "AKID"):
        assert secret not in repr(spec)
    data = json.loads(text)
    with pytest.raises(MirrorflowError, match="archived: no client settings for c9"):
        ArchiveSpec.from_dict({**data, "archived": ["c9"]})
    with pytest.raises(MirrorflowError, match="max_records_per_run: must be a positive integer"):
        ArchiveSpec.from_dict({**data, "max_records_per_run": 0})
    with pytest.raises(MirrorflowError, match="location: .*bucket"):
        ArchiveSpec.from_dict({**data, "location": {"prefix": "x"}})
    with pytest.raises(MirrorflowError, match=f"{ARCHIVE_ENV} is not set"):
        ArchiveSpec.from_env({})


def test_progress_shape_is_checked():
    assert validate({"t": {"0": {"first": 0, "next": 5}}}, "x") == {"t": {"0": {"first": 0, "next": 5}}}
    with pytest.raises(ArchiveError, match=r"progress x: t\.0: expected"):
        validate({"t": {"0": {"first": 6, "next": 5}}}, "x")
    with pytest.raises(ArchiveError, match=r"t\.p0"):
        validate({"t": {"p0": {"first": 0, "next": 5}}}, "x")
