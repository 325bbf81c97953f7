"""Mirroring through Airflow's REST API: the level DAGs, lowest first, round after round, then the lag once.

The DAGs also run on their schedule, one copy at a time, so a run the demo
triggers may queue behind a scheduled one; :class:`RunWatch` names it, and a
round counts what scheduled runs copied meanwhile.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from mirrorflow_dev.airflow_api import (
    AirflowApi,
    active_runs,
    ended_runs,
    return_value,
    run_state,
    trigger,
    unpause,
)
from mirrorflow_dev.demo.settings import LAG_DAG, MAX_ROUNDS, RUN_TIMEOUT, DemoSettings, say, wait_for


def level_dag_id(level: int) -> str:
    return f"mirror_level_{level}"


def run_summary(api: AirflowApi, dag_id: str, run_id: str) -> dict | None:
    """The ``copy`` task's return value (the batch summary), or None if it has none (skipped, or died early)."""
    return return_value(api, dag_id, run_id, "copy")


class RunWatch:
    """Polls one of our runs and prints each change of state, and a heartbeat while it lasts.

    The DAGs also run on their schedule, one copy at a time, so our run may first
    queue or wait behind a scheduled one; the watch names it.
    """

    def __init__(self, api: AirflowApi, dag_id: str, run_id: str) -> None:
        self.api, self.dag_id, self.run_id = api, dag_id, run_id
        self.started = self.last_print = time.monotonic()
        self.state: str | None = None

    def ended(self) -> str | None:
        state = run_state(self.api, self.dag_id, self.run_id)
        elapsed = time.monotonic() - self.started
        if state != self.state:
            ahead = [r["dag_run_id"] for r in active_runs(self.api, self.dag_id)
                     if r["dag_run_id"] != self.run_id and r["state"] == "running"] if state == "queued" else []
            say(f"  {self.dag_id} {self.run_id}: {state} after {elapsed:.0f}s"
                + (f" (behind {', '.join(ahead)})" if ahead else ""))
            self.state, self.last_print = state, time.monotonic()
        elif time.monotonic() - self.last_print >= 30:
            say(f"  {self.dag_id} {self.run_id}: still {state} after {elapsed:.0f}s")
            self.last_print = time.monotonic()
        return state if state in ("success", "failed") else None


def run_level(demo: DemoSettings, api: AirflowApi, dag_id: str) -> tuple[str, int]:
    """Trigger one level run and wait for it; exits naming every error if it fails. Returns (run id, copied)."""
    run_id = trigger(api, dag_id)
    watch = RunWatch(api, dag_id, run_id)
    state = wait_for(f"{dag_id} run {run_id} to end", watch.ended, timeout=RUN_TIMEOUT, interval=2)
    summary = run_summary(api, dag_id, run_id)
    if state != "success":
        logs = demo.airflow_home / "logs" / f"dag_id={dag_id}"
        errors = (summary or {}).get("errors") or [f"no summary: the run failed before copying; task logs are under "
                                                  f"{logs}"]
        raise SystemExit(f"mirrorflow demo: {dag_id} run {run_id} failed:\n  " + "\n  ".join(errors))
    copied = summary["copied"] if summary else 0
    say(f"  {dag_id} {run_id}: copied {copied}" + ("" if summary else " (no copy summary: skipped)"))
    return run_id, copied


def scheduled_activity(api: AirflowApi, dag_ids: list[str], since: datetime, accounted: set,
                       round_start: datetime) -> tuple[int, list[str]]:
    """What runs we did not trigger did: copies by those that ended since ``since``, and those still active.

    A scheduled run that copies between our runs makes new work for the other
    levels, so its copies count in the round, and a round with one still active
    that started before the round cannot be the quiet one: it may be copying what
    the round did not see. One that started during the round saw no more than the
    round's own runs (a short schedule always has one going).
    """
    copied, active = 0, []
    for dag_id in dag_ids:
        for run in ended_runs(api, dag_id, since):
            key = (dag_id, run["dag_run_id"])
            if key in accounted or run["state"] not in ("success", "failed"):
                continue
            accounted.add(key)
            summary = run_summary(api, dag_id, run["dag_run_id"]) or {}
            copied += summary.get("copied", 0)
            say(f"  {dag_id} {run['dag_run_id']} (not ours): {run['state']}, copied {summary.get('copied', 0)}"
                + "".join(f"\n    error: {e}" for e in summary.get("errors", [])))
        active += [f"{dag_id} {r['dag_run_id']}" for r in active_runs(api, dag_id)
                   if r.get("start_date") and datetime.fromisoformat(r["start_date"]) < round_start]
    return copied, active


def mirror_until_quiet(demo: DemoSettings, api: AirflowApi, levels: list[int]) -> None:
    """Every level, lowest first, round after round, until one whole round copies nothing.

    A message needs several rounds to reach every leaf (within its pair at level 1,
    across at level 3, then within the other pair), so only a round in which no
    run copied anything shows the tree has settled.
    """
    dag_ids = [level_dag_id(level) for level in sorted(levels)]
    for dag_id in dag_ids:
        unpause(api, dag_id)
    say(f"Unpaused {', '.join(dag_ids)}; mirroring round after round until a round copies nothing")
    since = datetime.now(UTC)
    accounted: set[tuple[str, str]] = set()
    for round_no in range(1, MAX_ROUNDS + 1):
        say(f"Round {round_no}")
        round_start = datetime.now(UTC)
        copied = 0
        for dag_id in dag_ids:
            run_id, run_copied = run_level(demo, api, dag_id)
            accounted.add((dag_id, run_id))
            copied += run_copied
        others, active = scheduled_activity(api, dag_ids, since, accounted, round_start)
        copied += others
        say(f"Round {round_no}: {copied} messages copied"
            + (f"; still active: {', '.join(active)}" if active else ""))
        if copied == 0 and not active:
            return
    raise SystemExit(f"mirrorflow demo: still copying after {MAX_ROUNDS} rounds")


def measure_lag(api: AirflowApi) -> None:
    """One ``mirror_lag_monitor`` run now, so the Mirror page shows every link's lag; then it runs every minute."""
    unpause(api, LAG_DAG)
    run_id = trigger(api, LAG_DAG)
    state = wait_for(f"{LAG_DAG} run {run_id} to end", RunWatch(api, LAG_DAG, run_id).ended, timeout=RUN_TIMEOUT,
                     interval=2)
    say(f"Lag measured ({LAG_DAG} {run_id}: {state}); it measures every minute from now on")
