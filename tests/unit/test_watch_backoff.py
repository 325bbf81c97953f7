"""The ``on_data`` watcher's back-off from links and partitions whose runs keep failing (mirrorflow.lag.backoff). Pure.

Against real brokers and a failing partition: tests/dags/test_sick_partition.py.
"""

from __future__ import annotations

from mirrorflow.lag import DataWatch, LinkPartitionLag, waiting
from mirrorflow.lag.backoff import Backoff, Failing, failing_keys


def _row(link, partition, start, end, topic="orders"):
    return LinkPartitionLag(link, 1, "c1", "c2", topic, partition, records=end - start, start=start, end=end)


def test_a_partition_whose_runs_keep_failing_is_asked_for_less_and_less_often_up_to_the_cap():
    watch = DataWatch(floor_s=2, resend_s=60, backoff=Backoff(first_s=10, cap_s=40))
    sick = frozenset({("c1.L1", "orders", 0)})
    ends = iter(range(10, 10_000))

    def growing(t):  # the sick partition's source grows at every poll: new offsets, as in the issue
        return waiting([_row("c1.L1", 0, 5, next(ends))])

    asked, runs = [], 0
    t = 0.0
    while t < 300:
        failing = Failing(f"run{runs}", sick) if runs else None  # each asked run fails the partition
        if watch.decide(t, growing(t), failing=failing).run:
            asked.append(t)
            runs += 1
        t += 1.0
    gaps = [b - a for a, b in zip(asked, asked[1:])]
    # each run failed it: 10, 20, then 40 (the cap) seconds between runs, instead of the 2 s floor
    assert gaps[:5] == [10.0, 20.0, 40.0, 40.0, 40.0], gaps
    assert len(asked) <= 10  # without the back-off: one run per floor, 150 in 300 s


def test_healthy_links_still_start_runs_at_once_and_a_copied_partition_ends_the_back_off():
    watch = DataWatch(floor_s=2, resend_s=60, backoff=Backoff(first_s=10, cap_s=300))
    failing = Failing("r1", failing_keys([{"link": "c1.L1", "topic": "orders", "partition": 0}]))
    sick_only = waiting([_row("c1.L1", 0, 5, 9)])
    assert watch.decide(0, sick_only).run
    decision = watch.decide(3, sick_only, failing=failing)
    assert not decision.run and "only on links or partitions whose runs keep failing" in decision.why
    assert decision.notes == ("link c1.L1 orders[0] failed in 1 run(s) in a row: what waits on it alone starts no "
                              "run for 10s (doubling per failed run, at most 300s); other links and partitions "
                              "start runs at once",)
    # records on another partition of the same link, and on another link: a run at once
    both = waiting([_row("c1.L1", 0, 5, 9), _row("c2.L1", 1, 0, 3)])
    decision = watch.decide(4, both, failing=failing)
    assert decision.run and decision.why == "3 records wait (c2.L1 3); 4 more on failing partitions, retried with them"
    # the next run copied it: no back-off any more, said once
    healed = watch.decide(20, waiting([_row("c1.L1", 0, 9, 12)]), failing=Failing("r2"))
    assert healed.run and healed.notes == ("link c1.L1 orders[0] copied again: runs for it start at once again",)


def test_a_whole_link_that_failed_backs_off_every_partition_of_it_and_the_record_round_trips():
    errors = [{"link": "c1.L1", "topic": "*", "partition": None}, {"link": "c2.L1", "topic": "t", "partition": 3}]
    failing = Failing("r@1.5", failing_keys(errors))
    assert Failing.from_dict(failing.to_dict()) == failing and Failing.from_dict(None) is None
    backoff = Backoff(first_s=10, cap_s=300)
    backoff.asked(100.0)
    backoff.observe(failing, 101.0)
    assert backoff.holds("c1.L1", "any", 7, 105.0) == 5.0 and backoff.holds("c2.L1", "t", 3, 105.0) == 5.0
    assert backoff.holds("c2.L1", "t", 4, 105.0) == 0.0 and backoff.holds("c3.L1", "t", 3, 105.0) == 0.0
    backoff.observe(failing, 120.0)  # the same run seen again: counted once
    assert backoff.sick == {("c1.L1", "*", None): 1, ("c2.L1", "t", 3): 1}
