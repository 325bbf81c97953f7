"""Spark entry point: one micro-batch of one level (what ``mirror_level_<L>`` submits).

    MIRRORFLOW_JOB='<job spec JSON>' spark-submit spark_jobs/mirror_level.py --result /tmp/result.json

The spec (see ``mirrorflow.copy.spec.JobSpec``) names the level, the run, the
links with their effective targets and settings, and each cluster's client
settings; it comes in an environment variable because it may hold credentials.
The driver plans and writes the :class:`~mirrorflow.copy.spec.JobResult` as JSON
to ``--result`` (when given); executors copy.

Exit codes: 0 every partition copied its planned range; 2 some link or
partition failed (the result names each; the others were copied); 1 the job
itself could not run.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from mirrorflow.copy import JobSpec, run_job
    from mirrorflow.spark import run_entry

    return run_entry(__doc__, JobSpec, run_job, lambda spec: f"mirrorflow-level-{spec.level}", argv)


if __name__ == "__main__":
    sys.exit(main())
