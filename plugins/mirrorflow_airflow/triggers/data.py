"""The watcher of an ``on_data`` level: starts ``mirror_level_<L>`` when records wait on one of its links.

An asset watcher (Airflow 3's event-driven scheduling): the level DAG is
scheduled on the asset ``mirrorflow-pending://level/<L>``, whose watcher is this
trigger, run by the triggerer. Every ``poll`` seconds it measures the level's
links the cheap way: each source's stable end offsets and each link's checkpoint
on its effective target, no message read (:func:`mirrorflow.lag.link_lag` with
``ages=False``). :class:`mirrorflow.lag.DataWatch` decides whether that starts a
run (a floor between two runs, nothing asked twice for the same offsets, nothing
while a run of the level is already queued); a run is one event, which Airflow
records on the asset and turns into a run of the DAG. The level copies one run
at a time all the same (docs/levels.md, "One copy at a time"). docs/levels.md,
"Runs started by data".

Like every mirrorflow trigger, the kwargs hold no secret: the topology and the
clusters' client settings are resolved in the triggerer at each poll
(:class:`~mirrorflow_airflow.triggers.base.CheckContext`), so an edited topology
or a target switch applies from the next poll.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from mirrorflow.lag import DataWatch, Waiting, link_lag, waiting
from mirrorflow.topology import effective_links, split_by_window
from mirrorflow_airflow.triggers.base import CheckContext

log = logging.getLogger(__name__)

#: Bound of one poll's requests: a cluster that does not answer in this time is left for the next poll.
POLL_TIMEOUT_S = 5.0


def pending_uri(level: int) -> str:
    """The URI of the asset whose watcher starts level ``level``'s runs."""
    return f"mirrorflow-pending://level/{level}"


def measure_level(level: int, context: CheckContext | None = None, timeout: float = POLL_TIMEOUT_S) -> Waiting:
    """What waits now on the level's links that may copy now (effective targets, windows open)."""
    ctx = context or CheckContext()
    topology = ctx.topology
    links = effective_links(topology, level, ctx.link_targets())
    open_links, _ = split_by_window(topology, links, datetime.now(UTC))
    if not open_links:
        return Waiting()
    clients = ctx.clients({c for l in open_links for c in (l.source, l.default_target)})
    rows = link_lag(topology, clients, open_links, timeout=timeout, ages=False)
    return waiting(rows)


def queued_runs(dag_id: str) -> int:
    """Runs of ``dag_id`` queued now, asked of Airflow through the triggerer's supervisor (0 if it cannot say)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    return RuntimeTaskInstance.get_dr_count(dag_id=dag_id, states=["queued"])


class LevelDataTrigger(BaseEventTrigger):
    """Fires ``{"level", "records", "why"}`` whenever records waiting on the level's links should start a run."""

    def __init__(self, level: int, dag_id: str, poll_s: float, floor_s: float, resend_s: float = 60.0) -> None:
        super().__init__()
        self.level, self.dag_id = int(level), str(dag_id)
        self.poll_s, self.floor_s, self.resend_s = float(poll_s), float(floor_s), float(resend_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"level": self.level, "dag_id": self.dag_id, "poll_s": self.poll_s, "floor_s": self.floor_s,
                 "resend_s": self.resend_s})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        dag_id = self.dag_id
        watch = DataWatch(self.floor_s, self.resend_s)
        said = ""  # the last problem logged, and the links last logged as not measured: each is said once
        unmeasured: dict[str, str] = {}
        while True:
            started = time.monotonic()
            try:
                found = await asyncio.to_thread(measure_level, self.level)
                queued = await asyncio.to_thread(self._queued, dag_id) if found.total else 0
                said = ""
            except Exception as exc:  # a topology being edited, a connection missing: the next poll tries again
                found, queued = Waiting(), 0
                message = f"level {self.level}: not measured ({type(exc).__name__}: {exc}); polling on"
                if message != said:
                    log.warning("%s", message)
                    said = message
            if found.unmeasured != unmeasured:
                for link, why in sorted(found.unmeasured.items()):
                    log.warning("level %d: link %s not measured: %s", self.level, link, why)
                unmeasured = found.unmeasured
            decision = watch.decide(time.time(), found, queued=queued)
            if decision.run:
                log.info("level %d: starting a run of %s: %s", self.level, dag_id, decision.why)
                yield TriggerEvent({"level": self.level, "records": found.records, "why": decision.why})
            else:
                log.debug("level %d: no run yet: %s", self.level, decision.why)
            await asyncio.sleep(max(0.0, self.poll_s - (time.monotonic() - started)))

    def _queued(self, dag_id: str) -> int:
        try:
            return queued_runs(dag_id)
        except Exception as exc:  # outside a triggerer (no supervisor): decide on the offsets alone
            log.debug("level %d: queued runs of %s unknown: %s", self.level, dag_id, exc)
            return 0
