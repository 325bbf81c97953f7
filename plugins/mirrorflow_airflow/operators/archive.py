"""The step of ``mirror_archive``: submit the archive job to Spark and report what it wrote.

The spec carries each archived cluster's client settings and the S3
credentials resolved from the Airflow AWS connection; it goes to
``spark-submit`` in ``MIRRORFLOW_ARCHIVE_JOB`` only.
"""

from __future__ import annotations

import logging
from typing import Any

from mirrorflow.archive import ArchiveSpec, run_archive
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.archive import archive_location
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.operators.spark_job import MirrorSparkJobOperator
from mirrorflow_airflow.spark import SPARK_JOBS

log = logging.getLogger(__name__)


class ArchiveFailed(MirrorflowError):
    """Some partitions were not archived; the others were, and the next run retries these."""


class MirrorArchiveOperator(MirrorSparkJobOperator[ArchiveSpec]):
    def __init__(self, *, topology: Topology, **kwargs: Any) -> None:
        super().__init__(application=str(SPARK_JOBS / "mirror_archive.py"), name="mirrorflow-archive",
                         run=run_archive, **kwargs)
        self.topology = topology

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the result is the XCom
        archived = self.topology.archive.archived(self.topology.leaves)
        location = archive_location(self.topology)
        spec = ArchiveSpec(
            run_id=context["run_id"],
            clusters={c: dict(MirrorClusterHook(self.topology, c).client().settings) for c in archived},
            archived=tuple(archived), topics=tuple(self.topology.topics), location=location,
            max_records_per_run=self.topology.archive.max_records_per_run, names=self.topology.topic_formats(archived),
        )
        log.info("archiving %s to %s", ", ".join(archived), location.uri)
        result = self.submit(context, spec)
        result.pop("partition_details", None)
        log.info("archived %d records in %d objects; manifests: %s", result["archived"], result["objects"],
                 ", ".join(result["manifests"].values()) or "none (nothing new)")
        for gap in result["lost"]:
            log.warning("%s %s[%s]: offsets %s were deleted by retention before they were archived",
                        gap["cluster"], gap["topic"], gap["partition"], gap["lost"])
        if not result["ok"]:
            raise ArchiveFailed("archive run failed for some partitions (the others were archived):\n  "
                                + "\n  ".join(result["errors"]))
        return result
