"""One micro-batch as an Airflow task runs it on a Spark Connect connection: a fresh process, the driver in it.

    MIRRORFLOW_JOB='<spec>' python -m benchmarks.connect_client sc://127.0.0.1:15002 --result /tmp/result.json

What ``MirrorSparkJobOperator`` does for a ``spark_connect`` connection, without
Airflow around it: open mirrorflow's session on the server, run the level job
(planning here, copying on the server's warm Python workers), write the result.
A new process per run, as every Airflow task is, so its interpreter start and
imports are on the clock.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.connect_client", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the Spark Connect server (sc://host:port)")
    parser.add_argument("--result", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from mirrorflow.copy.job import run_job
    from mirrorflow.copy.spec import JobSpec
    from mirrorflow.spark import opening

    spec = JobSpec.from_env()
    with opening(args.url) as spark:  # planned while the session opens, as the level operator does
        result = run_job(spec, spark)
    args.result.write_text(result.to_json(), encoding="utf-8")
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
