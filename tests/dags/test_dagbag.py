"""Every DAG file imports cleanly and every DAG meets the house rules."""

from __future__ import annotations

import pytest
from airflow.dag_processing.dagbag import DagBag

pytestmark = pytest.mark.airflow


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}, "\n".join(f"{f}: {e}" for f, e in dagbag.import_errors.items())


def test_level_dags_exist_for_every_level_of_the_topology(dagbag):
    # topologies/demo.yaml has levels 1 and 3 (the tree of docs/architecture.md, Contracts)
    assert {"mirror_level_1", "mirror_level_3"} <= set(dagbag.dag_ids)


#: The contract of docs/architecture.md ("Contracts"): DAG ids, and the form params of the manual DAGs.
CONTRACT_PARAMS = {
    "mirror_offsets": set(),
    "mirror_schemas": set(),
    "mirror_lag_monitor": set(),
    "mirror_archive": set(),
    "mirror_audit": set(),
    "mirror_failover_consumer_group": {"groups", "from_cluster", "to_cluster", "mode", "precision", "dry_run",
                                       "force"},
    "mirror_onboard_cluster": {"cluster", "bootstrap", "conn_id", "sibling_of", "level", "topics", "backfill",
                               "since", "schemas", "dry_run"},
    "mirror_switch_target": {"source_cluster", "level", "target"},
    "mirror_decommission_cluster": {"cluster", "force", "dry_run"},
    "mirror_resolve_gap": {"link", "topic", "partition", "action", "offset", "dry_run"},
    "mirror_carry_checkpoints": {"level_map", "dry_run"},
}


@pytest.mark.parametrize("dag_id", sorted(CONTRACT_PARAMS))
def test_the_contract_dag_ids_exist_with_their_form_params(dagbag, dag_id):
    """DAG ids and form params are a contract (docs/architecture.md, Contracts): users trigger them by name."""
    assert dag_id in dagbag.dag_ids
    missing = CONTRACT_PARAMS[dag_id] - set(dagbag.get_dag(dag_id).params)
    assert not missing, f"{dag_id} lacks the form params {sorted(missing)}"


@pytest.mark.parametrize("rule", ["owner", "tags", "retries"])
def test_every_dag_follows_house_rules(dagbag, rule):
    assert dagbag.dags, "no DAGs were found"
    offenders = []
    for dag_id, dag in dagbag.dags.items():
        if rule == "tags" and "mirrorflow" not in (dag.tags or []):
            offenders.append(dag_id)
        for t in dag.tasks:
            if rule == "owner" and t.owner in (None, "", "airflow"):
                offenders.append(f"{dag_id}.{t.task_id}")
            if rule == "retries" and not t.retries:
                offenders.append(f"{dag_id}.{t.task_id}")
    assert not offenders, f"{rule} missing on: {offenders}"


def test_broken_topology_is_an_import_error_naming_the_key(airflow_home, tmp_path, monkeypatch):
    bad = tmp_path / "topology.yaml"
    bad.write_text(
        "clusters:\n  c1: {bootstrap: '127.0.0.1:1'}\n  c2: {bootstrap: '127.0.0.1:2'}\n"
        "tree: {level: 1, children: [c1, c9]}\ntopics: [orders]\n"
    )
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(bad))
    import os

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    errors = "\n".join(bag.import_errors.values())
    assert "c9" in errors and "tree" in errors, errors


#: Tasks that write operator state shared between runs (state.py's Variables): one at a time.
STATE_WRITERS = {
    ("mirror_switch_target", "switch"), ("mirror_decommission_cluster", "switch"),
    ("mirror_decommission_cluster", "leave"), ("mirror_onboard_cluster", "preflight"),
    ("mirror_onboard_cluster", "join"), ("mirror_onboard_cluster", "summary"),
    ("mirror_failover_consumer_group", "switch"), ("mirror_offsets", "owners"), ("mirror_offsets", "commit"),
}


def test_the_tasks_that_write_shared_state_share_the_one_slot_operations_pool(dagbag):
    """Two of them on two workers would each read a Variable, change it, and write it back over the other."""
    import json

    from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL
    from tests.conftest import REPO

    pooled = {(dag_id, t.task_id) for dag_id, dag in dagbag.dags.items() for t in dag.tasks
              if t.pool == OPERATIONS_POOL}
    assert pooled == STATE_WRITERS
    # The pool they wait for is the one deploy/pools.json creates (the demo, platform mode, compose), with one slot.
    assert json.loads((REPO / "deploy" / "pools.json").read_text())[OPERATIONS_POOL]["slots"] == 1


#: The tasks that emit arrival assets: each is followed by ``announce``, which emits the assets new to Airflow.
ARRIVAL_EMITTERS = {("mirror_level_1", "copy"), ("mirror_level_2", "copy"), ("mirror_level_3", "copy"),
                    ("mirror_onboard_cluster", "backfill"), ("mirror_resolve_gap", "resolve")}


def test_every_task_that_emits_arrivals_hands_new_assets_to_one_slot_announce_tasks(dagbag):
    """Two tasks creating the same new asset at once: Airflow 3.3's API server fails one (docs/assets.md)."""
    import json

    from mirrorflow_airflow.assets import ANNOUNCE_POOL, ANNOUNCE_TASK, ARRIVALS
    from tests.conftest import REPO

    emitters = {(dag_id, t.task_id) for dag_id, dag in dagbag.dags.items() for t in dag.tasks
                if ARRIVALS in t.outlets and t.task_id != ANNOUNCE_TASK}
    assert emitters == {e for e in ARRIVAL_EMITTERS if e[0] in dagbag.dags}
    for dag_id, task_id in emitters:
        announce = dagbag.dags[dag_id].get_task(ANNOUNCE_TASK)
        assert announce.upstream_task_ids == {task_id} and announce.pool == ANNOUNCE_POOL, (dag_id, announce)
        # a level's announce runs after a failed copy too (what advanced is announced; the run stays red)
        rule = "none_skipped" if dag_id.startswith("mirror_level_") else "all_success"
        assert ARRIVALS in announce.outlets and announce.trigger_rule == rule, (dag_id, announce.trigger_rule)
        assert announce.is_teardown == dag_id.startswith("mirror_level_")
    assert json.loads((REPO / "deploy" / "pools.json").read_text())[ANNOUNCE_POOL]["slots"] == 1


def test_a_second_tree_gets_dags_pools_and_assets_of_its_own_and_the_first_keeps_every_id(airflow_home, tmp_path,
                                                                                           monkeypatch):
    """Several trees in one Airflow (docs/naming.md): the tree with a namespace starts its names with it."""
    import os

    import yaml

    from mirrorflow_airflow.assets import ANNOUNCE_POOL
    from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL
    from tests.conftest import REPO

    first = os.environ["MIRROR_TOPOLOGY"]
    data = yaml.safe_load((REPO / "topologies" / "demo.yaml").read_text())
    data.update(name="acceptance", namespace="acc", schemas={})  # its own clusters: nothing shared
    for i, cluster in enumerate(data["clusters"].values()):
        cluster["bootstrap"] = f"127.0.0.1:{29092 + i}"
    second = tmp_path / "acc.yaml"
    second.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("MIRROR_TOPOLOGY", f"{first}:{second}")
    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert bag.import_errors == {}, bag.import_errors
    for dag_id, params in CONTRACT_PARAMS.items():  # both trees, each with the contract's forms
        assert dag_id in bag.dag_ids and params <= set(bag.get_dag(f"acc.{dag_id}").params), dag_id
    assert {"mirror_level_1", "mirror_level_3", "acc.mirror_level_1", "acc.mirror_level_3"} <= set(bag.dag_ids)
    assert len(bag.dag_ids) == 2 * len([d for d in bag.dag_ids if not d.startswith("acc.")])
    # the tasks that write a tree's operator state wait for that tree's pool; announcing assets stays shared
    pools = {(dag_id, t.task_id): t.pool for dag_id, dag in bag.dags.items() for t in dag.tasks}
    assert {k for k, v in pools.items() if v == f"acc.{OPERATIONS_POOL}"} == {(f"acc.{d}", t) for d, t in STATE_WRITERS}
    assert {k for k, v in pools.items() if v == OPERATIONS_POOL} == STATE_WRITERS
    assert pools[("acc.mirror_level_1", "announce")] == pools[("mirror_level_1", "announce")] == ANNOUNCE_POOL
    # every sensor of a tree checks that tree's topology
    waits = {(dag_id, t.task_id): t.tree for dag_id, dag in bag.dags.items() for t in dag.tasks if hasattr(t, "tree")}
    assert waits and all(tree == ("acc" if dag_id.startswith("acc.") else "") for (dag_id, _), tree in waits.items())
    # each tree's audit proves its own assets
    outlets = {dag_id: {a.name for t in bag.get_dag(dag_id).tasks for a in t.outlets if hasattr(a, "uri")}
               for dag_id in ("mirror_audit", "acc.mirror_audit")}
    assert outlets["acc.mirror_audit"] == {n.replace("mirrorflow.proven.", "mirrorflow.proven.acc.", 1)
                                          for n in outlets["mirror_audit"]} and outlets["mirror_audit"]
    # onboarding into the second tree a cluster the first has, where their names would meet: refused up front
    from mirrorflow.onboard.plan import OnboardRefused
    from mirrorflow.topology import load_trees_from_env
    from mirrorflow_airflow.steps.onboard import _apart_from_other_trees

    demo, acc = load_trees_from_env()
    shared = demo.cluster("c2").bootstrap
    grown = acc.with_cluster("c5", {"bootstrap": shared}, sibling_of="c4", level=1)
    with pytest.raises(OnboardRefused, match="(?s)c5 would share names with another tree.*their topic names can meet"):
        _apart_from_other_trees(acc, grown, "c5")
    apart = acc.with_cluster("c5", {"bootstrap": "127.0.0.1:29999"}, sibling_of="c4", level=1)
    _apart_from_other_trees(acc, apart, "c5")  # a cluster of its own
