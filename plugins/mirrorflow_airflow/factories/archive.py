"""``mirror_archive``: each mirrored topic of each archived cluster to S3 as Parquet (scheduled).

One Spark job per run (``spark_jobs/mirror_archive.py``): Parquet objects
partitioned by cluster, topic, partition and date, each holding key, value,
headers, timestamp, provenance and source offsets; a manifest per run and
cluster; progress per cluster, written last, so a killed run is repeated
without duplicate rows (see :mod:`mirrorflow.archive.job`). Where to write
comes from the Airflow AWS connection ``archive.conn_id`` (default
``mirrorflow_archive``); what and how often from the topology's ``archive``.

``mirror_onboard_cluster`` with ``backfill: archive`` restores from it.
"""

from __future__ import annotations

from airflow.sdk import DAG

from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.operators.archive import MirrorArchiveOperator

DAG_ID = "mirror_archive"


def build_archive_dag(topology: Topology) -> DAG:
    archived = topology.archive.archived(topology.leaves)
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description=f"Archive the mirrored topics of {', '.join(archived)} to S3 (Parquet, manifests)",
        schedule=parse_schedule(topology.archive.schedule),
        tags=("archive",),
        doc_md=__doc__,
    ) as dag:
        MirrorArchiveOperator(task_id="archive", topology=topology)
    return dag
