"""``on_data`` levels: the topology keys and the watcher's rules (mirrorflow.lag.waiting). Pure.

Against real brokers: tests/dags/test_data_trigger.py; under the real scheduler:
tests/e2e/standalone/test_data_triggered_levels.py.
"""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.lag import DataWatch, LinkPartitionLag, waiting
from mirrorflow.topology import parse_topology

BASE = """
clusters: {c1: {bootstrap: "a:1"}, c2: {bootstrap: "b:1"}, c3: {bootstrap: "c:1"}}
tree: {level: 3, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [orders]
"""


def _row(link, partition, start, end, error=None, topic="orders"):
    return LinkPartitionLag(link, 1, "c1", "c2", topic, partition, records=None if error else end - start,
                            start=start, end=end, error=error)


def test_a_level_or_every_level_may_be_on_data_with_its_watcher_settings():
    topo = parse_topology(BASE + "replication: {levels: {1: {schedule: on_data}}, on_data: {poll: 500ms, floor: 3s}}")
    assert (topo.replication.on_data_at(1), topo.replication.on_data_at(3)) == (True, False)
    assert topo.replication.schedule_for(1) is None  # no clock
    assert (topo.replication.on_data.poll_seconds, topo.replication.on_data.floor_seconds) == (0.5, 3.0)
    every = parse_topology(BASE + "replication: {schedule: on_data}")
    assert all(every.replication.on_data_at(level) for level in every.levels)
    assert (every.replication.on_data.poll_seconds, every.replication.on_data.floor_seconds) == (1.0, 2.0)


@pytest.mark.parametrize("replication, path, problem", [
    ("{schedule: on_dat}", "replication.schedule", "or 'on_data'"),
    ("{levels: {1: {schedule: ondata}}}", "replication.levels.1.schedule", "or 'on_data'"),
    ("{on_data: {poll: 0s}}", "replication.on_data.poll", "outside"),
    ("{on_data: {floor: 5}}", "replication.on_data.floor", "string"),
    ("{on_data: {floor: soon}}", "replication.on_data.floor", "not a duration"),
    ("{on_data: {pol: 1s}}", "replication.on_data.pol", ""),
])
def test_bad_on_data_settings_are_named_by_key(replication, path, problem):
    with pytest.raises(TopologyError) as err:
        parse_topology(BASE + f"replication: {replication}")
    assert path in str(err.value) and problem in str(err.value)


def test_waiting_counts_offsets_up_to_the_stable_end_and_names_what_was_not_measured():
    found = waiting([_row("c1.L1", 0, 5, 9), _row("c1.L1", 1, 3, 3), _row("c2.L1", 0, 0, 2),
                     _row("c3.L1", 0, 7, 4),  # a checkpoint past the end (truncated): no run can help
                     LinkPartitionLag("c4.L1", 1, "c4", "c3", "*", None, records=None, error="c4 unreachable")])
    assert found.records == {"c1.L1": 4, "c2.L1": 2} and found.total == 6
    assert found.marks == (("c1.L1", "orders", 0, 5, 9), ("c2.L1", "orders", 0, 0, 2))
    assert found.unmeasured == {"c4.L1": "c4 unreachable"}


def test_the_watch_asks_for_a_run_once_per_news_after_its_floor_and_never_while_one_is_queued():
    watch = DataWatch(floor_s=5, resend_s=60)
    one, two = waiting([_row("c1.L1", 0, 0, 3)]), waiting([_row("c1.L1", 0, 0, 4)])
    assert not watch.decide(0, waiting([])).run
    assert watch.decide(1, one).run
    assert "as when the last run" in watch.decide(2, one).why  # the same offsets: a run has them
    assert "floor" in watch.decide(3, two).why  # news, but within the floor
    assert "already queued" in watch.decide(7, two, queued=1).why
    assert watch.decide(7, two).run
    assert not watch.decide(60, two).run and watch.decide(68, two).run  # still there after resend_s: again
    assert not watch.decide(70, waiting([])).run
    assert watch.decide(75, two).run  # the same offsets after nothing waited are news
