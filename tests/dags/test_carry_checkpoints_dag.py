"""mirror_carry_checkpoints under dag.test(): levels 1/3 renumbered to 2/4 on a synced tree, then carried over."""

from __future__ import annotations

import pytest

from mirrorflow_airflow.factories.carry_checkpoints import build_carry_checkpoints_dag
from tests.dags.test_level_dags import xcom
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

    after = topology(kafka_clusters, RENUMBERED, [topic])
    assert all(not run_level(after, level, settings).ok for level in after.levels)  # refused, nothing copied
    dag = build_carry_checkpoints_dag(after)

    dry = dag.test(run_conf={"level_map": "1:2,3:4", "dry_run": True})
    assert dry.state == "success"
    shown = xcom(dry, "carry")
    assert sorted((c["old_link"], c["new_link"]) for c in shown) == sorted(
        (f"{c}.L{old}", f"{c}.L{new}") for c in CLUSTERS for old, new in ((1, 2), (3, 4)))
    # the DAG carries every topic; other tests' topics may be on the same clusters, so look at this one's
    assert all(c["dry_run"] and {f"{topic}[0]", f"{topic}[1]"} <= set(c["checkpoints"]) for c in shown)
    assert not run_level(after, 2, settings).ok  # a dry run changes nothing

    done = dag.test(run_conf={"level_map": "1:2,3:4", "dry_run": False})
    assert done.state == "success"
    expected += [m for c in CLUSTERS for m in traffic(kafka_clusters, c, topic, 10, start=15)]
    converge(after, settings)
    assert_exactly_once(kafka_clusters, CLUSTERS, topic, expected)
