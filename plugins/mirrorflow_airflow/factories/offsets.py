"""``mirror_offsets``: keep consumer groups positioned on every cluster (scheduled, default every minute).

Each run, in four tasks:

1. ``owners``: find where each selected group runs (the one cluster where it
   has members; an idle group keeps its remembered owner, Variable
   ``mirrorflow_group_owners``). A group with members on two clusters at once
   is reported and left alone.
2. ``publish``: on each owner cluster, turn committed offsets into portable
   positions and write them to ``_mirrorflow.offsets``.
3. ``distribute``: carry that topic along the tree (same copier and copy flags as
   data, highest level first, so one pass reaches every cluster).
4. ``commit``: on every other cluster, resolve each position (``offsets.precision``
   per group pattern) and commit it for groups with no members there. Commits
   that would change nothing are not made; each made commit is one journal line.

A cluster that does not answer is skipped by every step, and the run ends
failed naming it, after the other clusters have been served.
"""

from __future__ import annotations

from airflow.sdk import DAG, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL, mirror_dag
from mirrorflow_airflow.steps.offsets import commit_run, distribute_positions, find_owners, publish_positions

DAG_ID = "mirror_offsets"


def build_offsets_dag(topology: Topology) -> DAG:
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Distribute committed consumer-group offsets and commit them on the other clusters",
        schedule=parse_schedule(topology.offsets.schedule),
        tags=("offsets",),
        doc_md=__doc__,
    ) as dag:

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def owners() -> dict:
            """Where each group runs."""
            return find_owners(topology)

        @task
        def publish(found: dict) -> dict:
            """Portable positions of each owner's groups, written to its _mirrorflow.offsets."""
            return publish_positions(topology, found["owners"])

        @task
        def distribute_(published: dict) -> dict:
            """_mirrorflow.offsets along the tree, exactly once."""
            return distribute_positions(topology)

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def commit(found: dict, published: dict, distributed: dict) -> dict:
            """Positions resolved and committed where the groups are idle; fails naming unreachable clusters."""
            return commit_run(topology, found, published, distributed)

        found = owners()
        published = publish(found)
        distributed = distribute_.override(task_id="distribute")(published)
        commit(found, published, distributed)
    return dag
