"""Onboarding, the pure part: the request form, where the new cluster joins, and which links are pinned.

No Kafka: ``preflight`` itself is covered by the integration tests; here only the
decisions it is built from.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mirrorflow.onboard.plan import (
    OnboardPlan,
    OnboardRefused,
    OnboardRequest,
    backfill_link,
    joined_topology,
    parse_since,
    pins_for,
)
from mirrorflow.topology import Topology, parse_topology

#: c1 and c2 in a level-1 pair, c3 alone on the other side of the level-3 root.
THREE = """
clusters:
  c1: {bootstrap: "127.0.0.1:9091"}
  c2: {bootstrap: "127.0.0.1:9092"}
  c3: {bootstrap: "127.0.0.1:9093"}
tree: {level: 3, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [orders]
"""

C4 = "127.0.0.1:9094"


def three() -> Topology:
    return parse_topology(THREE)


def form(**overrides) -> dict:
    params = {"cluster": "c4", "sibling_of": "c3", "level": 1, "bootstrap": C4}
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not ...}


def refused_lines(params: dict) -> list[str]:
    """The problem lines of a refused form (the first line is the header)."""
    with pytest.raises(OnboardRefused) as info:
        OnboardRequest.from_params(params)
    header, *lines = str(info.value).split("\n")
    assert header == "mirror_onboard_cluster: the form is not valid:"
    return [line.strip() for line in lines]


# --------------------------------------------------------------------------- the form


def test_minimal_form_has_the_documented_defaults():
    req = OnboardRequest.from_params(form())
    assert req == OnboardRequest(cluster="c4", sibling_of="c3", level=1, bootstrap=C4, conn_id=None, topics=(),
                                 backfill="retained", since=None, schemas=True, adopt=False, dry_run=False)
    assert req.cluster_config() == {"bootstrap": C4}
    assert req.since_ms() is None


def test_the_new_clusters_names_go_into_its_entry_and_bad_ones_are_named():
    names = {"topics": "{tenant}-{topic}", "values": {"tenant": "acme"}}
    req = OnboardRequest.from_params(form(names=names))
    assert req.cluster_config() == {"bootstrap": C4, "names": names}
    grown = req.grown(three())
    assert grown.topic_naming("c4").render("orders") == "acme-orders"
    assert OnboardRequest.from_params(form(names={})).cluster_config() == {"bootstrap": C4}
    [line] = refused_lines(form(names={"topics": "{tenant}-{topic}"}))
    assert line.startswith("names") and "no value for {tenant}" in line, line
    assert refused_lines(form(names="acme-")) == ["names: expected an object such as {\"topic_prefix\": \"acme-\"}, "
                                                  "got str"]


def test_form_normalizes_text_level_and_topics():
    req = OnboardRequest.from_params(form(cluster="  c4 ", sibling_of=" c3", level="2", bootstrap=...,
                                          conn_id=" kafka_c4 ", topics=" orders , payments\\..* ,, ",
                                          schemas=False, adopt=True, dry_run=True))
    assert (req.cluster, req.sibling_of, req.level) == ("c4", "c3", 2)
    assert (req.bootstrap, req.conn_id) == (None, "kafka_c4")
    assert req.cluster_config() == {"conn_id": "kafka_c4"}
    assert req.topics == ("orders", "payments\\..*")
    assert (req.schemas, req.adopt, req.dry_run) == (False, True, True)


def test_topics_as_a_list_are_kept_in_order():
    req = OnboardRequest.from_params(form(topics=["b", "a.*"]))
    assert req.topics == ("b", "a.*")


@pytest.mark.parametrize("level", [0, -1, True, 1.0, "x", "1.5", None])
def test_bad_level_is_named(level):
    lines = refused_lines(form(level=level))
    assert lines == [f"level: expected a positive integer, got {level!r}"]


@pytest.mark.parametrize("overrides", [{"conn_id": "kafka_c4"}, {"bootstrap": ...}, {"bootstrap": "  "}])
def test_exactly_one_of_bootstrap_and_conn_id(overrides):
    lines = refused_lines(form(**overrides))
    assert len(lines) == 1
    assert lines[0].startswith("bootstrap / conn_id: give exactly one")


def test_missing_and_bad_names_are_named():
    assert refused_lines(form(cluster=..., sibling_of=...)) == [
        "cluster: the new cluster's name is required",
        "sibling_of: name the existing cluster the new one joins next to",
    ]
    assert refused_lines(form(cluster="c 4")) == [
        "cluster: 'c 4' is not a valid cluster name (letters, digits, _ and -)"]
    lines = refused_lines(form(cluster=4))
    assert lines[0] == "cluster: expected a string, got int"
    assert all(line.startswith("cluster: ") for line in lines)


def test_bad_regex_in_topics_is_named():
    lines = refused_lines(form(topics=["orders", "pay(ments"]))
    assert len(lines) == 1
    assert lines[0].startswith("topics: bad regular expression 'pay(ments': ")
    assert refused_lines(form(topics=["orders", 5])) == ["topics: expected a list of topic names or regexes"]
    assert refused_lines(form(topics={"orders": 1})) == ["topics: expected a list of topic names or regexes"]


def test_unknown_backfill_mode_is_named():
    assert refused_lines(form(backfill="everything")) == [
        "backfill: expected one of none, retained, since, archive, got 'everything'"]


def test_backfill_since_needs_a_timestamp():
    assert refused_lines(form(backfill="since")) == [
        "since: backfill 'since' needs a timestamp (ISO 8601, or epoch milliseconds)"]
    assert refused_lines(form(backfill="since", since="  ")) == [
        "since: backfill 'since' needs a timestamp (ISO 8601, or epoch milliseconds)"]
    lines = refused_lines(form(backfill="since", since="yesterday"))
    assert lines == ["since: 'yesterday' is neither ISO 8601 (2026-11-22T10:00:00Z) nor epoch milliseconds"]


def test_backfill_since_with_a_timestamp():
    req = OnboardRequest.from_params(form(backfill="since", since="2026-11-22T10:00:00Z"))
    assert req.backfill == "since"
    assert req.since_ms() == int(datetime(2026, 11, 22, 10, tzinfo=UTC).timestamp() * 1000)


def test_since_is_ignored_unless_the_backfill_is_since():
    req = OnboardRequest.from_params(form(backfill="retained", since="not a time"))
    assert req.since == "not a time"
    assert req.since_ms() is None


@pytest.mark.parametrize("key", ["schemas", "adopt", "dry_run"])
@pytest.mark.parametrize("value", ["yes", 1, 0, None, "true"])
def test_flags_must_be_booleans(key, value):
    assert refused_lines(form(**{key: value})) == [f"{key}: expected true or false, got {value!r}"]


def test_every_problem_is_reported_at_once_each_naming_its_field():
    lines = refused_lines({"cluster": "c 4", "level": 0, "bootstrap": C4, "conn_id": "x", "topics": ["("],
                           "backfill": "since", "since": "soon", "schemas": "no", "adopt": 1, "dry_run": "y"})
    fields = [line.split(":", 1)[0] for line in lines]
    assert fields == ["cluster", "sibling_of", "level", "bootstrap / conn_id", "topics", "since", "schemas",
                      "adopt", "dry_run"]


# --------------------------------------------------------------------------- parse_since


def test_parse_since_epoch_milliseconds():
    assert parse_since("0") == 0
    assert parse_since("1763805600000") == 1763805600000


def test_parse_since_iso_8601():
    utc = int(datetime(2026, 11, 22, 10, tzinfo=UTC).timestamp() * 1000)
    assert parse_since("2026-11-22T10:00:00Z") == utc
    assert parse_since("2026-11-22T10:00:00+00:00") == utc
    assert parse_since("2026-11-22T10:00:00") == utc  # naive means UTC
    assert parse_since("2026-11-22T12:00:00+02:00") == utc
    assert parse_since("2026-11-22T10:00:00.250Z") == utc + 250
    assert parse_since("2026-11-22") == utc - 10 * 3600 * 1000


@pytest.mark.parametrize("text", ["", "yesterday", "-5", "1.5", "2026-13-01T00:00:00Z", "22/11/2026"])
def test_parse_since_refuses_the_rest(text):
    with pytest.raises(ValueError, match="neither ISO 8601 .* nor epoch milliseconds"):
        parse_since(text)


# --------------------------------------------------------------------------- joining the tree


def req(**overrides) -> OnboardRequest:
    return OnboardRequest.from_params(form(**overrides))


def test_pair_node_join_is_accepted():
    old = three()
    new = joined_topology(old, req())
    assert new.tree.model_dump() == {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                                              {"level": 1, "children": ["c3", "c4"]}]}
    assert new.cluster("c4").bootstrap == C4
    assert new.leaves == ["c1", "c2", "c3", "c4"]
    assert {l.link_id for l in new.all_links()} - {l.link_id for l in old.all_links()} == {
        "c3.L1", "c4.L1", "c4.L3"}
    link = backfill_link(new, req())
    assert (link.link_id, link.source, link.default_target, link.level) == ("c3.L1", "c3", "c4", 1)


def test_pair_node_join_at_a_new_level_between():
    new = joined_topology(three(), req(level=2))
    assert new.levels == [1, 2, 3]
    link = backfill_link(new, req(level=2))
    assert (link.link_id, link.source, link.default_target) == ("c3.L2", "c3", "c4")
    assert [d.link_id for d in new.distributors("c4")] == ["c4.L2", "c4.L3"]


def test_join_with_a_conn_id_puts_it_in_the_cluster_entry():
    new = joined_topology(three(), req(bootstrap=..., conn_id="kafka_c4"))
    assert (new.cluster("c4").conn_id, new.cluster("c4").bootstrap) == ("kafka_c4", None)


def test_a_cluster_already_in_the_tree_is_returned_unchanged():
    old = three()
    assert joined_topology(old, req(cluster="c3", sibling_of="c1")) is old


def test_joining_an_existing_nary_node_is_refused_naming_the_foreign_links():
    with pytest.raises(OnboardRefused) as info:
        joined_topology(three(), req(level=3))
    text = str(info.value)
    assert text.startswith("cluster c4 would join an existing level-3 node next to c3: that creates links "
                           "c1.L3.c3, c1.L3.c4, c2.L3.c3, c2.L3.c4 into it from other clusters")
    assert "Join at a level below c3's parent" in text


def test_joining_an_existing_pair_at_its_level_is_refused_too():
    with pytest.raises(OnboardRefused, match=r"would join an existing level-1 node next to c1: .*c2\.L1\.c1"):
        joined_topology(three(), req(sibling_of="c1", level=1))


def test_a_level_that_does_not_fit_is_refused():
    with pytest.raises(OnboardRefused) as info:
        joined_topology(three(), req(level=5))
    assert str(info.value).startswith("cluster c4 cannot join next to c3 at level 5: invalid topology: tree.level:")


def test_a_bad_bootstrap_is_refused():
    with pytest.raises(OnboardRefused, match=r"cannot join next to c3 at level 1: .*clusters\.c4\.bootstrap"):
        joined_topology(three(), req(bootstrap="nohost"))


def test_unknown_sibling_is_refused_naming_it():
    with pytest.raises(OnboardRefused, match="c9"):
        joined_topology(three(), req(sibling_of="c9"))


# --------------------------------------------------------------------------- pins


def test_pins_keep_a_link_whose_default_target_changes_with_the_new_leaf():
    old = three()
    new = joined_topology(old, req())
    assert old.link("c2.L3").default_target == "c3"
    assert new.link("c2.L3").default_target == "c4"  # the spread changed: c2 is the 2nd leaf of its side
    assert pins_for(old, new, {}) == {"c2.L3": "c3"}


def test_pins_respect_an_operator_switch_already_stored():
    old = three()
    new = joined_topology(old, req())
    # c3.L3 was switched to c2 (default c1, unchanged by the join): it stays on c2, pinned
    assert pins_for(old, new, {"c3.L3": "c2"}) == {"c2.L3": "c3", "c3.L3": "c2"}
    # c2.L3 switched to c3 already: still c3 after the join
    assert pins_for(old, new, {"c2.L3": "c3"}) == {"c2.L3": "c3"}


def test_pins_only_what_would_move():
    old = three()
    new = joined_topology(old, req(level=2))
    assert pins_for(old, new, {}) == {"c2.L3": "c3"}
    same = parse_topology(THREE)
    assert pins_for(old, same, {}) == {}
    assert pins_for(old, same, {"c1.L3": "c3"}) == {}


def test_a_stale_stored_target_is_not_the_current_one():
    old = three()
    new = joined_topology(old, req())
    # c4 is no leaf of old's c1.L3 sibling subtree: old effective_links copy c1.L3 into c3, its default.
    assert pins_for(old, new, {"c1.L3": "c4"}).get("c1.L3") != "c4"


# --------------------------------------------------------------------------- the plan


def test_plan_round_trips_and_its_event_adds_the_cluster():
    plan = OnboardPlan(cluster="c4", config={"bootstrap": C4}, sibling_of="c3", level=1, link_id="c3.L1",
                       backfill="since", since_ms=5, bits=0b101, topics={"orders": 3}, pins={"c2.L3": "c3"})
    again = OnboardPlan.from_dict(plan.to_dict())
    assert again == plan
    assert again.to_dict()["pins"] == {"c2.L3": "c3"}
    assert plan.event() == {"op": "add", "cluster": "c4", "config": {"bootstrap": C4}, "sibling_of": "c3",
                            "level": 1}
