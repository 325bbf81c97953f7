"""The Mirror page and its metrics on the running demo: what a person sees and what Prometheus scrapes.

Used by the demo's end-to-end test (tests/e2e/test_demo.py), after ``make demo``
converged: Airflow standalone with this repo's plugin, four clusters, the demo's
SLA (100 records). Everything goes through what a user has: the REST API with a
login, the UI in headless Chromium, and a Prometheus server scraping the
endpoint with a token.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from mirrorflow_dev.process import until_answered, wait_until
from tests.fixtures.browser import AirflowUI

LEVEL_DAGS = ("mirror_level_1", "mirror_level_3")
LAG_DAG = "mirror_lag_monitor"
RED = {"breach": "rgb(211, 47, 47)", "error": "rgb(142, 0, 0)"}
RUN_TIMEOUT = 600.0
IDEMPOTENT = ("GET", "PATCH", "PUT")
RETRY_500 = 60.0


class Rest:
    """Airflow's REST API as the demo user (a JWT from ``POST /auth/token``)."""

    def __init__(self, base: str, user: str, password: str) -> None:
        self.base = base
        request = urllib.request.Request(f"{base}/auth/token", method="POST",
                                         data=json.dumps({"username": user, "password": password}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            self.token = json.load(resp)["access_token"]

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One call; an idempotent one (GET, PATCH, PUT) is asked again while the API answers 500.

        The demo's Airflow runs on SQLite, whose "database is locked" comes back as HTTP 500
        now and then under CI load (a PATCH pausing a DAG failed that way in CI).
        """
        if method not in IDEMPOTENT:
            return self._call(method, path, body)
        return until_answered(f"{method} {path} to answer other than 500", lambda: self._call(method, path, body),
                              lambda exc: isinstance(exc, urllib.error.HTTPError) and exc.code == 500, RETRY_500)

    def _call(self, method: str, path: str, body: Any) -> Any:
        request = urllib.request.Request(f"{self.base}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            raw = resp.read()
            return json.loads(raw) if raw and resp.headers.get_content_type() == "application/json" else raw.decode()

    def variable(self, key: str) -> Any:
        value = self.call("GET", f"/api/v2/variables/{key}")["value"]
        return json.loads(value) if isinstance(value, str) else value

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def active(self, dag_id: str) -> list[str]:
        runs = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running&limit=50")["dag_runs"]
        return [r["dag_run_id"] for r in runs]

    def trigger(self, dag_id: str) -> str:
        """A new run of ``dag_id``; its id is chosen here, so asking again after a failed answer is safe.

        The demo's SQLite answers "database is locked" (HTTP 500) now and then under CI load; a second POST
        of the same run id creates the run, or says 409 when the first one had.
        """
        run_id = f"manual__test_{uuid.uuid4().hex[:12]}"
        for attempt in range(3):
            try:
                self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None})
                return run_id
            except urllib.error.HTTPError as exc:
                if exc.code == 409 and attempt:
                    return run_id
                if exc.code != 500 or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def state(self, dag_id: str, run_id: str) -> str:
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")["state"]

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"
                                f"/taskInstances/{task_id}")["state"]

    def wait(self, dag_id: str, run_id: str, timeout: float = RUN_TIMEOUT) -> str:
        """The run's final state, once it has one."""

        def ended() -> str | None:
            state = self.state(dag_id, run_id)
            return state if state in ("success", "failed") else None

        return wait_until(f"{dag_id} run {run_id} to end", ended, timeout)

    def run(self, dag_id: str, timeout: float = RUN_TIMEOUT) -> tuple[str, str]:
        """Trigger ``dag_id`` now and wait until the run ends; returns (run id, final state)."""
        run_id = self.trigger(dag_id)
        return run_id, self.wait(dag_id, run_id, timeout)


def refused_anonymously(base: str, path: str) -> int:
    """The HTTP status of an anonymous GET (the test wants 401)."""
    try:
        with urllib.request.urlopen(f"{base}{path}", timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def quiesce_levels(rest: Rest) -> None:
    """Pause the level DAGs and wait until none of their runs is active: nothing copies behind the test's back."""
    for dag_id in LEVEL_DAGS:
        rest.set_paused(dag_id, True)
    wait_until("the active level runs to end", lambda: not any(rest.active(d) for d in LEVEL_DAGS), RUN_TIMEOUT)


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    """``values`` into one partition of ``topic`` (the SLA bounds each link-partition)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "message.max.bytes": 1_000_000})
    failures: list[str] = []
    for value in values:
        producer.produce(topic, value, partition=partition,
                         on_delivery=lambda err, _m: failures.append(str(err)) if err else None)
    assert producer.flush(60) == 0 and not failures, failures


def create_small_topic(bootstraps: dict[str, str], logical: str, small_on: str, max_bytes: int,
                       prefixes: dict[str, str] | None = None) -> None:
    """``logical`` on every cluster (1 partition; under the cluster's prefix in ``prefixes``, if any); on
    ``small_on`` it refuses messages over ``max_bytes``."""
    for name, bootstrap in bootstraps.items():
        topic = (prefixes or {}).get(name, "") + logical
        admin = AdminClient({"bootstrap.servers": bootstrap})
        config = {"max.message.bytes": str(max_bytes)} if name == small_on else {}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=30)[topic].result(timeout=60)
        if name == small_on:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            # the broker asked may not know the just-created topic yet (UNKNOWN_TOPIC_OR_PART)
            described = until_answered(
                f"{topic}'s configs on {name}", lambda a=admin, r=resource: a.describe_configs([r])[r].result(timeout=30),
                lambda exc: isinstance(exc, KafkaException) and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART,
                60, interval=0.2)
            assert described["max.message.bytes"].value == str(max_bytes)


class MirrorPage:
    """The Mirror page inside the Airflow UI (``/plugin/mirror``: the app in the UI's frame)."""

    def __init__(self, ui: AirflowUI) -> None:
        self.ui = ui
        self.frame = ui.page.frame_locator("iframe")

    def open(self) -> None:
        self.ui.page.goto(f"{self.ui.base}/plugin/mirror")
        self.ui.expect(self.frame.locator("body[data-loaded]")).to_have_count(1)

    def edge_states(self) -> dict[str, str]:
        edges = self.frame.locator("path.edge")
        self.ui.expect(edges).to_have_count(8)
        return {e.get_attribute("data-link"): e.get_attribute("data-state") for e in edges.all()}

    def edge_colour(self, link: str) -> str:
        return self.frame.locator(f"path.edge[data-link='{link}']").evaluate("e => getComputedStyle(e).stroke")

    def link_records(self) -> dict[str, str]:
        rows = self.frame.locator("#links tbody tr")
        return {r.get_attribute("data-link"): r.locator("td[data-records]").get_attribute("data-records")
                for r in rows.all()}

    def names(self) -> dict[str, tuple[str, str]]:
        """The "Names per cluster" table: cluster -> (topic format, group format); empty while it is hidden."""
        if self.frame.locator("#names-box").is_hidden():
            return {}
        rows = self.frame.locator("#names tbody tr")
        return {r.get_attribute("data-cluster"): tuple(r.locator("td").nth(i).inner_text() for i in (1, 2))
                for r in rows.all()}

    def problems(self) -> list[tuple[str, str]]:
        boxes = self.frame.locator("#problems .problem")
        return [(b.get_attribute("data-kind"), b.inner_text()) for b in boxes.all()]

    def trigger_form(self, link: str, dag_id: str) -> str:
        """Open the pre-filled form of ``dag_id`` on ``link``'s row, trigger it as it is (a dry run); the run id."""
        self.frame.locator(f"#links tbody tr[data-link='{link}'] button[data-dag='{dag_id}']").click()
        dialog = self.frame.locator("dialog#form")
        self.ui.expect(dialog).to_be_visible()
        self.ui.expect(dialog.locator("#form-dry")).to_be_checked()
        dialog.locator("#form-go").click()
        result = dialog.locator("#form-result a")
        self.ui.expect(result).to_have_count(1)
        return result.inner_text()

    def screenshot(self, path: Path) -> Path:
        self.ui.page.screenshot(path=str(path), full_page=True)
        return path
