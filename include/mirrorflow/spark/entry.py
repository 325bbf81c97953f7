"""What every Spark entry point in ``spark_jobs/`` does around its job: one place, three jobs.

Each job (level copy, onboarding backfill, archive) reads its spec from the
environment variable the spec names (:meth:`SparkJobSpec.from_env
<mirrorflow.spark.contract.SparkJobSpec.from_env>`: it may hold credentials),
runs on a SparkContext, writes its result as JSON to ``--result`` (atomically,
via a temporary file the caller reads only once renamed) and exits 0 when
everything was done, 2 when some partitions failed (the result names each; the
others were done), 1 when the job itself could not run (an exception).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mirrorflow.secrets import ScrubFilter, remember
from mirrorflow.spark.contract import SparkJobResult, SparkJobSpec

SpecT = TypeVar("SpecT", bound=SparkJobSpec)


def run_entry(doc: str, spec_type: type[SpecT], run: Callable[[SpecT, Any], SparkJobResult],
              app_name: Callable[[SpecT], str], argv: list[str] | None = None) -> int:
    """Read a ``spec_type`` from its variable, ``run(spec, sc)``, write the result; ``app_name(spec)`` names the app."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--result", type=Path, help="write the job result (JSON) here")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # the job's output is the task log: no secret in it
        handler.addFilter(ScrubFilter())
    for noisy in ("py4j", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    # A bare SparkContext: the jobs use RDDs only, and a SparkSession's SQL machinery
    # would add to every micro-batch's start (docs/benchmarks.md).
    from pyspark import SparkConf, SparkContext

    spec = spec_type.from_env()
    for settings in spec.clusters.values():
        remember(settings)
    sc = SparkContext(conf=SparkConf().setAppName(app_name(spec)))
    sc.setLogLevel("WARN")
    try:
        result = run(spec, sc)
    finally:
        sc.stop()
    if args.result:
        args.result.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.result.with_suffix(".tmp")
        tmp.write_text(result.to_json(), encoding="utf-8")
        tmp.replace(args.result)
    for error in result.errors:
        logging.getLogger("mirrorflow.job").error("%s", error)
    return 0 if result.ok else 2
