"""The level runs' running totals per link-partition (mirrorflow.status.totals): counters, successes, failures."""

from __future__ import annotations

import copy

from mirrorflow.status.totals import empty, failing, fold, key


def row(partition: int = 0, copied: int = 0, nbytes: int = 0, error: str | None = None, *, link: str = "c1.L1",
        target: str = "c2", topic: str = "orders", skipped: int = 0) -> dict:
    return {"link_id": link, "source": link.split(".")[0], "target": target, "topic": topic, "partition": partition,
            "copied": copied, "skipped": skipped, "bytes": nbytes, "error": error,
            "error_offset": None if error is None else 42}


def test_the_first_run_makes_one_entry_per_partition_in_the_documented_format():
    totals = fold(None, [row(0, 10, 1000), row(1, 0, 0)], finished_at=100.0, run_id="r1")
    assert totals == {
        "partitions": {
            "c1.L1|orders|0": {"link": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": 0,
                               "records": 10, "bytes": 1000, "last_success": 100.0, "error": None,
                               "error_since": None},
            "c1.L1|orders|1": {"link": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": 1,
                               "records": 0, "bytes": 0, "last_success": 100.0, "error": None,
                               "error_since": None},
        },
        "run_id": "r1",
        "finished_at": 100.0,
    }
    assert key("c1.L1", "orders", 0) == "c1.L1|orders|0"
    assert fold({}, [], finished_at=1.0, run_id="r") == {"partitions": {}, "run_id": "r", "finished_at": 1.0}
    assert empty() == {"partitions": {}, "run_id": None, "finished_at": None}


def test_records_and_bytes_only_add_up_and_skipped_messages_are_not_copies():
    totals = fold(None, [row(0, 10, 1000, skipped=7)], finished_at=100.0, run_id="r1")
    totals = fold(totals, [row(0, 5, 500, skipped=3)], finished_at=200.0, run_id="r2")
    totals = fold(totals, [row(0, 0, 0)], finished_at=300.0, run_id="r3")
    entry = totals["partitions"]["c1.L1|orders|0"]
    assert (entry["records"], entry["bytes"], entry["last_success"]) == (15, 1500, 300.0)


def test_a_failure_sets_error_and_keeps_error_since_from_the_first_failing_run_until_a_success_clears_it():
    totals = fold(None, [row(0, 10, 1000)], finished_at=100.0, run_id="r1")
    # the run copied 4 and then failed: the 4 were committed, they count
    totals = fold(totals, [row(0, 4, 400, "retention gap: offsets 14..19 (6) are no longer on c1")],
                  finished_at=200.0, run_id="r2")
    entry = totals["partitions"]["c1.L1|orders|0"]
    assert entry["error"].startswith("retention gap") and entry["error_since"] == 200.0
    assert (entry["records"], entry["last_success"]) == (14, 100.0)
    totals = fold(totals, [row(0, 0, 0, "still stopped")], finished_at=300.0, run_id="r3")
    entry = totals["partitions"]["c1.L1|orders|0"]
    assert (entry["error"], entry["error_since"], entry["last_success"]) == ("still stopped", 200.0, 100.0)
    assert [e["partition"] for e in failing(totals)] == [0]
    totals = fold(totals, [row(0, 6, 600)], finished_at=400.0, run_id="r4")
    entry = totals["partitions"]["c1.L1|orders|0"]
    assert (entry["error"], entry["error_since"], entry["last_success"], entry["records"]) == (None, None, 400.0, 20)
    assert failing(totals) == []


def test_a_partition_that_never_succeeded_has_no_last_success():
    totals = fold(None, [row(3, 0, 0, "TOPIC_AUTHORIZATION_FAILED: denied")], finished_at=50.0, run_id="r1")
    entry = totals["partitions"]["c1.L1|orders|3"]
    assert (entry["last_success"], entry["error_since"]) == (None, 50.0)


def test_partitions_a_run_did_not_report_keep_what_they_had_and_the_latest_target_wins():
    one = fold(None, [row(0, 10, 100), row(0, 3, 30, link="c2.L1", target="c1")], finished_at=100.0, run_id="r1")
    two = fold(one, [row(0, 1, 10, target="c3")], finished_at=200.0, run_id="r2")
    assert two["partitions"]["c2.L1|orders|0"] == one["partitions"]["c2.L1|orders|0"]
    assert two["partitions"]["c1.L1|orders|0"]["target"] == "c3"
    assert two["partitions"]["c1.L1|orders|0"]["records"] == 11


def test_fold_changes_nothing_in_place_and_folding_the_same_run_twice_counts_it_once():
    first = fold(None, [row(0, 10, 100)], finished_at=100.0, run_id="r1")
    kept = copy.deepcopy(first)
    second = fold(first, [row(0, 5, 50)], finished_at=200.0, run_id="r2")
    assert first == kept
    again = fold(second, [row(0, 5, 50)], finished_at=200.0, run_id="r2")
    assert again == second and again["partitions"]["c1.L1|orders|0"]["records"] == 15
    # a retry of the same run id that ended later copied again: it counts
    retried = fold(second, [row(0, 2, 20)], finished_at=260.0, run_id="r2")
    assert retried["partitions"]["c1.L1|orders|0"]["records"] == 17
