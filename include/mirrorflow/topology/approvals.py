"""A second pair of eyes before a failover, a target switch or a decommission (topology key ``approvals``).

Off by default::

    approvals:
      enabled: true
      timeout_minutes: 60          # no answer by then: rejected, nothing changed
      approvers: [alice, bob]      # Airflow user ids who may answer (default: anyone who may act on the DAG)

With it on, ``mirror_failover_consumer_group``, ``mirror_switch_target`` and
``mirror_decommission_cluster`` compute their plan, show it to an approver
through Airflow's human-in-the-loop (Browse, Required Actions), and change
nothing until it is approved (docs/approvals.md).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool, StrictInt, StrictStr

from mirrorflow.topology.base import Model


class ApprovalsConfig(Model):
    """Whether operator DAGs wait for an approval before they act, how long, and who may answer."""

    enabled: StrictBool = False
    timeout_minutes: Annotated[StrictInt, Field(ge=1, le=10080)] = 60
    approvers: list[StrictStr] = Field(default_factory=list)
