"""The "Mirror" page's server: a FastAPI app mounted in Airflow's API server at ``/mirror``.

Every route sits behind Airflow's own authentication and authorization (the
session cookie of a logged-in UI user, or a bearer JWT from ``POST /auth/token``)
and needs read access to DAGs: an anonymous request gets 401, an invalid token
403. Airflow 3 leaves plugin apps unprotected unless they ask, hence the
dependency on every route rather than on the app. Routes (docs/status.md):

- ``/`` the page (a static document; it fetches the API below);
- ``/api/trees`` the trees this Airflow runs (one, or several: docs/naming.md);
- ``/api/status`` the whole status document; ``/api/links`` the links, filtered and paged;
- ``/metrics`` the same state in Prometheus' text format (docs/metrics.md).

With several trees every route but ``/api/trees`` takes ``?tree=<name>``.
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
from mirrorflow.formats import NewerFormat
from mirrorflow.status import build_status, links_page
from mirrorflow.status.inputs import StatusInputs
from mirrorflow.status.links import State
from mirrorflow.status.metrics import CONTENT_TYPE, render
from mirrorflow.topology import Topology, in_tree, load_trees_from_env
from mirrorflow_airflow.state import CHANGES_VARIABLE, FORMAT_VARIABLE, check_format_marker
from mirrorflow_airflow.topology import current_topology
from mirrorflow_airflow.ui.readers import json_variable, read_inputs, text_variable

#: Reading the page's data needs what reading the DAGs needs.
READ = [Depends(requires_access_dag("GET"))]

app = FastAPI(title="mirrorflow status", description="The Mirror page of mirrorflow (docs/status.md)",
              docs_url=None, redoc_url=None, openapi_url=None)


def _state(session: Any, tree: str) -> tuple[Topology, StatusInputs]:
    trees = _trees()
    if tree not in trees:
        known = ", ".join(repr(t) for t in sorted(trees))
        raise HTTPException(status_code=404,
                            detail=f"mirrorflow: no tree {tree!r} (trees: {known}): name one with ?tree=")
    try:
        topology = current_topology(changes=json_variable(session, in_tree(tree, CHANGES_VARIABLE)) or [], ns=tree)
    except (MirrorflowError, ValueError, OSError) as exc:  # a broken topology file names itself
        raise HTTPException(status_code=500, detail=f"mirrorflow: the topology cannot be loaded: {exc}") from None
    try:
        check_format_marker(text_variable(session, FORMAT_VARIABLE))
    except NewerFormat as exc:
        raise HTTPException(status_code=500, detail=f"mirrorflow: the state cannot be shown: {exc}") from None
    return topology, read_inputs(session, topology, datetime.now(UTC))


def _trees() -> dict[str, str]:
    """Namespace -> topology name of every tree (``{"": name}`` for the only one)."""
    try:
        return {t.namespace: t.name for t in load_trees_from_env()}
    except (MirrorflowError, ValueError, OSError) as exc:
        raise HTTPException(status_code=500, detail=f"mirrorflow: the topology cannot be loaded: {exc}") from None


@app.get("/", response_class=HTMLResponse, dependencies=READ)
def page() -> HTMLResponse:
    html = resources.files("mirrorflow_airflow.ui").joinpath("page.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


@app.get("/api/trees", dependencies=READ)
def trees() -> dict[str, Any]:
    return {"trees": [{"tree": ns, "name": name} for ns, name in sorted(_trees().items())]}


@app.get("/api/status", dependencies=READ)
def status(session: SessionDep, tree: str = "") -> dict[str, Any]:
    topology, inputs = _state(session, tree)
    return build_status(topology, inputs)


@app.get("/api/links", dependencies=READ)
def links(session: SessionDep, state: State | None = None,
          level: int | None = None, q: str = "", offset: Annotated[int, Query(ge=0)] = 0,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100, tree: str = "") -> dict[str, Any]:
    topology, inputs = _state(session, tree)
    return links_page(topology, inputs, state=state, level=level, query=q, offset=offset, limit=limit)


@app.get("/metrics", response_class=PlainTextResponse, dependencies=READ)
def metrics(session: SessionDep, tree: str = "") -> PlainTextResponse:
    topology, inputs = _state(session, tree)
    return PlainTextResponse(render(topology, inputs), media_type=CONTENT_TYPE)
