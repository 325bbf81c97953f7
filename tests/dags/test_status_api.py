"""The Mirror page's API and metrics inside Airflow's own API server app: refused without a login, served with one.

Airflow's real app (``airflow.api_fastapi.app.create_app``, the one ``airflow
api-server`` serves) with this repo's plugin, its real auth manager (the simple
one, as ``airflow standalone`` runs it) and the session's metadata database;
requests go through FastAPI's test client, in process. The state the page reads
is stored the way the DAGs store it. A big tree is read in headless Chromium
from the same app served by uvicorn on loopback (as ``airflow api-server`` serves
it). The page on real traffic is tested by the demo's end-to-end test
(tests/e2e/test_demo.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mirrorflow.lag import LinkPartitionLag
from mirrorflow.lag.snapshot import LagSnapshot
from mirrorflow_airflow.state import COPY_TOTALS_PREFIX, LAG_SNAPSHOT_VARIABLE

ROUTES = ("/mirror/", "/mirror/api/status", "/mirror/api/links", "/mirror/metrics")


@pytest.fixture(scope="module")
def api(airflow_home):
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "status-api-test-only")  # standalone generates one
        with TestClient(create_app()) as client:
            yield client


def token(role: str = "viewer") -> str:
    """A JWT as ``POST /auth/token`` issues it for a user of ``role``, signed by the running auth manager."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=f"{role}-user", role=role))


@pytest.fixture
def stored(airflow_home):
    """Set Variables as the DAGs would; delete them afterwards."""
    from airflow.models import Variable

    keys = []

    def store(key: str, value) -> None:
        keys.append(key)
        Variable.set(key, json.dumps(value))

    yield store
    for key in keys:
        Variable.delete(key)


@pytest.mark.parametrize("route", ROUTES)
def test_anonymous_and_forged_requests_are_refused(api, route):
    assert api.get(route).status_code == 401
    assert api.get(route, headers={"Authorization": "Bearer not-a-token"}).status_code == 403
    api.cookies.set("_token", "forged")
    try:
        assert api.get(route).status_code == 403
    finally:
        api.cookies.clear()


def test_a_logged_in_viewer_reads_the_page_its_api_and_the_metrics(api, stored, monkeypatch):
    now = datetime.now(UTC)
    rows = [LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 0, 150, 12.0),
            LinkPartitionLag("c2.L1", 1, "c2", "c1", "orders", 0, 0, 0.0)]
    snapshot = LagSnapshot(now, "demo", links=rows, sla={"sla": {"records": 100}})
    stored(LAG_SNAPSHOT_VARIABLE, snapshot.to_dict())
    stored(f"{COPY_TOTALS_PREFIX}1", {"partitions": {"c1.L1|orders|0": {
        "link": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": 0, "records": 40,
        "bytes": 4000, "last_success": now.timestamp(), "error": None, "error_since": None}}})
    topology = monkeypatch_topology(monkeypatch, "lag: {sla: {records: 100}}")
    headers = {"Authorization": f"Bearer {token('viewer')}"}

    page = api.get("/mirror/", headers=headers)
    assert page.status_code == 200 and "<title>Mirror" in page.text

    status = api.get("/mirror/api/status", headers=headers).json()
    assert status["topology"] == topology
    links = {r["id"]: r for r in status["links"]["items"]}
    assert links["c1.L1"]["state"] == "breach" and links["c1.L1"]["records"] == 150
    assert links["c1.L1"]["copied_records"] == 40
    assert links["c2.L1"]["state"] == "ok"
    assert status["links"]["counts"]["unknown"] == 6  # the links the snapshot did not measure

    page_of = api.get("/mirror/api/links", params={"state": "breach"}, headers=headers).json()
    assert [r["id"] for r in page_of["items"]] == ["c1.L1"]
    assert api.get("/mirror/api/links", params={"state": "purple"}, headers=headers).status_code == 422

    metrics = api.get("/mirror/metrics", headers=headers)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert ('mirrorflow_link_lag_records{link="c1.L1",source="c1",target="c2",topic="orders",partition="0"} 150'
            in metrics.text.splitlines())

    api.cookies.set("_token", token("viewer"))  # the UI's login, as the page's own requests carry it
    try:
        assert api.get("/mirror/api/status").status_code == 200
    finally:
        api.cookies.clear()


def test_a_broken_topology_file_is_named_not_a_blank_page(api, monkeypatch, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nclusters: {c1: {bootstrap: 'nowhere'}}\n")
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(broken))
    answer = api.get("/mirror/api/status", headers={"Authorization": f"Bearer {token()}"})
    assert answer.status_code == 500
    assert "the topology cannot be loaded" in answer.json()["detail"] and "broken.yaml" in answer.json()["detail"]


def test_variables_a_newer_mirrorflow_keeps_are_named_not_shown_as_this_ones(api, stored):
    from mirrorflow_airflow.state import FORMAT_VARIABLE

    stored(FORMAT_VARIABLE, 2)
    for route in ROUTES[1:]:
        answer = api.get(route, headers={"Authorization": f"Bearer {token()}"})
        assert answer.status_code == 500, route
        assert ("airflow-state at Airflow Variable mirrorflow_state_format is format 2; this mirrorflow reads "
                "airflow-state up to format 1") in answer.json()["detail"], route


def monkeypatch_topology(monkeypatch, extra: str) -> str:
    """The demo's tree with ``extra`` appended, as the API server's ``MIRROR_TOPOLOGY``; returns its name."""
    import os
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "topologies" / "demo.yaml").read_text().split("\nlag:")[0] + "\n" + extra + "\n"
    handle, path = tempfile.mkstemp(suffix=".yaml")
    os.close(handle)
    Path(path).write_text(text.replace("name: demo", "name: status-api"))
    monkeypatch.setenv("MIRROR_TOPOLOGY", path)
    return "status-api"


@pytest.fixture
def served(airflow_home):
    """Airflow's API server app, served by uvicorn on a free loopback port in this process; yields its base URL."""
    import threading

    import uvicorn
    from airflow.api_fastapi.app import create_app

    from mirrorflow_dev.process import free_port, wait_until

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "status-api-test-only")
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            wait_until("uvicorn to serve the API server app", lambda: server.started, 30, interval=0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(30)


def test_a_fifty_cluster_tree_stays_readable_in_the_browser(served, stored, monkeypatch, chromium, tmp_path):
    """50 clusters in one flat level: 2,450 links (the most 50 clusters can have), 4,900 link-partitions."""
    import yaml

    clusters = {f"k{i:02d}": {"bootstrap": f"127.0.0.1:{20000 + i}"} for i in range(50)}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({"name": "big", "clusters": clusters, "topics": ["orders"], "lag": {"sla": {
        "records": 100}}, "tree": {"level": 1, "children": sorted(clusters)}}))
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(path))
    from mirrorflow.topology import load_topology

    topology = load_topology(path)
    links = topology.all_links()
    assert len(links) == 2450
    rows = [LinkPartitionLag(link.link_id, 1, link.source, link.default_target, "orders", p,
                             500 if (i % 97 == 0 and p == 0) else (3 if i % 13 == 0 else 0), 1.0)
            for i, link in enumerate(links) for p in (0, 1)]
    snapshot = LagSnapshot(datetime.now(UTC), "big", links=rows, sla={"sla": {"records": 100}})
    stored(LAG_SNAPSHOT_VARIABLE, snapshot.to_dict())
    breaching = sum(1 for i in range(len(links)) if i % 97 == 0)
    lagging = sum(1 for i in range(len(links)) if i % 13 == 0 and i % 97 != 0)

    import urllib.request

    request = urllib.request.Request(f"{served}/mirror/api/status",
                                     headers={"Authorization": f"Bearer {token()}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    doc = json.loads(body)
    assert doc["links"]["counts"] == {"error": 0, "breach": breaching, "lagging": lagging, "waiting": 0,
                                      "ok": 2450 - breaching - lagging, "unknown": 0}
    assert len(doc["links"]["items"]) == 100 and doc["links"]["items"][0]["state"] == "breach"
    print(f"\n[big tree] status document {len(body) / 1e6:.2f} MB")

    context = chromium.new_context(viewport={"width": 1600, "height": 1200})
    try:
        context.add_cookies([{"name": "_token", "value": token(), "url": served}])
        page = context.new_page()
        page.goto(f"{served}/mirror/")
        page.wait_for_selector("body[data-loaded]", timeout=60_000)
        assert page.locator("#tree circle[data-cluster]").count() == 50
        drawn = page.locator("#tree path.edge")  # a big tree draws only what needs a look: here the breaches
        assert drawn.count() == breaching
        assert {drawn.nth(i).get_attribute("data-state") for i in range(drawn.count())} == {"breach"}
        assert page.locator("#tree-note").text_content() == (
            f"2450 links: only the {breaching} over their SLA or failing are drawn ({lagging} more are lagging); "
            f"the table lists every link")
        assert page.locator("#links tbody tr").count() == 50
        assert page.locator("#f-page").inner_text() == "1–50 of 2450"
        page.locator("#f-state").select_option("breach")
        page.wait_for_function(f"document.querySelector('#f-page').textContent === '1–{breaching} of {breaching}'")
        assert {r.get_attribute("data-state") for r in page.locator("#links tbody tr").all()} == {"breach"}
        page.screenshot(path=str(tmp_path / "big-tree.png"), full_page=False)
    finally:
        context.close()


def test_the_page_reads_its_variables_as_stored_without_offering_them_to_the_secrets_masker(stored, monkeypatch):
    """Loading a Variable row offers its whole value to Airflow's secrets masker (half the page's time at 10,000
    partitions, docs/benchmarks.md); the page reads the columns instead, encrypted or plain, to the same value."""
    import airflow.models.variable as variable_model
    from airflow.models import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import delete, insert, select

    from mirrorflow_airflow.ui.readers import json_variable

    offered: list[str] = []
    monkeypatch.setattr(variable_model, "mask_secret", lambda value, name=None: offered.append(name))
    value = {"partitions": {f"c1.L1|orders|{p}": {"copied": p} for p in range(50)}}
    stored(f"{COPY_TOTALS_PREFIX}1", value)  # as the DAGs store it: encrypted with the home's Fernet key
    with create_session() as session:
        session.execute(insert(Variable).values(key=LAG_SNAPSHOT_VARIABLE, _val=json.dumps({"ok": True}),
                                                is_encrypted=False))  # as stored before a Fernet key was set
    try:
        with create_session() as session:
            assert session.scalar(select(Variable.is_encrypted).where(Variable.key == f"{COPY_TOTALS_PREFIX}1"))
            assert json_variable(session, f"{COPY_TOTALS_PREFIX}1") == value
            assert json_variable(session, LAG_SNAPSHOT_VARIABLE) == {"ok": True}
            assert json_variable(session, "mirrorflow_no_such_variable") is None
    finally:
        with create_session() as session:
            session.execute(delete(Variable).where(Variable.key == LAG_SNAPSHOT_VARIABLE))
    assert offered == []
