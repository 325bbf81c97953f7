"""The topology's ``lag`` section: what it accepts, how bounds combine, and how it refuses bad input.

Also the SLA verdict of :func:`mirrorflow.lag.evaluate` on hand-made rows: which
rows violate which bound, and in words an operator can act on.
"""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.lag import WHOLE, GroupPartitionLag, LinkPartitionLag, evaluate
from mirrorflow.topology import Topology
from mirrorflow.topology.lag import DEFAULT_LAG_SCHEDULE, Bound, LagConfig
from tests.unit.topologies import four_with_lag


def refuse(lag) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        Topology.parse(four_with_lag(lag))
    text = str(info.value)
    assert "pydantic" not in text and "Input should" not in text, text
    return info.value


def test_without_the_key_nothing_is_bounded_and_the_monitor_runs_every_minute():
    lag = Topology.parse(four_with_lag()).lag
    assert lag == LagConfig()
    assert lag.schedule == DEFAULT_LAG_SCHEDULE == "1m"
    assert lag.link_bound("c1.L1") == Bound()
    assert lag.group_bound("orders-app") is None
    assert "lag" not in Topology.parse(four_with_lag()).to_dict()


def test_link_bounds_override_the_sla_key_by_key_and_group_rules_match_first_wins():
    topo = Topology.parse(four_with_lag({
        "schedule": "30s",
        "sla": {"records": 100000, "seconds": 600},
        "links": {"c1.L3": {"seconds": 120}},
        "groups": [{"groups": "orders-.*", "records": 5000}, {"groups": "orders-batch", "records": 1}],
    }))
    lag = topo.lag
    assert lag.link_bound("c1.L3") == Bound(records=100000, seconds=120)
    assert lag.link_bound("c2.L1") == Bound(records=100000, seconds=600)
    assert lag.group_bound("orders-batch") == Bound(records=5000)  # the first matching rule wins
    assert lag.group_bound("billing") is None  # the sla applies to links, not to groups
    # the section survives a round trip through the file shape
    assert Topology.parse(topo.to_dict()).lag == lag


def test_bound_says_which_limit_is_exceeded():
    bound = Bound(records=10, seconds=60)
    assert bound.exceeded(10, 60.0) == []  # at the bound is within it
    assert bound.exceeded(11, 61.4) == ["11 records > 10", "61s > 60s"]
    assert Bound().exceeded(10**9, 10**9) == []


@pytest.mark.parametrize("lag, path, words", [
    ({"sla": {"records": -1}}, "lag.sla.records", "-1"),
    ({"sla": {"records": "lots"}}, "lag.sla.records", "expected an integer"),
    ({"sla": {"seconds": True}}, "lag.sla.seconds", "boolean"),
    ({"sla": {"seconds": 1.5}}, "lag.sla.seconds", "expected an integer"),
    ({"sla": {"recs": 1}}, "lag.sla.recs", "did you mean 'records'"),
    ({"slaa": {"records": 1}}, "lag.slaa", "did you mean 'sla'"),
    ({"schedule": "5x"}, "lag.schedule", "not a duration"),
    ({"schedule": "1s"}, "lag.schedule", "shorter than the minimum"),
    ({"links": {"c9.L1": {"records": 1}}}, "lag.links.c9.L1", "unknown link id"),
    ({"links": {"c1.L1": {"minutes": 1}}}, "lag.links.c1.L1.minutes", "unknown key"),
    ({"groups": [{"groups": "(", "records": 1}]}, "lag.groups[0].groups", "not a valid regex"),
    ({"groups": [{"records": 1}]}, "lag.groups[0].groups", "required key is missing"),
    ({"groups": {"orders": 1}}, "lag.groups", "expected a list"),
    ("fast", "lag", "expected a mapping"),
])
def test_bad_lag_settings_name_the_key(lag, path, words):
    err = refuse(lag)
    assert path in err.paths, err
    assert words in str(err), str(err)


# --------------------------------------------------------------------------- the SLA verdict


def link_row(link_id="c1.L1", topic="orders", partition=0, records=0, seconds=0.0, error=None, note=None):
    return LinkPartitionLag(link_id, 1, link_id.split(".")[0], "c2", topic, partition, records, seconds, note=note,
                            error=error)


def group_row(group="orders-app", cluster="c1", topic="orders", partition=0, records=0, seconds=0.0, error=None):
    return GroupPartitionLag(cluster, group, topic, partition, records, seconds, error=error)


def config(**lag) -> LagConfig:
    return Topology.parse(four_with_lag(lag)).lag


def test_rows_over_their_bound_are_named_with_link_topic_partition_value_and_bound():
    lag = config(sla={"records": 10, "seconds": 600}, links={"c3.L1": {"records": 0}})
    rows = [
        link_row("c1.L1", records=10, seconds=600.0),        # at the bound: fine
        link_row("c1.L1", partition=1, records=11),           # over in records
        link_row("c2.L1", records=1, seconds=3600.4),         # over in age
        link_row("c3.L1", topic="payments.eu", records=1),    # over its own link bound
    ]
    texts = [str(v) for v in evaluate(lag, rows, [])]
    assert texts == [
        "link c1.L1 (c1 -> c2) orders[1]: 11 records > 10",
        "link c2.L1 (c2 -> c2) orders[0]: 3600s > 600s",
        "link c3.L1 (c3 -> c2) payments.eu[0]: 1 records > 0",
    ]


def test_a_link_outside_its_window_is_held_to_no_bound_but_a_gap_still_violates():
    lag = config(sla={"records": 10})
    gap = LinkPartitionLag("c2.L1", 1, "c2", "c1", "orders", 0, 0, 0.0, checkpoint=5, gap=3)
    rows = [link_row("c1.L1", records=500), gap]
    assert [str(v) for v in evaluate(lag, rows, [], waiting={"c1.L1", "c2.L1"})] == [
        "link c2.L1 (c2 -> c1) orders[0]: retention gap: offsets 5..7 (3) were deleted on c2 before the link "
        "copied them"]
    assert len(evaluate(lag, rows, [])) == 2  # window open: the 500 records are over the bound


def test_an_unmeasured_link_or_cluster_violates_only_where_a_bound_applies():
    down = link_row("c1.L3", topic=WHOLE, partition=None, records=None, seconds=None,
                    error="not measured: cluster c3 unreachable at 127.0.0.1:1")
    cluster_down = GroupPartitionLag("c3", WHOLE, WHOLE, None, None, error="consumer groups not measured: c3 down")
    assert evaluate(config(), [down], [cluster_down]) == []  # nothing configured: recorded, not alerted
    texts = [str(v) for v in evaluate(config(sla={"records": 0}, groups=[{"groups": ".*", "records": 0}]),
                                      [down], [cluster_down])]
    assert texts == ["link c1.L3 (c1 -> c2): not measured: cluster c3 unreachable at 127.0.0.1:1",
                     "cluster c3: consumer groups not measured: c3 down"]


def test_an_unknown_age_violates_a_seconds_bound_but_not_a_records_bound():
    row = link_row(records=5, seconds=None, note="age not read: no message within 10s")
    assert evaluate(config(sla={"records": 10}), [row], []) == []
    [violation] = evaluate(config(sla={"seconds": 60}), [row], [])
    assert "age unknown (age not read: no message within 10s)" in str(violation)


def test_group_rules_apply_to_matching_groups_only():
    lag = config(groups=[{"groups": "orders-.*", "records": 3}])
    rows = [group_row("orders-app", records=4), group_row("billing", records=10**6),
            group_row("orders-idle", topic=WHOLE, partition=None, records=None, seconds=None)]
    assert [str(v) for v in evaluate(lag, [], rows)] == ["group orders-app on c1 orders[0]: 4 records > 3"]
