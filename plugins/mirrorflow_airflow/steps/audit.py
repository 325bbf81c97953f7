"""The steps of ``mirror_audit``: count what is new on every cluster and compare, then fail on a difference.

Counting and judging are apart, like the lag monitor's measure and check: the
counts are stored on the clusters (``_mirrorflow.audit``) and logged even when a
window differs, and the failure names every difference with its messages. The
latest summary is also kept in the Airflow Variable ``mirrorflow_audit_result``
(:func:`mirrorflow_airflow.state.set_audit_result`), where the lag monitor finds
it: an audit violation is an SLA violation there too.

A window is recorded in the cluster's ledger as proven before its event exists
(Airflow registers a task's outlet events only when the task succeeds), so a task
that dies in between leaves it proven and not announced. The next run asks
Airflow which of those windows have an event (:func:`registered_proven`): those
are marked announced, the others announced again (docs/assets.md, "Proven").
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.completeness.proven import ProvenWindow
from mirrorflow.completeness.run import difference_lines, run_audit, summary_problems
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow_airflow.assets import emit_proven, proven_asset
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import set_audit_result

log = logging.getLogger(__name__)

#: Differences per table in the task log and in the failure (the XCom has all that were drilled).
LOG_ROWS = 50


class AuditViolation(AirflowFailException, MirrorflowError):
    """A final window differs between clusters. Not retried: a retry would count the same messages."""


def audit_clusters(topology: Topology, run_id: str = "") -> dict[str, Any]:
    """What the ``count`` task does: count, store, compare, drill down; returns the result as a dict."""
    clients = {name: MirrorClusterHook(topology, name).client() for name in sorted(topology.clusters)}
    result = run_audit(clients, topology.selects, window_s=topology.audit.window_minutes * 60,
                       grace_s=topology.audit.grace_minutes * 60.0, run_id=run_id,
                       registered=functools.partial(registered_proven, ns=topology.namespace))
    summary = result.summary()
    log.info("counted since the last audit: %s", ", ".join(f"{c} {n}" for c, n in summary["read"].items()))
    log.info("windows judged %d, complete %d, waiting for their grace period %d, before a horizon %d",
             summary["judged"], summary["complete"], summary["pending"], summary["before_horizon"])
    for row in difference_lines(summary["differences"])[:LOG_ROWS]:
        log.warning("%s", row)
    summary["checked_at"] = datetime.now(UTC).isoformat()
    set_audit_result(topology.namespace, summary)
    return summary


def proven_task_id(topic: str) -> str:
    """The audit DAG's task group that announces ``topic``'s proven windows (one task per cluster in it)."""
    return "proven_" + re.sub(r"[^A-Za-z0-9_-]", "_", topic)


def announce_proven(summary: dict[str, Any], topic: str, cluster: str, context: Any, ns: str = ""
                    ) -> dict[str, list[str]]:
    """One event per window of ``topic`` to announce on ``cluster`` in this run (the count's summary); skipped
    when there is none.

    A window whose event Airflow already holds is left out: this task run again by hand, or after a try whose
    events registered although its end was not heard, announces nothing twice. When Airflow cannot be asked,
    only the windows first proven in this run are announced (no earlier try can have announced them unless
    the task is cleared by hand); the others wait for the next run.
    """
    windows = [w for w in summary.get("proven", []) if w["topic"] == topic and w["cluster"] == cluster]
    if windows:
        held = proven_events(cluster, topic, min(int(w["window_ms"]) for w in windows), ns)
        if held is None:
            windows = [w for w in windows if not w.get("again")]
        elif gone := [w for w in windows if w["window"] in held]:
            log.info("%s on %s: already announced, not again: %s", topic, cluster, ", ".join(w["window"] for w in gone))
            windows = [w for w in windows if w["window"] not in held]
    if not windows:
        raise AirflowSkipException(f"no window of {topic} to announce on {cluster} in this run")
    keys = emit_proven(context["outlet_events"], windows, str(context["run_id"]), ns)
    for uri, windows_of in sorted(keys.items()):
        log.info("%s: proven complete: %s", uri, ", ".join(sorted(windows_of)))
    return keys


def check_audit(summary: dict[str, Any]) -> dict[str, Any]:
    """Fail, naming every difference (and every cluster not audited), when there is one."""
    problems = summary_problems(summary)
    if problems:
        shown = problems[:LOG_ROWS] + ([f"... and {len(problems) - LOG_ROWS} more"] if len(problems) > LOG_ROWS
                                       else [])
        raise AuditViolation("completeness audit: " + str(len(problems)) + " problem(s)\n  " + "\n  ".join(shown))
    return summary


#: Events are looked for from this long before a window's start: the clocks of the worker and the API server differ.
EVENT_CLOCK_SLACK = timedelta(hours=1)


def proven_events(cluster: str, topic: str, since_ms: int, ns: str = "") -> set[str] | None:
    """The partition keys (windows) of the events Airflow holds of ``topic``'s proven asset on ``cluster``,
    registered after the window starting at ``since_ms`` began; ``None`` when it cannot say.

    Asked of the task's supervisor, as ``inlet_events`` are, without declaring the asset an inlet.
    """
    asset = proven_asset(cluster, topic, ns)
    after = datetime.fromtimestamp(since_ms / 1000, UTC) - EVENT_CLOCK_SLACK
    try:
        from airflow.sdk.execution_time.context import InletEventsAccessor

        events = InletEventsAccessor(asset_name=asset.name, asset_uri=asset.uri).after(after.isoformat())
        return {str(e.partition_key) for e in events if e.partition_key}
    except Exception as exc:  # an API server that does not answer, an older or newer Task SDK
        log.warning("the events of %s could not be asked of Airflow (%s: %s)", asset.uri, type(exc).__name__, exc)
        return None


def registered_proven(windows: Sequence[ProvenWindow], ns: str = "") -> set[ProvenWindow] | None:
    """Of ``windows``, those whose event Airflow holds; ``None`` when it cannot say for every one
    (the ``registered`` of :func:`mirrorflow.completeness.run.run_audit`)."""
    groups: dict[tuple[str, str], list[ProvenWindow]] = {}
    for w in windows:
        groups.setdefault((w.cluster, w.topic), []).append(w)
    found: set[ProvenWindow] = set()
    for (cluster, topic), mine in sorted(groups.items()):
        keys = proven_events(cluster, topic, min(w.window_ms for w in mine), ns)
        if keys is None:
            return None
        found |= {w for w in mine if w.key in keys}
    return found
