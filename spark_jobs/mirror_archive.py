"""Spark entry point: one archive run (Kafka topics to Parquet in S3).

    MIRRORFLOW_ARCHIVE_JOB='<archive spec JSON>' spark-submit spark_jobs/mirror_archive.py --result /tmp/result.json

The spec (see ``mirrorflow.archive.spec.ArchiveSpec``) names the run, the
clusters to archive, the topic patterns, the S3 location and each cluster's
client settings; it comes in an environment variable because it may hold
credentials. The driver reads progress, plans, writes manifests and progress,
and writes the :class:`~mirrorflow.archive.spec.ArchiveResult` as JSON to
``--result`` (when given); executors write the Parquet objects.

Exit codes: 0 every planned partition archived its range; 2 some cluster or
partition failed (the result names each; the others were archived and
committed); 1 the job itself could not run.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from mirrorflow.archive import ArchiveSpec, run_archive
    from mirrorflow.spark import run_entry

    return run_entry(__doc__, ArchiveSpec, run_archive, lambda spec: f"mirrorflow-archive-{spec.run_id}", argv)


if __name__ == "__main__":
    sys.exit(main())
