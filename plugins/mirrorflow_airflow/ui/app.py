"""The "Mirror" page's server: a FastAPI app mounted in Airflow's API server at ``/mirror``.

Every route sits behind Airflow's own authentication and authorization (the
session cookie of a logged-in UI user, or a bearer JWT from ``POST /auth/token``)
and needs read access to DAGs: an anonymous request gets 401, an invalid token
403. Airflow 3 leaves plugin apps unprotected unless they ask, hence the
dependency on every route rather than on the app. Routes (docs/status.md):

- ``/`` the page (a static document; it fetches the API below);
- ``/api/status`` the whole status document; ``/api/links`` the links, filtered and paged;
- ``/metrics`` the same state in Prometheus' text format (docs/metrics.md).
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any

from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, PlainTextResponse

from mirrorflow.errors import MirrorflowError
from mirrorflow.status import build_status, links_page
from mirrorflow.status.inputs import StatusInputs
from mirrorflow.status.links import State
from mirrorflow.status.metrics import CONTENT_TYPE, render
from mirrorflow.topology import Topology
from mirrorflow_airflow.state import CHANGES_VARIABLE
from mirrorflow_airflow.topology import current_topology
from mirrorflow_airflow.ui.readers import json_variable, read_inputs

#: Reading the page's data needs what reading the DAGs needs.
READ = [Depends(requires_access_dag("GET"))]

app = FastAPI(title="mirrorflow status", description="The Mirror page of mirrorflow (docs/status.md)",
              docs_url=None, redoc_url=None, openapi_url=None)


def _state(session: Any) -> tuple[Topology, StatusInputs]:
    try:
        topology = current_topology(changes=json_variable(session, CHANGES_VARIABLE) or [])
    except (MirrorflowError, ValueError, OSError) as exc:  # a broken topology file names itself
        raise HTTPException(status_code=500, detail=f"mirrorflow: the topology cannot be loaded: {exc}") from None
    return topology, read_inputs(session, topology, datetime.now(UTC))


@app.get("/", response_class=HTMLResponse, dependencies=READ)
def page() -> HTMLResponse:
    html = resources.files("mirrorflow_airflow.ui").joinpath("page.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


@app.get("/api/status", dependencies=READ)
def status(session: SessionDep) -> dict[str, Any]:
    topology, inputs = _state(session)
    return build_status(topology, inputs)


@app.get("/api/links", dependencies=READ)
def links(session: SessionDep, state: State | None = None,
          level: int | None = None, q: str = "", offset: Annotated[int, Query(ge=0)] = 0,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    topology, inputs = _state(session)
    return links_page(topology, inputs, state=state, level=level, query=q, offset=offset, limit=limit)


@app.get("/metrics", response_class=PlainTextResponse, dependencies=READ)
def metrics(session: SessionDep) -> PlainTextResponse:
    topology, inputs = _state(session)
    return PlainTextResponse(render(topology, inputs), media_type=CONTENT_TYPE)
