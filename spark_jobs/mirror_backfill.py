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

import sys


def main(argv: list[str] | None = None) -> int:
    from mirrorflow.onboard.backfill import BackfillSpec, run_backfill
    from mirrorflow.spark import run_entry

    return run_entry(__doc__, BackfillSpec, run_backfill, lambda spec: f"mirrorflow-backfill-{spec.target}", argv)


if __name__ == "__main__":
    sys.exit(main())
