"""The S3 archive of Kafka topics: Parquet objects per partition and UTC date, manifests, progress.

Modules, smallest first:

- :mod:`~mirrorflow.archive.errors`: what goes wrong, each error naming its object or partition;
- :mod:`~mirrorflow.archive.location`: where (bucket, prefix, endpoint, credentials);
- :mod:`~mirrorflow.archive.layout`: the object keys;
- :mod:`~mirrorflow.archive.records`: the Parquet schema;
- :mod:`~mirrorflow.archive.progress`: how far the archive got, per cluster;
- :mod:`~mirrorflow.archive.writer`: what an executor does for one partition range;
- :mod:`~mirrorflow.archive.reader`: coverage and records back, in offset order;
- :mod:`~mirrorflow.archive.source`: the archive as a message source for the copier's restores;
- the archive run: :mod:`~mirrorflow.archive.spec` (what the Spark job is asked,
  and its result), :mod:`~mirrorflow.archive.plan` (each partition's range in a
  run), :mod:`~mirrorflow.archive.job` (:func:`run_archive`: execute, manifest,
  progress, audit).

Outside ``archive/`` import from this face only. The modules that need ``boto3``
and ``pyarrow`` (or the topology's models) besides the core's dependencies are
loaded on first use of one of their names, so a copy-only executor, and
:mod:`mirrorflow.lineage`, which only names archived data, never need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.archive.errors import ArchiveConflict, ArchiveError
from mirrorflow.archive.layout import topic_prefix
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.faces import on_first_use

if TYPE_CHECKING:
    from mirrorflow.archive.job import run_archive
    from mirrorflow.archive.reader import coverage, coverages, iter_archived
    from mirrorflow.archive.source import ArchivedMessage, ArchiveSource, EndOfRange
    from mirrorflow.archive.spec import ARCHIVE_ENV, ArchiveResult, ArchiveSpec

#: The names loaded on first use, and the module of this package each comes from.
_ON_FIRST_USE = {
    "ARCHIVE_ENV": "spec", "ArchiveResult": "spec", "ArchiveSpec": "spec", "run_archive": "job",
    "coverage": "reader", "coverages": "reader", "iter_archived": "reader",
    "ArchiveSource": "source", "ArchivedMessage": "source", "EndOfRange": "source",
}


__getattr__ = on_first_use(__name__, _ON_FIRST_USE)


__all__ = [
    "ARCHIVE_ENV",
    "ArchiveConflict",
    "ArchiveError",
    "ArchiveLocation",
    "ArchiveResult",
    "ArchiveSource",
    "ArchiveSpec",
    "ArchivedMessage",
    "EndOfRange",
    "coverage",
    "coverages",
    "iter_archived",
    "run_archive",
    "topic_prefix",
]
