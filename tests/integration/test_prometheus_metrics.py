"""mirrorflow's metrics as a real Prometheus sees them: scraped over HTTP with a bearer token, then queried.

A loopback HTTP server (``http.server`` in a thread) serves
:func:`mirrorflow.status.metrics.render` of a :class:`StatusInputs` the test
swaps between scrapes, behind a bearer token as the Airflow API server will be;
Debian's Prometheus scrapes it every second (``tests/fixtures/prometheus.py``)
and PromQL answers with what the test put in: the lag of a link, its drop to 0,
the copy counters with ``increase``, and the SLA comparison the alert rules make.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from mirrorflow.status.inputs import DagInfo, RunInfo, StatusInputs
from mirrorflow.status.metrics import CONTENT_TYPE, render
from mirrorflow.status.totals import fold
from mirrorflow.topology import Topology, parse_topology
from tests.fixtures.prometheus import ScrapeTarget, run_promtool, values

PATH = "/mirror/metrics"
TOPOLOGY = """
name: metrics
clusters:
  c1: {bootstrap: "127.0.0.1:19092"}
  c2: {bootstrap: "127.0.0.1:19093"}
tree: {level: 1, children: [c1, c2]}
topics: [orders]
lag:
  sla: {records: 100, seconds: 600}
  links: {c1.L1: {records: 10}}
"""


def lag_row(link: str, source: str, target: str, partition: int, records: int, seconds: float) -> dict[str, Any]:
    return {"link_id": link, "level": 1, "source": source, "target": target, "topic": "orders",
            "partition": partition, "records": records, "seconds": seconds, "checkpoint": 100, "start": 100,
            "end": 100 + records, "oldest_timestamp": None, "gap": 0, "truncated": False,
            "checkpoint_missing": False, "note": None, "error": None}


def copy_row(partition: int, copied: int) -> dict[str, Any]:
    return {"link_id": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": partition,
            "copied": copied, "skipped": 0, "bytes": copied * 100, "error": None, "error_offset": None}


def inputs(now: datetime, c1_lag: tuple[int, int], totals: dict[str, Any]) -> StatusInputs:
    lag = {"taken_at": (now - timedelta(seconds=20)).isoformat(), "topology": "metrics", "duration_s": 0.4,
           "links": [lag_row("c1.L1", "c1", "c2", 0, c1_lag[0], 30.0 if c1_lag[0] else 0.0),
                     lag_row("c1.L1", "c1", "c2", 1, c1_lag[1], 12.5 if c1_lag[1] else 0.0),
                     lag_row("c2.L1", "c2", "c1", 0, 0, 0.0)],
           "groups": [], "unreachable": {}, "violations": []}
    run = RunInfo("mirror_level_1", "scheduled__1", "success", now - timedelta(seconds=40), now - timedelta(seconds=5),
                  result={"level": 1, "copied": 3, "skipped": 0, "bytes": 300, "errors": [], "plan_s": 0.5,
                          "copy_s": 2.0})
    return StatusInputs(now=now, lag=lag, totals=totals, dags={"mirror_level_1": DagInfo("mirror_level_1", False,
                                                                                           runs=(run,))})


class Served:
    """What the metrics endpoint serves now (swapped by the test), and the token it wants."""

    def __init__(self, topology: Topology, first: StatusInputs, token: str) -> None:
        self.topology, self.token = topology, token
        self._inputs = first
        self._lock = threading.Lock()
        self.scrapes = 0

    @property
    def current(self) -> StatusInputs:
        with self._lock:
            return self._inputs

    def set(self, new: StatusInputs) -> None:
        with self._lock:
            self._inputs = new

    def text(self) -> str:
        with self._lock:
            current = self._inputs
            self.scrapes += 1
        return render(self.topology, replace(current, now=datetime.now(UTC)))


@pytest.fixture
def endpoint() -> Iterator[tuple[Served, str]]:
    topology = parse_topology(TOPOLOGY, source="test")
    now = datetime.now(UTC)
    first = inputs(now, (50, 2), fold(None, [copy_row(0, 100), copy_row(1, 10)], finished_at=now.timestamp() - 60,
                                      run_id="r1"))
    served = Served(topology, first, secrets.token_urlsafe(24))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path != PATH:
                self.send_error(404)
                return
            if self.headers.get("Authorization") != f"Bearer {served.token}":
                self.send_error(401)
                return
            body = served.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield served, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_prometheus_scrapes_the_metrics_with_a_token_and_sees_them_change(endpoint, prometheus):
    served, address = endpoint
    with pytest.raises(HTTPError) as refused:  # the endpoint really wants the token Prometheus is given
        urlopen(Request(f"http://{address}{PATH}"), timeout=5)
    assert refused.value.code == 401

    prom = prometheus([ScrapeTarget(address, PATH, bearer_token=served.token, token_in_file=True)],
                      scrape_interval="1s")
    lag = 'mirrorflow_link_lag_records{link="c1.L1"}'
    result = prom.wait_for(lag, lambda r: len(r) == 2)
    assert values(result, "partition") == {"0": 50.0, "1": 2.0}
    assert {r["metric"]["target"] for r in result} == {"c2"} and {r["metric"]["job"] for r in result} == {"mirrorflow"}
    # the comparison the alert rules make: only partition 0 is over the link's bound of 10 records
    over = prom.query("mirrorflow_link_lag_records > on(link) group_left() mirrorflow_link_sla_records")
    assert [(r["metric"]["link"], r["metric"]["partition"]) for r in over] == [("c1.L1", "0")]
    assert values(prom.query('mirrorflow_link_copied_records_total{link="c1.L1",partition="0"}')) == 100.0

    # the token is rotated (Prometheus reads credentials_file on every scrape, docs/metrics.md), the link catches
    # up and a level run copies 50 more on partition 0: what follows was scraped with the new token
    served.token = secrets.token_urlsafe(24)
    prom.token_file().write_text(served.token)
    now = datetime.now(UTC)
    served.set(inputs(now, (0, 0), fold(served.current.totals, [copy_row(0, 50), copy_row(1, 0)],
                                        finished_at=now.timestamp(), run_id="r2")))
    result = prom.wait_for(lag, lambda r: values(r, "partition") == {"0": 0.0, "1": 0.0})
    assert prom.query("mirrorflow_link_lag_records > on(link) group_left() mirrorflow_link_sla_records") == []
    prom.wait_for('mirrorflow_link_copied_records_total{link="c1.L1",partition="0"}',
                  lambda r: values(r) == 150.0)
    increase = prom.wait_for('increase(mirrorflow_link_copied_records_total{link="c1.L1",partition="0"}[1m])',
                             lambda r: bool(r) and float(r[0]["value"][1]) > 0)
    assert float(increase[0]["value"][1]) > 0
    assert values(prom.query('sum(mirrorflow_link_copied_bytes_total{link="c1.L1"})')) == 16000.0
    assert values(prom.query('mirrorflow_level_run_copied_records{level="1"}')) == 3.0
    assert served.scrapes >= 2


def test_promtool_finds_no_problem_in_the_rendered_metrics(endpoint):
    served, _ = endpoint
    text = served.text()
    assert "mirrorflow_link_lag_records{" in text
    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
        checked.stdout + checked.stderr)
