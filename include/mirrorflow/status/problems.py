"""Open problems: what a person must look at now, each with where the details are and what to do.

Built from what the DAGs stored: failed partitions (the level runs' totals and
latest results), clusters the lag monitor could not reach, SLA violations, audit
differences, and the latest run of any mirrorflow DAG that failed. A lag snapshot
that is too old is a problem too: a silent monitor must not look like a healthy one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from mirrorflow.status import forms
from mirrorflow.status.inputs import DagInfo, StatusInputs
from mirrorflow.topology import Topology
from mirrorflow.topology.replication import parse_schedule

#: A snapshot older than this many lag-monitor intervals (and at least STALE_MIN) is reported as stale.
STALE_INTERVALS = 5
STALE_MIN = timedelta(minutes=5)
LAG_DAG = "mirror_lag_monitor"


def _when(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC).isoformat()
    return str(value)


def _problem(kind: str, what: str, where: str, *, since: Any = None, log_url: str | None = None,
             actions: list[dict[str, Any]] | None = None, dag_id: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "what": what, "where": where, "since": _when(since), "log_url": log_url,
            "actions": actions or [], "dag_id": dag_id}


def _level_log(inputs: StatusInputs, level: int) -> str | None:
    """The log of the latest level-``level`` run that failed (it names every failed partition)."""
    dag = inputs.dags.get(f"mirror_level_{level}") or DagInfo("")
    for run in dag.runs:
        if run.state == "failed":
            return run.task_logs.get("copy") or run.log_url
    return None


def failed_partitions(topology: Topology, inputs: StatusInputs, totals: list[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    seen = set()
    out = []
    levels = {link.link_id: link.level for link in topology.all_links()}
    for t in totals:
        if not t.get("error"):
            continue
        key = (t["link"], t["topic"], t["partition"])
        seen.add(key)
        out.append(_partition_problem(inputs, levels.get(t["link"]), t["link"], t["source"], t["target"], t["topic"],
                                      t["partition"], t["error"], t.get("error_since")))
    for level in topology.levels:
        last = (inputs.dags.get(f"mirror_level_{level}") or DagInfo("")).last
        if last is None or last.state != "failed":
            continue
        for e in (last.result or {}).get("error_details") or []:
            key = (e["link"], e["topic"], e["partition"])
            if key not in seen:
                seen.add(key)
                out.append(_partition_problem(inputs, level, e["link"], e["source"], e["target"], e["topic"],
                                              e["partition"], e["error"], last.started))
    return out


def declined_changes(topology: Topology, inputs: StatusInputs) -> list[dict[str, Any]]:
    """What the latest run of each level declined to change on its own (docs/safety.md), once per change."""
    out = []
    seen = set()
    for level in topology.levels:
        last = (inputs.dags.get(f"mirror_level_{level}") or DagInfo("")).last
        if last is None:
            continue
        for link in (last.result or {}).get("links") or []:
            for d in link.get("declined") or []:
                key = (d["area"], d["cluster"], d["subject"])
                if key not in seen:
                    seen.add(key)
                    out.append(_problem("declined", str(d["message"]), f"{d['area']} on {d['cluster']}: "
                                        f"{d['subject']}", since=last.started,
                                        log_url=last.task_logs.get("copy") or last.log_url,
                                        dag_id=inputs.dag_id(f"mirror_level_{level}")))
    return out


def _partition_problem(inputs: StatusInputs, level: int | None, link: str, source: str, target: str, topic: str,
                       partition: int | None, error: str, since: Any) -> dict[str, Any]:
    actions = []
    if partition is not None and ("gap" in error.lower() or "deleted" in error.lower() or "truncat" in error.lower()):
        actions.append(forms.resolve_gap_form(link, topic, partition, inputs.tree))
    return _problem("failed_partition", error, f"link {link} ({source} -> {target}) {topic}[{partition}]",
                    since=since, log_url=_level_log(inputs, level) if level is not None else None, actions=actions,
                    dag_id=inputs.dag_id(f"mirror_level_{level}") if level is not None else None)


def open_problems(topology: Topology, inputs: StatusInputs, totals: list[dict[str, Any]],
                  links: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every open problem, most urgent kinds first."""
    base = inputs.base_url
    lag = inputs.lag
    lag_dag = inputs.dags.get(LAG_DAG) or DagInfo(LAG_DAG)
    lag_log = None
    if lag_dag.last:
        lag_log = lag_dag.last.task_logs.get("check") or lag_dag.last.task_logs.get("measure") or lag_dag.last.log_url
    out = failed_partitions(topology, inputs, totals)
    out += declined_changes(topology, inputs)
    for cluster, reason in sorted(((lag or {}).get("unreachable") or {}).items()):
        actions = [forms.switch_form(l["source"], l["level"], l["alternatives"][0], inputs.tree)
                   for l in links if l["target"] == cluster and l["alternatives"]]
        actions += [forms.failover_form(g, cluster, next(c for c in sorted(topology.clusters) if c != cluster),
                                        inputs.tree)
                    for g, owner in sorted(inputs.owners.items()) if owner == cluster and len(topology.clusters) > 1]
        out.append(_problem("unreachable", str(reason), f"cluster {cluster}", since=(lag or {}).get("taken_at"),
                            log_url=lag_log, actions=actions))
    for text in (lag or {}).get("violations") or []:
        out.append(_problem("sla", str(text), str(text).split(":", 1)[0], since=(lag or {}).get("taken_at"),
                            log_url=lag_log))
    if lag is None:
        out.append(_problem("not_measured", "no lag snapshot yet: mirror_lag_monitor has not run (or is paused)",
                            LAG_DAG, log_url=forms.dag_url(base, inputs.dag_id(LAG_DAG))))
    else:
        taken = datetime.fromisoformat(lag["taken_at"])
        interval = parse_schedule(topology.lag.schedule)  # cron or manual: no interval to hold it to
        limit = max(STALE_MIN, STALE_INTERVALS * interval) if isinstance(interval, timedelta) else None
        if limit is not None and inputs.now - taken > limit:
            out.append(_problem("stale", f"the latest lag snapshot is {int((inputs.now - taken).total_seconds())}s "
                                f"old: mirror_lag_monitor has not measured since (paused, failing or queued)",
                                LAG_DAG, since=lag["taken_at"], log_url=forms.dag_url(base, inputs.dag_id(LAG_DAG))))
    for d in (inputs.audit or {}).get("differences") or []:
        out.append(_problem("audit", f"{d['held']} of {d['expected']} messages of origin {d['origin']}",
                            f"topic {d['topic']} on {d['cluster']}", since=(inputs.audit or {}).get("checked_at"),
                            log_url=_last_log(inputs, "mirror_audit")))
    covered = {p["dag_id"] for p in out if p["kind"] == "failed_partition"}  # their partitions say it better
    for dag_id, dag in sorted(inputs.dags.items()):
        last = dag.last
        if last and last.state == "failed" and dag.dag_id not in covered and dag_id != LAG_DAG:
            failed = sorted(t for t, s in last.tasks.items() if s in ("failed", "upstream_failed"))
            out.append(_problem("run_failed", f"the latest run {last.run_id} failed"
                                + (f" (task {', '.join(failed)})" if failed else ""), dag.dag_id, since=last.started,
                                log_url=next((last.task_logs[t] for t in failed if t in last.task_logs),
                                             last.log_url), dag_id=dag.dag_id))
    return out


def _last_log(inputs: StatusInputs, dag_id: str) -> str | None:
    last = (inputs.dags.get(dag_id) or DagInfo(dag_id)).last
    return last.log_url if last else None
