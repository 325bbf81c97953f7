"""``mirror_lag_monitor`` (contract): measure lag per link and per consumer group; fail past the SLA.

Each run takes one snapshot (:mod:`mirrorflow.lag`):

- ``measure``: every link of every level, on its *effective* target (operator
  switches from the Airflow Variable ``mirrorflow_link_targets``), per source
  topic-partition: records not yet copied and the age of the oldest of them;
  and every selected consumer group (``offsets.groups`` of the topology,
  mirrorflow's own groups never) on every cluster: records not yet consumed
  and their age, with the group's state and member count. An unreachable
  cluster is recorded as such; the rest is still measured. The snapshot is
  stored in the Airflow Variable ``mirrorflow_lag_snapshot`` (JSON; Admin ->
  Variables, or :func:`read_lag_snapshot` from any task) and returned as the
  task's XCom; the task log shows a table per link and per group and one
  ``lag_snapshot`` journal line with the totals.
- ``check``: fails, without retrying, listing every violation when the
  topology's ``lag`` section sets a bound that is exceeded (an unreachable
  cluster counts when a bound applies to what it would have measured).

With an ``alerts`` section in the topology, ``check`` tells a person: one
message per link, group or cluster that violates the SLA when it starts, and one
when it is over (:mod:`mirrorflow_airflow.notifiers.alerts`, docs/alerts.md).

Schedule: ``lag.schedule`` of the topology (default every minute); one run at
a time, no catch-up. Format of the snapshot: docs/lag.md.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.notifiers.alerts import alert_callbacks
from mirrorflow_airflow.steps.lag_monitor import check_sla, measure_lag

DAG_ID = "mirror_lag_monitor"


def build_lag_monitor_dag(topology: Topology) -> DAG:
    bounds = topology.lag.model_dump(mode="json", exclude_defaults=True)
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Measure replication lag per link and consumer-group lag per cluster; fail past the SLA",
        schedule=parse_schedule(topology.lag.schedule),
        tags=("monitoring", "lag"),
        doc_md=__doc__,
    ) as dag:

        @task(**alert_callbacks(topology, "task"))
        def measure() -> dict[str, Any]:
            """Measure every link and group; store the snapshot in the Variable mirrorflow_lag_snapshot."""
            return measure_lag(topology, datetime.now(UTC))

        @task(doc_md="Fail, without retrying, when the snapshot exceeds the topology's lag settings: "
                     + (json.dumps(bounds) if bounds else "none set"),
              **alert_callbacks(topology, "lag", result_task_id="measure"))
        def check(snapshot: dict[str, Any]) -> dict[str, Any]:
            return check_sla(snapshot)

        check(measure())
    return dag
