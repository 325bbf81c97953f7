"""Which proven windows Airflow already holds an event of: the second step of the audit's ledger.

The audit records a window as proven on its cluster before the event exists
(Airflow registers a task's outlet events only when the task succeeds), so a task
that dies in between leaves a window proven and not announced. The next run asks
Airflow which of those windows have an event: those are marked announced, the
others are announced again (docs/assets.md, "Proven"). Asking is also how an
``announce`` task run a second time leaves out what the first one announced.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from mirrorflow.completeness.proven import ProvenWindow
from mirrorflow_airflow.assets import proven_asset

log = logging.getLogger(__name__)

#: Events are looked for from this long before a window's start: the clocks of the worker and the API server differ.
EVENT_CLOCK_SLACK = timedelta(hours=1)


def proven_events(cluster: str, topic: str, since_ms: int) -> set[str] | None:
    """The partition keys (windows) of the events Airflow holds of ``topic``'s proven asset on ``cluster``,
    registered after the window starting at ``since_ms`` began; ``None`` when it cannot say.

    Asked of the task's supervisor, as ``inlet_events`` are, without declaring the asset an inlet.
    """
    asset = proven_asset(cluster, topic)
    after = datetime.fromtimestamp(since_ms / 1000, UTC) - EVENT_CLOCK_SLACK
    try:
        from airflow.sdk.execution_time.context import InletEventsAccessor

        events = InletEventsAccessor(asset_name=asset.name, asset_uri=asset.uri).after(after.isoformat())
        return {str(e.partition_key) for e in events if e.partition_key}
    except Exception as exc:  # an API server that does not answer, an older or newer Task SDK
        log.warning("the events of %s could not be asked of Airflow (%s: %s)", asset.uri, type(exc).__name__, exc)
        return None


def registered_proven(windows: Sequence[ProvenWindow]) -> set[ProvenWindow] | None:
    """Of ``windows``, those whose event Airflow holds; ``None`` when it cannot say for every one
    (the ``registered`` of :func:`mirrorflow.completeness.run.run_audit`)."""
    groups: dict[tuple[str, str], list[ProvenWindow]] = {}
    for w in windows:
        groups.setdefault((w.cluster, w.topic), []).append(w)
    found: set[ProvenWindow] = set()
    for (cluster, topic), mine in sorted(groups.items()):
        keys = proven_events(cluster, topic, min(w.window_ms for w in mine))
        if keys is None:
            return None
        found |= {w for w in mine if w.key in keys}
    return found
