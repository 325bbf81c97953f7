"""The topology file: what it accepts, what it derives, and how it refuses bad input.

Every refusal must name the key path and the problem in plain words; none may
show a raw pydantic dump.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from mirrorflow.errors import MirrorflowError, TopologyError, UnknownClusterError, UnknownLinkError
from mirrorflow.topology import (
    INTERNAL_TOPIC_PREFIX,
    ClusterConfig,
    Distributor,
    Topology,
    is_internal_topic,
    load_topology,
    load_topology_from_env,
    parse_topology,
)
from tests.unit.topologies import assert_readable, four, has_problem, refuse

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "topologies" / "demo.yaml"
UNBALANCED = REPO / "topologies" / "unbalanced.yaml"

# --------------------------------------------------------------------------- the files in topologies/


def test_demo_file_is_the_design_tree():
    topo = load_topology(DEMO)
    assert topo.leaves == ["c1", "c2", "c3", "c4"]
    assert topo.levels == [1, 3]
    assert {n: c.bootstrap for n, c in topo.clusters.items()} == {
        "c1": "127.0.0.1:19092", "c2": "127.0.0.1:19093", "c3": "127.0.0.1:19094", "c4": "127.0.0.1:19095",
    }
    assert all(c.conn_id is None and c.config == {} for c in topo.clusters.values())


def test_unbalanced_file_runs_the_distributors_of_the_seed():
    topo = load_topology(UNBALANCED)
    assert topo.leaves == ["c1", "c2", "c3", "c4", "c5"]
    assert topo.levels == [1, 2, 3]
    levels = {c: [d.level for d in topo.distributors(c)] for c in topo.leaves}
    assert levels == {"c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3]}
    assert topo.clusters["c5"].bootstrap == "127.0.0.1:19096"


def test_names_file_is_the_demo_tree_under_three_naming_patterns_and_the_demo_under_one():
    names, demo = load_topology(REPO / "topologies" / "names.yaml"), load_topology(DEMO)
    assert (names.leaves, names.levels) == (demo.leaves, demo.levels)
    assert {c: names.cluster(c).bootstrap for c in names.clusters} == {c: demo.cluster(c).bootstrap
                                                                     for c in demo.clusters}
    assert {c: names.topic_naming(c).render("orders") for c in names.clusters} == {
        "c1": "acme-main-prod-orders", "c2": "acme-prod-orders", "c3": "orders", "c4": "orders"}
    assert names.group_naming("c1").render("app") == "acme-main-prod-app"
    assert all(demo.topic_naming(c).is_identity and demo.group_naming(c).is_identity for c in demo.clusters)


# --------------------------------------------------------------------------- derived structure


def test_default_targets_spread_load():
    topo = Topology.parse(four())
    at = {d.link_id: d.default_target for c in topo.leaves for d in topo.distributors(c)}
    assert at == {
        "c1.L1": "c2", "c2.L1": "c1", "c3.L1": "c4", "c4.L1": "c3",
        "c1.L3": "c3", "c2.L3": "c4", "c3.L3": "c1", "c4.L3": "c2",
    }


def test_distributor_fields():
    topo = Topology.parse(four())
    d = topo.distributors("c2")[1]
    assert d == Distributor(source="c2", level=3, sibling_leaves=("c3", "c4"), default_target="c4",
                            alternatives=("c3",), link_id="c2.L3")
    assert (d.node_path, d.sibling_path) == ("tree", "tree.children[1]")
    assert (d.bit, d.mask) == (0b100, 0b111)
    with pytest.raises(Exception):
        d.level = 1  # frozen


def test_links_of_a_level_cover_every_cluster_once():
    topo = Topology.parse(four())
    assert [d.link_id for d in topo.links(3)] == ["c1.L3", "c2.L3", "c3.L3", "c4.L3"]
    assert [d.source for d in topo.links(1)] == ["c1", "c2", "c3", "c4"]
    assert topo.links(2) == []
    assert [d.link_id for d in topo.all_links()] == [d.link_id for lv in (1, 3) for d in topo.links(lv)]


def test_link_lookup_and_unknown_names():
    topo = Topology.parse(four())
    assert topo.link("c3.L1").default_target == "c4"
    with pytest.raises(UnknownLinkError):
        topo.link("c3.L2")
    with pytest.raises(UnknownClusterError, match="c9"):
        topo.distributors("c9")
    with pytest.raises(LookupError):
        topo.cluster("c9")


def test_unbalanced_spreading_wraps_around():
    topo = load_topology(UNBALANCED)
    targets = {d.link_id: d.default_target for d in topo.all_links()}
    # level 3: left child leaves [c1, c2, c3], right [c4, c5]
    assert (targets["c1.L3"], targets["c2.L3"], targets["c3.L3"]) == ("c4", "c5", "c4")
    assert (targets["c4.L3"], targets["c5.L3"]) == ("c1", "c2")
    assert targets["c2.L2"] == targets["c3.L2"] == "c1"
    assert topo.link("c1.L2").sibling_leaves == ("c2", "c3")


def test_nary_node_gives_one_distributor_per_sibling_subtree_with_unique_ids():
    data = {
        "clusters": {c: {"bootstrap": "h:1"} for c in ("a", "b", "c", "d", "e")},
        "tree": {"level": 5, "children": ["a", {"level": 2, "children": ["b", "c"]}, {"level": 1, "children": ["d", "e"]}]},
        "topics": ["t"],
    }
    topo = Topology.parse(data)
    a = topo.distributors("a")
    assert [(d.level, d.sibling_leaves, d.default_target, d.link_id) for d in a] == [
        (5, ("b", "c"), "b", "a.L5.b"),
        (5, ("d", "e"), "d", "a.L5.d"),
    ]
    assert [d.link_id for d in topo.distributors("c")] == ["c.L2", "c.L5.a", "c.L5.d"]
    assert topo.link("c.L5.d").default_target == "e"  # c is the 2nd leaf of its subtree
    ids = [d.link_id for d in topo.all_links()]
    assert len(ids) == len(set(ids)) == 5 * 2 + 2 + 2  # each leaf crosses into 2 subtrees at L5; 2 pairs below


def test_link_ids_are_task_id_safe():
    for topo in (load_topology(DEMO), load_topology(UNBALANCED)):
        assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", d.link_id) for d in topo.all_links())


def test_switching_target_keeps_link_id():
    d = Topology.parse(four()).link("c1.L3")
    switched = d.with_target("c4")
    assert (switched.link_id, switched.default_target, switched.alternatives) == ("c1.L3", "c4", ("c3",))
    with pytest.raises(ValueError, match="c2"):
        d.with_target("c2")


def test_same_level_numbers_in_different_branches_and_gaps_are_fine():
    data = four()
    data["tree"] = {"level": 40, "children": [{"level": 7, "children": ["c1", "c2"]},
                                              {"level": 7, "children": ["c3", "c4"]}]}
    assert Topology.parse(data).levels == [7, 40]
    data["tree"]["level"] = 63
    assert Topology.parse(data).levels == [7, 63]


def test_conn_id_cluster_and_config():
    data = four()
    data["clusters"]["c2"] = {"conn_id": "kafka_c2", "config": {"linger.ms": 5, "enable.ssl.certificate.verification": False,
                                                              "compression.type": "zstd"}}
    c2 = Topology.parse(data).clusters["c2"]
    assert (c2.bootstrap, c2.conn_id) == (None, "kafka_c2")
    assert c2.config == {"linger.ms": 5, "enable.ssl.certificate.verification": False, "compression.type": "zstd"}
    assert type(c2.config["linger.ms"]) is int and type(c2.config["enable.ssl.certificate.verification"]) is bool


def test_name_defaults_to_mirrorflow():
    assert Topology.parse(four()).name == "mirrorflow"
    assert load_topology(DEMO).name == "demo"


# --------------------------------------------------------------------------- topic selection


@pytest.mark.parametrize("topic, selected", [
    ("orders", True),
    ("orders2", False),      # full match, not search
    ("my-orders", False),
    ("payments.eu", True),
    ("payments.", True),
    ("payments", False),
    ("paymentsXeu", False),  # the dot is escaped in the file
    ("__consumer_offsets", False),
    ("__transaction_state", False),
    ("_schemas", False),
    (f"{INTERNAL_TOPIC_PREFIX}-offsets", False),
])
def test_selects(topic, selected):
    assert Topology.parse(four()).selects(topic) is selected


def test_internal_topics_never_match_even_a_catch_all():
    data = four()
    data["topics"] = [".*"]
    topo = Topology.parse(data)
    assert topo.selects("anything") and topo.selects("_private")
    for internal in ("__consumer_offsets", "_schemas", "_mirrorflow_offsets", "_mirrorflow"):
        assert is_internal_topic(internal) and not topo.selects(internal)


# --------------------------------------------------------------------------- loading


def test_load_from_env(monkeypatch):
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(UNBALANCED))
    assert load_topology_from_env().leaves == ["c1", "c2", "c3", "c4", "c5"]
    assert load_topology_from_env(environ={"MIRROR_TOPOLOGY": str(DEMO)}).levels == [1, 3]


@pytest.mark.parametrize("value", [None, "", "  "])
def test_env_unset_is_an_error_naming_the_variable(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("MIRROR_TOPOLOGY", raising=False)
    else:
        monkeypatch.setenv("MIRROR_TOPOLOGY", value)
    with pytest.raises(TopologyError) as info:
        load_topology_from_env()
    assert info.value.path == "MIRROR_TOPOLOGY" and "not set" in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(TopologyError) as info:
        load_topology(tmp_path / "nope.yaml")
    assert "nope.yaml" in info.value.path and "file not found" in str(info.value)


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(TopologyError, match="directory"):
        load_topology(tmp_path)


def test_not_yaml(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text("clusters: [c1\n  tree: {\n")
    with pytest.raises(TopologyError) as info:
        load_topology(bad)
    assert str(bad) in str(info.value) and "not valid YAML" in str(info.value) and "line" in str(info.value)


@pytest.mark.parametrize("text, words", [
    ("- c1\n- c2\n", "got a list"),
    ("just a string\n", "got a str"),
    ("", "empty"),
    ("# only a comment\n", "empty"),
])
def test_not_a_mapping(tmp_path, text, words):
    bad = tmp_path / "t.yaml"
    bad.write_text(text)
    with pytest.raises(TopologyError) as info:
        load_topology(bad)
    assert info.value.path == str(bad) and words in str(info.value)


def test_duplicate_yaml_key_is_refused_not_silently_dropped():
    text = DEMO.read_text().replace('  c2: {bootstrap: "127.0.0.1:19093"}', '  c1: {bootstrap: "127.0.0.1:19093"}')
    with pytest.raises(TopologyError, match=r"duplicate key 'c1' \(line \d+"):
        parse_topology(text, "demo.yaml")


def test_model_errors_name_the_file(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text(DEMO.read_text().replace("bootstrap:", "bootstrp:", 1))
    with pytest.raises(TopologyError) as info:
        load_topology(bad)
    assert info.value.source == str(bad)
    assert str(info.value).startswith(f"invalid topology {bad}: clusters.c1.bootstrp: unknown key")


# --------------------------------------------------------------------------- one test per refusal


def test_leaf_naming_an_unknown_cluster():
    data = four()
    data["tree"]["children"][1]["children"][1] = "c9"
    data["clusters"].pop("c4")
    err = refuse(data)
    assert err.problems == (("tree.children[1].children[1]",
                             "unknown cluster 'c9': not defined under clusters (defined: c1, c2, c3)"),)


def test_cluster_in_the_tree_twice():
    data = four()
    data["tree"]["children"][1]["children"][1] = "c1"
    err = refuse(data)
    assert has_problem(err, "tree.children[1].children[1]", "'c1'", "twice", "tree.children[0].children[0]")
    assert has_problem(err, "clusters.c4", "not in the tree")


def test_cluster_missing_from_the_tree():
    data = four()
    data["clusters"]["c5"] = {"bootstrap": "127.0.0.1:19096"}
    err = refuse(data)
    assert err.paths == ("clusters.c5",) and "not in the tree" in err.problem


def test_level_not_larger_than_every_level_below():
    data = four()
    data["tree"]["children"][1]["level"] = 3
    err = refuse(data)
    assert err.paths == ("tree.level",)
    assert "level 3 must be larger than every level below it" in err.problem
    assert "tree.children[1].level is 3" in err.problem


def test_level_below_a_deeper_level_names_the_largest():
    data = four()
    data["tree"]["children"][0] = {"level": 2, "children": ["c1", {"level": 9, "children": ["c2", "c5"]}]}
    data["clusters"]["c5"] = {"bootstrap": "h:5"}
    err = refuse(data)
    assert has_problem(err, "tree.children[0].level", "level 2", "tree.children[0].children[1].level is 9")
    assert has_problem(err, "tree.level", "level 3", "tree.children[0].children[1].level is 9")


@pytest.mark.parametrize("level", [0, -1, 64, 1000])
def test_level_out_of_range(level):
    data = four()
    data["tree"]["children"][0]["level"] = level
    if level > 3:
        data["tree"]["level"] = level + 1
    err = refuse(data)
    assert has_problem(err, "tree.children[0].level", f"level {level} is out of range", "1..63")


def test_inner_node_with_fewer_than_two_children():
    data = four()
    data["tree"]["children"][0]["children"] = ["c1"]
    data["tree"]["children"].append("c2")
    err = refuse(data)
    assert err.problems == (("tree.children[0].children", "an inner node needs at least 2 children, got 1"),)


def test_bad_regex_in_topics():
    data = four()
    data["topics"] = ["orders", "payments(", "ok"]
    err = refuse(data)
    assert err.paths == ("topics[1]",) and "bad regular expression 'payments('" in err.problem


def test_empty_topics_and_internal_topic_names():
    data = four()
    data["topics"] = []
    assert refuse(data).paths == ("topics",)
    data["topics"] = ["__consumer_offsets", ""]
    err = refuse(data)
    assert has_problem(err, "topics[0]", "internal topic") and has_problem(err, "topics[1]", "empty")


def test_missing_bootstrap_and_conn_id():
    data = four()
    data["clusters"]["c2"] = {}
    err = refuse(data)
    assert err.problems == (("clusters.c2", "give exactly one of bootstrap or conn_id, got neither"),)


def test_both_bootstrap_and_conn_id():
    data = four()
    data["clusters"]["c2"]["conn_id"] = "kafka_c2"
    err = refuse(data)
    assert err.problems == (("clusters.c2", "give exactly one of bootstrap or conn_id, got both"),)


@pytest.mark.parametrize("where, key, path, suggestion", [
    (("clusters", "c1"), "bootstrp", "clusters.c1.bootstrp", "did you mean 'bootstrap'?"),
    ((), "topcs", "topcs", "did you mean 'topics'?"),
    (("tree",), "lvl", "tree.lvl", "did you mean 'level'?"),
    (("tree", "children", 1), "childs", "tree.children[1].childs", "did you mean 'children'?"),
])
def test_unknown_key_anywhere(where, key, path, suggestion):
    data = four()
    node = data
    for part in where:
        node = node[part]
    node[key] = "x"
    err = refuse(data)
    assert has_problem(err, path, "unknown key", suggestion, "allowed:")


def test_many_problems_are_reported_together():
    data = four()
    data["clusters"]["c1"]["bootstrp"] = "x"
    data["clusters"]["c2"] = {}
    data["tree"]["children"][0]["level"] = "one"
    data["topcs"] = []
    err = refuse(data)
    assert set(err.paths) == {"clusters.c1.bootstrp", "clusters.c2", "tree.children[0].level", "topcs"}
    assert str(err).startswith("invalid topology: 4 problems\n")

    data = four()
    data["tree"]["children"][1]["children"] = ["c3", "c9"]
    data["topics"] = ["("]
    err = refuse(data)
    assert set(err.paths) == {"tree.children[1].children[1]", "topics[0]", "clusters.c4"}


@pytest.mark.parametrize("leaf, words", [
    (False, "got a boolean (false); quote"),   # YAML `no`
    (None, "got nothing (null)"),
    (5, "got an integer (5)"),
    (["c1"], "got a list"),
])
def test_tree_child_of_the_wrong_type(leaf, words):
    data = four()
    data["tree"]["children"][1]["children"][0] = leaf
    err = refuse(data)
    assert has_problem(err, "tree.children[1].children[0]", "expected a cluster name or a mapping", words)


@pytest.mark.parametrize("bootstrap", ["", "localhost", "h:", ":9092", "h:abc", "h:70000", "h:1,,h:2"])
def test_bad_bootstrap(bootstrap):
    data = four()
    data["clusters"]["c3"]["bootstrap"] = bootstrap
    assert has_problem(refuse(data), "clusters.c3.bootstrap", "host:port")


def test_good_bootstraps():
    data = four()
    data["clusters"]["c3"]["bootstrap"] = "b1:9092, b2:9092,SSL://b3.example.com:9093,[::1]:9094"
    assert Topology.parse(data).clusters["c3"].bootstrap == "b1:9092,b2:9092,SSL://b3.example.com:9093,[::1]:9094"


def test_bootstrap_of_the_wrong_type():
    data = four()
    data["clusters"]["c3"]["bootstrap"] = 19094
    assert has_problem(refuse(data), "clusters.c3.bootstrap", "expected a string, got an integer (19094)")


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret",
                                 "sasl.jaas.config"])
def test_secrets_are_refused_in_config(key):
    data = four()
    data["clusters"]["c3"]["config"] = {key: "hunter2"}
    err = refuse(data)
    assert has_problem(err, "clusters.c3.config", "secrets never go in the topology file", key)
    assert "hunter2" not in str(err)


def test_config_value_types_and_bootstrap_in_config():
    data = four()
    data["clusters"]["c3"]["config"] = {"linger.ms": 1.5}
    assert has_problem(refuse(data), "clusters.c3.config.linger.ms", "string, an integer or a boolean")
    data["clusters"]["c3"]["config"] = {"bootstrap.servers": "h:1"}
    assert has_problem(refuse(data), "clusters.c3.config", "bootstrap")


@pytest.mark.parametrize("name", ["bad name", "-c1", "c1/x", "ü", "c1\n"])
def test_bad_cluster_name(name):
    data = four()
    data["clusters"][name] = data["clusters"].pop("c4")
    data["tree"]["children"][1]["children"][1] = name
    assert has_problem(refuse(data), f"clusters.{name}", "invalid name")


def test_cluster_name_must_be_a_string():
    text = DEMO.read_text().replace("  c4: {", "  4: {").replace("[c3, c4]", "[c3, '4']")
    with pytest.raises(TopologyError) as info:
        parse_topology(text)
    assert_readable(info.value)
    assert info.value.path == "clusters[4]" and "quote it" in info.value.problem


@pytest.mark.parametrize("key", ["clusters", "tree", "topics"])
def test_required_top_level_keys(key):
    data = four()
    del data[key]
    assert has_problem(refuse(data), key, "required key is missing")


def test_level_must_be_an_integer():
    data = four()
    data["tree"]["level"] = True
    assert has_problem(refuse(data), "tree.level", "expected an integer")


def test_every_constructor_raises_topology_error():
    data = four()
    data["clusters"]["c2"] = {}
    with pytest.raises(TopologyError):
        Topology.model_validate(data)
    with pytest.raises(TopologyError):
        Topology(**data)
    with pytest.raises(TopologyError, match="<top level>"):
        Topology.parse(["not", "a", "mapping"])
    err = refuse({})
    assert isinstance(err, MirrorflowError) and set(err.paths) == {"clusters", "tree", "topics"}


# --------------------------------------------------------------------------- values and edits


def test_topology_is_immutable_and_picklable():
    topo = load_topology(UNBALANCED)
    with pytest.raises(Exception):
        topo.name = "x"
    again = pickle.loads(pickle.dumps(topo))
    assert again == topo and again.all_links() == topo.all_links() and again.selects("orders")
    err = pickle.loads(pickle.dumps(refuse({"clusters": {}})))
    assert isinstance(err, TopologyError) and err.problems


def test_to_dict_round_trips():
    data = four()
    data["clusters"]["c2"] = {"conn_id": "k2", "config": {"acks": "all"}}
    topo = Topology.parse(data)
    out = topo.to_dict()
    assert out["clusters"]["c1"] == {"bootstrap": "127.0.0.1:19092"}
    assert out["clusters"]["c2"] == {"conn_id": "k2", "config": {"acks": "all"}}
    assert Topology.parse(out) == topo
    assert parse_topology(topo.to_yaml()) == topo


def test_with_cluster_makes_a_new_pair_or_joins_a_node_of_that_level():
    topo = Topology.parse(four())
    grown = topo.with_cluster("c5", {"bootstrap": "h:5"}, sibling_of="c4", level=1)
    assert grown.to_dict()["tree"]["children"][1] == {"level": 1, "children": ["c3", "c4", "c5"]}
    deeper = topo.with_cluster("c5", ClusterConfig(conn_id="k5"), sibling_of="c2", level=1)
    assert deeper.to_dict()["tree"]["children"][0]["children"] == ["c1", "c2", "c5"]
    split = Topology.parse(load_topology(UNBALANCED).to_dict()).with_cluster(
        "c6", {"bootstrap": "h:6"}, sibling_of="c1", level=1)
    assert split.to_dict()["tree"]["children"][0]["children"][0] == {"level": 1, "children": ["c1", "c6"]}
    assert topo.distributors("c1") == Topology.parse(four()).distributors("c1")  # original untouched
    with pytest.raises(TopologyError, match="must be larger"):
        topo.with_cluster("c5", {"bootstrap": "h:5"}, sibling_of="c4", level=3)
    with pytest.raises(TopologyError, match="already exists"):
        topo.with_cluster("c1", {"bootstrap": "h:5"}, sibling_of="c4", level=2)


def test_without_cluster_folds_single_child_nodes():
    topo = Topology.parse(four())
    smaller = topo.without_cluster("c4")
    assert smaller.to_dict()["tree"] == {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]}, "c3"]}
    assert [d.link_id for d in smaller.distributors("c3")] == ["c3.L3"]
    two = smaller.without_cluster("c3")
    assert two.to_dict()["tree"] == {"level": 1, "children": ["c1", "c2"]} and two.levels == [1]
    with pytest.raises(TopologyError, match="single cluster"):
        two.without_cluster("c1")
    with pytest.raises(UnknownClusterError):
        topo.without_cluster("c9")
