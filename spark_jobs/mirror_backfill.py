"""Spark entry point: the onboarding backfill (what ``mirror_onboard_cluster``'s ``backfill`` task submits).

    MIRRORFLOW_BACKFILL='<spec JSON>' spark-submit spark_jobs/mirror_backfill.py --result /tmp/result.json

The spec (``mirrorflow.onboard.backfill.BackfillSpec``) names the new link, the
mode, the topics and each cluster's client settings (and the archive's
credentials for ``archive``), so it comes in an environment variable.

Exit codes: 0 every partition reached the planned cut; 2 some partition failed
(the result names each; re-running continues from the checkpoints); 1 the job
itself could not run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--result", type=Path, help="write the backfill result (JSON) here")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from pyspark.sql import SparkSession

    from mirrorflow.onboard.backfill import BackfillSpec, run_backfill

    spec = BackfillSpec.from_env()
    spark = SparkSession.builder.appName(f"mirrorflow-backfill-{spec.target}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        result = run_backfill(spec, spark)
    finally:
        spark.stop()
    if args.result:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.result.with_suffix(".tmp")
        tmp.write_text(result.to_json(), encoding="utf-8")
        tmp.replace(args.result)
    for error in result.errors:
        logging.getLogger("mirrorflow.backfill").error("%s", error)
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
