"""Which windows the audit proves complete on a cluster for the first time: what ``mirror_audit`` announces.

Pure. A window ``W`` of topic ``T`` is *proven* on cluster ``C`` when it is final
and every cell of ``(T, W)`` from another origin compared complete on ``C`` (the
cell of ``C``'s own messages needs no proof: they were produced there). Nothing
is proven in a run where any cluster went unaudited: its messages of ``W`` would
be unknown, so no window could be said to hold them. Each cluster keeps a ledger
of the windows proven there (:mod:`mirrorflow.completeness.store`), in two steps:
*proven* when first proven, *announced* once a later run saw its event in Airflow.
A window still *proven* is announced again by the next run only if Airflow has no
event of it (the task that should have announced it died), so each window is
announced once, also when a later run proves it after a difference was mended.
Windows that ended more than :data:`ANNOUNCE_HORIZON_S` ago are never proven for
the first time: the first audit after an upgrade would otherwise announce the
whole history. So a cluster left unaudited that long drops proofs on every
cluster, which :func:`dropping_proofs` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mirrorflow.completeness.compare import Verdict, final
from mirrorflow.completeness.tally import Tallies, WindowKey

#: Windows that ended longer ago than this (seconds) are not announced.
ANNOUNCE_HORIZON_S = 24 * 3600

#: The window's start in the partition key: the format Airflow's temporal partition mappers read by default.
KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"


def window_key(window_ms: int) -> str:
    """A window's partition key: its start, UTC (``2026-11-28T10:20:00``)."""
    return datetime.fromtimestamp(window_ms / 1000, UTC).strftime(KEY_FORMAT)


@dataclass(frozen=True, order=True)
class ProvenWindow:
    """Window ``window_ms`` of ``topic`` holds, on ``cluster``, every message of every origin exactly once."""

    cluster: str
    topic: str
    window_ms: int
    #: Messages of the window from other clusters that the proof covered.
    messages: int = 0
    #: Proven by an earlier run, whose announcement Airflow never registered: announced by this one.
    again: bool = False

    @property
    def key(self) -> str:
        return window_key(self.window_ms)


def proven_windows(tallies: Mapping[str, Tallies], verdicts: Mapping[tuple[str, WindowKey], Verdict], *,
                   window_s: int, now_ms: int, grace_s: float, horizons: Mapping[tuple[str, str], int],
                   announced: Mapping[str, set[tuple[str, int]]],
                   horizon_s: float = ANNOUNCE_HORIZON_S) -> list[ProvenWindow]:
    """The windows proven on each audited cluster of ``tallies`` and not ``announced`` there yet.

    ``verdicts``: this run's comparison (every judged cell on every cluster but its
    origin); ``horizons``: (cluster, topic) -> epoch ms before which it was never counted.
    """
    cells: dict[tuple[str, int], set[WindowKey]] = {}
    for t in tallies.values():
        for key in t.cells:
            cells.setdefault((key.topic, key.window_ms), set()).add(key)
    proven: list[ProvenWindow] = []
    oldest_end = now_ms - horizon_s * 1000
    for (topic, window_ms), keys in sorted(cells.items()):
        if not final(window_ms, window_s, now_ms, grace_s) or window_ms + window_s * 1000 < oldest_end:
            continue
        if any(k.origin not in tallies or window_ms < horizons.get((k.origin, topic), 0) for k in keys):
            continue  # an origin that was not counted then: nothing to compare with
        for cluster in sorted(tallies):
            if window_ms < horizons.get((cluster, topic), 0) or (topic, window_ms) in announced.get(cluster, set()):
                continue
            others = [k for k in keys if k.origin != cluster]
            judged = [verdicts.get((cluster, k)) for k in others]
            if all(v is not None and v.complete for v in judged):
                proven.append(ProvenWindow(cluster, topic, window_ms,
                                           sum(v.expected for v in judged if v is not None)))
    return proven


def dropping_proofs(last_full_ms: int | None, unaudited: list[str], *, now_ms: int, grace_s: float,
                    horizon_s: float = ANNOUNCE_HORIZON_S) -> dict[str, Any] | None:
    """What a run that could not audit ``unaudited`` says when proofs fall out of the horizon; else ``None``.

    ``last_full_ms``: when a run last audited every cluster (``None``: unknown). Windows
    final after it could not be proven since; the first of them (ended ``grace_s``
    before it) leaves the horizon ``horizon_s`` after it ended, and every later one follows.
    """
    if not unaudited or last_full_ms is None or now_ms - last_full_ms <= (horizon_s - grace_s) * 1000:
        return None
    return {"unaudited": sorted(unaudited), "last_full_audit_ms": last_full_ms,
            "last_full_audit": window_key(last_full_ms), "dropped_before_ms": int(now_ms - horizon_s * 1000),
            "dropped_before": window_key(int(now_ms - horizon_s * 1000))}
