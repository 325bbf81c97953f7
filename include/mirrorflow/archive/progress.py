"""How far the archive got, per cluster: one small JSON object, the archive's only position.

``{topic: {partition: {"first": int, "next": int}}}`` (partitions as JSON
strings). ``next`` is where the next run reads from; ``first`` is where the
partition's current contiguous coverage began (it moves up when the source
deleted records before the archive read them, so ``[first, next)`` is always
gap-free; the manifests keep the history, holes included).

It lives in S3 beside the data rather than in a Kafka consumer group: the
archive must stay readable and resumable when the source cluster is gone, and
one object written after the run's manifest makes "archived" a single step.
"""

from __future__ import annotations

import json
from typing import Any

from mirrorflow.archive import layout
from mirrorflow.archive.errors import ArchiveError
from mirrorflow.archive.location import ArchiveLocation

Progress = dict[str, dict[str, dict[str, int]]]


def _missing(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code")
    return code in ("NoSuchKey", "404", "NotFound")


def read_progress(location: ArchiveLocation, cluster: str, *, s3: Any = None) -> Progress:
    """The cluster's progress; ``{}`` when the cluster was never archived."""
    from botocore.exceptions import ClientError

    s3 = s3 if s3 is not None else location.client()
    key = layout.progress_key(location.prefix, cluster)
    try:
        body = s3.get_object(Bucket=location.bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if _missing(exc):
            return {}
        raise
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ArchiveError(f"progress s3://{location.bucket}/{key} is not JSON: {exc}") from None
    return validate(data, f"s3://{location.bucket}/{key}")


def validate(data: Any, where: str) -> Progress:
    """``data`` if it has the progress shape, else :class:`ArchiveError` naming the first bad entry."""
    if not isinstance(data, dict):
        raise ArchiveError(f"progress {where}: expected an object of topics, got {type(data).__name__}")
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise ArchiveError(f"progress {where}: {topic}: expected an object of partitions")
        for partition, entry in partitions.items():
            ok = (partition.isdigit() and isinstance(entry, dict)
                  and all(isinstance(entry.get(k), int) and entry[k] >= 0 for k in ("first", "next"))
                  and entry["first"] <= entry["next"])
            if not ok:
                raise ArchiveError(f"progress {where}: {topic}.{partition}: expected "
                                   f"{{\"first\": n, \"next\": m}} with 0 <= n <= m, got {entry!r}")
    return data


def write_progress(location: ArchiveLocation, cluster: str, progress: Progress, *, s3: Any = None) -> str:
    """Replace the cluster's progress (one PUT: readers see the old or the new one); its key."""
    s3 = s3 if s3 is not None else location.client()
    key = layout.progress_key(location.prefix, cluster)
    body = json.dumps(validate(progress, key), sort_keys=True, indent=1).encode()
    s3.put_object(Bucket=location.bucket, Key=key, Body=body, ContentType="application/json")
    return key
