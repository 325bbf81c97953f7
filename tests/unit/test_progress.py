"""Progress lines of long tasks (mirrorflow.progress): interval, percent, rate, time left, threads, audit line."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from mirrorflow.progress import PROGRESS_ENV, Progress, in_context, interval_s, note, tracking


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lines(caplog):
    """The readable lines and the parsed ``progress`` audit lines logged so far."""
    caplog.set_level(logging.INFO, logger="mirrorflow")

    def read() -> tuple[list[str], list[dict]]:
        text = [r.getMessage() for r in caplog.records if r.name == "mirrorflow.progress"]
        audits = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
        return text, [a for a in audits if a["event"] == "progress"]

    return read


def test_a_line_at_most_every_interval_and_one_at_the_end(lines):
    clock = Clock()
    p = Progress("level 1 run r", 1000, interval=30, clock=clock)
    for step in range(1, 8):  # an update every 10 s for 70 s: lines at 30 s and 60 s only
        clock.now += 10
        p.add(100, 1000)
        assert p.lines == step // 3
    assert p.tick() is None  # at 70 s: the last line was at 60 s
    clock.now += 5
    final = p.finish()
    p.finish()  # once only
    text, audits = lines()
    assert [a["final"] for a in audits] == [False, False, True] and len(text) == 3
    assert [a["records"] for a in audits] == [300, 600, 700]
    assert final.final and text[-1].startswith("progress level 1 run r: done, 700 of 1,000 records (70.0%)")
    p.add(1)  # after the end: counted, never logged
    assert p.lines == 3


def test_the_line_says_records_percent_size_rate_and_time_left(lines):
    clock = Clock()
    p = Progress("level 1 run manual__x", 50_000, interval=30, clock=clock,
                 fields={"run_id": "manual__x", "job": "level"})
    clock.now += 10
    p.add(12_345, 3_200_000)
    assert p.lines == 0  # 10 s: not due yet
    assert p.snapshot().line() == ("progress level 1 run manual__x: 12,345 of 50,000 records (24.7%), 3.2 MB, "
                                   "1,234 records/s, about 31 s left")
    clock.now += 20
    p.tick()
    text, audits = lines()
    assert text == ["progress level 1 run manual__x: 12,345 of 50,000 records (24.7%), 3.2 MB, 412 records/s, "
                    "about 92 s left"]
    line = audits[0]
    assert {k: line[k] for k in ("event", "run_id", "job", "what", "records", "planned", "bytes", "percent",
                                 "records_per_s", "eta_s", "elapsed_s", "final", "measured")} == {
        "event": "progress", "run_id": "manual__x", "job": "level", "what": "level 1 run manual__x",
        "records": 12_345, "planned": 50_000, "bytes": 3_200_000, "percent": 24.7, "records_per_s": 411.5,
        "eta_s": 91.5, "elapsed_s": 30.0, "final": False, "measured": "records"}
    assert line["audit"] == "mirrorflow" and line["at"]


def test_longer_waits_read_in_minutes_and_hours():
    clock = Clock()
    p = Progress("archive run a", 1_000_000, interval=30, clock=clock)
    clock.now += 60
    p.add(10_000)  # 1 % a minute
    assert "about 99 min left" in p.snapshot().line()
    clock.now += 6000
    assert "about 166.7 h left" in p.snapshot().line()


def test_an_unknown_plan_gives_no_percent_and_no_time_left_and_says_so(lines):
    clock = Clock()
    p = Progress("completeness audit of c1", None, interval=0, clock=clock)
    clock.now += 4
    p.add(2_000, 1500)
    text, audits = lines()
    assert text == ["progress completeness audit of c1: 2,000 records, 1.5 KB, 500 records/s; "
                    "the plan is unknown, so no percent or time left"]
    assert audits[0]["percent"] is None and audits[0]["eta_s"] is None and audits[0]["planned"] is None


def test_nothing_planned_is_said_and_never_divides_by_zero():
    p = Progress("level 2 run idle", 0, interval=0, clock=Clock())
    assert p.finish().line() == "progress level 2 run idle: done, 0 records (none planned), 0 B in 0 s"


def test_on_spark_the_line_counts_finished_tasks_until_the_job_ends(lines):
    clock = Clock()
    p = Progress("level 1 run s", 50_000, interval=30, clock=clock)
    p.on_spark()
    clock.now += 30
    p.tick()
    clock.now += 30
    p.tasks(3, 8)
    clock.now += 1
    p.finish(50_000, 2_000_000)
    text, audits = lines()
    assert text[0] == ("progress level 1 run s: running on Spark, no task count reported yet, 50,000 records "
                       "planned; records and bytes are known when the Spark job ends")
    assert text[1].startswith("progress level 1 run s: 3 of 8 Spark tasks done (37.5%), 50,000 records planned, "
                              "about 100 s left; records and bytes are known when the Spark job ends")
    assert audits[1]["measured"] == "spark_tasks" and audits[1]["percent"] == 37.5
    assert audits[1]["records_per_s"] is None and audits[1]["tasks_done"] == 3 and audits[1]["tasks"] == 8
    assert text[2] == ("progress level 1 run s: done, 50,000 of 50,000 records (100.0%), 2.0 MB in 61 s, "
                       "820 records/s, 3 of 8 Spark tasks")
    assert audits[2]["final"] and audits[2]["percent"] == 100.0


def test_threads_add_without_losing_counts_and_one_line_per_interval():
    clock = Clock()
    p = Progress("backfill b", 80_000, interval=30, clock=clock)

    def work() -> None:
        for _ in range(10_000):
            p.add(1, 2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert p.snapshot().records == 80_000 and p.snapshot().bytes == 160_000 and p.lines == 0

    clock.now += 30  # due once: of eight threads ticking at the same moment, exactly one logs
    start = threading.Barrier(8)

    def tick() -> None:
        start.wait()
        p.tick()

    threads = [threading.Thread(target=tick) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert p.lines == 1


def test_copiers_count_into_the_progress_of_their_context_threads_included():
    p = Progress("level 1 run n", 10, interval=3600, clock=Clock())
    note(5)  # nobody listening: nothing happens
    with tracking(p):
        note(2, 20)
        thread = threading.Thread(target=in_context(lambda: note(3, 30)))
        thread.start()
        thread.join()
    note(7)
    assert (p.snapshot().records, p.snapshot().bytes) == (5, 50)


def test_the_ticker_polls_and_a_failing_block_still_gets_its_final_line(lines):
    polled = threading.Event()
    p = Progress("archive run t", 10, interval=0)
    with pytest.raises(ValueError):
        with p.running(poll=polled.set):
            assert polled.wait(10)  # the ticker thread called poll (an event, not a sleep)
            raise ValueError("boom")
    text, audits = lines()
    assert text[-1].startswith("progress archive run t: stopped (ValueError), 0 of 10 records (0.0%)")
    assert audits[-1]["final"] and audits[-1]["outcome"] == "stopped (ValueError)"


def test_the_interval_setting(caplog):
    assert interval_s({}) == 30.0
    assert interval_s({PROGRESS_ENV: "0"}) == 0.0
    assert interval_s({PROGRESS_ENV: " 2.5 "}) == 2.5
    with caplog.at_level(logging.WARNING, logger="mirrorflow.progress"):
        assert interval_s({PROGRESS_ENV: "soon"}) == 30.0
        assert interval_s({PROGRESS_ENV: "-1"}) == 30.0
    assert f"{PROGRESS_ENV}='soon' is not a number of seconds >= 0" in caplog.text
