"""Running totals per link-partition, kept by the level runs: what the counters of the metrics are made of.

A level run's copy (:class:`mirrorflow.copy.spec.JobResult`) reports one row per
link-partition it copied (``JobResult.partitions``: ``link_id``, ``source``,
``target``, ``topic``, ``partition``, ``copied``, ``skipped``, ``bytes``,
``error``, ``error_offset``...). :func:`fold` adds such a run to the totals
kept so far and returns new totals (pure: nothing is changed in place)::

    {
      "partitions": {
        "c1.L1|orders|0": {
          "link": "c1.L1", "source": "c1", "target": "c2", "topic": "orders", "partition": 0,
          "records": 1200,                  # messages copied, over every run: only ever grows
          "bytes": 96000,                   # their bytes (key + value + headers), likewise
          "last_success": 1795352602.5,     # epoch seconds: the end of the latest run that
                                            # copied (or found nothing to copy) without an error
          "error": null,                    # the error of the latest run, while it fails
          "error_since": null               # epoch seconds: the end of the first run of the
                                            # current failure (kept while it goes on)
        }
      },
      "run_id": "scheduled__2026-11-22T14:00:00+00:00",   # the run folded last
      "finished_at": 1795352602.5                          # and when it ended
    }

- ``records`` and ``bytes`` only add up: they are counters (Prometheus'
  ``_total``), so a person or ``rate()`` sees how much went through, whatever
  the runs in between. Records copied by a run that then failed on the
  partition count too: they were committed before the error.
- ``last_success`` is ``null`` until the partition has had a run without an error.
- ``error``/``error_since`` are set while the partition fails and cleared (``null``)
  by its next run without an error; ``error_since`` stays at the first failing run.
- A partition the run did not report (another level's, or nothing planned for it)
  keeps what it had.
- The ``target`` is the one of the latest run (an operator may switch a link's target).
- Folding the same run twice (same ``run_id`` and ``finished_at``, a retried store)
  changes nothing.

The key of a partition is ``"<link>|<topic>|<partition>"`` (:func:`key`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any


def key(link: str, topic: str, partition: int | None) -> str:
    """The totals key of one link-partition: ``"<link>|<topic>|<partition>"`` (``*`` for no partition)."""
    return f"{link}|{topic}|{'*' if partition is None else partition}"


def empty() -> dict[str, Any]:
    """Totals before any level run."""
    return {"partitions": {}, "run_id": None, "finished_at": None}


def fold(previous: Mapping[str, Any] | None, partitions: Iterable[Mapping[str, Any]], *, finished_at: float,
         run_id: str) -> dict[str, Any]:
    """``previous`` totals (``None``: none yet) with one level run's partition rows added (see the module)."""
    out = empty()
    if previous:
        out["partitions"] = copy.deepcopy(dict(previous.get("partitions") or {}))
        out["run_id"], out["finished_at"] = previous.get("run_id"), previous.get("finished_at")
        if out["run_id"] == run_id and out["finished_at"] == finished_at:
            return out
    table: dict[str, dict[str, Any]] = out["partitions"]
    for row in partitions:
        link, topic, partition = row["link_id"], row["topic"], row.get("partition")
        entry = table.setdefault(key(link, topic, partition), {
            "link": link, "source": row.get("source"), "target": row.get("target"), "topic": topic,
            "partition": partition, "records": 0, "bytes": 0, "last_success": None, "error": None,
            "error_since": None})
        entry["source"] = row.get("source", entry.get("source"))
        entry["target"] = row.get("target", entry.get("target"))
        entry["records"] = int(entry.get("records") or 0) + max(0, int(row.get("copied") or 0))
        entry["bytes"] = int(entry.get("bytes") or 0) + max(0, int(row.get("bytes") or 0))
        error = row.get("error")
        if error:
            if not entry.get("error"):
                entry["error_since"] = finished_at
            entry["error"] = str(error)
        else:
            entry["last_success"] = finished_at
            entry["error"] = entry["error_since"] = None
    out["run_id"], out["finished_at"] = run_id, finished_at
    return out


def failing(totals: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The partitions that fail now (their latest run ended with an error), by key."""
    table = (totals or {}).get("partitions") or {}
    return [dict(table[k]) for k in sorted(table) if table[k].get("error")]
