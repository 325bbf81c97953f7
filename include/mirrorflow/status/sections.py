"""The page's other sections, each from what its DAG stored: levels, groups, schemas, audit, running tasks.

Each function takes the topology and :class:`~mirrorflow.status.inputs.StatusInputs`
and returns JSON-able data; nothing here measures anything again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mirrorflow.lag.rows import WHOLE
from mirrorflow.status import forms
from mirrorflow.status.inputs import DagInfo, RunInfo, StatusInputs
from mirrorflow.topology import Topology

#: Latest runs shown per level.
RUNS_SHOWN = 5


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def run_row(run: RunInfo) -> dict[str, Any]:
    result = run.result or {}
    return {"run_id": run.run_id, "state": run.state, "started": iso(run.started), "ended": iso(run.ended),
            "duration_s": run.duration_s, "copied": result.get("copied"), "bytes": result.get("bytes"),
            "errors": len(result.get("errors") or []), "log_url": run.log_url}


def levels(topology: Topology, inputs: StatusInputs) -> list[dict[str, Any]]:
    """Per level: its DAG, paused or not, the next scheduled run, its windows, and its latest runs."""
    out = []
    for level in topology.levels:
        base = f"mirror_level_{level}"
        dag_id = inputs.dag_id(base)
        dag = inputs.dags.get(base) or DagInfo(dag_id)
        windows = {link.link_id: list(topology.link_settings(link.link_id).windows or [])
                   for link in topology.links(level)}
        out.append({
            "level": level, "dag_id": dag_id, "dag_url": forms.dag_url(inputs.base_url, dag_id),
            "links": len(topology.links(level)), "paused": dag.paused, "next_run": iso(dag.next_run),
            "schedule": topology.replication.schedule_text(level),
            "windows": {k: v for k, v in windows.items() if v},
            "runs": [run_row(r) for r in dag.runs[:RUNS_SHOWN]],
        })
    return out


def groups(topology: Topology, inputs: StatusInputs) -> list[dict[str, Any]]:
    """Per consumer group: its owner, where it has members, its lag per cluster, and a failover's preview."""
    lag = inputs.lag or {}
    by_group: dict[str, dict[str, Any]] = {}
    for s in (lag.get("per_group") or {}).values():
        g = by_group.setdefault(s["group"], {"group": s["group"], "clusters": {}})
        g["clusters"][s["cluster"]] = {"state": s.get("state"), "members": s.get("members"),
                                       "records": s.get("records"), "seconds": s.get("max_seconds"),
                                       "errors": s.get("errors") or []}
    for group in inputs.owners:
        by_group.setdefault(group, {"group": group, "clusters": {}})
    previews = lag.get("failover") or {}
    out = []
    for name in sorted(by_group):
        g = by_group[name]
        g["owner"] = owner = inputs.owners.get(name)
        g["active_on"] = sorted(c for c, v in g["clusters"].items() if v.get("members"))
        preview = (previews.get(name) or {}).get("targets") or {}
        g["failover"] = {}
        for cluster in sorted(topology.clusters):
            if cluster == owner:
                continue
            p = dict(preview.get(cluster) or {"replay": None, "skip": None,
                                              "why": "not measured yet (mirror_lag_monitor)"})
            if owner:
                p["form"] = forms.failover_form(name, owner, cluster, inputs.tree)
            g["failover"][cluster] = p
        out.append(g)
    return out


def schemas(topology: Topology, inputs: StatusInputs) -> dict[str, Any]:
    """Schema sync per cluster from the latest ``mirror_schemas`` run: the primary, and each target's task."""
    primary = topology.schemas.primary
    last = (inputs.dags.get("mirror_schemas") or DagInfo("mirror_schemas")).last
    clusters = {}
    for name in sorted(topology.clusters):
        task = f"sync_{name}"
        state = "primary" if name == primary else (last.tasks.get(task) if last else None) or "not synced yet"
        clusters[name] = {"state": state, "log_url": last.task_logs.get(task) if last else None}
    return {"primary": primary, "last_run": run_row(last) if last else None, "clusters": clusters}


def audit(inputs: StatusInputs) -> dict[str, Any] | None:
    """The latest completeness audit per topic (``None`` before the first): complete, or what differs."""
    summary = inputs.audit
    if not summary:
        return None
    topics: dict[str, dict[str, Any]] = {}
    for row in (inputs.lag or {}).get("links", []):
        if row.get("topic") not in (None, WHOLE):
            topics.setdefault(row["topic"], {"missing": 0, "duplicated": 0, "differences": 0})
    for d in summary.get("differences") or []:
        t = topics.setdefault(d["topic"], {"missing": 0, "duplicated": 0, "differences": 0})
        t["differences"] += 1
        t["missing"] += int(d.get("missing_count", max(0, int(d.get("expected", 0)) - int(d.get("held", 0)))))
        t["duplicated"] += int(d.get("duplicated_count", max(0, int(d.get("held", 0)) - int(d.get("expected", 0)))))
    for t in topics.values():
        t["state"] = "complete" if not t["differences"] else "differs"
    return {"checked_at": summary.get("checked_at"), "judged": summary.get("judged"),
            "complete": summary.get("complete"), "pending": summary.get("pending"),
            "unreachable": summary.get("unreachable") or {}, "topics": dict(sorted(topics.items()))}


def running(inputs: StatusInputs) -> list[dict[str, Any]]:
    """Tasks of mirrorflow DAGs running now, longest-running first, with their latest progress."""
    rows = []
    for t in inputs.running:
        elapsed = (inputs.now - t.started).total_seconds() if t.started else None
        rows.append({"dag_id": t.dag_id, "run_id": t.run_id, "task_id": t.task_id, "started": iso(t.started),
                     "elapsed_s": elapsed, "log_url": t.log_url, "progress": t.progress})
    return sorted(rows, key=lambda r: -(r["elapsed_s"] or 0))
