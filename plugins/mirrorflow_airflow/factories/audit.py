"""``mirror_audit``: the completeness audit, every cluster holds every message of every origin exactly once.

Each run (:mod:`mirrorflow.completeness`, docs/audit.md):

- ``count``: on every cluster, every mirrored topic is read from where the last
  audit stopped; per topic, origin cluster and window of the message timestamp
  (``audit.window_minutes``, default 10) a count and an order-independent sum of
  the messages' identities are added to the tallies kept on that cluster (topic
  ``_mirrorflow.audit``). Then every window that ended more than
  ``audit.grace_minutes`` ago (default 15) is compared with its origin's tally,
  and each difference is drilled down to its messages. Returns the summary
  (XCom) and writes one ``completeness`` journal line.
- ``check``: fails, without retrying, with a table naming topic, window, origin,
  cluster, the counts and the messages missing or duplicated.
- ``proven_<topic>.<cluster>``, one per topic named in the topology
  (``Topology.asset_topics``) and cluster: each window the count proved complete
  there for the first time, or proved earlier without Airflow registering its
  event (a task died between the ledger and the event), is one event of the asset
  ``mirrorflow-proven://<cluster>/<topic>``, the window's start as its partition
  key (docs/assets.md); skipped when there is none.

With an ``alerts`` section in the topology, each difference (per cluster, topic
and origin) and each cluster not audited is one message when found and one when
it is over (:mod:`mirrorflow_airflow.notifiers.alerts`, docs/alerts.md).

Schedule: ``audit.schedule`` of the topology (default every 10 minutes); one run
at a time, no catch-up.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, TaskGroup, get_current_context, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.assets import proven_asset
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.notifiers.alerts import alert_callbacks
from mirrorflow_airflow.steps.audit import announce_proven, audit_clusters, check_audit, proven_task_id

DAG_ID = "mirror_audit"


def build_audit_dag(topology: Topology) -> DAG:
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Count every origin's messages per window on every cluster and compare: loss and duplicates",
        schedule=parse_schedule(topology.audit.schedule),
        tags=("monitoring", "audit"),
        doc_md=__doc__,
    ) as dag:

        @task(**alert_callbacks(topology, "task"))
        def count() -> dict[str, Any]:
            """Count what is new on every cluster, compare the final windows, drill down the differences."""
            return audit_clusters(topology, run_id=str(get_current_context()["run_id"]))

        @task(**alert_callbacks(topology, "audit", result_task_id="count"))
        def check(summary: dict[str, Any]) -> dict[str, Any]:
            """Fail, without retrying (AuditViolation), naming every difference."""
            return check_audit(summary)

        counted = count()
        check(counted)
        for topic in topology.asset_topics():
            # One task per topic and cluster, skipped when the run proved nothing there: an asset a task
            # lists is marked on every success of that task, with a window or without one.
            with TaskGroup(group_id=proven_task_id(topic)):
                for cluster in topology.clusters:
                    @task(task_id=cluster, outlets=[proven_asset(cluster, topic, topology.namespace)])
                    def announce(summary: dict[str, Any], topic: str = topic,
                                 cluster: str = cluster) -> dict[str, list[str]]:
                        """The windows of the topic proven complete on the cluster and not announced, one event each."""
                        return announce_proven(summary, topic, cluster, get_current_context(), topology.namespace)

                    announce(counted)
    return dag
