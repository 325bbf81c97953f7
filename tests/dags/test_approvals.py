"""A second pair of eyes (topology key ``approvals``): where the approval sits in each operator DAG, and what it asks.

The approval itself, given and refused in the UI: tests/e2e/standalone/test_failover_form.py. Here, under
``dag.test()`` on real brokers, answered through the API's own handler (what Required Actions
calls): a planned failover approved after its group came back to life on the source refuses by
name and commits nothing on the target, and the requester's own approval counts as a rejection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.decommission import build_decommission_dag
from mirrorflow_airflow.factories.failover import build_failover_dag
from mirrorflow_airflow.factories.switch import build_switch_dag
from mirrorflow_airflow.operators.approval import PlanApprovalOperator, responder
from mirrorflow_dev.process import wait_until
from tests.dags.dag_runs import states, task_output
from tests.dags.forms import failover_conf
from tests.integration.groups import Member, committed_offsets, consume_and_commit
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology, traffic
from tests.unit.topologies import BASE

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


# ---------------------------------------------------------------------------------------------- answered for real


def _awaiting(dag_id: str, seen: set[str]) -> str | None:
    """The run id whose ``approve`` waits for its answer now (one not in ``seen``), else ``None``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        rows = session.query(TaskInstance.run_id).filter(
            TaskInstance.dag_id == dag_id, TaskInstance.task_id == "approve",
            TaskInstance.state == TaskInstanceState.AWAITING_INPUT).all()
    return next((r.run_id for r in rows if r.run_id not in seen), None)


def _answer(dag_id: str, run_id: str, option: str, user: str) -> None:
    """Answer as a user in Required Actions does: the API's own handler records it and resumes the task."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.utils.session import create_session

    with create_session() as session:
        update_hitl_detail(dag_id=dag_id, dag_run_id=run_id, task_id="approve",
                           update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[option]),
                           user=SimpleAuthManagerUser(username=user, role="admin"), session=session)


def _warm_imports() -> None:
    """Import and map in this thread what both threads use: two threads importing Airflow's models at once deadlock
    (the import lock against SQLAlchemy's mapper configuration)."""
    import airflow.api.common.trigger_dag  # noqa: F401 (imported by dag.test() when it serializes the DAG)
    import airflow.models.dagbag  # noqa: F401
    import airflow.providers.standard.operators.trigger_dagrun  # noqa: F401
    from airflow.models import import_all_models
    from sqlalchemy.orm import configure_mappers

    import_all_models()
    configure_mappers()


class _Approver:
    """Answers a run's approval from a thread of its own (``dag.test()`` needs the main one: task timeouts use signals).

    Waits until the next run's ``approve`` waits for input, calls ``meanwhile``, then answers ``option`` as
    ``user``. If anything fails before, it answers Reject, so ``dag.test()`` ends instead of waiting forever.
    """

    def __init__(self, dag_id: str, seen: set[str], option: str, user: str,
                 meanwhile: Callable[[], None] | None = None) -> None:
        _warm_imports()
        self.dag_id, self.seen, self.option, self.user, self.meanwhile = dag_id, seen, option, user, meanwhile
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._go, daemon=True)
        self._thread.start()

    def _go(self) -> None:
        run_id = None
        try:
            run_id = wait_until("the failover to wait for its approval", lambda: _awaiting(self.dag_id, self.seen),
                                180, 0.5)
            self.seen.add(run_id)
            if self.meanwhile is not None:
                self.meanwhile()
            _answer(self.dag_id, run_id, self.option, self.user)
        except BaseException as exc:  # noqa: BLE001 (raised by done(), after the run ended)
            self.error = exc
            if run_id is not None:
                _answer(self.dag_id, run_id, "Reject", "the-test-after-its-own-failure")

    def done(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the approver thread did not end"
        if self.error is not None:
            raise self.error


@pytest.mark.kafka
def test_a_planned_failover_approved_after_its_group_came_back_on_the_source_refuses_by_name_and_commits_nothing(
        kafka_clusters, make_topic, as_current, owners, caplog, capfd):  # noqa: F811 (fixtures)
    topic = topic_everywhere(make_topic)
    approvals = "approvals: {enabled: true, timeout_minutes: 30}\n"  # no approvers: anyone but the requester
    topo = as_current(topology(kafka_clusters, FOUR, [topic], extra=approvals))
    c1, c4 = kafka_clusters["c1"].bootstrap, kafka_clusters["c4"].bootstrap
    traffic(kafka_clusters, "c1", topic, 60)
    converge(topo, clients(kafka_clusters, topo))  # c4 holds all of it: nothing to wait for once approved
    consume_and_commit(c1, topic, "fo-back", 20)
    dag, seen = build_failover_dag(topo), set()

    def nothing_committed() -> None:
        assert committed_offsets(c4, topic, "fo-back", 2) == [-1001, -1001], "committed on c4"
        assert "fo-back" not in owners()

    # 1. the requester approves their own change (no approvers listed: anyone but the requester): a rejection
    approver = _Approver(dag.dag_id, seen, "Approve", "dag_test")  # dag.test()'s triggering user
    run = dag.test(run_conf=failover_conf(groups=["fo-back"]))
    approver.done()
    assert states(run)["approve"] == "success" and states(run)["publish_final"] == "skipped", states(run)
    assert "dag_test requested this change and may not approve it" in task_output(caplog, capfd)
    nothing_committed()

    # 2. while the approval waits, the application is restarted on c1 and joins the group again
    members: list[Member] = []

    def restarted() -> None:
        members.append(Member(c1, topic, "fo-back"))
        members[0].wait_joined("c1")

    approver = _Approver(dag.dag_id, seen, "Approve", "bob", restarted)
    try:
        run = dag.test(run_conf=failover_conf(groups=["fo-back"]))
        approver.done()
    finally:
        for member in members:
            member.stop()
    assert run.state == "failed" and states(run)["publish_final"] == "failed", states(run)
    assert states(run)["switch"] == "upstream_failed", states(run)
    said = task_output(caplog, capfd)
    assert "the plan is stale: consumer groups became active again on the source c1" in said, said[-3000:]
    assert "fo-back (1 member(s)" in said and "nothing was committed on c4" in said
    nothing_committed()

    # 3. it consumed and committed more, then stopped again: no member, but the cut moved
    approver = _Approver(dag.dag_id, seen, "Approve", "bob", lambda: consume_and_commit(c1, topic, "fo-back", 10))
    run = dag.test(run_conf=failover_conf(groups=["fo-back"]))
    approver.done()
    assert run.state == "failed" and states(run)["publish_final"] == "failed", states(run)
    said = task_output(caplog, capfd)
    assert "committed offsets on the source c1 moved since it was made: fo-back " in said, said[-3000:]
    nothing_committed()
