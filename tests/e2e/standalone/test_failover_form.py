"""The operator's UI, for real: headless Chromium against ``airflow standalone``.

A user logs in, opens ``mirror_failover_consumer_group``, fills its form (the
cluster fields are drop-downs of the topology's clusters) and triggers it. The
topology asks for approvals (docs/approvals.md): the run stops at ``approve``,
whose Required Action shows the plan. Rejected, the run skips every change and
the group stays where it was; triggered again and approved, the run succeeds and
the group then stands on the other cluster exactly where it stood on the first.
Last, the Mirror page shows the stack's two trees (``stack.py``), each behind a
button of its own.

The set-up is real throughout: the session's Kafka clusters c1..c4 in the
four-cluster tree, a topic only c1 produces to, mirrored to every cluster by
the same copy job the level DAGs run, and a consumer group ``ui-orders`` that
consumed part of it on c1, committed, and left (no members). Standalone runs a
copy of this repo's dags/ (and its plugins/) on a topology file that names these
clusters: the package's shared standalone (``stack.py``).
"""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow_dev.process import wait_until
from tests.e2e.standalone.stack import CLUSTERS, FAILOVER_DAG
from tests.fixtures.browser import AirflowUI
from tests.fixtures.kafka import wait_for_topic
from tests.fixtures.standalone import ApiError, Standalone
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import clients, converge

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(1200)]

DAG_ID = FAILOVER_DAG
GROUP = "ui-orders"
PARTITIONS = 3
PER_PARTITION = 30  # messages produced on c1 into each partition
CONSUMED = {0: 11, 1: 4, 2: 23}  # what the group consumed and committed on c1, per partition
RUN_TIMEOUT = 300.0  # queueing, a LocalExecutor worker, the failover task: generous on a busy two-core machine


@pytest.fixture(scope="module")
def consumed_group(kafka_clusters, stack) -> dict[int, int]:
    """``ui-orders`` consumed part of the topic on c1 and left; the topic is mirrored everywhere.

    Returns the group's committed offsets on c1 (per partition).
    """
    topic, topology = stack.topics.failover, stack.topology
    for name in CLUSTERS:
        admin = AdminClient({"bootstrap.servers": kafka_clusters[name].bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(timeout=60)
        wait_for_topic(admin, topic, PARTITIONS)
    c1 = kafka_clusters["c1"].bootstrap
    now = int(time.time() * 1000)
    for p in range(PARTITIONS):
        records = [(f"k{p}".encode(), f"c1|{p}|{i:04d}".encode(), None, now - PER_PARTITION + i)
                   for i in range(PER_PARTITION)]
        produce(c1, topic, records, partition=p)

    # A real member of the group: it joins, is assigned every partition, reads, commits what it processed, leaves.
    consumer = Consumer({"bootstrap.servers": c1, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 90
    try:
        while any(seen.get(p, 0) < n for p, n in CONSUMED.items()):
            assert time.monotonic() < deadline, f"the group read only {seen} of {CONSUMED} on c1"
            for msg in consumer.consume(100, timeout=0.05):  # a partial batch waits the whole timeout
                if msg.error() is None:
                    seen[msg.partition()] = max(seen.get(msg.partition(), 0), msg.offset() + 1)
        consumer.commit(offsets=[TopicPartition(topic, p, n) for p, n in CONSUMED.items()], asynchronous=False)
    finally:
        consumer.close()
    assert committed(c1, topic) == CONSUMED

    converge(topology, clients(kafka_clusters, topology))  # the same copy job as the level DAGs, in process
    return CONSUMED


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on one cluster (``Consumer.committed``: an OffsetFetch, no join)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def _trigger_failover(ui: AirflowUI, paused: bool) -> str:
    """The form filled as a user would, triggered (unpausing the DAG if ``paused``); returns the run id."""
    ui.open_dag(DAG_ID)
    form = ui.open_trigger_form(DAG_ID)
    assert form.options("from_cluster") == list(CLUSTERS)
    assert form.options("to_cluster") == list(CLUSTERS)
    form.fill_list("groups", [GROUP])
    form.choose("from_cluster", "c1")
    form.choose("to_cluster", "c2")
    form.choose("mode", "planned")
    form.choose("precision", "exact")
    form.switch("dry_run", False)
    form.switch("force", False)
    if paused:  # the box shows only while the DAG is paused
        form.unpause_on_trigger(True)
    dag_id, run_id = form.trigger()
    assert dag_id == DAG_ID
    return run_id


def _awaiting_input(standalone: Standalone, run_id: str) -> None:
    """``approve`` waits for its answer, and the scheduler has taken in that its first part ended.

    An answer the scheduler gets before its executor reported the parked part's end
    (Airflow 3.3.2, LocalExecutor: seen 6 s late) makes it take that late report for
    the resumed part's: the task is failed, retried, and asks again. A person answers
    later than that; the test waits for the report in the scheduler's log.
    """
    def waiting() -> bool:
        try:
            states = {t["task_id"]: t["state"] for t in standalone.task_instances(DAG_ID, run_id)}
        except ApiError:  # the API server stalled under load (seen on CI): ask again, the deadline decides
            return False
        assert states.get("publish_final") in (None, "scheduled", "queued"), f"published before approval: {states}"
        return states.get("approve") == "awaiting_input"
    wait_until("the failover to wait for its approval", waiting, RUN_TIMEOUT, 2,
               lambda: standalone.task_logs(DAG_ID, run_id) + standalone.logged_errors())
    reported = (f"Received executor event with state success for task instance TaskInstanceKey(dag_id='{DAG_ID}', "
                f"task_id='approve', run_id='{run_id}'")
    wait_until("the scheduler to take in that the approval's first part ended",
               lambda: reported in standalone.log_file.read_text(errors="replace"), 120, 1, standalone.log_tail)


def _task_log(standalone: Standalone, run_id: str, task_id: str) -> str:
    """Every attempt's log of one task of one run, whole."""
    root = standalone.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(f.read_text(errors="replace") for f in sorted(root.rglob("*.log")))


def _finished(ui: AirflowUI, standalone: Standalone, run_id: str, started: float) -> str:
    state = ui.wait_for_run_state(RUN_TIMEOUT)
    # The task table may stop refreshing with the header (it showed "Running" under a "Success" header):
    # reload the run page, so the table and the screenshot show the final states.
    ui.page.reload()
    assert ui.wait_for_run_state(60) == state
    assert state == "success", (
        f"run {run_id} ended {state!r} in the UI after {time.monotonic() - started:.0f}s; task logs:\n"
        + standalone.task_logs(DAG_ID, run_id) + "\n" + standalone.logged_errors())
    return state


# Argument order matters: standalone boots while the group is prepared and the topic mirrored.
def test_failover_form_rejected_changes_nothing_and_approved_moves_the_group(
        standalone_launched, consumed_group, airflow_standalone: Standalone, stack, kafka_clusters, ui_page,
        chromium, tmp_path):
    topic = stack.topics.failover
    ui = AirflowUI(ui_page, airflow_standalone.base)
    started = time.monotonic()
    ui.log_in(airflow_standalone.user, airflow_standalone.password)
    # the approver, in a browser of their own: the requester may not approve their own change
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    approver = AirflowUI(context.new_page(), airflow_standalone.base)
    approver.log_in(airflow_standalone.approver, airflow_standalone.password)
    approver.park()

    # first the approver says no: the plan was shown, nothing is published or committed
    rejected = _trigger_failover(ui, paused=True)
    ui.park()
    _awaiting_input(airflow_standalone, rejected)
    shown = approver.answer(DAG_ID, rejected, "approve", "Reject")
    approver.park()
    assert f"Fail over {GROUP} from c1 to c2?" in shown and "would read again" in shown, shown
    assert f"Requested by {airflow_standalone.user}, who may not approve it" in shown, shown
    ui.page.goto(f"{airflow_standalone.base}/dags/{DAG_ID}/runs/{quote(rejected, safe='')}")
    _finished(ui, airflow_standalone, rejected, started)
    states = {t["task_id"]: t["state"] for t in airflow_standalone.task_instances(DAG_ID, rejected)}
    assert states == {"preflight": "success", "propose": "success", "approve": "success", "publish_final": "skipped",
                      "wait_for_replication": "skipped", "switch": "skipped", "verify": "skipped",
                      "read_only_guard": "skipped"}, states
    assert committed(kafka_clusters["c2"].bootstrap, topic) == {}, "the rejected failover committed on c2"
    # the audit line, as the task log file holds it (JSON inside the log record's JSON)
    assert re.search(r'decision\\?":\\?"reject\\?",\\?"event\\?":\\?"approval',
                     _task_log(airflow_standalone, rejected, "approve")), "no approval audit line"

    # then the same failover, approved
    run_id = _trigger_failover(ui, paused=False)
    ui.park()
    _awaiting_input(airflow_standalone, run_id)
    approver.answer(DAG_ID, run_id, "approve", "Approve")
    context.close()
    ui.page.goto(f"{airflow_standalone.base}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    state = _finished(ui, airflow_standalone, run_id, started)
    ui.screenshot(tmp_path / "run.png")
    tasks = airflow_standalone.task_instances(DAG_ID, run_id)
    assert ui.task_states(len(tasks)) == ["success"] * len(tasks)
    assert state == "success"
    logs = _task_log(airflow_standalone, run_id, "switch")
    assert re.search(rf'approved_by\\?":\\?"{airflow_standalone.approver}\\?"', logs), \
        "the failover's audit line names no approver"

    # The UI showed it; the REST API agrees, with the form's values as the run's conf.
    run = next(r for r in airflow_standalone.dag_runs(DAG_ID) if r["dag_run_id"] == run_id)
    assert run["state"] == "success"
    assert {t["state"] for t in tasks} == {"success"}, tasks
    conf = run["conf"]
    assert (conf["groups"], conf["from_cluster"], conf["to_cluster"]) == ([GROUP], "c1", "c2")
    assert (conf["mode"], conf["precision"], conf["dry_run"], conf["force"]) == ("planned", "exact", False, False)

    # The group now stands on c2 where it stood on c1: before the first message it had not consumed.
    on_c2 = read_all(kafka_clusters["c2"].bootstrap, topic, PARTITIONS)
    expected = {}
    for p, n in consumed_group.items():
        values = [r for r in on_c2 if r.partition == p]
        nxt = next(r for r in values if r.value == f"c1|{p}|{n:04d}".encode())
        expected[p] = nxt.offset
    assert committed(kafka_clusters["c2"].bootstrap, topic) == expected == consumed_group

    # The Mirror page shows both trees of this Airflow (stack.py): a button each, the second's levels behind its own
    ui.page.goto(f"{airflow_standalone.base}/mirror/")
    ui.page.wait_for_selector("#trees button[data-tree='b']", timeout=60_000)
    assert ui.page.locator("#trees button").all_inner_texts() == ["e2e-standalone", "second-tree"]
    ui.page.wait_for_selector("#levels tbody a[href$='/dags/mirror_level_3']", timeout=60_000)
    ui.page.click("#trees button[data-tree='b']")
    ui.page.wait_for_selector("#levels tbody a[href$='/dags/b.mirror_level_1']", timeout=60_000)
    assert ui.page.locator("#levels tbody tr").count() == 1 and "tree=b" in ui.page.url
