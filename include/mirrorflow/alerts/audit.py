"""Incidents of ``mirror_audit``: a cluster not audited, and messages missing or duplicated on a cluster.

Read from the summary the ``count`` task returns (docs/audit.md, "Where the
results are"). A difference is one incident per cluster, topic and origin, however
many windows differ (the windows are its details): a person checks the links into
that cluster once, not once per window. A cluster that could not be audited is an
``unreachable`` incident; the differences on it, or of its messages, are not
taken for resolved until it is audited again. Clusters unaudited so long that proven
windows are dropped are one ``proofs`` incident, over at the next run that audits
every cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mirrorflow.alerts.incident import TASK_SCOPE, Findings, Incident

SOURCE = "mirror_audit"
#: Windows named in one incident's summary (the details have them all).
SHOWN_WINDOWS = 3


def _window(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _line(d: Mapping[str, Any]) -> str:
    line = f"window {_window(d['window_ms'])}: {d['held']} of {d['expected']} messages"
    if "missing_count" in d:
        line += (f"; missing {d['missing_count']} {d.get('missing', [])}, duplicated {d['duplicated_count']} "
                 f"{d.get('duplicated', [])}, unexpected {d.get('unexpected_count', 0)} {d.get('unexpected', [])} "
                 f"(origin partition, offset)")
    return line


def audit_incidents(summary: Mapping[str, Any], source: str = SOURCE) -> Findings:
    """Every incident of one audit summary; it looked at the clusters it counted."""
    unreachable: Mapping[str, str] = summary.get("unreachable") or {}
    incidents = [Incident(f"{source}:cluster:{name}", "unreachable", source, f"cluster {name}",
                          f"cluster {name} not audited: {why}", (str(why),), (name,))
                 for name, why in sorted(unreachable.items())]
    cells: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for d in summary.get("differences") or []:
        cells.setdefault((str(d["cluster"]), str(d["topic"]), str(d["origin"])), []).append(d)
    for (cluster, topic, origin), diffs in sorted(cells.items()):
        diffs = sorted(diffs, key=lambda d: d["window_ms"])
        subject = f"topic {topic} on {cluster}, messages of {origin}"
        shown = "; ".join(f"window {_window(d['window_ms'])}: {d['held']} of {d['expected']}"
                          for d in diffs[:SHOWN_WINDOWS])
        more = f" (and {len(diffs) - SHOWN_WINDOWS} more windows)" if len(diffs) > SHOWN_WINDOWS else ""
        summary_text = f"{cluster} does not hold {origin}'s messages of topic {topic} exactly once: {shown}{more}"
        incidents.append(Incident(f"{source}:difference:{cluster}:{topic}:{origin}", "audit", source, subject,
                                  summary_text, tuple(_line(d) for d in diffs), (cluster, origin)))
    if dropping := summary.get("proofs_dropping"):
        missing = " and ".join(dropping["unaudited"])
        incidents.append(Incident(
            f"{source}:proofs", "proofs", source, "proven windows",
            f"no window was proven since {_window(dropping['last_full_audit_ms'])} UTC (the last audit of every "
            f"cluster): {missing} not audited; windows that ended before "
            f"{_window(dropping['dropped_before_ms'])} UTC are no longer announced on any cluster",
            tuple(f"cluster {name} not audited" for name in dropping["unaudited"])))
    audited = frozenset(str(c) for c in (summary.get("read") or {})) - frozenset(unreachable)
    return Findings(source, tuple(incidents), audited | {TASK_SCOPE})
