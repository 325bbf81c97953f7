"""The status document (mirrorflow.status): link states against the SLA, problems with their links, paging.

Built from hand-made stored state in the formats the DAGs write (lag snapshot,
copy totals, run results), as the API server reads them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from mirrorflow.status import DagInfo, RunInfo, StatusInputs, build_status, forms, links_page
from mirrorflow.topology import Topology

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def four(**extra) -> Topology:
    return Topology.parse({
        "name": "t",
        "clusters": {f"c{i}": {"bootstrap": f"127.0.0.1:{19091 + i}"} for i in range(1, 5)},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["orders"], **extra})


def row(link: str, source: str, target: str, partition: int, records: int | None, seconds: float = 0.0, **more):
    level = 1 if ".L1" in link else 3
    return {"link_id": link, "level": level, "source": source, "target": target, "topic": "orders",
            "partition": partition, "records": records, "seconds": seconds, "gap": 0, "truncated": False,
            "checkpoint_missing": False, "error": None, **more}


def snapshot(rows, **more):
    return {"taken_at": (NOW - timedelta(seconds=30)).isoformat(), "links": rows, "groups": [], "unreachable": {},
            "violations": [], "per_group": {}, "ok": True, "sla": {}, "totals": {}, **more}


def by_id(doc):
    return {r["id"]: r for r in links_page(four(lag={"sla": {"records": 100}}), doc, limit=1000)["items"]}


def test_each_link_is_coloured_by_its_lag_against_its_sla():
    topology = four(lag={"sla": {"records": 100, "seconds": 600}, "links": {"c3.L1": {"records": 5}}})
    inputs = StatusInputs(now=NOW, lag=snapshot([
        row("c1.L1", "c1", "c2", 0, 150, 12.0), row("c1.L1", "c1", "c2", 1, 0),
        row("c2.L1", "c2", "c1", 0, 40, 3.0),
        row("c3.L1", "c3", "c4", 0, 6),
        row("c4.L1", "c4", "c3", 0, 0), row("c1.L3", "c1", "c3", 0, 0, gap=7),
    ]))
    rows = {r["id"]: r for r in links_page(topology, inputs, limit=1000)["items"]}
    assert rows["c1.L1"]["state"] == "breach" and rows["c1.L1"]["records"] == 150 and rows["c1.L1"]["seconds"] == 12
    assert rows["c1.L1"]["over"] == ["orders[0]: 150 records > 100"]
    assert rows["c2.L1"]["state"] == "lagging"
    assert rows["c3.L1"]["state"] == "breach"  # its own bound of 5 records
    assert rows["c4.L1"]["state"] == "ok"
    assert rows["c1.L3"]["state"] == "error" and rows["c1.L3"]["problems"] == ["orders[0]: retention gap of 7 offsets"]
    assert rows["c2.L3"]["state"] == "unknown" and rows["c2.L3"]["records"] is None
    ordered = [r["id"] for r in links_page(topology, inputs, limit=1000)["items"]]
    assert ordered[:3] == ["c1.L3", "c1.L1", "c3.L1"]  # worst first


def test_a_link_outside_its_window_is_waiting_not_over_its_sla_until_the_window_opens():
    # NOW is 12:00 UTC on a Thursday: c1.L1's window is closed, c2.L1's open; both are 150 records behind
    topology = four(lag={"sla": {"records": 100}}, replication={"links": {
        "c1.L1": {"windows": ["22:00-06:00 Europe/Amsterdam"]}, "c2.L1": {"windows": ["Mon-Fri 08:00-18:00"]},
        "c3.L1": {"windows": ["Sat 00:00-24:00"]}}})
    inputs = StatusInputs(now=NOW, lag=snapshot([row("c1.L1", "c1", "c2", 0, 150), row("c2.L1", "c2", "c1", 0, 150),
                                                 row("c3.L1", "c3", "c4", 0, 5, gap=3)]))
    rows = {r["id"]: r for r in links_page(topology, inputs, limit=1000)["items"]}
    assert rows["c1.L1"]["state"] == "waiting" and rows["c1.L1"]["over"] == []
    assert rows["c1.L1"]["waiting_until"] == "2026-11-26T21:00:00+00:00"  # 22:00 in Amsterdam
    assert rows["c1.L1"]["windows"] == ["22:00-06:00 Europe/Amsterdam"]
    assert rows["c2.L1"]["state"] == "breach" and rows["c2.L1"]["waiting_until"] is None
    assert rows["c3.L1"]["state"] == "error"  # a gap is a problem whatever the window
    assert rows["c3.L1"]["waiting_until"] == "2026-11-28T00:00:00+00:00"
    later = StatusInputs(now=NOW.replace(hour=22), lag=inputs.lag)  # 23:00 in Amsterdam: open, and behind
    assert {r["id"]: r for r in links_page(topology, later, limit=1000)["items"]}["c1.L1"]["state"] == "breach"


def test_a_partition_held_by_a_long_open_transaction_is_a_problem_of_its_link():
    inputs = StatusInputs(now=NOW, lag=snapshot([
        row("c1.L1", "c1", "c2", 0, 1001, 3600.0, end=0, high=1001, held=1001, open_transaction_s=3600.0),
        row("c2.L1", "c2", "c1", 0, 3, 0.2, end=7, high=10, held=3, open_transaction_s=0.2),  # a moment: normal
    ]))
    rows = by_id(inputs)
    assert rows["c1.L1"]["state"] == "error" and rows["c1.L1"]["problems"] == [
        "orders[0]: 1001 records wait behind a transaction open for 3600s on c1 at offset 0: no copy passes it "
        "until it ends"]
    assert rows["c2.L1"]["state"] == "lagging" and rows["c2.L1"]["problems"] == []


def test_a_switched_link_is_drawn_to_its_effective_target():
    topology = four()
    doc = build_status(topology, StatusInputs(now=NOW, targets={"c1.L3": "c4"}))
    edge = next(e for e in doc["links"]["all_edges"] if e["id"] == "c1.L3")
    assert (edge["source"], edge["target"]) == ("c1", "c4")
    item = next(r for r in doc["links"]["items"] if r["id"] == "c1.L3")
    assert item["switched"] and item["default_target"] == "c3" and item["alternatives"] == ["c3"]
    assert doc["tree"] == {"level": 3, "path": "tree", "children": [
        {"level": 1, "path": "tree.children[0]", "children": [{"cluster": "c1"}, {"cluster": "c2"}]},
        {"level": 1, "path": "tree.children[1]", "children": [{"cluster": "c3"}, {"cluster": "c4"}]}]}


def test_a_failed_partition_is_a_problem_naming_its_error_with_the_run_log_and_the_gap_form():
    failed = RunInfo("mirror_level_1", "manual__1", "failed", NOW - timedelta(minutes=2), NOW,
                     result={"errors": ["x"]}, tasks={"copy": "failed"},
                     task_logs={"copy": "/dags/mirror_level_1/runs/manual__1/tasks/copy"})
    totals = {"partitions": {"c1.L1|orders|2": {
        "link": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": 2, "records": 10,
        "bytes": 100, "last_success": None, "error": "offsets 0..4 were deleted on c1 before the link copied them",
        "error_since": (NOW - timedelta(minutes=9)).timestamp()}}}
    doc = build_status(four(), StatusInputs(now=NOW, lag=snapshot([]), totals=totals,
                                            dags={"mirror_level_1": DagInfo("mirror_level_1", runs=(failed,))}))
    [problem] = [p for p in doc["problems"] if p["kind"] == "failed_partition"]
    assert problem["where"] == "link c1.L1 (c1 -> c2) orders[2]"
    assert "deleted on c1" in problem["what"]
    assert problem["log_url"] == "/dags/mirror_level_1/runs/manual__1/tasks/copy"
    [action] = problem["actions"]
    assert action["dag_id"] == "mirror_resolve_gap"
    assert action["conf"] == {"link": "c1.L1", "topic": "orders", "partition": 2}
    assert not [p for p in doc["problems"] if p["kind"] == "run_failed"]  # the partition says it better
    link = next(r for r in doc["links"]["items"] if r["id"] == "c1.L1")
    assert link["state"] == "error"


def test_a_change_a_sync_declined_is_a_problem_once_with_its_run_log():
    from mirrorflow.declined import Declined

    declined = Declined("topic_configs", "c2", "orders retention.ms", "remove retention.ms", "c2's own value ...",
                        "topic_configs.allow_keeping_less: [retention.ms]").to_dict()
    run = RunInfo("mirror_level_1", "scheduled__1", "success", NOW - timedelta(minutes=1), NOW,
                  result={"links": [{"link": "c1.L1", "declined": [declined]}, {"link": "c3.L1", "declined": [declined]}]},
                  tasks={"copy": "success"}, task_logs={"copy": "/dags/mirror_level_1/runs/scheduled__1/tasks/copy"})
    doc = build_status(four(), StatusInputs(now=NOW, lag=snapshot([]),
                                            dags={"mirror_level_1": DagInfo("mirror_level_1", runs=(run,))}))
    [problem] = [p for p in doc["problems"] if p["kind"] == "declined"]
    assert problem["where"] == "topic_configs on c2: orders retention.ms"
    assert problem["what"].startswith("topic_configs declined on c2: remove retention.ms (orders retention.ms)")
    assert "allow_keeping_less" in problem["what"]
    assert problem["log_url"] == "/dags/mirror_level_1/runs/scheduled__1/tasks/copy"


def test_unreachable_clusters_stale_snapshots_and_failed_runs_are_problems():
    schemas_run = RunInfo("mirror_schemas", "scheduled__1", "failed", NOW, NOW,
                          tasks={"sync_c2": "failed", "sync_c3": "success"},
                          task_logs={"sync_c2": "/log/c2", "sync_c3": "/log/c3"}, log_url="/log/c2")
    inputs = StatusInputs(
        now=NOW, owners={"orders-app": "c2"},
        lag=snapshot([], unreachable={"c2": "no broker answered in 10s"},
                     taken_at=(NOW - timedelta(minutes=20)).isoformat()),
        dags={"mirror_schemas": DagInfo("mirror_schemas", runs=(schemas_run,))})
    doc = build_status(four(schemas={"primary": "c1"}), inputs)
    kinds = {p["kind"]: p for p in doc["problems"]}
    assert set(kinds) == {"unreachable", "stale", "run_failed"}
    actions = {(a["dag_id"], json.dumps(a["conf"], sort_keys=True)) for a in kinds["unreachable"]["actions"]}
    # c1.L1 has no other target (its sibling subtree is c2 alone); c4.L3 (to c2) may go to c1 instead
    assert actions == {
        ("mirror_switch_target", '{"level": 3, "source_cluster": "c4", "target": "c1"}'),
        ("mirror_failover_consumer_group", '{"from_cluster": "c2", "groups": ["orders-app"], "to_cluster": "c1"}')}
    assert "mirror_lag_monitor has not measured" in kinds["stale"]["what"]
    assert kinds["run_failed"]["log_url"] == "/log/c2" and "sync_c2" in kinds["run_failed"]["what"]
    assert doc["schemas"]["clusters"]["c1"]["state"] == "primary"
    assert doc["schemas"]["clusters"]["c2"] == {"state": "failed", "log_url": "/log/c2"}
    assert [c["reachable"] for c in doc["clusters"]] == [True, False, True, True]


def test_groups_show_owner_lag_and_the_failover_preview_with_its_form():
    lag = snapshot([], per_group={"c1/app": {"cluster": "c1", "group": "app", "state": "Stable", "members": 2,
                                             "records": 7, "max_seconds": 1.5, "errors": []}},
                   failover={"app": {"owner": "c1", "targets": {"c2": {"replay": 3, "skip": 0,
                                                                       "precision": "exact"}}}})
    doc = build_status(four(), StatusInputs(now=NOW, lag=lag, owners={"app": "c1"}))
    [group] = doc["groups"]
    assert group["owner"] == "c1" and group["active_on"] == ["c1"]
    assert group["clusters"]["c1"]["records"] == 7
    assert group["failover"]["c2"]["replay"] == 3 and group["failover"]["c2"]["skip"] == 0
    assert group["failover"]["c3"]["replay"] is None and "not measured" in group["failover"]["c3"]["why"]
    assert group["failover"]["c2"]["form"]["conf"] == {"groups": ["app"], "from_cluster": "c1", "to_cluster": "c2"}


def test_links_page_filters_and_pages_a_big_tree():
    clusters = {f"k{i:02d}": {"bootstrap": f"127.0.0.1:{20000 + i}"} for i in range(50)}
    topology = Topology.parse({"name": "big", "clusters": clusters, "topics": ["orders"],
                               "tree": {"level": 1, "children": sorted(clusters)}})
    rows = [row(link.link_id, link.source, link.default_target, 0, 1 if i % 7 == 0 else 0)
            for i, link in enumerate(topology.all_links())]
    inputs = StatusInputs(now=NOW, lag=snapshot(rows))
    first = links_page(topology, inputs, limit=100)
    assert first["total"] == len(topology.all_links()) >= 2000
    assert len(first["items"]) == 100 and first["items"][0]["state"] == "lagging"
    lagging = links_page(topology, inputs, state="lagging", offset=100, limit=100)
    assert lagging["total"] == sum(1 for r in rows if r["records"]) and len(lagging["items"]) == 100
    assert all(r["state"] == "lagging" for r in lagging["items"])
    assert links_page(topology, inputs, query="k07.L1.k3")["total"] == 10
    doc = build_status(topology, inputs)
    assert len(doc["links"]["items"]) == 100 and doc["links"]["counts"]["lagging"] == lagging["total"]


def test_forms_carry_the_dag_contracts_params_and_log_urls_quote_the_run_id():
    assert forms.switch_form("c1", 3, "c4") == {
        "dag_id": "mirror_switch_target", "title": "Switch the level-3 link of c1 to c4",
        "conf": {"source_cluster": "c1", "level": 3, "target": "c4"}, "url": "/dags/mirror_switch_target"}
    assert forms.task_log_url("", "d", "manual__2026-11-26T12:00:00+00:00", "copy") == \
        "/dags/d/runs/manual__2026-11-26T12%3A00%3A00%2B00%3A00/tasks/copy"


def test_a_renaming_cluster_says_how_it_names_topics_and_groups_and_the_others_say_nothing():
    data = four().to_dict()
    data["clusters"]["c2"]["names"] = {"topics": "{tenant}-{environment}-{topic}", "group_prefix": "acme.",
                                       "values": {"tenant": "acme", "environment": "prod"}}
    clusters = {c["name"]: c for c in build_status(Topology.parse(data), StatusInputs(now=NOW))["clusters"]}
    assert (clusters["c2"]["topic_names"], clusters["c2"]["group_names"]) == ("acme-prod-{topic}", "acme.{group}")
    assert (clusters["c1"]["topic_names"], clusters["c1"]["group_names"]) == (None, None)
