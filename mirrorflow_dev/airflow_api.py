"""Airflow's REST API (v2) as a user of the simple auth manager: the one client of the demo, platform mode and tests.

A session logs in with ``POST /auth/token`` and sends the JWT as a bearer token,
logging in again when a token is refused. A local API server shares a small
machine with Kafka, Spark and the scheduler, so a call that cannot connect or
times out is tried again a few times (``attempts``) before :class:`ApiError`.

The helpers below name the few calls the demo and the tests make on DAGs and
their runs.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

_pause = threading.Event()  # never set: .wait(t) is a back-off between retries, not synchronisation


class ApiError(Exception):
    """Airflow's REST API refused a call or could not be reached."""


def _http_json(method: str, url: str, body: Any = None, token: str | None = None, timeout: float = 30) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, method=method, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def healthy(base: str) -> bool:
    """Whether the API server at ``base`` (``http://host:port``) answers its health check."""
    try:
        with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=3) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


class AirflowApi:
    """One user's session with Airflow's REST API (v2) at ``base``: a JWT from /auth/token, renewed if refused."""

    def __init__(self, base: str, user: str, password: str, attempts: int = 5) -> None:
        self.base = base
        self.user = user
        self.password = password
        self.attempts = attempts
        self._token: str | None = None

    def call(self, method: str, path: str, body: Any = None, missing_ok: bool = False, root: str = "/api/v2") -> Any:
        """``method`` on ``root`` + ``path``; the decoded JSON answer, or None for a 404 if ``missing_ok``.

        ``root``: ``""`` for an app the API server mounts elsewhere (mirrorflow's Mirror page, ``/mirror``).
        """
        problem = ""
        attempt = 0
        while attempt < self.attempts:
            fresh = self._token is None
            try:
                if fresh:
                    self._token = _http_json("POST", f"{self.base}/auth/token",
                                             {"username": self.user, "password": self.password})["access_token"]
                return _http_json(method, f"{self.base}{root}{path}", body, self._token)
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:800]
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code == 401 and not fresh:  # the token expired: log in again
                    self._token = None
                    continue
                raise ApiError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                problem = str(exc)
                attempt += 1
                if self.attempts > 1:  # after the last one too: a stalled API server gets the whole back-off
                    _pause.wait(2.0 * attempt)
        raise ApiError(f"{method} {path}: no answer after {self.attempts} attempts: {problem}")


def run_path(dag_id: str, run_id: str) -> str:
    """The API path of one DAG run (run ids hold characters a path must quote)."""
    return f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"


def iso(moment: datetime) -> str:
    """``moment`` as a query parameter."""
    return urllib.parse.quote(moment.isoformat(), safe="")


def listed_dags(api: AirflowApi, pattern: str = "mirror_") -> set[str]:
    """DAG ids the API shows the user (empty if it does not answer): proves the login and the DAG parse at once."""
    try:
        answer = api.call("GET", f"/dags?dag_id_pattern={pattern}&limit=100")
        return {d["dag_id"] for d in answer["dags"]}
    except (ApiError, KeyError):
        return set()


def unpause(api: AirflowApi, dag_id: str) -> None:
    """New DAGs start paused; a paused DAG's triggered runs would wait forever."""
    api.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})


def trigger(api: AirflowApi, dag_id: str, note: str = "make demo") -> str:
    """A manual run now (Airflow 3: no logical date); returns its run id."""
    return api.call("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "note": note})["dag_run_id"]


def run_state(api: AirflowApi, dag_id: str, run_id: str) -> str:
    return api.call("GET", run_path(dag_id, run_id))["state"]


def return_value(api: AirflowApi, dag_id: str, run_id: str, task_id: str) -> Any:
    """What one task of a run returned (its ``return_value`` XCom, JSON decoded), or None if it has none."""
    entry = api.call("GET", f"{run_path(dag_id, run_id)}/taskInstances/{task_id}/xcomEntries/return_value",
                     missing_ok=True)
    if entry is None:
        return None
    value = entry["value"]
    return json.loads(value) if isinstance(value, str) else value


def active_runs(api: AirflowApi, dag_id: str) -> list[dict]:
    """The queued and running runs of ``dag_id``."""
    return api.call("GET", f"/dags/{dag_id}/dagRuns?state=queued&state=running&limit=100")["dag_runs"]


def ended_runs(api: AirflowApi, dag_id: str, since: datetime) -> list[dict]:
    """The runs of ``dag_id`` that ended since ``since`` (at most 100)."""
    return api.call("GET", f"/dags/{dag_id}/dagRuns?end_date_gte={iso(since)}&limit=100")["dag_runs"]


def recent_runs(api: AirflowApi, dag_id: str, limit: int = 20) -> list[dict]:
    """The last ``limit`` runs of ``dag_id``, latest start first."""
    return api.call("GET", f"/dags/{dag_id}/dagRuns?order_by=-start_date&limit={limit}")["dag_runs"]


def task_instances(api: AirflowApi, dag_id: str, run_id: str) -> list[dict]:
    return api.call("GET", f"{run_path(dag_id, run_id)}/taskInstances")["task_instances"]
