"""The ``replication`` key: schedules, daily UTC windows, per-link settings and how the topology refuses bad ones."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, time, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow.errors import TopologyError, UnknownLinkError
from mirrorflow.topology import Topology, parse_topology
from mirrorflow.topology.replication import (
    DEFAULT_SCHEDULE,
    LinkSettings,
    ReplicationConfig,
    parse_schedule,
)
from mirrorflow.topology.windows import Window, next_opening, window_open
from tests.unit.strategies import window_times

DAY = datetime(2024, 3, 10, tzinfo=UTC)
PYDANTIC_NOISE = ("validation error", "pydantic", "Input should", "For further information", "type=")
LINK_FIELDS = ("max_bytes_per_second", "max_records_per_run", "max_bytes_per_run", "txn_records")


def at(hour: int, minute: int = 0, second: int = 0, microsecond: int = 0, day: datetime = DAY) -> datetime:
    return day.replace(hour=hour, minute=minute, second=second, microsecond=microsecond)


def four(replication=None) -> dict:
    """The four-cluster tree (levels 1 and 3), optionally with a ``replication`` section."""
    data = {
        "clusters": {f"c{i}": {"bootstrap": f"127.0.0.1:{19091 + i}"} for i in range(1, 5)},
        "tree": {
            "level": 3,
            "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}],
        },
        "topics": ["orders", "payments\\..*"],
    }
    if replication is not None:
        data["replication"] = copy.deepcopy(replication)
    return data


def refuse(replication) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        Topology.parse(four(replication))
    text = str(info.value)
    for noise in PYDANTIC_NOISE:
        assert noise not in text, f"pydantic leaks into the message: {text}"
    return info.value


def problem_at(err: TopologyError, path: str) -> str:
    found = [m for p, m in err.problems if p == path]
    assert found, f"no problem reported at {path!r}; got {err.problems}"
    return found[0]


# --------------------------------------------------------------------------- parse_schedule


@pytest.mark.parametrize("text, expected", [
    ("30s", timedelta(seconds=30)),
    ("10s", timedelta(seconds=10)),          # the minimum itself is fine
    ("5m", timedelta(minutes=5)),
    ("90m", timedelta(minutes=90)),
    ("1h", timedelta(hours=1)),
    ("24h", timedelta(days=1)),
    (" 5m ", timedelta(minutes=5)),          # surrounding blanks are ignored
])
def test_durations_become_timedeltas(text, expected):
    assert parse_schedule(text) == expected


@pytest.mark.parametrize("text", ["9s", "1s", "0s", "0m", "0h", "00m"])
def test_durations_below_ten_seconds_are_refused(text):
    with pytest.raises(ValueError, match="shorter than the minimum 10s"):
        parse_schedule(text)


@pytest.mark.parametrize("text", ["*/10 * * * *", "0 2 * * *", "15,45 * * * 1-5", "0 0 1 JAN MON"])
def test_five_field_cron_is_kept_as_text(text):
    assert parse_schedule(text) == text


@pytest.mark.parametrize("text", ["@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually",
                                  "@midnight"])
def test_airflow_presets_are_kept_as_text(text):
    assert parse_schedule(text) == text


@pytest.mark.parametrize("text", ["manual", " manual "])
def test_manual_means_no_schedule(text):
    assert parse_schedule(text) is None


@pytest.mark.parametrize("text", [
    "garbage", "", "5", "1d", "5M", "30 s", "-5m", "1.5h", "* * * *", "* * * * * *", "@Hourly", "@every5m",
    "Manual", "*/10 * * * ?",
])
def test_garbage_schedules_are_refused_with_the_choices(text):
    with pytest.raises(ValueError) as info:
        parse_schedule(text)
    message = str(info.value)
    assert repr(text) in message
    for choice in ("duration", "cron", "preset", "'manual'"):
        assert choice in message, message


def test_huge_duration_is_refused_as_a_value_error():
    # BUG (replication.parse_schedule): int('99999999999') hours overflows timedelta and the raw
    # OverflowError escapes, so Topology.parse crashes instead of raising TopologyError.
    try:
        parse_schedule("99999999999h")
    except ValueError:
        pass
    except OverflowError as exc:
        pytest.fail(f"parse_schedule('99999999999h') raised a raw OverflowError ({exc}) instead of a ValueError "
                    "naming the schedule (bug in replication.parse_schedule)")


def test_huge_duration_in_the_topology_is_a_topology_error():
    try:
        Topology.parse(four({"schedule": "99999999999h"}))
    except TopologyError as err:
        assert err.path == "replication.schedule"
    except OverflowError as exc:
        pytest.fail(f"Topology.parse with replication.schedule '99999999999h' crashed with OverflowError ({exc}) "
                    "instead of TopologyError at replication.schedule (bug in replication.parse_schedule)")
    else:
        pytest.fail("a schedule of 99999999999 hours was accepted")


# --------------------------------------------------------------------------- Window.parse


@pytest.mark.parametrize("text, start, end", [
    ("08:00-17:30", time(8, 0), time(17, 30)),
    ("22:00-06:00", time(22, 0), time(6, 0)),      # crosses midnight
    ("00:00-24:00", time(0, 0), time(0, 0)),       # all day
    ("18:00-24:00", time(18, 0), time(0, 0)),      # until midnight
    ("23:59-00:00", time(23, 59), time(0, 0)),
    (" 01:00-02:00 ", time(1, 0), time(2, 0)),
])
def test_window_parse_valid(text, start, end):
    w = Window.parse(text)
    assert (w.start, w.end, w.text) == (start, end, text.strip())


@pytest.mark.parametrize("text", ["08:00-08:00", "00:00-00:00", "23:59-23:59"])
def test_empty_window_is_refused(text):
    with pytest.raises(ValueError, match="is empty"):
        Window.parse(text)


@pytest.mark.parametrize("text", [
    "8:00-09:00", "08:00 - 09:00", "08:00", "08:60-09:00", "25:00-01:00", "24:00-01:00", "08:00-25:00",
    "0800-0900", "08:00-09:00-10:00", "", "always", "08:00:00-09:00:00",
    "Mon Tue 08:00-09:00", "08:00-09:00 UTC extra", "08:00-09:00 08:00-10:00",
])
def test_badly_formatted_windows_are_refused(text):
    with pytest.raises(ValueError, match=r"is not \[DAYS \]HH:MM-HH:MM\[ ZONE\]"):
        Window.parse(text)


def test_24_is_only_valid_as_24_00():
    with pytest.raises(ValueError, match="only valid as 24:00"):
        Window.parse("08:00-24:30")


# --------------------------------------------------------------------------- window_open / next_opening


def test_no_windows_means_always_open():
    assert window_open(None, at(3)) and window_open([], at(3))


@pytest.mark.parametrize("now, expected", [
    (at(21, 59, 59, 999999), False),
    (at(22, 0), True),                   # start is inclusive
    (at(23, 59, 59, 999999), True),
    (at(0, 0), True),                    # midnight inside a window that crosses it
    (at(5, 59, 59, 999999), True),
    (at(6, 0), False),                   # end is exclusive
    (at(12, 0), False),
])
def test_window_crossing_midnight(now, expected):
    assert window_open([Window.parse("22:00-06:00")], now) is expected


@pytest.mark.parametrize("now, expected", [
    (at(7, 59, 59), False), (at(8, 0), True), (at(16, 59, 59), True), (at(17, 0), False), (at(0, 0), False),
])
def test_window_within_a_day(now, expected):
    assert window_open([Window.parse("08:00-17:00")], now) is expected


@pytest.mark.parametrize("now", [at(0, 0), at(12, 0), at(23, 59, 59, 999999)])
def test_all_day_window_is_always_open(now):
    assert window_open([Window.parse("00:00-24:00")], now)


def test_window_until_midnight_closes_at_midnight():
    w = [Window.parse("18:00-24:00")]
    assert window_open(w, at(23, 59, 59, 999999))
    assert not window_open(w, at(0, 0))
    assert not window_open(w, at(17, 59, 59))


def test_any_of_several_windows_opens():
    ws = [Window.parse("01:00-02:00"), Window.parse("13:00-14:00")]
    assert [window_open(ws, at(h, 30)) for h in (0, 1, 2, 13, 14)] == [False, True, False, True, False]


def test_window_open_converts_other_time_zones_to_utc():
    plus2 = timezone(timedelta(hours=2))
    w = [Window.parse("22:00-06:00")]
    assert window_open(w, datetime(2024, 3, 11, 0, 30, tzinfo=plus2))      # 22:30 UTC
    assert not window_open(w, datetime(2024, 3, 11, 8, 30, tzinfo=plus2))  # 06:30 UTC
    assert next_opening(w, datetime(2024, 3, 11, 8, 30, tzinfo=plus2)) == datetime(2024, 3, 10, 22, tzinfo=UTC) \
        + timedelta(days=1)


@pytest.mark.parametrize("now, expected", [
    (at(12, 0), at(22, 0)),                                   # later today
    (at(21, 59, 59, 999999), at(22, 0)),
    (at(22, 0), at(22, 0) + timedelta(days=1)),                # at the start: strictly after now
    (at(23, 0), at(22, 0) + timedelta(days=1)),
    (at(6, 0), at(22, 0)),                                     # just closed
])
def test_next_opening_around_midnight(now, expected):
    got = next_opening([Window.parse("22:00-06:00")], now)
    assert got == expected and got.tzinfo is not None and got.utcoffset() == timedelta(0)


def test_next_opening_picks_the_earliest_window_and_wraps_to_tomorrow():
    ws = [Window.parse("13:00-14:00"), Window.parse("01:00-02:00")]
    assert next_opening(ws, at(0, 30)) == at(1, 0)
    assert next_opening(ws, at(2, 0)) == at(13, 0)
    assert next_opening(ws, at(14, 0)) == at(1, 0) + timedelta(days=1)
    # the last day of a month and of a year roll over like any other day
    assert next_opening(ws, datetime(2024, 12, 31, 23, 0, tzinfo=UTC)) == datetime(2025, 1, 1, 1, 0, tzinfo=UTC)


@st.composite
def windows(draw):
    return Window.parse(draw(window_times()))


moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))


def oracle_open(w: Window, now: datetime) -> bool:
    """Independent rule: start inclusive, end exclusive, end <= start crosses midnight (24:00 = all day)."""
    t = now.astimezone(UTC).time()
    if w.text.endswith("24:00"):
        return t >= w.start
    if w.start < w.end:
        return w.start <= t < w.end
    return t >= w.start or t < w.end


@settings(max_examples=500, deadline=None)
@given(ws=st.lists(windows(), min_size=1, max_size=3), now=moments)
def test_window_open_matches_the_rule(ws, now):
    assert window_open(ws, now) == any(oracle_open(w, now) for w in ws), [w.text for w in ws]


@settings(max_examples=500, deadline=None)
@given(ws=st.lists(windows(), min_size=1, max_size=3), now=moments)
def test_next_opening_is_soon_after_now_and_open(ws, now):
    nxt = next_opening(ws, now)
    assert now < nxt <= now + timedelta(hours=24)
    assert window_open(ws, nxt)
    if not window_open(ws, now):
        # nothing opens in between: it is the *next* opening
        gap = nxt - now
        for k in range(20):
            assert not window_open(ws, now + gap * k / 20), [w.text for w in ws]
        assert not window_open(ws, nxt - timedelta(microseconds=1))


# --------------------------------------------------------------------------- LinkSettings / ReplicationConfig


def test_defaults_without_a_replication_key():
    topo = Topology.parse(four())
    assert topo.replication == ReplicationConfig()
    assert topo.replication.schedule == DEFAULT_SCHEDULE == "5m"
    assert all(topo.replication.schedule_for(level) == timedelta(minutes=5) for level in topo.levels)
    assert topo.link_settings("c1.L3") == LinkSettings()
    assert topo.link_settings("c1.L3").parsed_windows() is None


def test_link_settings_override_defaults_key_by_key():
    topo = Topology.parse(four({
        "defaults": {"windows": ["22:00-06:00"], "max_bytes_per_second": 1000, "txn_records": 200},
        "links": {"c1.L3": {"max_bytes_per_second": 50, "max_records_per_run": 10},
                  "c2.L1": {"windows": ["01:00-02:00", "13:00-14:00"]}},
    }))
    assert topo.link_settings("c1.L3") == LinkSettings(
        windows=["22:00-06:00"], max_bytes_per_second=50, max_records_per_run=10, txn_records=200)
    assert topo.link_settings("c2.L1") == LinkSettings(
        windows=["01:00-02:00", "13:00-14:00"], max_bytes_per_second=1000, txn_records=200)
    assert topo.link_settings("c4.L3") == LinkSettings(
        windows=["22:00-06:00"], max_bytes_per_second=1000, txn_records=200)
    assert [w.text for w in topo.link_settings("c2.L1").parsed_windows()] == ["01:00-02:00", "13:00-14:00"]


def test_link_settings_of_an_unknown_link():
    with pytest.raises(UnknownLinkError, match="c9.L3"):
        Topology.parse(four()).link_settings("c9.L3")


def test_schedule_per_level():
    topo = Topology.parse(four({"schedule": "1h", "levels": {3: {"schedule": "manual"}}}))
    assert topo.replication.schedule_for(1) == timedelta(hours=1)
    assert topo.replication.schedule_for(3) is None
    topo = Topology.parse(four({"levels": {1: {"schedule": "*/10 * * * *"}, 3: {}}}))
    assert topo.replication.schedule_for(1) == "*/10 * * * *"
    assert topo.replication.schedule_for(3) == timedelta(minutes=5)   # empty level settings: the global one


def test_replication_in_yaml():
    topo = parse_topology("""
clusters:
  c1: {bootstrap: "h:1"}
  c2: {bootstrap: "h:2"}
tree: {level: 2, children: [c1, c2]}
topics: [orders]
replication:
  schedule: 30s
  levels:
    2: {schedule: "@hourly"}
  defaults: {windows: ["22:00-06:00"], max_bytes_per_run: 1048576}
  links:
    c1.L2: {txn_records: 100}
""")
    assert topo.replication.schedule_for(2) == "@hourly"
    assert topo.link_settings("c1.L2") == LinkSettings(windows=["22:00-06:00"], max_bytes_per_run=1048576,
                                                       txn_records=100)
    assert topo.link_settings("c2.L2").txn_records is None


# --------------------------------------------------------------------------- errors in the topology


def test_bad_schedule_names_the_key():
    assert "not a duration" in problem_at(refuse({"schedule": "garbage"}), "replication.schedule")
    assert "minimum 10s" in problem_at(refuse({"schedule": "5s"}), "replication.schedule")
    assert "expected a string" in problem_at(refuse({"schedule": 5}), "replication.schedule")


def test_level_not_in_the_tree():
    err = refuse({"levels": {2: {"schedule": "1h"}}})
    assert err.paths == ("replication.levels.2",)
    assert "no inner node of the tree has this level" in err.problem


def test_level_key_that_is_not_a_number_reads_plainly():
    # BUG (model._problem_text): the int_parsing error of a dict *key* takes the early ``[key]`` branch and
    # returns pydantic's raw msg ("Input should be a valid integer, ...").
    with pytest.raises(TopologyError) as info:
        Topology.parse(four({"levels": {"x": {"schedule": "1h"}}}))
    err = info.value
    assert err.path == "replication.levels.x"
    assert "Input should" not in err.problem, (
        f"replication.levels.x shows pydantic's raw text: {err.problem!r} (bug in model._problem_text, "
        "the '[key]' branch does not translate int_parsing)")


def test_bad_level_schedule_names_the_key_like_other_level_errors():
    # BUG (model.format_path): an integer *mapping key* is rendered like a list index, so the same key is
    # named ``replication.levels.2`` for one problem and ``replication.levels[1].schedule`` for another.
    err = refuse({"levels": {1: {"schedule": "nope"}}})
    assert err.paths == ("replication.levels.1.schedule",), (
        f"a bad level schedule is reported at {err.paths}, not at replication.levels.1.schedule "
        "(bug in model.format_path: int keys of levels rendered as list indexes [1])")


def test_unknown_link_with_a_hint():
    err = refuse({"links": {"c1.L4": {"txn_records": 10}}})
    problem = problem_at(err, "replication.links.c1.L4")
    assert "unknown link id" in problem and "did you mean 'c1.L3'?" in problem
    assert "c1.L1, c1.L3, c2.L1" in problem


def test_unknown_link_without_a_close_match_lists_the_links():
    problem = problem_at(refuse({"links": {"zz": {}}}), "replication.links.zz")
    assert "did you mean" not in problem and "(links: c1.L1," in problem


@pytest.mark.parametrize("windows, words", [
    (["25:00-01:00"], "is not [DAYS ]HH:MM-HH:MM[ ZONE]"),
    (["08:00-08:00"], "is empty"),
    (["22:00-06:00 Europe/Amsterdamm"], "'Europe/Amsterdamm' is not a time zone"),
    (["Mon-Fry 22:00-06:00"], "'Fry' is not a day"),
    ([], "empty list would never copy"),
    ("22:00-06:00", "expected a list"),
])
def test_bad_default_windows(windows, words):
    assert words in problem_at(refuse({"defaults": {"windows": windows}}), "replication.defaults.windows")


def test_window_that_is_not_a_string():
    assert "expected a string" in problem_at(refuse({"defaults": {"windows": [2200]}}),
                                             "replication.defaults.windows[0]")


def test_bad_link_windows_name_the_link():
    problem = problem_at(refuse({"links": {"c2.L1": {"windows": ["6:00-7:00"]}}}), "replication.links.c2.L1.windows")
    assert "'6:00-7:00'" in problem


@pytest.mark.parametrize("replication, path, allowed", [
    ({"schedul": "5m"}, "replication.schedul", "did you mean 'schedule'?"),
    ({"defaults": {"max_byte_per_second": 1}}, "replication.defaults.max_byte_per_second",
     "did you mean 'max_bytes_per_second'?"),
    ({"links": {"c1.L3": {"windws": ["01:00-02:00"]}}}, "replication.links.c1.L3.windws", "did you mean 'windows'?"),
    ({"levels": {3: {"schedle": "1h"}}}, None, "did you mean 'schedule'?"),
])
def test_unknown_keys_inside_replication(replication, path, allowed):
    err = refuse(replication)
    assert len(err.problems) == 1
    if path is not None:
        assert err.path == path
    else:
        assert err.path.startswith("replication.levels") and err.path.endswith("schedle")
    assert err.problem.startswith("unknown key") and allowed in err.problem


@pytest.mark.parametrize("field", LINK_FIELDS)
@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("where", ["defaults", "links"])
def test_non_positive_integers_are_refused(field, value, where):
    replication = {"defaults": {field: value}} if where == "defaults" else {"links": {"c3.L1": {field: value}}}
    path = f"replication.defaults.{field}" if where == "defaults" else f"replication.links.c3.L1.{field}"
    assert problem_at(refuse(replication), path) == f"must be a positive integer, got an integer ({value})"


@pytest.mark.parametrize("field", LINK_FIELDS)
def test_booleans_are_not_integers(field):
    # BUG (replication.LinkSettings): the fields are lax PositiveInt, so YAML ``yes``/``true`` silently becomes 1
    # (txn_records: yes -> one record per transaction; max_bytes_per_second: true -> 1 byte/s), while tree levels
    # (StrictInt) refuse booleans with "expected an integer".
    try:
        topo = Topology.parse(four({"defaults": {field: True}}))
    except TopologyError as err:
        assert "expected an integer" in problem_at(err, f"replication.defaults.{field}")
    else:
        pytest.fail(f"replication.defaults.{field}: true was accepted as "
                    f"{getattr(topo.replication.defaults, field)!r} (bug: lax int in LinkSettings)")


@pytest.mark.parametrize("field", LINK_FIELDS)
def test_fractions_are_refused(field):
    assert "expected an integer" in problem_at(refuse({"defaults": {field: 1.5}}), f"replication.defaults.{field}")


def test_several_replication_problems_at_once():
    err = refuse({"schedule": "never", "defaults": {"txn_records": 0}, "links": {"c1.L3": {"windows": ["x"]}}})
    assert set(err.paths) == {"replication.schedule", "replication.defaults.txn_records",
                              "replication.links.c1.L3.windows"}


# --------------------------------------------------------------------------- to_dict


def test_to_dict_leaves_replication_out_when_not_set():
    for replication in (None, {}, {"schedule": "5m"}, {"defaults": {}}):
        topo = Topology.parse(four(replication))
        assert "replication" not in topo.to_dict(), replication
        assert Topology.parse(topo.to_dict()) == topo


def test_to_dict_round_trip_keeps_replication():
    replication = {
        "schedule": "1h",
        "levels": {3: {"schedule": "manual"}},
        "defaults": {"windows": ["22:00-06:00"], "max_bytes_per_second": 1000},
        "links": {"c1.L3": {"max_bytes_per_second": 5, "txn_records": 100}},
    }
    topo = Topology.parse(four(replication))
    data = topo.to_dict()
    assert data["replication"] == replication
    again = Topology.parse(data)
    assert again == topo
    assert again.link_settings("c1.L3") == topo.link_settings("c1.L3")
    assert parse_topology(topo.to_yaml()) == topo


def test_with_cluster_keeps_replication():
    topo = Topology.parse(four({"schedule": "1m", "links": {"c4.L3": {"txn_records": 9}}}))
    grown = topo.with_cluster("c5", {"bootstrap": "h:1"}, sibling_of="c4", level=1)
    assert grown.replication == topo.replication
    assert grown.link_settings("c4.L3").txn_records == 9


def test_on_gap_defaults_to_fail_and_a_link_may_choose_skip():
    topo = Topology.parse(four({"links": {"c3.L1": {"on_gap": "skip"}}}))
    from mirrorflow.copy.spec import link_job

    assert link_job(topo, topo.link("c1.L1")).on_gap == "fail"
    assert link_job(topo, topo.link("c3.L1")).on_gap == "skip"


@pytest.mark.parametrize("where", ["defaults", "links"])
def test_an_unknown_on_gap_policy_is_refused_naming_the_key_and_the_choices(where):
    replication = {"defaults": {"on_gap": "ignore"}} if where == "defaults" else {
        "links": {"c3.L1": {"on_gap": "ignore"}}}
    path = "replication.defaults.on_gap" if where == "defaults" else "replication.links.c3.L1.on_gap"
    problem = problem_at(refuse(replication), path)
    assert "fail" in problem and "skip" in problem, problem
