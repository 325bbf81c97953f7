"""``mirror_carry_checkpoints``: after renumbering the levels, carry every link's checkpoints to its new id (manual).

A link's id is ``<source>.L<level>`` and its checkpoint is kept under that id, so
renumbering the levels of the topology file (1 and 3 become 2 and 4, to make
room for an onboarding) leaves every link without a checkpoint, and level runs
refuse to copy, naming the old link ids they found. Give the renumbering as
``level_map`` (``1:2,3:4``; it must keep the levels' order) and run this DAG
once, with ``dry_run`` first: each new link's checkpoints are committed from
its old id's, fenced through the new link's transactions. Nothing is changed if
any new link already has checkpoints. One ``checkpoints_carried`` journal line per
link. docs/levels.md ("Renumbering levels") gives the whole procedure.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.steps.carry_checkpoints import run_carry

DAG_ID = "mirror_carry_checkpoints"


def build_carry_checkpoints_dag(topology: Topology) -> DAG:
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="After renumbering the levels: carry every link's checkpoints over to its new id",
        schedule=None,
        tags=("operations",),
        doc_md=__doc__,
        params={
            "level_map": Param("", type="string", title="Level map",
                               description="old level:new level, comma-separated (example: 1:2,3:4)"),
            "dry_run": Param(True, type="boolean", title="Dry run", description="Show what would be carried"),
        },
    ) as dag:

        @task
        def carry(params: dict | None = None) -> list[dict]:
            """Commit each new link's checkpoints from its old id's, fenced, and log a journal line per link."""
            p = params or {}
            return run_carry(topology, str(p["level_map"]), dry_run=bool(p.get("dry_run")))

        carry()
    return dag
