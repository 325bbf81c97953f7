"""Spark entry point: one archive run (Kafka topics to Parquet in S3).

    MIRRORFLOW_ARCHIVE_JOB='<archive spec JSON>' spark-submit spark_jobs/mirror_archive.py --result /tmp/result.json

The spec (see ``mirrorflow.archive.job.ArchiveSpec``) names the run, the
clusters to archive, the topic patterns, the S3 location and each cluster's
client settings; it comes in an environment variable because it may hold
credentials. The driver reads progress, plans, writes manifests and progress,
and writes the :class:`~mirrorflow.archive.job.ArchiveResult` as JSON to
``--result`` (when given); executors write the Parquet objects.

Exit codes: 0 every planned partition archived its range; 2 some cluster or
partition failed (the result names each; the others were archived and
committed); 1 the job itself could not run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--result", type=Path, help="write the run result (JSON) here")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("botocore").setLevel(logging.WARNING)

    from pyspark.sql import SparkSession

    from mirrorflow.archive.job import ArchiveSpec, run_archive

    spec = ArchiveSpec.from_env()
    spark = SparkSession.builder.appName(f"mirrorflow-archive-{spec.run_id}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        result = run_archive(spec, spark)
    finally:
        spark.stop()
    if args.result:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.result.with_suffix(".tmp")
        tmp.write_text(result.to_json(), encoding="utf-8")
        tmp.replace(args.result)
    for error in result.errors:
        logging.getLogger("mirrorflow.archive").error("%s", error)
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
