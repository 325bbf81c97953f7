"""The open incidents, kept between runs, and what one run changes about them: one message per incident.

The ledger is plain JSON (the Airflow glue keeps it in a Variable)::

    {"<key>": {"kind": "lag", "source": "mirror_lag_monitor", "subject": "link c1.L1 c1 -> c2",
               "summary": "...", "details": [...], "scopes": ["c1.L1", "c1", "c2"],
               "opened_at": "2026-11-22T14:04:03+00:00", "last_seen": "2026-11-22T14:09:03+00:00",
               "dag_id": ..., "task_id": ..., "run_id": ..., "log_url": ...,   # the run that opened it
               "last_run_id": ..., "last_log_url": ...,                        # the latest run that saw it
               "notified": ["email", "webhook"]}}

:func:`decide` compares one run's :class:`Findings` with it: an incident not in
the ledger opens (a message to every channel that wants its kind); one already
open is only seen again (no message, unless a channel missed the opening: it is
tried again; or its kind changed, and with it what to do: it is announced
again); an open incident of the same source that this run looked for and did
not see is resolved (one message to the channels that heard of it) and dropped.
Only the incidents of the run's own source change, so several DAGs share one
ledger: :meth:`Decision.apply` applies the change to a freshly read ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mirrorflow.alerts.incident import Findings, Incident

#: Details kept per incident in the ledger (and shown in a message); the task log has them all.
MAX_DETAILS = 20


@dataclass(frozen=True)
class RunRef:
    """The task instance that looked: where a person reads more (``log_url``: the Airflow UI's page of it)."""

    dag_id: str
    task_id: str
    run_id: str
    at: datetime
    log_url: str = ""


@dataclass(frozen=True)
class Notice:
    """One message to send: an incident ``opened`` or ``resolved``, to the named channels."""

    event: str
    key: str
    record: Mapping[str, Any]
    channels: tuple[str, ...]


@dataclass
class Decision:
    """What one run changes: the notices to send, the records to keep (opened or seen again), the keys to drop."""

    notices: list[Notice] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)

    @property
    def opened(self) -> list[Notice]:
        return [n for n in self.notices if n.event == "opened"]

    @property
    def resolved(self) -> list[Notice]:
        return [n for n in self.notices if n.event == "resolved"]

    def apply(self, ledger: Mapping[str, Mapping[str, Any]],
              delivered: Mapping[tuple[str, str], bool] | None = None) -> dict[str, dict[str, Any]]:
        """The ledger after this run: ``delivered[(key, channel)]`` says which opening messages went out."""
        out = {k: dict(v) for k, v in ledger.items() if k not in self.dropped}
        for key, record in self.records.items():
            sent = {channel for (k, channel), ok in (delivered or {}).items() if k == key and ok}
            out[key] = {**record, "notified": sorted(set(record.get("notified", [])) | sent)}
        return out


def record_of(incident: Incident, run: RunRef) -> dict[str, Any]:
    """A new ledger record: the incident as the run that opened it saw it."""
    at = run.at.isoformat()
    return {
        "kind": incident.kind, "source": incident.source, "subject": incident.subject, "summary": incident.summary,
        "details": list(incident.details[:MAX_DETAILS]), "more_details": max(0, len(incident.details) - MAX_DETAILS),
        "scopes": list(incident.scopes), "opened_at": at, "last_seen": at, "dag_id": run.dag_id,
        "task_id": run.task_id, "run_id": run.run_id, "log_url": run.log_url, "last_run_id": run.run_id,
        "last_log_url": run.log_url, "notified": [],
    }


def _merged(incidents: tuple[Incident, ...]) -> dict[str, Incident]:
    """Incidents by key; a key found twice in one run keeps the first, with the details of both."""
    out: dict[str, Incident] = {}
    for incident in incidents:
        first = out.get(incident.key)
        if first is None:
            out[incident.key] = incident
        else:
            details = first.details + tuple(d for d in incident.details if d not in first.details)
            out[incident.key] = Incident(first.key, first.kind, first.source, first.subject, first.summary, details,
                                         first.scopes)
    return out


def decide(ledger: Mapping[str, Mapping[str, Any]], findings: Findings, run: RunRef,
           channels: Mapping[str, frozenset[str]], *, send_resolved: bool = True) -> Decision:
    """What ``findings`` change in ``ledger``; ``channels``: each channel's name and the kinds it wants."""
    decision = Decision()
    current = _merged(findings.incidents)
    for key, incident in current.items():
        known = ledger.get(key)
        if known is None:
            record = record_of(incident, run)
        elif known.get("kind") != incident.kind:
            # what to do changed (a lagging link whose source then deleted what it had not copied: lag -> gap):
            # the incident is announced again with its new kind, since it was opened
            record = {**record_of(incident, run), "opened_at": known.get("opened_at", run.at.isoformat()),
                      "was": known.get("kind")}
        else:
            record = {**known, "last_seen": run.at.isoformat(), "last_run_id": run.run_id,
                      "last_log_url": run.log_url, "summary_now": incident.summary}
        decision.records[key] = record
        missed = tuple(c for c, kinds in channels.items()
                       if incident.kind in kinds and c not in record.get("notified", []))
        if missed:
            decision.notices.append(Notice("opened", key, record, missed))
    for key, known in ledger.items():
        if known.get("source") != findings.source or key in current or not findings.saw(known.get("scopes", [])):
            continue
        decision.dropped.append(key)
        heard = tuple(c for c in known.get("notified", []) if c in channels)
        if send_resolved and heard:
            decision.notices.append(Notice("resolved", key, {**known, "resolved_at": run.at.isoformat(),
                                                             "resolved_run_id": run.run_id,
                                                             "resolved_log_url": run.log_url}, heard))
    return decision
