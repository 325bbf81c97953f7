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
clusters' client settings are resolved in the triggerer
(:class:`~mirrorflow_airflow.triggers.base.CheckContext`), again every
``CONTEXT_REFRESH_S`` seconds and after a failed poll; a target switch applies
from the next poll.

What it keeps between polls:

- its Kafka clients (:class:`mirrorflow.kafka.kept.KeptClients`): one admin
  client per cluster and one consumer per link's checkpoints, so an idle watcher
  opens no connection once started; a client whose call fails is replaced;
- which links and partitions the level's runs keep failing (recorded by each
  run's ``copy`` task, :func:`mirrorflow_airflow.state.read_failing`): records
  waiting on those alone start runs less and less often, doubling up to a cap
  (:mod:`mirrorflow.lag.backoff`), said at WARNING in the triggerer's log, while
  records on healthy links start runs at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from mirrorflow.kafka import KeptClients
from mirrorflow.lag import DataWatch, Waiting, link_lag, waiting
from mirrorflow.lag.backoff import DEFAULT_CAP_S, DEFAULT_FIRST_S, Backoff, Failing
from mirrorflow.topology import effective_links, split_by_window
from mirrorflow_airflow.state import read_failing
from mirrorflow_airflow.triggers.base import CheckContext

log = logging.getLogger(__name__)

#: Bound of one poll's requests: a cluster that does not answer in this time is left for the next poll.
POLL_TIMEOUT_S = 5.0


def pending_uri(level: int, ns: str = "") -> str:
    """The URI of the asset whose watcher starts level ``level``'s runs (of tree ``ns``, one of several)."""
    return f"mirrorflow-pending://{ns}/level/{level}" if ns else f"mirrorflow-pending://level/{level}"


#: Seconds a watcher keeps the topology and the clusters' client settings it read before reading them again.
CONTEXT_REFRESH_S = 30.0


def measure_level(level: int, context: CheckContext | None = None, timeout: float = POLL_TIMEOUT_S,
                  kept: KeptClients | None = None) -> Waiting:
    """What waits now on the level's links that may copy now (effective targets, windows open).

    ``kept``: clients kept across polls (the watcher's); without, fresh ones for this measurement.
    """
    ctx = context or CheckContext()
    topology = ctx.topology
    links = effective_links(topology, level, ctx.link_targets())
    open_links, _ = split_by_window(topology, links, datetime.now(UTC))
    if not open_links:
        return Waiting()
    clients = ctx.clients({c for l in open_links for c in (l.source, l.default_target)})
    if kept is None:
        return waiting(link_lag(topology, clients, open_links, timeout=timeout, ages=False))
    with kept.active():
        rows = link_lag(topology, clients, open_links, timeout=timeout, ages=False)
    kept.retain_used()
    return waiting(rows)


def queued_runs(dag_id: str) -> int:
    """Runs of ``dag_id`` queued now, asked of Airflow through the triggerer's supervisor (0 if it cannot say)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    return RuntimeTaskInstance.get_dr_count(dag_id=dag_id, states=["queued"])


class LevelDataTrigger(BaseEventTrigger):
    """Fires ``{"level", "records", "why"}`` whenever records waiting on the level's links should start a run."""

    def __init__(self, level: int, dag_id: str, poll_s: float, floor_s: float, resend_s: float = 60.0,
                 backoff_s: float = DEFAULT_FIRST_S, backoff_cap_s: float = DEFAULT_CAP_S, tree: str = "") -> None:
        super().__init__()
        self.level, self.dag_id, self.tree = int(level), str(dag_id), str(tree)
        self.poll_s, self.floor_s, self.resend_s = float(poll_s), float(floor_s), float(resend_s)
        self.backoff_s, self.backoff_cap_s = float(backoff_s), float(backoff_cap_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"level": self.level, "dag_id": self.dag_id, "poll_s": self.poll_s, "floor_s": self.floor_s,
                 "resend_s": self.resend_s, "backoff_s": self.backoff_s, "backoff_cap_s": self.backoff_cap_s,
                 "tree": self.tree})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        dag_id = self.dag_id
        watch = DataWatch(self.floor_s, self.resend_s, backoff=Backoff(self.backoff_s, self.backoff_cap_s))
        said = ""  # the last problem logged, and the links last logged as not measured: each is said once
        unmeasured: dict[str, str] = {}
        kept = KeptClients()
        context: CheckContext | None = None
        context_at = 0.0
        try:
            while True:
                started = time.monotonic()
                failing = None
                try:
                    if context is None or started - context_at >= CONTEXT_REFRESH_S:
                        context, context_at = CheckContext(ns=self.tree), started
                    found = await asyncio.to_thread(measure_level, self.level, context, POLL_TIMEOUT_S, kept)
                    queued = await asyncio.to_thread(self._queued, dag_id) if found.total else 0
                    failing = await asyncio.to_thread(self._failing) if found.total else None
                    said = ""
                except Exception as exc:  # a topology being edited, a connection missing: the next poll tries again
                    found, queued, context = Waiting(), 0, None
                    message = f"level {self.level}: not measured ({type(exc).__name__}: {exc}); polling on"
                    if message != said:
                        log.warning("%s", message)
                        said = message
                if found.unmeasured != unmeasured:
                    for link, why in sorted(found.unmeasured.items()):
                        log.warning("level %d: link %s not measured: %s", self.level, link, why)
                    unmeasured = found.unmeasured
                    context = None  # its settings may be what failed: read again at the next poll
                decision = watch.decide(time.time(), found, queued=queued, failing=failing)
                for note in decision.notes:
                    log.warning("level %d: %s", self.level, note)
                if decision.run:
                    log.info("level %d: starting a run of %s: %s", self.level, dag_id, decision.why)
                    yield TriggerEvent({"level": self.level, "records": found.records, "why": decision.why})
                else:
                    log.debug("level %d: no run yet: %s", self.level, decision.why)
                await asyncio.sleep(max(0.0, self.poll_s - (time.monotonic() - started)))
        finally:
            kept.close()

    def _failing(self) -> Failing | None:
        try:
            return read_failing(self.tree, self.level)
        except Exception as exc:  # no record readable: no back-off, as before
            log.debug("level %d: what its runs failed is unknown: %s", self.level, exc)
            return None

    def _queued(self, dag_id: str) -> int:
        try:
            return queued_runs(dag_id)
        except Exception as exc:  # outside a triggerer (no supervisor): decide on the offsets alone
            log.debug("level %d: queued runs of %s unknown: %s", self.level, dag_id, exc)
            return 0
