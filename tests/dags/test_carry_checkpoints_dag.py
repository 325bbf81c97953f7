"""mirror_carry_checkpoints under dag.test(): levels 1/3 renumbered to 2/4 on a synced tree, then carried over."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow_airflow.factories.carry_checkpoints import build_carry_checkpoints_dag
from mirrorflow_airflow.steps.carry_checkpoints import run_carry
from tests.dags.dag_runs import xcom
from tests.integration.mirroring import (
    FOUR,
    RENUMBERED,
    assert_exactly_once,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

CLUSTERS = ["c1", "c2", "c3", "c4"]


def test_renumbered_levels_are_carried_over_by_the_form_and_go_on_exactly_once(kafka_clusters, make_topic,
                                                                                airflow_home):
    topic = topic_everywhere(make_topic)
    before = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, before)
    expected = [m for c in CLUSTERS for m in traffic(kafka_clusters, c, topic, 15)]
    converge(before, settings)
    assert_exactly_once(kafka_clusters, CLUSTERS, topic, expected)

    # New link ids (c1.L1 -> c1.L2) start without checkpoints while their targets hold everything already:
    # the runs refuse, naming the old link ids, and copy nothing.
    after = topology(kafka_clusters, RENUMBERED, [topic])
    for level in after.levels:
        refused = run_level(after, level, settings)
        assert refused.copied == 0, refused.summary()
        mine = [e for e in refused.errors if e.topic == topic]
        assert len(mine) == 8 and all("the link has no checkpoint on" in e.error and "the levels were renumbered"
                                      in e.error and f".L{level - 1} for it" in e.error
                                      for e in mine), refused.summary()["errors"]
    assert_exactly_once(kafka_clusters, CLUSTERS, topic, expected)
    dag = build_carry_checkpoints_dag(after)

    dry = dag.test(run_conf={"level_map": "1:2,3:4", "dry_run": True})
    assert dry.state == "success"
    shown = xcom(dry, "carry")
    assert sorted((c["old_link"], c["new_link"]) for c in shown) == sorted(
        (f"{c}.L{old}", f"{c}.L{new}") for c in CLUSTERS for old, new in ((1, 2), (3, 4)))
    # the topics the topology mirrors, not the other tests' topics on the same clusters
    assert all(c["dry_run"] and {f"{topic}[0]", f"{topic}[1]"} == set(c["checkpoints"]) for c in shown)
    assert not run_level(after, 2, settings).ok  # a dry run changes nothing

    done = dag.test(run_conf={"level_map": "1:2,3:4", "dry_run": False})
    assert done.state == "success"
    # the old links were cut: a run of the old topology (one still scheduled, say) stops by name, copies nothing
    stale = run_level(before, 1, settings)
    assert stale.copied == 0 and stale.errors and all(
        "were carried to" in e.error and "the levels were renumbered" in e.error for e in stale.errors), \
        stale.summary()["errors"]
    expected += [m for c in CLUSTERS for m in traffic(kafka_clusters, c, topic, 10, start=15)]
    converge(after, settings)
    assert_exactly_once(kafka_clusters, CLUSTERS, topic, expected)

    twice = dag.test(run_conf={"level_map": "1:2,3:4", "dry_run": False})  # the new ids have checkpoints now
    assert twice.state == "failed"
    with pytest.raises(AirflowFailException,
                       match=r"(?s)refused, nothing carried.*c1.L2 already has checkpoints on c2"):
        run_carry(after, "1:2,3:4")
    [ti] = twice.get_task_instances()
    assert ti.try_number == 1  # a refusal is not retried
