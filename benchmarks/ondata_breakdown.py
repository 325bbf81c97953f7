"""Where an ``on_data`` message's time goes: the watcher, the scheduler, the pools, the queue, the task, the copy.

``benchmarks.scheduler_latency`` measures a message from its produce until it is
readable on all four clusters. This module splits that time with what the metadata
database keeps, per level run started by data:

- ``scheduler``: the watcher's first event of the run (``asset_event``) until the
  scheduler created the run (``dag_run.queued_at``), then until it started it;
- ``to_scheduled``: the run's start until its ``copy`` task was scheduled;
- ``pools``: scheduled until queued to the executor. The copy task runs one at a
  time per level (``max_active_tis_per_dag=1``, docs/levels.md) and in a pool, so a
  run that waits for the previous one's copy waits here;
- ``queue``: queued until a worker started it (Celery, or the standalone scheduler's
  local executor);
- ``task_start``: the task's start until the level job began (the DAG parse, the
  Task SDK, the imports): what is left of the copy task before ``plan_s``;
- ``plan`` and ``copy``: the job's own ``plan_s`` and ``copy_s`` (its XCom);
- ``task_end``: the job's end until the task's end (its arrival events, the XCom, the
  Task SDK's exit).

And per hop of a message (a level-1 hop from where it was produced, the level-3 hop,
and the level-1 hop on the far pair), the ``watcher``'s part: from the record being
readable on the hop's source until the next event of that level's watcher. That is
the poll interval, the poll, and the floor between two runs.
"""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime
from typing import Any

#: Per level run started by data: its first and last event, the run's and the copy task's moments, the copy's XCom.
RUN_ROWS = """
    SELECT r.dag_id, r.run_id,
           (SELECT MIN(e.timestamp) FROM dagrun_asset_event de JOIN asset_event e ON e.id = de.event_id
            WHERE de.dag_run_id = r.id),
           r.queued_at, r.start_date, r.end_date,
           c.scheduled_dttm, c.queued_dttm, c.start_date, c.end_date, x.value
    FROM dag_run r
    JOIN task_instance c ON c.dag_id = r.dag_id AND c.run_id = r.run_id AND c.task_id = 'copy'
    LEFT JOIN xcom x ON x.dag_id = r.dag_id AND x.run_id = r.run_id AND x.task_id = 'copy'
                    AND x.key = 'return_value'
    WHERE r.dag_id LIKE 'mirror_level_%' AND r.state = 'success' AND r.run_type = 'asset_triggered'
"""

#: Every event of the level watchers' assets (``mirrorflow.pending.level_<L>``): when each level was asked for a run.
EVENT_ROWS = """
    SELECT a.name, e.timestamp FROM asset_event e JOIN asset a ON a.id = e.asset_id
    WHERE a.name LIKE 'mirrorflow.pending.level_%'
"""

#: The demo tree (topologies/demo.yaml): a message's level-1 partner, and its level-3 target.
PARTNER = {"c1": "c2", "c2": "c1", "c3": "c4", "c4": "c3"}
FAR = {"c1": "c3", "c2": "c4", "c3": "c1", "c4": "c2"}

SPANS = ("event_to_created", "created_to_started", "to_scheduled", "pools", "queue", "task_start", "plan", "copy",
         "task_end", "event_to_end")


def moment(value: Any) -> datetime | None:
    """A timestamp as PostgreSQL (aware) or SQLite (a naive UTC string) returns it."""
    if value is None:
        return None
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _seconds(begin: datetime | float | None, end: datetime | float | None) -> float | None:
    if begin is None or end is None:
        return None
    b = begin.timestamp() if isinstance(begin, datetime) else begin
    e = end.timestamp() if isinstance(end, datetime) else end
    return e - b


def spread(values: list[float]) -> dict[str, float | int | None]:
    """Median, p90 and max of ``values`` (seconds, rounded)."""
    if not values:
        return {"n": 0, "median": None, "p90": None, "max": None}
    ordered = sorted(values)
    p90 = statistics.quantiles(ordered, n=10)[8] if len(ordered) >= 2 else ordered[0]
    return {"n": len(ordered), "median": round(statistics.median(ordered), 2), "p90": round(p90, 2),
            "max": round(ordered[-1], 2)}


def _report(value: Any) -> dict[str, Any]:
    """The copy task's XCom as a dict, however the database hands the JSON back (text, once or twice encoded)."""
    while isinstance(value, (str, bytes)):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def run_spans(rows: list[tuple], since: float, until: float) -> dict[str, dict[str, dict[str, Any]]]:
    """Per level DAG, the spread of each span over its data-started runs whose first event fell in the window."""
    per_dag: dict[str, dict[str, list[float]]] = {}
    for dag_id, _run_id, event, created, started, _ended, scheduled, queued, t_start, t_end, xcom in rows:
        event, created, started = moment(event), moment(created), moment(started)
        scheduled, queued, t_start, t_end = moment(scheduled), moment(queued), moment(t_start), moment(t_end)
        if event is None or not since <= event.timestamp() <= until:
            continue
        report = _report(xcom)
        plan_s, copy_s, finished = report.get("plan_s"), report.get("copy_s"), report.get("finished_at")
        job_start = finished - copy_s - plan_s if None not in (plan_s, copy_s, finished) else None
        values = {"event_to_created": _seconds(event, created), "created_to_started": _seconds(created, started),
                  "to_scheduled": _seconds(started, scheduled), "pools": _seconds(scheduled, queued),
                  "queue": _seconds(queued, t_start), "task_start": _seconds(t_start, job_start),
                  "plan": plan_s, "copy": copy_s, "task_end": _seconds(finished, t_end),
                  "event_to_end": _seconds(event, t_end)}
        spans = per_dag.setdefault(dag_id, {name: [] for name in SPANS})
        for name, value in values.items():
            if value is not None:
                spans[name].append(value)
    return {dag_id: {name: spread(v) for name, v in spans.items()} for dag_id, spans in sorted(per_dag.items())}


def events_by_level(rows: list[tuple]) -> dict[int, list[float]]:
    """Each level's watcher events, as sorted epoch seconds."""
    out: dict[int, list[float]] = {}
    for name, at in rows:
        level = int(str(name).rsplit("_", 1)[1])
        stamp = moment(at)
        if stamp is not None:
            out.setdefault(level, []).append(stamp.timestamp())
    return {level: sorted(times) for level, times in out.items()}


def _next(times: list[float], after: float) -> float | None:
    import bisect

    i = bisect.bisect_left(times, after)
    return times[i] if i < len(times) else None


def watcher_waits(counted: dict[bytes, float], seen: dict[bytes, dict[str, float]],
                  events: dict[int, list[float]]) -> dict[str, dict[str, Any]]:
    """Per hop kind, how long a readable record waited for its level's next watcher event."""
    waits: dict[str, list[float]] = {"level 1, from the origin": [], "level 3": [], "level 1, on the far pair": []}
    for value, produced in counted.items():
        origin = value.decode().split("|", 1)[0]
        far = FAR.get(origin)
        hops = [("level 1, from the origin", 1, produced), ("level 3", 3, produced)]
        if far is not None and far in seen.get(value, {}):
            hops.append(("level 1, on the far pair", 1, seen[value][far]))
        for kind, level, readable in hops:
            nxt = _next(events.get(level, []), readable)
            if nxt is not None:
                waits[kind].append(nxt - readable)
    return {kind: spread(v) for kind, v in waits.items()}


def case_label(r: dict[str, Any]) -> str:
    """A case as the tables name it: its mode, its load, and where its far clusters are (if any)."""
    far = f" ({'+'.join(r['far'])} {r['rtt_ms']:g} ms away)" if r.get("rtt_ms") is not None else ""
    return f"{r['mode']}{' busy' if r.get('busy') else ''}{far}"


def breakdown_lines(results: list[dict[str, Any]]) -> list[str]:
    """The Markdown tables of every case's ``on_data`` breakdown."""
    lines: list[str] = []
    cases = [r for r in results if r.get("on_data_breakdown")]
    if not cases:
        return lines
    lines += ["", "Where an `on_data` message's time goes: per data-started level run, median (p90) seconds "
              "(benchmarks/ondata_breakdown.py):", "",
              "| case | DAG | runs | event to run created | to started | to scheduled | pools | queue | "
              "task start | plan | copy | task end | event to end |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in cases:
        for dag_id, spans in r["on_data_breakdown"]["runs"].items():
            cells = [f"{s['median']} ({s['p90']})" for s in (spans[name] for name in SPANS)]
            lines.append(f"| {case_label(r)} | {dag_id} | "
                         f"{spans['event_to_end']['n']} | " + " | ".join(cells) + " |")
    lines += ["", "The watcher's part of each hop: a readable record until its level's next event, median "
              "(p90, max) seconds:", "", "| case | hop | hops | median | p90 | max |", "|---|---|---|---|---|---|"]
    for r in cases:
        for kind, s in r["on_data_breakdown"]["watcher"].items():
            lines.append(f"| {case_label(r)} | {kind} | {s['n']} | {s['median']} | "
                         f"{s['p90']} | {s['max']} |")
    return lines
