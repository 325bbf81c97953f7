"""S3 archive of the mirrored topics (topology key ``archive``): where, how often, which clusters.

All optional. ``mirror_archive`` writes each selected topic of each archived
cluster to S3 as Parquet; ``mirror_onboard_cluster`` with ``backfill: archive``
restores from it what the peers no longer retain::

    archive:
      conn_id: mirrorflow_archive     # Airflow AWS connection (default shown)
      schedule: 1h                    # default every hour
      clusters: [c1, c3]              # default: every cluster
      prefix: mirrorflow              # key prefix inside the bucket (default shown)

Bucket, endpoint and credentials come from the Airflow AWS connection (its
extra ``bucket`` or ``service_config.s3.bucket_name``, ``endpoint_url``,
``region_name``; login/password are the key id and secret), never from this
file. Each archived cluster keeps its own archive: a restore must continue at
an exact offset of the cluster it continues from, and offsets differ between
clusters. Archiving every cluster costs storage once per cluster; name fewer
clusters to save it, and onboard new clusters next to an archived one.
"""

from __future__ import annotations

from pydantic import Field, StrictStr, field_validator

from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

DEFAULT_ARCHIVE_CONN_ID = "mirrorflow_archive"
DEFAULT_ARCHIVE_SCHEDULE = "1h"
DEFAULT_ARCHIVE_PREFIX = "mirrorflow"


class ArchiveConfig(Model):
    conn_id: StrictStr = DEFAULT_ARCHIVE_CONN_ID
    schedule: StrictStr = DEFAULT_ARCHIVE_SCHEDULE
    #: Clusters whose topics are archived; ``None``: every cluster of the tree.
    clusters: list[StrictStr] | None = None
    prefix: StrictStr = Field(default=DEFAULT_ARCHIVE_PREFIX, pattern=r"^[A-Za-z0-9._/-]*$")
    #: Most records archived per partition and run (bounds a run after a long pause).
    max_records_per_run: int | None = Field(default=None, gt=0)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value

    def archived(self, leaves: list[str]) -> list[str]:
        """The archived clusters, in tree order."""
        return [c for c in leaves if self.clusters is None or c in self.clusters]
