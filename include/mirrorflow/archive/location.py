"""Where the archive lives: a bucket, a key prefix, and how to reach the S3 API.

The location travels from Airflow to the Spark driver and on to every executor
(inside the job spec, as :meth:`ArchiveLocation.to_dict`), so it is plain data.
Credentials are optional: without them boto3's default chain applies (instance
role, environment, ``~/.aws``), which is what a production deployment should
use. When they are given (the local S3 server, an Airflow connection), they
stay out of ``repr`` and so out of every log line that prints a location.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mirrorflow.archive.errors import ArchiveError

_SESSION_LOCK = threading.Lock()
_SESSION: Any = None


def _session() -> Any:
    """The process's boto3 session (call with ``_SESSION_LOCK`` held)."""
    global _SESSION
    if _SESSION is None:
        import boto3

        _SESSION = boto3.session.Session()
    return _SESSION


# Loose on purpose: S3's rules for new buckets are 3-63 lower-case letters, digits, dots and
# hyphens, but older us-east-1 buckets may carry capitals and underscores (up to 255). This
# only catches what can never be a bucket (a path, a URL, an empty string) before any request.
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]$")


@dataclass(frozen=True)
class ArchiveLocation:
    bucket: str
    prefix: str = "mirrorflow"
    #: An S3-compatible endpoint (``http://127.0.0.1:9000``); ``None`` is AWS itself.
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.bucket, str) or not _BUCKET.fullmatch(self.bucket):
            raise ArchiveError(f"archive location: bucket {self.bucket!r} is not an S3 bucket name "
                               "(3-63 characters: lower-case letters, digits, '.', '-'; no '/' or scheme)")
        if not isinstance(self.prefix, str):
            raise ArchiveError(f"archive location: prefix must be a string, got {type(self.prefix).__name__}")
        prefix = self.prefix.strip("/")
        if "//" in prefix:
            raise ArchiveError(f"archive location: prefix {self.prefix!r} has an empty path segment")
        object.__setattr__(self, "prefix", prefix)
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ArchiveError("archive location: give both access_key_id and secret_access_key, or neither "
                               "(then boto3's default credential chain applies)")

    @property
    def uri(self) -> str:
        """``s3://bucket/prefix``: what logs and journal lines show (never credentials)."""
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __str__(self) -> str:
        return self.uri

    def client(self) -> Any:
        """A boto3 S3 client for this location.

        Path-style addressing whenever an endpoint is given: S3-compatible servers
        on an address (loopback, a cluster service) have no per-bucket host names.
        Clients come from one boto3 session per process, created under a lock:
        sessions are not thread-safe, but a new session per client would parse
        botocore's service models again every time (a second or more of CPU on
        a busy two-core machine).
        """
        from botocore.config import Config

        config = Config(
            s3={"addressing_style": "path"} if self.endpoint_url else {},
            retries={"mode": "standard", "max_attempts": 5},
            connect_timeout=10,
            read_timeout=60,
        )
        with _SESSION_LOCK:
            return _session().client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.access_key_id,
                aws_secret_access_key=self.secret_access_key,
                aws_session_token=self.session_token,
                config=config,
            )

    def to_dict(self) -> dict[str, Any]:
        """Every field, credentials included: for the job spec, which is kept out of files and logs."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "location") -> ArchiveLocation:
        """Build from :meth:`to_dict`'s shape; an unknown or missing key is named in the error."""
        if not isinstance(data, Mapping):
            raise ArchiveError(f"{where}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ArchiveError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        if not data.get("bucket"):
            raise ArchiveError(f"{where}.bucket: missing")
        for key, value in data.items():
            if value is not None and not isinstance(value, str):
                raise ArchiveError(f"{where}.{key}: expected a string, got {type(value).__name__}")
        return cls(**dict(data))
