"""mirrorflow_dev.airflow_api, the one REST client of the demo, platform mode and the tests, on a stand-in server.

The stand-in answers like Airflow's API server: ``POST /auth/token`` gives a
token, ``/api/v2/...`` wants it as a bearer token. The client logs in once,
logs in again when a token is refused, and turns refusals into ApiError.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mirrorflow_dev.airflow_api import AirflowApi, ApiError, listed_dags, return_value, run_path


class FakeAirflow(BaseHTTPRequestHandler):
    tokens: list[str] = []
    expired: set[str] = set()
    calls: list[tuple[str, str]] = []

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.calls.append((self.command, self.path))
        if self.path == "/auth/token":
            if body != {"username": "admin", "password": "right"}:
                return self._answer(401, {"detail": "Invalid credentials"})
            self.tokens.append(f"t{len(self.tokens)}")
            return self._answer(201, {"access_token": self.tokens[-1]})
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in self.tokens or token in self.expired:
            return self._answer(401, {"detail": "Not authenticated"})
        if self.path.startswith("/api/v2/dags?"):
            return self._answer(200, {"dags": [{"dag_id": "mirror_level_1"}, {"dag_id": "mirror_audit"}]})
        if self.path.endswith("/xcomEntries/return_value"):
            if "missing" in self.path:
                return self._answer(404, {"detail": "no XCom"})
            return self._answer(200, {"value": json.dumps({"copied": 3})})
        return self._answer(200, {"method": self.command, "path": self.path, "body": body})

    do_GET = do_POST = do_PATCH = _handle


@pytest.fixture
def airflow() -> Iterator[str]:
    FakeAirflow.tokens, FakeAirflow.expired, FakeAirflow.calls = [], set(), []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeAirflow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_logs_in_once_and_again_when_the_token_is_refused(airflow):
    api = AirflowApi(airflow, "admin", "right", attempts=1)
    assert api.call("PATCH", "/dags/d", {"is_paused": False})["body"] == {"is_paused": False}
    assert api.call("GET", "/dags/d")["path"] == "/api/v2/dags/d"
    assert FakeAirflow.tokens == ["t0"]
    FakeAirflow.expired.add("t0")
    assert api.call("GET", "/dags/d")["method"] == "GET"  # one attempt is enough: a new login is no retry
    assert FakeAirflow.tokens == ["t0", "t1"]


def test_refusals_are_api_errors_and_a_missing_entry_may_be_none(airflow):
    with pytest.raises(ApiError, match="HTTP 401"):
        AirflowApi(airflow, "admin", "wrong", attempts=1).call("GET", "/dags/d")
    api = AirflowApi(airflow, "admin", "right", attempts=1)
    assert return_value(api, "d", "missing", "copy") is None
    assert return_value(api, "d", "manual__2026-01-01T00:00:00+00:00", "copy") == {"copied": 3}
    assert ("GET", "/api/v2" + run_path("d", "manual__2026-01-01T00:00:00+00:00")
            + "/taskInstances/copy/xcomEntries/return_value") in FakeAirflow.calls
    assert listed_dags(api) == {"mirror_level_1", "mirror_audit"}


def test_no_answer_is_an_api_error_after_its_attempts():
    api = AirflowApi("http://127.0.0.1:9", "admin", "right", attempts=1)  # the discard port: nothing listens
    with pytest.raises(ApiError, match="no answer after 1 attempts"):
        api.call("GET", "/dags")
    assert listed_dags(api) == set()
