"""``mirror_level_<L>`` DAGs (contract): one per level of the topology.

Each run is one micro-batch of every level-L link (a source cluster's level-L
distributor and its effective target leaf):

- ``copy``, the task that copies, first applies the operator's target switches (Airflow
  Variable ``mirrorflow_link_targets``) and the replication windows; it logs each
  link's effective target and, for a link outside its windows, when the next
  window opens; with no link open the run is skipped. Then it submits the level
  job to Spark (``spark_jobs/mirror_level.py``): the driver shapes target topics,
  reads checkpoints and end offsets and packs the work; executors copy exactly
  once. It logs one journal line per partition and returns the batch summary, the
  DAG run's return value, and emits an asset event per cluster and topic that got records.
- ``announce``, skipped unless the copy reached a cluster and topic Airflow has no
  asset for yet: emits those events, one such task at a time across DAGs
  (:mod:`mirrorflow_airflow.factories.announce`). It runs after a failed copy too, and
  then emits every arrival of the run: a partition that failed does not hold back the
  events of the topics that advanced. A teardown task, so the run still ends failed.

With an ``alerts`` section in the topology, a failed partition (a retention gap,
a truncated source, any copy error) is one message when it starts failing and one
when a later run copies it (:mod:`mirrorflow_airflow.notifiers.alerts`, docs/alerts.md).

Schedule: ``replication.schedule`` or ``replication.levels.<L>.schedule`` of the
topology (default every 5 minutes); no catch-up; one copy at a time. That last is
the ``copy`` task's ``max_active_tis_per_dag=1``, with a second run allowed to wait
(``max_active_runs=2``): with ``max_active_runs=1`` alone, Airflow 3.3's
dag-processor can store "at its maximum" for a run that ends while it parses the
file, and the scheduler then starts no run until the next parse, about 30 s later
(docs/levels.md, "One copy at a time"). ``on_data``:
no clock; the DAG is scheduled on the asset ``mirrorflow-pending://level/<L>``,
whose watcher in the triggerer starts a run when records wait on a link of the
level (:mod:`mirrorflow_airflow.triggers.data`, docs/levels.md).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher

from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.factories.announce import announce_task
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.notifiers.alerts import alert_callbacks
from mirrorflow_airflow.operators.level_copy import MirrorLevelCopyOperator
from mirrorflow_airflow.triggers.data import LevelDataTrigger, pending_uri


def level_dag_id(level: int, ns: str = "") -> str:
    """The DAG id of level ``level``: a contract, users and checks trigger it by name (``<ns>.`` first for
    one of several trees)."""
    return in_tree(ns, f"mirror_level_{level}")


def level_schedule(topology: Topology, level: int) -> Any:
    """The level DAG's schedule: its clock, or for ``on_data`` the asset its data watcher marks."""
    if not topology.replication.on_data_at(level):
        return topology.replication.schedule_for(level)
    watch = topology.replication.on_data
    ns = topology.namespace
    trigger = LevelDataTrigger(level=level, dag_id=level_dag_id(level, ns), poll_s=watch.poll_seconds,
                               floor_s=watch.floor_seconds, tree=ns)
    return [Asset(name=in_tree(ns, f"mirrorflow.pending.level_{level}"), uri=pending_uri(level, ns),
                  watchers=[AssetWatcher(name=in_tree(ns, f"mirrorflow_level_{level}_data"), trigger=trigger)])]


def build_level_dag(topology: Topology, level: int) -> DAG:
    links = topology.links(level)
    with mirror_dag(
        level_dag_id(level, topology.namespace),
        description=f"One micro-batch of every level-{level} link ({len(links)} links)",
        schedule=level_schedule(topology, level),
        tags=("replication", f"level-{level}"),
        doc_md=__doc__,
        max_active_runs=2,
    ) as dag:
        copy = MirrorLevelCopyOperator(task_id="copy", topology=topology, level=level, max_active_tis_per_dag=1,
                                       **alert_callbacks(topology, "copy"))
        copy >> announce_task("copy", after_failure=True)
    return dag


def build_level_dags(topology: Topology) -> dict[str, DAG]:
    return {level_dag_id(level, topology.namespace): build_level_dag(topology, level) for level in topology.levels}
