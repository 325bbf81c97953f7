"""The Prometheus metrics of mirrorflow: :func:`render` turns :class:`StatusInputs` into the text format.

Pure: what the DAGs stored (the lag snapshot, the audit summary, the level runs'
totals, the latest DAG runs) plus the topology's SLA bounds, as the Prometheus
text exposition format, version 0.0.4 (``# HELP``, ``# TYPE``, one line per
series; content type :data:`CONTENT_TYPE`). The Airflow glue serves it; nothing
here reads Airflow or Kafka, so a scrape costs no request to a cluster.

Every family is declared once in :data:`FAMILIES` (name, type, label names,
help); docs/metrics.md describes each. Conventions: base units (seconds, bytes),
``_total`` for counters only, ``_seconds`` / ``_bytes`` /
``_timestamp_seconds`` suffixes, ``_info`` for a series that is always 1 and
carries labels. Error texts are never label values (their number has no
bound); a failing partition gets a short ``reason`` from a fixed set
(:func:`failure_reason`). A family with no series is left out. The SLA bounds are
gauges of their own (``mirrorflow_link_sla_records{link}``...), so that alert
rules compare in PromQL: ``mirrorflow_link_lag_records > on(link) group_left()
mirrorflow_link_sla_records``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mirrorflow.lag.rows import WHOLE
from mirrorflow.status.inputs import DagInfo, RunInfo, StatusInputs
from mirrorflow.topology import Topology, split_by_window
from mirrorflow.topology.replication import parse_schedule

#: The HTTP ``Content-Type`` of :func:`render`'s text.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LINK_PARTITION = ("link", "source", "target", "topic", "partition")
GROUP_PARTITION = ("group", "cluster", "topic", "partition")
AUDIT_CELL = ("topic", "window", "origin", "cluster")

#: Level DAG ids: ``mirror_level_<L>``.
LEVEL_DAG = re.compile(r"^mirror_level_(\d+)$")
#: Intervals of the Airflow presets a lag schedule may name.
PRESET_SECONDS = {"@hourly": 3600, "@daily": 86400, "@midnight": 86400, "@weekly": 7 * 86400}


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "gauge" or "counter"
    labels: tuple[str, ...]
    help: str


FAMILIES: tuple[Family, ...] = (
    # ---- links: the topology and its bounds
    Family("mirrorflow_link_info", "gauge", ("link", "level", "source", "target", "default_target"),
           "Every link of the topology (always 1): its level, source, current target (after operator switches) "
           "and default target."),
    Family("mirrorflow_link_sla_records", "gauge", ("link",),
           "Lag bound of the link in records, for each of its partitions (topology lag.sla / lag.links); "
           "absent when the link has none."),
    Family("mirrorflow_link_sla_seconds", "gauge", ("link",),
           "Lag bound of the link in seconds (age of the oldest message not yet copied); absent when the link "
           "has none."),
    Family("mirrorflow_link_window_open", "gauge", ("link",),
           "1 while the link's replication window is open, 0 while it is closed (its pending records wait by "
           "design then: alert on lag only where this is 1); absent for a link without windows."),
    Family("mirrorflow_link_window_next_open_timestamp_seconds", "gauge", ("link",),
           "When (Unix time) a link outside its replication window may copy again; absent while it is open."),
    # ---- links: the latest lag snapshot
    Family("mirrorflow_link_lag_records", "gauge", LINK_PARTITION,
           "Offsets of the source partition the link has not copied yet (latest lag snapshot)."),
    Family("mirrorflow_link_lag_seconds", "gauge", LINK_PARTITION,
           "Age of the oldest message the link has not copied yet, 0 when caught up (latest lag snapshot; absent "
           "when the age could not be read)."),
    Family("mirrorflow_link_retention_gap_records", "gauge", LINK_PARTITION,
           "Offsets the source deleted before the link copied them (a retention gap): nothing can copy them any "
           "more, a person must decide (mirror_resolve_gap)."),
    Family("mirrorflow_link_open_transaction_seconds", "gauge", LINK_PARTITION,
           "Age of an open transaction on the source partition that holds the link back (no copy passes the last "
           "stable offset until it ends), 0 when none is open (latest lag snapshot)."),
    Family("mirrorflow_link_source_truncated", "gauge", LINK_PARTITION,
           "1 when the link's checkpoint is past the source partition's end (the source was truncated or "
           "recreated), else 0."),
    Family("mirrorflow_link_checkpoint_missing", "gauge", LINK_PARTITION,
           "1 when the link had a checkpoint here at an earlier measurement and has none now (expired, deleted, "
           "or the link's id changed), else 0."),
    Family("mirrorflow_link_lag_measured", "gauge", ("link", "source", "target"),
           "1 when every partition of the link was measured in the latest lag snapshot, 0 when some could not "
           "be (an unreachable cluster, an error: the snapshot names it)."),
    # ---- links: the level runs' running totals
    Family("mirrorflow_link_copied_records_total", "counter", LINK_PARTITION,
           "Messages the level runs copied for the link-partition, since the totals were started."),
    Family("mirrorflow_link_copied_bytes_total", "counter", LINK_PARTITION,
           "Bytes (key, value and headers) the level runs copied for the link-partition."),
    Family("mirrorflow_link_last_success_timestamp_seconds", "gauge", LINK_PARTITION,
           "End (Unix time) of the latest level run that copied the link-partition, or found nothing to copy, "
           "without an error."),
    Family("mirrorflow_link_partition_failed", "gauge", LINK_PARTITION + ("reason",),
           "1 while the link-partition's latest level run ended with an error (reason: a short class of it; the "
           "run's log has the text), else 0."),
    Family("mirrorflow_link_partition_failed_since_timestamp_seconds", "gauge", LINK_PARTITION + ("reason",),
           "End (Unix time) of the first level run of the link-partition's current failure."),
    # ---- consumer groups
    Family("mirrorflow_group_lag_records", "gauge", GROUP_PARTITION,
           "Offsets of the partition the consumer group has not consumed yet on the cluster (latest lag snapshot)."),
    Family("mirrorflow_group_lag_seconds", "gauge", GROUP_PARTITION,
           "Age of the first message the consumer group has not consumed yet, 0 when caught up (latest lag "
           "snapshot)."),
    Family("mirrorflow_group_members", "gauge", ("group", "cluster"),
           "Members of the consumer group on the cluster (latest lag snapshot)."),
    Family("mirrorflow_group_lag_measured", "gauge", ("cluster",),
           "1 when the consumer groups of the cluster were measured in the latest lag snapshot, else 0."),
    Family("mirrorflow_group_sla_records", "gauge", ("group",),
           "Lag bound of the consumer group in records (the first matching rule of topology lag.groups); absent "
           "when none applies."),
    Family("mirrorflow_group_sla_seconds", "gauge", ("group",),
           "Lag bound of the consumer group in seconds; absent when none applies."),
    Family("mirrorflow_group_owner_info", "gauge", ("group", "cluster"),
           "The cluster each consumer group runs on, as failovers recorded it (always 1)."),
    # ---- clusters
    Family("mirrorflow_cluster_reachable", "gauge", ("cluster",),
           "1 when the cluster answered the latest lag snapshot's metadata request, else 0."),
    # ---- the lag snapshot itself
    Family("mirrorflow_lag_snapshot_timestamp_seconds", "gauge", (),
           "When (Unix time) mirror_lag_monitor took the latest lag snapshot."),
    Family("mirrorflow_lag_snapshot_age_seconds", "gauge", (),
           "Age of the latest lag snapshot when this page was rendered: grows when the monitor stops."),
    Family("mirrorflow_lag_snapshot_duration_seconds", "gauge", (),
           "How long the latest lag measurement took."),
    Family("mirrorflow_lag_schedule_interval_seconds", "gauge", (),
           "How often mirror_lag_monitor runs (topology lag.schedule; absent for a cron schedule or manual)."),
    Family("mirrorflow_lag_violations", "gauge", (),
           "Violations in the latest lag snapshot (SLA bounds, gaps, truncated sources, vanished checkpoints, "
           "audit problems)."),
    # ---- the completeness audit
    Family("mirrorflow_audit_timestamp_seconds", "gauge", (),
           "When (Unix time) the latest completeness audit (mirror_audit) finished counting."),
    Family("mirrorflow_audit_age_seconds", "gauge", (),
           "Age of the latest completeness audit when this page was rendered."),
    Family("mirrorflow_audit_differences", "gauge", (),
           "Windows (topic, window, origin, cluster) that differ from their origin in the latest audit."),
    Family("mirrorflow_audit_missing_messages", "gauge", AUDIT_CELL,
           "Messages of the origin the cluster lacks in the window (from the drill-down; else the count "
           "difference)."),
    Family("mirrorflow_audit_duplicated_messages", "gauge", AUDIT_CELL,
           "Extra copies of the origin's messages the cluster holds in the window (from the drill-down; else the "
           "count difference)."),
    Family("mirrorflow_audit_unexpected_messages", "gauge", AUDIT_CELL,
           "Messages on the cluster, of the origin, that the origin no longer holds (drilled windows only)."),
    Family("mirrorflow_audit_expected_messages", "gauge", AUDIT_CELL,
           "Messages the origin holds in a differing window."),
    Family("mirrorflow_audit_held_messages", "gauge", AUDIT_CELL,
           "Messages of the origin the cluster holds in a differing window."),
    Family("mirrorflow_audit_cluster_audited", "gauge", ("cluster",),
           "1 when the latest audit counted the cluster, 0 when it could not reach it."),
    Family("mirrorflow_audit_unaudited_messages", "gauge", ("cluster",),
           "Messages deleted on the cluster before an audit read them, in the latest audit (they count as "
           "missing)."),
    # ---- DAG runs
    Family("mirrorflow_dag_run_duration_seconds", "gauge", ("dag_id", "state"),
           "Duration of the DAG's latest finished run, with its state."),
    Family("mirrorflow_dag_run_end_timestamp_seconds", "gauge", ("dag_id", "state"),
           "End (Unix time) of the DAG's latest finished run, with its state."),
    Family("mirrorflow_dag_paused", "gauge", ("dag_id",),
           "1 when the DAG is paused, else 0."),
    Family("mirrorflow_dag_next_run_timestamp_seconds", "gauge", ("dag_id",),
           "When (Unix time) the scheduler runs the DAG next."),
    Family("mirrorflow_dag_running_tasks", "gauge", ("dag_id",),
           "Tasks of the DAG running now."),
    # ---- level runs
    Family("mirrorflow_level_run_copied_records", "gauge", ("level",),
           "Messages the latest finished run of mirror_level_<level> copied."),
    Family("mirrorflow_level_run_skipped_records", "gauge", ("level",),
           "Messages the latest finished level run read and did not copy (already distributed at this level)."),
    Family("mirrorflow_level_run_copied_bytes", "gauge", ("level",),
           "Bytes the latest finished level run copied."),
    Family("mirrorflow_level_run_errors", "gauge", ("level",),
           "Errors (failed partitions, links or topics) of the latest finished level run."),
    Family("mirrorflow_level_run_plan_seconds", "gauge", ("level",),
           "How long the latest finished level run planned (target shapes, checkpoints, offsets)."),
    Family("mirrorflow_level_run_copy_seconds", "gauge", ("level",),
           "How long the latest finished level run copied."),
    Family("mirrorflow_level_run_end_timestamp_seconds", "gauge", ("level",),
           "End (Unix time) of the latest finished level run."),
)
BY_NAME = {f.name: f for f in FAMILIES}

#: Failure reasons, first match wins (case-insensitive substrings of the error); anything else is ``other``.
REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("retention_gap", ("retention gap",)),
    ("truncated_source", ("truncated source", "truncated or recreated")),
    ("checkpoint_lost", ("checkpoint was lost", "checkpoint is gone", "checkpoint on")),
    ("switched", ("switched to", "switch mark")),
    ("not_authorized", ("authorization_failed", "authorization failed", "not authorized", "authentication",
                        "sasl")),
    ("unreachable", ("unreachable", "_transport", "all_brokers_down", "timed out", "timed_out")),
    ("fenced", ("fenced",)),
    ("refused_message", ("refused", "too_large", "too large", "invalid_record", "corrupt")),
)
REASON_NAMES = tuple(name for name, _ in REASONS) + ("other",)


def failure_reason(error: str | None) -> str:
    """A short class of an error text, for the ``reason`` label (a fixed set: :data:`REASON_NAMES`)."""
    text = (error or "").lower()
    for name, needles in REASONS:
        if any(n in text for n in needles):
            return name
    return "other"


# --------------------------------------------------------------------------- the text format


def escape_label(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A ``# HELP`` text: backslash and line feed escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers without a point, NaN and infinities as Prometheus writes them."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _sort_key(labels: tuple[str, ...]) -> tuple[tuple[int, int, str], ...]:
    """Label values in natural order (partition 2 before 10)."""
    return tuple((0, int(v), "") if v.isdigit() else (1, 0, v) for v in labels)


@dataclass
class Exposition:
    """Series by family; a second series with the same labels is ignored (the first stays)."""

    series: dict[str, dict[tuple[str, ...], float]] = field(default_factory=dict)

    def add(self, name: str, value: float | None, **labels: Any) -> None:
        if value is None:
            return
        family = BY_NAME[name]
        if set(labels) != set(family.labels):
            raise ValueError(f"{name}: labels {sorted(labels)} are not the family's {sorted(family.labels)}")
        key = tuple("" if labels[n] is None else str(labels[n]) for n in family.labels)
        self.series.setdefault(name, {}).setdefault(key, value)

    def text(self) -> str:
        lines: list[str] = []
        for family in FAMILIES:
            series = self.series.get(family.name)
            if not series:
                continue
            lines.append(f"# HELP {family.name} {escape_help(family.help)}")
            lines.append(f"# TYPE {family.name} {family.kind}")
            for key in sorted(series, key=_sort_key):
                shown = ",".join(f'{n}="{escape_label(v)}"' for n, v in zip(family.labels, key, strict=True)
                                 if v != "")
                lines.append(f"{family.name}{{{shown}}} {format_value(series[key])}" if shown
                             else f"{family.name} {format_value(series[key])}")
        return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------- what goes in


def render(topology: Topology, inputs: StatusInputs) -> str:
    """The metrics of ``inputs`` (and the topology's bounds) in the Prometheus text format 0.0.4."""
    out = Exposition()
    now = _epoch(inputs.now) or 0.0
    _links(out, topology, inputs)
    if inputs.lag:
        _lag(out, topology, inputs.lag, now)
    _groups_config(out, topology, inputs)
    _totals(out, inputs.totals)
    if inputs.audit:
        _audit(out, topology, inputs.audit, now)
    _dags(out, inputs)
    return out.text()


def _links(out: Exposition, topology: Topology, inputs: StatusInputs) -> None:
    for link in topology.all_links():
        target = inputs.targets.get(link.link_id, link.default_target)
        out.add("mirrorflow_link_info", 1, link=link.link_id, level=link.level, source=link.source, target=target,
                default_target=link.default_target)
        bound = topology.lag.link_bound(link.link_id)
        out.add("mirrorflow_link_sla_records", bound.records, link=link.link_id)
        out.add("mirrorflow_link_sla_seconds", bound.seconds, link=link.link_id)
    closed = {c.link_id: c for c in split_by_window(topology, list(topology.all_links()), inputs.now)[1]}
    for link in topology.all_links():
        if topology.link_settings(link.link_id).windows:
            shut = closed.get(link.link_id)
            out.add("mirrorflow_link_window_open", 0 if shut else 1, link=link.link_id)
            out.add("mirrorflow_link_window_next_open_timestamp_seconds",
                    shut.next_open.timestamp() if shut else None, link=link.link_id)
    interval = _interval(topology.lag.schedule)
    out.add("mirrorflow_lag_schedule_interval_seconds", interval)


def _interval(schedule: str) -> float | None:
    try:
        parsed = parse_schedule(schedule)
    except ValueError:
        return None
    if isinstance(parsed, timedelta):
        return parsed.total_seconds()
    return PRESET_SECONDS.get(parsed) if isinstance(parsed, str) else None


def _lag(out: Exposition, topology: Topology, lag: Mapping[str, Any], now: float) -> None:
    taken = _epoch(lag.get("taken_at"))
    out.add("mirrorflow_lag_snapshot_timestamp_seconds", taken)
    out.add("mirrorflow_lag_snapshot_age_seconds", None if taken is None else max(0.0, now - taken))
    out.add("mirrorflow_lag_snapshot_duration_seconds", _number(lag.get("duration_s")))
    out.add("mirrorflow_lag_violations", len(lag.get("violations") or []))
    measured: dict[tuple[str, str, str], int] = {}
    for row in lag.get("links") or []:
        where = (row["link_id"], row.get("source"), row.get("target"))
        ok = row.get("records") is not None and not row.get("error")
        measured[where] = measured.get(where, 1) & int(ok)
        if row.get("topic") == WHOLE or row.get("partition") is None:
            continue
        labels = dict(link=row["link_id"], source=row.get("source"), target=row.get("target"), topic=row["topic"],
                      partition=row["partition"])
        if row.get("records") is not None:
            out.add("mirrorflow_link_lag_records", _number(row["records"]), **labels)
            out.add("mirrorflow_link_lag_seconds", _number(row.get("seconds")), **labels)
        out.add("mirrorflow_link_retention_gap_records", int(row.get("gap") or 0), **labels)
        if row.get("records") is not None:
            out.add("mirrorflow_link_open_transaction_seconds", _number(row.get("open_transaction_s") or 0), **labels)
        out.add("mirrorflow_link_source_truncated", int(bool(row.get("truncated"))), **labels)
        out.add("mirrorflow_link_checkpoint_missing", int(bool(row.get("checkpoint_missing"))), **labels)
    for (link, source, target), all_measured in measured.items():
        out.add("mirrorflow_link_lag_measured", all_measured, link=link, source=source, target=target)

    unreachable = lag.get("unreachable") or {}
    group_errors = {row["cluster"] for row in lag.get("groups") or [] if row.get("group") == WHOLE and row.get("error")}
    for cluster in sorted(set(topology.clusters) | set(unreachable)):
        out.add("mirrorflow_cluster_reachable", int(cluster not in unreachable), cluster=cluster)
        out.add("mirrorflow_group_lag_measured", int(cluster not in unreachable and cluster not in group_errors),
                cluster=cluster)
    for row in lag.get("groups") or []:
        if row.get("group") == WHOLE:
            continue
        out.add("mirrorflow_group_members", _number(row.get("members")), group=row["group"], cluster=row["cluster"])
        if row.get("topic") == WHOLE or row.get("partition") is None or row.get("records") is None:
            continue
        labels = dict(group=row["group"], cluster=row["cluster"], topic=row["topic"], partition=row["partition"])
        out.add("mirrorflow_group_lag_records", _number(row["records"]), **labels)
        out.add("mirrorflow_group_lag_seconds", _number(row.get("seconds")), **labels)


def _groups_config(out: Exposition, topology: Topology, inputs: StatusInputs) -> None:
    seen = {row["group"] for row in (inputs.lag or {}).get("groups") or [] if row.get("group") != WHOLE}
    for group in sorted(seen | set(inputs.owners)):
        bound = topology.lag.group_bound(group)
        if bound is not None:
            out.add("mirrorflow_group_sla_records", bound.records, group=group)
            out.add("mirrorflow_group_sla_seconds", bound.seconds, group=group)
    for group, cluster in sorted(inputs.owners.items()):
        out.add("mirrorflow_group_owner_info", 1, group=group, cluster=cluster)


def _totals(out: Exposition, totals: Mapping[str, Any]) -> None:
    for entry in (totals.get("partitions") or {}).values():
        labels = dict(link=entry["link"], source=entry.get("source"), target=entry.get("target"),
                      topic=entry["topic"], partition=entry.get("partition"))
        out.add("mirrorflow_link_copied_records_total", int(entry.get("records") or 0), **labels)
        out.add("mirrorflow_link_copied_bytes_total", int(entry.get("bytes") or 0), **labels)
        out.add("mirrorflow_link_last_success_timestamp_seconds", _number(entry.get("last_success")), **labels)
        error = entry.get("error")
        if error:
            reason = failure_reason(error)
            out.add("mirrorflow_link_partition_failed", 1, reason=reason, **labels)
            out.add("mirrorflow_link_partition_failed_since_timestamp_seconds", _number(entry.get("error_since")),
                    reason=reason, **labels)
        else:
            out.add("mirrorflow_link_partition_failed", 0, reason="", **labels)


def _audit(out: Exposition, topology: Topology, audit: Mapping[str, Any], now: float) -> None:
    checked = _epoch(audit.get("checked_at"))
    out.add("mirrorflow_audit_timestamp_seconds", checked)
    out.add("mirrorflow_audit_age_seconds", None if checked is None else max(0.0, now - checked))
    differences = audit.get("differences") or []
    out.add("mirrorflow_audit_differences", len(differences))
    for d in differences:
        window = datetime.fromtimestamp(int(d["window_ms"]) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        labels = dict(topic=d["topic"], window=window, origin=d["origin"], cluster=d["cluster"])
        expected, held = int(d.get("expected") or 0), int(d.get("held") or 0)
        drilled = "missing_count" in d
        out.add("mirrorflow_audit_missing_messages",
                int(d["missing_count"]) if drilled else max(0, expected - held), **labels)
        out.add("mirrorflow_audit_duplicated_messages",
                int(d.get("duplicated_count") or 0) if drilled else max(0, held - expected), **labels)
        out.add("mirrorflow_audit_unexpected_messages",
                int(d.get("unexpected_count") or 0) if drilled else None, **labels)
        out.add("mirrorflow_audit_expected_messages", expected, **labels)
        out.add("mirrorflow_audit_held_messages", held, **labels)
    unreachable = audit.get("unreachable") or {}
    for cluster in sorted(set(topology.clusters) | set(unreachable) | set(audit.get("read") or {})):
        out.add("mirrorflow_audit_cluster_audited", int(cluster not in unreachable), cluster=cluster)
    unaudited = audit.get("unaudited") or {}
    for cluster in sorted(set(audit.get("read") or {}) | set(unaudited)):
        out.add("mirrorflow_audit_unaudited_messages", int(unaudited.get(cluster) or 0), cluster=cluster)


def _dags(out: Exposition, inputs: StatusInputs) -> None:
    running: dict[str, int] = {}
    for task in inputs.running:
        running[task.dag_id] = running.get(task.dag_id, 0) + 1
    dags = {dag.dag_id: (base, dag) for base, dag in inputs.dags.items()}  # labelled with the real DAG id
    for dag_id in sorted(set(dags) | set(running)):
        out.add("mirrorflow_dag_running_tasks", running.get(dag_id, 0), dag_id=dag_id)
    for dag_id, (base, dag) in sorted(dags.items()):
        if dag.paused is not None:
            out.add("mirrorflow_dag_paused", int(dag.paused), dag_id=dag_id)
        out.add("mirrorflow_dag_next_run_timestamp_seconds", _epoch(dag.next_run), dag_id=dag_id)
        finished = _finished(dag.runs)
        if finished is not None:
            out.add("mirrorflow_dag_run_duration_seconds", finished.duration_s, dag_id=dag_id, state=finished.state)
            out.add("mirrorflow_dag_run_end_timestamp_seconds", _epoch(finished.ended), dag_id=dag_id,
                    state=finished.state)
        _level_run(out, base, dag)


def _finished(runs: Iterable[RunInfo], *, with_result: bool = False) -> RunInfo | None:
    for run in runs:
        if run.duration_s is not None and (not with_result or isinstance(run.result, dict)):
            return run
    return None


def _level_run(out: Exposition, base: str, dag: DagInfo) -> None:
    match = LEVEL_DAG.match(base)
    run = _finished(dag.runs, with_result=True) if match else None
    if match is None or run is None or run.result is None:
        return
    result, level = run.result, match.group(1)
    out.add("mirrorflow_level_run_copied_records", _number(result.get("copied")), level=level)
    out.add("mirrorflow_level_run_skipped_records", _number(result.get("skipped")), level=level)
    out.add("mirrorflow_level_run_copied_bytes", _number(result.get("bytes")), level=level)
    out.add("mirrorflow_level_run_errors", len(result.get("errors") or []), level=level)
    out.add("mirrorflow_level_run_plan_seconds", _number(result.get("plan_s")), level=level)
    out.add("mirrorflow_level_run_copy_seconds", _number(result.get("copy_s")), level=level)
    out.add("mirrorflow_level_run_end_timestamp_seconds", _number(result.get("finished_at")) or _epoch(run.ended),
            level=level)


# --------------------------------------------------------------------------- small conversions


def _epoch(value: datetime | str | None) -> float | None:
    """Unix time of a datetime or an ISO text (naive means UTC); ``None`` for nothing or nonsense."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    if isinstance(value, int | float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
