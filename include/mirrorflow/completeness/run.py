"""One completeness audit across the clusters: count what is new on each, compare, name the differences.

The steps (docs/audit.md tells the whole of it): each cluster's stored state is
read (:mod:`mirrorflow.completeness.store`), what arrived since is counted and
stored (:mod:`mirrorflow.completeness.count`), every final cell is compared with
its origin's (:mod:`mirrorflow.completeness.compare`), and each difference is
drilled down to its messages (:mod:`mirrorflow.completeness.drill`). A cluster
that cannot be reached is named and left out; its cells are compared on the next
run that reaches it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from mirrorflow.completeness.compare import Comparison, Difference, Verdict, compare
from mirrorflow.completeness.count import ClusterCount, count_cluster
from mirrorflow.completeness.drill import Drill, drill
from mirrorflow.completeness.proven import ProvenWindow, dropping_proofs, proven_windows
from mirrorflow.completeness.store import Position, announced_entry, proven_entry, read_state, write_verdicts
from mirrorflow.completeness.tally import DEFAULT_WINDOW_S, Tallies, WindowKey
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry, journal_warning
from mirrorflow.kafka import ClusterClient, describe_topics

log = logging.getLogger(__name__)

#: A window is judged once it ended this long ago (seconds): copies still on their way are not a loss.
DEFAULT_GRACE_S = 900.0
#: At most this many differing cells are drilled down per run (each reads the cell on two clusters).
DRILL_LIMIT = 20
#: At most this many differing cells of compacted topics are examined per run (each once: a cell found
#: complete by compaction is not read again while its counts stay the same).
COMPACTED_DRILL_LIMIT = 200
#: The record of when every cluster was last audited is written again once it is this old (seconds).
AUDITED_EVERY_S = 3600

#: Given windows proven by earlier runs and not known as announced, those Airflow holds an event of;
#: ``None`` when it cannot say (then none is announced again, and none is marked announced).
Registered = Callable[[Sequence[ProvenWindow]], Collection[ProvenWindow] | None]


@dataclass
class AuditResult:
    counts: dict[str, ClusterCount] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    comparison: Comparison | None = None
    drills: list[Drill] = field(default_factory=list)
    #: Per cluster: verdicts stored in this run (new or changed).
    verdicts_written: dict[str, int] = field(default_factory=dict)
    #: Windows to announce in this run (completeness.proven): proven for the first time and recorded in the
    #: ledger, or proven earlier with no event in Airflow (``again``).
    proven: list[ProvenWindow] = field(default_factory=list)
    #: Per cluster: windows proven earlier whose event Airflow holds, now marked announced in the ledger.
    confirmed: dict[str, int] = field(default_factory=dict)
    #: Windows proven earlier whose event could not be looked for: left for the next run.
    unconfirmed: int = 0
    #: Set when clusters left unaudited make proofs fall out of the horizon (proven.dropping_proofs).
    dropping: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.comparison is not None and self.comparison.ok and not self.unreachable

    def summary(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "read": {name: count.read for name, count in sorted(self.counts.items())},
            "unaudited": {name: sum(t.unaudited for t in count.topics) for name, count in sorted(self.counts.items())
                          if any(t.unaudited for t in count.topics)},
            "unreachable": self.unreachable,
            "judged": c.judged if c else 0, "complete": c.complete if c else 0,
            "pending": c.pending if c else 0, "before_horizon": c.before_horizon if c else 0,
            "compacted": c.compacted if c else 0,
            "verdicts_written": {name: n for name, n in sorted(self.verdicts_written.items()) if n},
            "differences": [d.to_dict() for d in self.drills] or ([x.to_dict() for x in c.differences] if c else []),
            "proven": [{"cluster": p.cluster, "topic": p.topic, "window_ms": p.window_ms, "window": p.key,
                        "messages": p.messages, **({"again": True} if p.again else {})} for p in self.proven],
            "announce_confirmed": {name: n for name, n in sorted(self.confirmed.items()) if n},
            "announce_unconfirmed": self.unconfirmed,
            "proofs_dropping": self.dropping,
        }


def difference_lines(differences: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per difference of a summary, with the messages when it was drilled down."""
    rows = []
    for d in differences:
        window = datetime.fromtimestamp(d["window_ms"] / 1000, UTC).strftime("%Y-%m-%d %H:%M")
        line = (f"topic {d['topic']} window {window} origin {d['origin']} on {d['cluster']}: "
                f"{d['held']} of {d['expected']} messages")
        if "missing_count" in d:
            line += (f"; missing {d['missing_count']} {d['missing']}, duplicated {d['duplicated_count']} "
                     f"{d['duplicated']}, unexpected {d['unexpected_count']} {d['unexpected']} "
                     f"(origin partition, offset)")
        rows.append(line)
    return rows


def summary_problems(summary: Mapping[str, Any]) -> list[str]:
    """Every problem of a summary (:meth:`AuditResult.summary`, or as stored), one line each.

    The clusters not audited first, then the differences.
    """
    problems = [f"{name} not audited: {why}" for name, why in sorted(summary.get("unreachable", {}).items())]
    return problems + difference_lines(summary.get("differences", []))


def run_audit(clients: Mapping[str, ClusterClient], selects: Callable[[str], bool], *,
              window_s: int = DEFAULT_WINDOW_S, grace_s: float = DEFAULT_GRACE_S, now_ms: int | None = None,
              run_id: str = "", timeout: float = 30.0, registered: Registered | None = None) -> AuditResult:
    """Audit every cluster of ``clients`` for the topics ``selects`` picks (see the module).

    ``registered`` says which windows proven by earlier runs Airflow holds an event of
    (docs/assets.md); without it, such windows wait in the ledger.
    """
    result = AuditResult()
    positions: dict[str, dict[tuple[str, int], Position]] = {}
    tallies: dict[str, Tallies] = {}
    horizons: dict[tuple[str, str], int] = {}
    stored: dict[str, dict[WindowKey, dict[str, Any]]] = {}
    announced: dict[str, set[tuple[str, int]]] = {}
    unannounced: list[ProvenWindow] = []
    audited_at: dict[str, int | None] = {}
    for name, client in sorted(clients.items()):
        started = time.monotonic()
        try:
            state = read_state(client, window_s, timeout)
            counted = count_cluster(client, state, selects, timeout, run_id=run_id)
        except MirrorflowError as exc:
            result.unreachable[name] = str(exc)
            log.error("%s: not audited: %s", name, exc)
            continue
        result.counts[name] = counted
        # only the topics audited now are compared: one that left the topology keeps its history, unjudged
        counted.tallies.cells = {k: v for k, v in counted.tallies.cells.items() if selects(k.topic)}
        positions[name], tallies[name], stored[name] = state.positions, counted.tallies, state.verdicts
        announced[name] = state.proven
        audited_at[name] = state.audited_at
        unannounced += [ProvenWindow(name, topic, window, int(entry.get("messages", 0)), again=True)
                        for (topic, window), entry in sorted(state.unannounced.items()) if selects(topic)]
        for topic, ms in counted.horizons.items():
            horizons[(name, topic)] = ms
        log.info("%s: %d new records counted in %.1fs (%s)", name, counted.read, time.monotonic() - started,
                 ", ".join(f"{t.topic} {t.read}" for t in counted.topics) or "no topics")
    topics = sorted({key.topic for t in tallies.values() for key in t.cells})
    holders = {topic: sorted(tallies) for topic in topics}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    comparison = compare(tallies, holders, now_ms=now, grace_s=grace_s, horizons=horizons)
    comparison, drills = _drill(comparison, clients, positions, stored, window_s, timeout)
    result.comparison, result.drills = comparison, drills
    proven = [] if result.unreachable else proven_windows(
        tallies, comparison.verdicts, window_s=window_s, now_ms=now, grace_s=grace_s, horizons=horizons,
        announced=announced)
    again, confirmed = _reconcile(unannounced, registered, result)
    if result.unreachable:
        result.dropping = dropping_proofs(_last_full(audited_at), sorted(result.unreachable), now_ms=now,
                                          grace_s=grace_s)
        if result.dropping:
            log.error("no window was proven since %s, the last audit of every cluster, because %s not audited; "
                      "windows that ended before %s are no longer announced", result.dropping["last_full_audit"],
                      " and ".join(result.dropping["unaudited"]), result.dropping["dropped_before"])
    # every cluster audited: each records it, when it writes anyway or its record is an hour old
    stale = set() if result.unreachable else {name for name, at in audited_at.items()
                                              if at is None or now - at >= AUDITED_EVERY_S * 1000}
    _store_verdicts(result, clients, comparison, stored, window_s, timeout, proven, now, confirmed, stale)
    result.proven += again
    line = dict(run_id=run_id, window_s=window_s, grace_s=grace_s, **result.summary())
    if result.ok:
        journal_entry("completeness", **line)
    else:
        journal_warning("completeness", **line)
    return result


def _reconcile(unannounced: list[ProvenWindow], registered: Registered | None,
               result: AuditResult) -> tuple[list[ProvenWindow], list[ProvenWindow]]:
    """The windows proven earlier and not known as announced, split by what Airflow holds: (to announce again,
    seen announced). A window whose event is seen is marked announced; one without an event was lost with
    the task that should have announced it, and is announced now."""
    if not unannounced:
        return [], []
    seen = registered(unannounced) if registered is not None else None
    if seen is None:
        result.unconfirmed = len(unannounced)
        log.warning("%d window(s) proven earlier wait in the ledger: whether Airflow holds their events could not "
                    "be asked; the next run asks again", len(unannounced))
        return [], []
    found = {(w.cluster, w.topic, w.window_ms) for w in seen}
    confirmed = [w for w in unannounced if (w.cluster, w.topic, w.window_ms) in found]
    again = [w for w in unannounced if (w.cluster, w.topic, w.window_ms) not in found]
    for w in again:
        log.warning("%s: window %s of %s was proven by an earlier run that did not announce it; announced now",
                    w.cluster, w.key, w.topic)
    return again, confirmed


def _last_full(audited_at: Mapping[str, int | None]) -> int | None:
    """When every cluster was last audited, as the audited clusters recorded it (``None``: never recorded)."""
    known = [at for at in audited_at.values() if at is not None]
    return max(known) if known else None


def _drill(comparison: Comparison, clients: Mapping[str, ClusterClient],
           positions: Mapping[str, Mapping[tuple[str, int], Position]],
           stored: Mapping[str, Mapping[WindowKey, Mapping[str, Any]]], window_s: int,
           timeout: float) -> tuple[Comparison, list[Drill]]:
    """The differences drilled down, and the comparison once compaction is taken out of it.

    A difference on a compacted topic is always drilled (up to :data:`COMPACTED_DRILL_LIMIT`
    per run; the rest wait, unjudged, for the next run), unless the same counts were
    found complete by compaction before; a cell whose every difference compaction
    explains is complete. Other differences are drilled up to :data:`DRILL_LIMIT`.
    """
    compacted = compacted_topics(clients, {d.topic for d in comparison.differences}, timeout)
    drills: list[Drill] = []
    excused: dict[Difference, int] = {}
    deferred: set[Difference] = set()
    budget = COMPACTED_DRILL_LIMIT
    for d in comparison.differences:
        if d.topic not in compacted:
            if len(drills) < DRILL_LIMIT:
                drills.append(drill(d, clients, positions, window_s, timeout))
            continue
        before = stored.get(d.cluster, {}).get(WindowKey(d.topic, d.origin, d.window_ms)) or {}
        if before.get("compacted") and before.get("complete") and (before.get("expected"), before.get("held")) == (
                d.expected, d.held):
            excused[d] = int(before["compacted"])
        elif budget <= 0:
            deferred.add(d)
        else:
            budget -= 1
            found = drill(d, clients, positions, window_s, timeout, compacted=True)
            if found.excused:
                excused[d] = found.compacted
            else:
                drills.append(found)
    if deferred:
        log.warning("%d difference(s) on compacted topics not examined in this run (at most %d are); they are "
                    "judged in the next runs", len(deferred), COMPACTED_DRILL_LIMIT)
    if not excused and not deferred:
        return comparison, drills

    def cell(d: Difference) -> WindowKey:
        return WindowKey(d.topic, d.origin, d.window_ms)

    left = [d for d in comparison.differences if d not in excused and d not in deferred]
    failing = {cell(d) for d in left}
    waiting = {cell(d) for d in deferred} - failing
    now_complete = {cell(d) for d in excused} - failing - waiting
    verdicts = {k: v for k, v in comparison.verdicts.items() if k[1] not in waiting}
    for d, n in excused.items():
        if cell(d) not in waiting:
            verdicts[(d.cluster, cell(d))] = Verdict(d.expected, d.held, True, compacted=n)
    judged = replace(comparison, judged=comparison.judged - len(waiting),
                     complete=comparison.complete + len(now_complete), differences=tuple(left),
                     pending=comparison.pending + len(waiting), verdicts=verdicts,
                     compacted=comparison.compacted + sum(excused.values()))
    return judged, drills


def compacted_topics(clients: Mapping[str, ClusterClient], topics: set[str], timeout: float) -> set[str]:
    """The ``topics`` whose ``cleanup.policy`` includes ``compact`` on any cluster that answers."""
    found: set[str] = set()
    if not topics:
        return found
    for name, client in sorted(clients.items()):
        try:
            shapes = describe_topics(client, sorted(topics), timeout)
        except MirrorflowError as exc:
            log.warning("%s: cleanup.policy of %s not read (%s); counted as not compacted there", name,
                        ", ".join(sorted(topics)), exc)
            continue
        found |= {t for t, shape in shapes.items() if "compact" in shape.configs.get("cleanup.policy", "")}
    return found


def _store_verdicts(result: AuditResult, clients: Mapping[str, ClusterClient], comparison: Comparison,
                    stored: Mapping[str, Mapping[WindowKey, Mapping[str, Any]]], window_s: int,
                    timeout: float, proven: list[ProvenWindow], now_ms: int, confirmed: list[ProvenWindow],
                    stale: set[str]) -> None:
    """Each cluster keeps the verdicts of its cells that are new or changed since they were last stored,
    and, with them, the windows proven there (not announced yet), the windows whose events were seen
    (announced), and, in a run that audited every cluster, when (``stale``: clusters that must write it).
    Only a window so recorded is announced (``result.proven``): its event comes after the ledger's entry."""
    changed: dict[str, dict[WindowKey, dict[str, Any]]] = {}
    for (cluster, cell), verdict in comparison.verdicts.items():
        if stored.get(cluster, {}).get(cell) != (value := verdict.to_dict()):
            changed.setdefault(cluster, {})[cell] = value
    windows: dict[str, list[ProvenWindow]] = {}
    for window in proven:
        windows.setdefault(window.cluster, []).append(window)
    seen: dict[str, list[ProvenWindow]] = {}
    for window in confirmed:
        seen.setdefault(window.cluster, []).append(window)
    for cluster in sorted(set(changed) | set(windows) | set(seen) | stale):
        mine = windows.get(cluster, [])
        entries = {(w.topic, w.window_ms): proven_entry(now_ms, w.messages) for w in mine}
        entries |= {(w.topic, w.window_ms): announced_entry(now_ms) for w in seen.get(cluster, [])}
        try:
            result.verdicts_written[cluster] = write_verdicts(
                clients[cluster], window_s, changed.get(cluster, {}), timeout, proven=entries,
                audited_at=None if result.unreachable else now_ms)
        except MirrorflowError as exc:  # the comparison stands; the history catches up on the next run
            log.error("%s: the audit's verdicts were not stored: %s%s", cluster, exc,
                      f"; the {len(mine)} window(s) proven there are announced by the next run" if mine else "")
            continue
        result.proven += mine
        if seen.get(cluster):
            result.confirmed[cluster] = len(seen[cluster])
