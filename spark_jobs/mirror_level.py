"""Spark entry point: one micro-batch of one level (what ``mirror_level_<L>`` submits).

    MIRRORFLOW_JOB='<job spec JSON>' spark-submit spark_jobs/mirror_level.py --result /tmp/result.json

The spec (see ``mirrorflow.copy.job.JobSpec``) names the level, the run, the
links with their effective targets and settings, and each cluster's client
settings; it comes in an environment variable because it may hold credentials.
The driver plans and writes the :class:`~mirrorflow.copy.job.JobResult` as JSON
to ``--result`` (when given); executors copy.

Exit codes: 0 every partition copied its planned range; 2 some link or
partition failed (the result names each; the others were copied); 1 the job
itself could not run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--result", type=Path, help="write the job result (JSON) here")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from pyspark.sql import SparkSession

    from mirrorflow.copy.job import JobSpec, run_job

    spec = JobSpec.from_env()
    spark = SparkSession.builder.appName(f"mirrorflow-level-{spec.level}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        result = run_job(spec, spark)
    finally:
        spark.stop()
    if args.result:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.result.with_suffix(".tmp")
        tmp.write_text(result.to_json(), encoding="utf-8")
        tmp.replace(args.result)
    for error in result.errors:
        logging.getLogger("mirrorflow.job").error("%s", error)
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
