"""A second pair of eyes (topology key ``approvals``): where the approval sits in each operator DAG, and what it asks.

The approval itself, given and refused in the UI: tests/e2e/test_failover_form.py.
"""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.decommission import build_decommission_dag
from mirrorflow_airflow.factories.failover import build_failover_dag
from mirrorflow_airflow.factories.switch import build_switch_dag
from mirrorflow_airflow.operators.approval import PlanApprovalOperator, responder
from tests.unit.test_grants import BASE

pytestmark = pytest.mark.airflow


def _topology(**approvals) -> Topology:
    return Topology.parse({**BASE, "approvals": approvals} if approvals else BASE)


@pytest.mark.parametrize("build, changes_first", [
    (build_failover_dag, "publish_final"),   # nothing is published or committed before the approval
    (build_switch_dag, "switch"),
    (build_decommission_dag, "switch"),
])
def test_with_approvals_on_the_plan_comes_first_and_everything_that_changes_waits_for_it(build, changes_first):
    off = build(_topology())
    assert "approve" not in off.task_ids and "propose" not in off.task_ids  # off by default: the DAG as before
    dag = build(_topology(enabled=True, timeout_minutes=30, approvers=["alice"]))
    approve = dag.get_task("approve")
    assert isinstance(approve, PlanApprovalOperator)
    assert approve.upstream_task_ids == {"propose"}
    assert changes_first in approve.downstream_task_ids
    # every task that changes something lies behind the approval; a rejection skips them all
    behind = {t.task_id for t in approve.get_flat_relatives(upstream=False)}
    assert behind == set(dag.task_ids) - {"approve", "propose", "preflight"}
    assert approve.ignore_downstream_trigger_rules and approve.defaults == ["Reject"]
    assert approve.response_timeout.total_seconds() == 1800
    assert approve.assigned_users == [{"id": "alice", "name": "alice"}]
    assert "xcom_pull(task_ids='propose')['text']" in approve.body


def test_the_approver_is_named_from_the_answer():
    assert responder({"chosen_options": ["Approve"], "responded_by_user": {"id": "a1", "name": "alice"}}) == "alice"
    assert responder({"chosen_options": ["Reject"], "responded_by_user": None}) is None  # no answer in time
    assert responder(None) is None


def test_a_bad_approvals_section_is_refused_naming_the_key():
    with pytest.raises(TopologyError) as caught:
        _topology(enabled=True, timeout_minutes=0)
    assert "approvals.timeout_minutes" in str(caught.value)
