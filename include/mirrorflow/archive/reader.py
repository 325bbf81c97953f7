"""Read the archive back: what is covered, and the records themselves in offset order.

The manifests are the reader's index. A data object counts only once a
manifest lists it, because a run that died half-way leaves objects nobody
vouched for (the next run overwrites them, or, after a retention gap moved the
start, leaves them unused). Manifests also say which offsets the source lost
before the archive saw them, and those stay holes in :func:`coverage`.

Repeated runs may list the same object twice, or two objects may hold the same
offset (a re-run after a crash between manifest and progress); every offset is
yielded once, and two objects that disagree about one stop the reader with
both keys named (:class:`~mirrorflow.archive.errors.ArchiveConflict`).
"""

from __future__ import annotations

import heapq
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from mirrorflow import formats
from mirrorflow.archive import layout
from mirrorflow.archive.errors import ArchiveConflict, ArchiveError
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.records import FORMAT_KEY, ArchivedRecord, from_table


def _list_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", ()))
    return sorted(keys)


def _get(s3: Any, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def read_manifests(location: ArchiveLocation, cluster: str, *, s3: Any = None) -> list[dict[str, Any]]:
    """Every manifest of ``cluster``, oldest first (keys start with the run's UTC time)."""
    s3 = s3 if s3 is not None else location.client()
    out = []
    for key in _list_keys(s3, location.bucket, layout.manifests_prefix(location.prefix, cluster)):
        if not key.endswith(".json"):
            continue
        try:
            manifest = json.loads(_get(s3, location.bucket, key))
        except ValueError as exc:
            raise ArchiveError(f"manifest s3://{location.bucket}/{key} is not JSON: {exc}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("partitions"), list):
            raise ArchiveError(f"manifest s3://{location.bucket}/{key} has no 'partitions' list")
        # a manifest or object a newer mirrorflow wrote stops the reader by name
        formats.check("archive", manifest.get("version", 1), f"manifest s3://{location.bucket}/{key}")
        manifest["_key"] = key
        out.append(manifest)
    return out


def _entries(manifests: list[dict[str, Any]], topic: str, partition: int) -> Iterator[tuple[str, dict[str, Any]]]:
    for manifest in manifests:
        for entry in manifest["partitions"]:
            if entry.get("topic") == topic and entry.get("partition") == partition:
                yield manifest["_key"], entry


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for first, nxt in sorted(r for r in ranges if r[1] > r[0]):
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], nxt))
        else:
            merged.append((first, nxt))
    return merged


def coverage(location: ArchiveLocation, cluster: str, topic: str, partition: int, *,
             s3: Any = None) -> list[tuple[int, int]]:
    """Contiguous ``(first, next)`` offset ranges the archive holds for one partition, sorted.

    Offsets inside a range that have no record (transaction markers, aborted
    or compacted-away records) were read and had nothing to keep; offsets
    between ranges were never archived (see :func:`lost`).
    """
    ranges = [(e["start"], e["next"]) for _, e in _entries(read_manifests(location, cluster, s3=s3), topic, partition)
              if not e.get("error")]
    return _merge(ranges)


def coverages(location: ArchiveLocation, cluster: str, partitions: list[tuple[str, int]], *,
              s3: Any = None) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """:func:`coverage` of several partitions of one cluster, reading its manifests once."""
    manifests = read_manifests(location, cluster, s3=s3)
    return {(topic, partition): _merge([(e["start"], e["next"]) for _, e in _entries(manifests, topic, partition)
                                        if not e.get("error")])
            for topic, partition in partitions}


def lost(location: ArchiveLocation, cluster: str, topic: str, partition: int, *,
         s3: Any = None) -> list[tuple[int, int]]:
    """``(from, to)`` ranges the source deleted before the archive read them, as the manifests recorded."""
    ranges = [tuple(e["lost"]) for _, e in _entries(read_manifests(location, cluster, s3=s3), topic, partition)
              if e.get("lost")]
    return _merge(ranges)


@dataclass(frozen=True, order=True)
class _Object:
    first: int
    last: int
    key: str


def _rows(s3: Any, location: ArchiveLocation, obj: _Object, start: int, end: int | None) -> Iterator[ArchivedRecord]:
    try:
        table = pq.read_table(io.BytesIO(_get(s3, location.bucket, obj.key)))
    except Exception as exc:
        raise ArchiveError(f"archive object s3://{location.bucket}/{obj.key} cannot be read: "
                           f"{type(exc).__name__}: {exc}") from exc
    stored = (table.schema.metadata or {}).get(FORMAT_KEY, b"1").decode()
    formats.check("archive", int(stored) if stored.isdigit() else stored,
                  f"archive object s3://{location.bucket}/{obj.key}")
    records = sorted(from_table(table), key=lambda r: r.offset)
    return (r for r in records if r.offset >= start and (end is None or r.offset < end))


def iter_archived(location: ArchiveLocation, cluster: str, topic: str, partition: int, start: int = 0,
                  end: int | None = None, *, s3: Any = None) -> Iterator[ArchivedRecord]:
    """The archived records of one partition with ``start <= offset < end``, in offset order, each once.

    Objects are opened only when the merge reaches their first offset, so
    memory holds the objects that overlap, not the whole range.
    """
    s3 = s3 if s3 is not None else location.client()
    objects: dict[str, _Object] = {}
    for _, entry in _entries(read_manifests(location, cluster, s3=s3), topic, partition):
        if entry.get("error"):
            continue
        for o in entry.get("objects", ()):
            if o["last"] >= start and (end is None or o["first"] < end):
                objects[o["key"]] = _Object(o["first"], o["last"], o["key"])
    pending = sorted(objects.values())
    heap: list[tuple[int, int, ArchivedRecord, str, Iterator[ArchivedRecord]]] = []
    seq = 0  # tie-breaker: records themselves are not ordered
    i = 0
    last: tuple[ArchivedRecord, str] | None = None
    while True:
        while i < len(pending) and (not heap or pending[i].first <= heap[0][0]):
            rows = _rows(s3, location, pending[i], start, end)
            head = next(rows, None)
            if head is not None:
                heapq.heappush(heap, (head.offset, seq, head, pending[i].key, rows))
                seq += 1
            i += 1
        if not heap:
            return
        offset, _, record, key, rows = heapq.heappop(heap)
        following = next(rows, None)
        if following is not None:
            heapq.heappush(heap, (following.offset, seq, following, key, rows))
            seq += 1
        if last is not None and last[0].offset == offset:
            if last[0] != record:
                raise ArchiveConflict(cluster, topic, partition, offset, last[1], key)
            continue
        last = (record, key)
        yield record
