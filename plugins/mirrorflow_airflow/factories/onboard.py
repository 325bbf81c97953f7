"""``mirror_onboard_cluster`` (contract): add a cluster from the UI form, with its history; no file edit.

Steps, each its own task and log (the audit record of the onboarding):

1. ``preflight``: the form, both clusters reachable, transactions allowed on the
   new one, where it joins the tree, topics that would clash (refused unless
   ``adopt``; a different partition count is always refused), the archive
   meeting Kafka (``archive``). Nothing is changed before this passes.
2. ``create_topics``: the mirrored topics with the sibling's partitions and
   travelling configs (and ``_mirrorflow.offsets``).
3. ``schemas``: the primary registry's registrations, subjects translated.
4. ``backfill``: the Spark job of :mod:`mirrorflow.onboard.backfill`, exactly once;
   its asset events new to Airflow are emitted by ``announce`` beside the next steps
   (:mod:`mirrorflow_airflow.factories.announce`).
5. ``positions``: consumer groups positioned on the new cluster from the owners'
   distributed positions (never a group active there).
6. ``join``: the cluster joins the tree durably (Airflow Variable
   ``mirrorflow_topology_changes``); links whose default target moves with the
   new leaf are pinned where they are. Every DAG sees it from its next parse.
7. ``verify``: per topic-partition, by origin, counts and checksums against the sibling.
8. ``summary``: one journal line for the whole onboarding; fails if a step did.

Re-running after a failure at any step continues: topics created by the
earlier attempt are recognised (Variable ``mirrorflow_onboarding``), the
backfill resumes from its checkpoints, the other steps are idempotent.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from mirrorflow.onboard.plan import BACKFILL_MODES, OnboardPlan
from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.factories.announce import announce_task
from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL, mirror_dag
from mirrorflow_airflow.operators.backfill import MirrorBackfillOperator
from mirrorflow_airflow.steps.onboard import (
    STEPS,
    create_topics,
    join_tree,
    position_groups,
    run_preflight,
    summary,
    sync_schemas,
    verify_step,
)

DAG_ID = "mirror_onboard_cluster"


def build_onboard_dag(topology: Topology) -> DAG:
    clusters = sorted(topology.clusters)
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Add a cluster: topics, schemas, backfill, consumer positions, join the tree, verify",
        schedule=None,
        tags=("operations", "onboarding"),
        doc_md=__doc__,
        params={
            "cluster": Param("", type="string", title="New cluster name",
                             description="Letters, digits, _ and -; becomes a leaf of the tree"),
            "bootstrap": Param("", type=["null", "string"], title="Bootstrap address",
                               description="host:port[,host:port]; or leave empty and give a connection id"),
            "conn_id": Param("", type=["null", "string"], title="Airflow connection id",
                             description="A Kafka connection holding bootstrap.servers and credentials"),
            "sibling_of": Param(clusters[0], type="string", enum=clusters, title="Joins next to",
                                description="The existing cluster the new one pairs with; its peer for the backfill"),
            "level": Param(1, type="integer", minimum=1, maximum=63, title="At level",
                           description="The level of the new pair node; below the sibling's parent level"),
            "topics": Param([], type="array", items={"type": "string"}, title="Topics",
                            description="Names or regexes; empty: every mirrored topic"),
            "backfill": Param("retained", type="string", enum=list(BACKFILL_MODES), title="Backfill",
                              description="none: only new messages; retained: all the sibling holds; since: from "
                                          "a timestamp; archive: from the S3 archive, then Kafka"),
            "since": Param("", type=["null", "string"], title="Since (backfill 'since')",
                           description="ISO 8601 timestamp or epoch milliseconds"),
            "schemas": Param(True, type="boolean", title="Sync schemas"),
            "adopt": Param(False, type="boolean", title="Adopt existing topics",
                           description="Use topics that already exist on the new cluster (same partitions)"),
            "dry_run": Param(False, type="boolean", title="Dry run",
                             description="Run every check and show the plan; change nothing"),
            "names": Param(None, type=["null", "object"], title="Names on the new cluster",
                           description="How it names mirrored topics and groups, as the topology's "
                                       "clusters.<c>.names (e.g. {\"topic_prefix\": \"acme-\"}); empty: the "
                                       "logical names (docs/naming.md)"),
        },
    ) as dag:

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def preflight_(params: dict | None = None, run_id: str | None = None) -> dict:
            """Every check before anything changes; the plan the other steps follow."""
            return run_preflight(topology, dict(params or {}), run_id or "")

        @task
        def create_topics_(plan: dict) -> dict:
            """Mirrored topics on the new cluster, shaped like the sibling's."""
            return create_topics(topology, OnboardPlan.from_dict(plan))

        @task
        def schemas_(plan: dict, created: dict, params: dict | None = None) -> dict:
            """The primary registry's registrations, synced to the new cluster."""
            return sync_schemas(topology, OnboardPlan.from_dict(plan), bool((params or {}).get("schemas", True)))

        @task
        def positions_(plan: dict, backfilled: dict) -> dict:
            """Consumer groups positioned on the new cluster."""
            return position_groups(topology, OnboardPlan.from_dict(plan))

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def join_(plan: dict, positioned: dict, schemas: dict, run_id: str | None = None) -> dict:
            """The new cluster joins the tree; every DAG sees it from its next parse."""
            return join_tree(topology, OnboardPlan.from_dict(plan), run_id or "")

        @task
        def verify_(plan: dict, joined_: dict) -> dict:
            """Counts and checksums by origin against the sibling."""
            return verify_step(topology, OnboardPlan.from_dict(plan))

        @task(trigger_rule="all_done", pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def summary_(run_id: str | None = None, ti: Any = None) -> dict:
            """One journal line for the onboarding; fails if any step did."""
            results = {s: ti.xcom_pull(task_ids=s) for s in STEPS}
            return summary(topology, results.get("preflight"), results, run_id or "")

        plan = preflight_.override(task_id="preflight")()
        created = create_topics_.override(task_id="create_topics")(plan)
        schemas = schemas_.override(task_id="schemas")(plan, created)
        backfill = MirrorBackfillOperator(task_id="backfill", topology=topology)
        created >> backfill >> announce_task("backfill")
        positioned = positions_.override(task_id="positions")(plan, backfill.output)
        joined_ = join_.override(task_id="join")(plan, positioned, schemas)
        verify_.override(task_id="verify")(plan, joined_) >> summary_.override(task_id="summary")()
    return dag
