"""Several trees in one Airflow (include/mirrorflow/topology/trees.py): loading, namespaces, what two may not share."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mirrorflow.copy.spec import JobSpec, build_spec
from mirrorflow.errors import TopologyError
from mirrorflow.internal_names import (
    ACL_GRANTS_TOPIC,
    AUDIT_TOPIC,
    OFFSETS_TOPIC,
    TOPIC_CONFIGS_TOPIC,
    checkpoint_group,
    in_namespace,
)
from mirrorflow.kafka import ClusterClient
from mirrorflow.naming import NameFormat
from mirrorflow.needed_acls import required_acls
from mirrorflow.topology import (
    Topology,
    in_tree,
    load_topology_from_env,
    load_trees,
    load_trees_from_env,
    topology_paths,
    tree_of,
)
from mirrorflow.topology.trees import meet


def _tree(namespace: str = "", shared: str = "10.0.0.9:9092", own: str = "10.0.0.1:9092", **shared_names) -> dict:
    data = {"name": namespace or "plain",
            "clusters": {"home": {"bootstrap": own},
                         "shared": {"bootstrap": shared, **({"names": shared_names} if shared_names else {})}},
            "tree": {"level": 1, "children": ["home", "shared"]}, "topics": ["orders.*"]}
    if namespace:
        data["namespace"] = namespace
    return data


def _write(tmp_path: Path, **trees: dict) -> list[Path]:
    paths = []
    for name, data in trees.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        paths.append(path)
    return paths


def test_one_file_is_one_tree_whose_names_are_those_it_always_had(tmp_path):
    [path] = _write(tmp_path, prod=_tree())
    [tree] = load_trees([path])
    assert tree.namespace == "" and in_tree(tree.namespace, "mirror_level_1") == "mirror_level_1"
    assert in_namespace(checkpoint_group("home.L1"), tree.namespace) == "_mirrorflow.link.home.L1"
    assert load_trees_from_env(environ={"MIRROR_TOPOLOGY": str(path)})[0].to_dict() == tree.to_dict()
    assert "namespace" not in tree.to_dict()  # the file's shape: nothing added


def test_two_trees_sharing_a_cluster_under_prefixes_of_their_own_load_each_with_its_namespace(tmp_path):
    paths = _write(tmp_path, prod=_tree(topic_prefix="prod-", group_prefix="prod-"),
                   acc=_tree("acc", own="10.0.0.2:9092", topic_prefix="acc-", group_prefix="acc-"))
    value = ":".join(map(str, paths))
    prod, acc = load_trees_from_env(environ={"MIRROR_TOPOLOGY": value})
    assert (prod.namespace, acc.namespace) == ("", "acc")
    # Airflow's names: the tree without a namespace keeps the contract ids, the other's start with its namespace
    assert in_tree(acc.namespace, "mirror_level_1") == "acc.mirror_level_1"
    assert (tree_of("acc.mirror_level_1", "mirror_level_1"), tree_of("mirror_level_1", "mirror_level_1")) == ("acc", "")
    assert tree_of("mirror_level_10", "mirror_level_1") is None
    # its own names on clusters: checkpoints, transactional ids and every store
    client = ClusterClient("shared", {"bootstrap.servers": "10.0.0.9:9092"}, namespace=acc.namespace)
    assert client.own(checkpoint_group("home.L1")) == "_mirrorflow.acc.link.home.L1"
    assert [client.own(t) for t in (OFFSETS_TOPIC, AUDIT_TOPIC, TOPIC_CONFIGS_TOPIC, ACL_GRANTS_TOPIC)] == [
        "_mirrorflow.acc.offsets", "_mirrorflow.acc.audit", "_mirrorflow.acc.topic-configs",
        "_mirrorflow.acc.acl-grants"]
    assert client.own("_mirrorflow-watermarks") == "_mirrorflow-watermarks"  # never commits: shared
    # the ACLs its principal needs name its own resources
    names = {acl.name for acl in required_acls(acc)}
    assert {"_mirrorflow.acc.offsets", "_mirrorflow.acc.link.home.L1", "_mirrorflow.acc.home.L1."} <= names
    assert "_mirrorflow.offsets" not in names
    # the copy job carries it to the executors
    spec = build_spec(acc, 1, "r", acc.links(1), {c: {"bootstrap.servers": "x:1"} for c in acc.clusters})
    assert JobSpec.from_json(spec.to_json()).namespace == "acc"
    # and a directory names both files
    assert [p.name for p in topology_paths(str(tmp_path))] == ["acc.yaml", "prod.yaml"]


def test_the_one_tree_loader_refuses_several_naming_the_variable(tmp_path):
    paths = _write(tmp_path, a=_tree(), b=_tree("b"))
    with pytest.raises(TopologyError, match="MIRROR_TOPOLOGY.*names several topologies"):
        load_topology_from_env(environ={"MIRROR_TOPOLOGY": f"{paths[0]}:{paths[1]}"})


@pytest.mark.parametrize(("prod", "acc", "problem"), [
    (_tree(topic_prefix="p-", group_prefix="p-"), _tree(topic_prefix="a-", group_prefix="a-"),
     "acc.yaml: namespace: '' is also the namespace of"),
    (_tree(), _tree("acc", own="10.0.0.2:9092", group_prefix="a-"),
     "acc.yaml: clusters.shared.names: plain's shared and acc's shared (.*) are one cluster, and their topic names "
     "can meet \\(no renaming and no renaming\\)"),
    (_tree(topic_prefix="p-", group_prefix="p-"),
     _tree("acc", own="10.0.0.2:9092", topic_prefix="p-x-", group_prefix="a-"),
     "their topic names can meet \\('p-<name>' and 'p-x-<name>'\\)"),
    (_tree(topic_prefix="p-"), _tree("acc", own="10.0.0.2:9092", topic_prefix="a-"),
     "their consumer group names can meet"),
    ({**_tree(topic_prefix="p-", group_prefix="p-"), "schemas": {"primary": "home"}},
     {**_tree("acc", own="10.0.0.2:9092", topic_prefix="a-", group_prefix="a-"), "schemas": {"primary": "home"}},
     "acc.yaml: schemas.primary: .* both trees sync schemas"),
])
def test_two_trees_that_would_share_something_by_accident_are_refused_naming_the_file_and_key(tmp_path, prod, acc,
                                                                                            problem):
    paths = _write(tmp_path, prod=prod, acc=acc)
    with pytest.raises(TopologyError, match=problem):
        load_trees(paths)


def test_trees_on_different_clusters_need_no_prefixes_and_one_carrying_no_groups_shares_none():
    assert load_trees  # the loader is the check's only caller; the check itself:
    from mirrorflow.topology import check_trees

    apart = {"a.yaml": Topology.parse(_tree()), "b.yaml": Topology.parse(_tree("b", shared="10.0.0.8:9092",
                                                                                 own="10.0.0.2:9092"))}
    check_trees(apart)
    no_groups = {**_tree("b", own="10.0.0.2:9092", topic_prefix="b-"), "offsets": {"groups": []}}
    check_trees({"a.yaml": Topology.parse(_tree(topic_prefix="a-")), "b.yaml": Topology.parse(no_groups)})


@pytest.mark.parametrize(("x", "y", "met"), [
    (NameFormat.identity(), NameFormat("p-{topic}", "p-", ""), True),
    (NameFormat("p-{topic}", "p-", ""), NameFormat("q-{topic}", "q-", ""), False),
    (NameFormat("p-{topic}", "p-", ""), NameFormat("p-x-{topic}", "p-x-", ""), True),
    (NameFormat("{topic}-p", "", "-p"), NameFormat("{topic}-q", "", "-q"), False),
    (NameFormat("a-{topic}-p", "a-", "-p"), NameFormat("b-{topic}-p", "b-", "-p"), False),
    (NameFormat("a-{topic}", "a-", ""), NameFormat("{topic}-p", "", "-p"), True),  # a-x-p is in both
])
def test_two_formats_meet_exactly_when_some_name_is_in_both(x, y, met):
    assert meet(x, y) is met and meet(y, x) is met


@pytest.mark.parametrize("namespace", ["a.b", "-a", "a b", "x" * 41])
def test_a_namespace_that_cannot_start_airflow_and_kafka_names_is_refused_naming_the_key(namespace):
    with pytest.raises(TopologyError, match="namespace"):
        Topology.parse(_tree(namespace))


def test_a_tree_that_keeps_logical_names_on_a_shared_cluster_may_when_it_selects_plain_names_the_other_lacks():
    from mirrorflow.topology import check_trees

    prod = {**_tree(group_prefix="p-"), "topics": ["orders", "payments"]}  # stored as they are on the shared one
    acc = {**_tree("acc", own="10.0.0.2:9092", topic_prefix="acc-", group_prefix="a-"), "topics": ["orders.*"]}
    check_trees({"prod.yaml": Topology.parse(prod), "acc.yaml": Topology.parse(acc)})
    clash = {**prod, "topics": ["orders", "acc-orders"]}  # acc's orders is stored as acc-orders there
    with pytest.raises(TopologyError, match="their topic names can meet"):
        check_trees({"prod.yaml": Topology.parse(clash), "acc.yaml": Topology.parse(acc)})
