"""Each link as the page draws it: its effective target, its lag against its SLA, and one state word.

A link's state is the worst of what is known about it: ``error`` (a partition
failed to copy or to be measured, a retention gap, a truncated source, a lost
checkpoint: a person must act), ``breach`` (over its SLA bound), ``lagging``
(records pending within the bound), ``waiting`` (outside its replication window:
records may wait until it opens, held to no bound), ``ok`` (nothing pending),
``unknown`` (not measured yet). The tree picture is the topology's tree with these links on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from mirrorflow.lag.rows import WHOLE
from mirrorflow.status import forms
from mirrorflow.topology import ClosedLink, Topology, effective_links, split_by_window
from mirrorflow.topology.tree import is_leaf

#: A link's state, worst first: the order of the page's tables and of a link's colour.
State = Literal["error", "breach", "lagging", "waiting", "ok", "unknown"]
STATES: tuple[str, ...] = get_args(State)


#: An open transaction on a source becomes a problem of its link on the page once it is this old: transactional
#: producers keep one open for moments all the time, a hung one holds the partition until its timeout.
OPEN_TRANSACTION_PROBLEM_S = 60.0

def tree_picture(topology: Topology) -> dict[str, Any]:
    """The distribution tree as nested nodes: ``{"level", "path", "children"}`` inside, ``{"cluster"}`` at leaves."""

    def node(value: Any, path: str) -> dict[str, Any]:
        if is_leaf(value):
            return {"cluster": str(value)}
        children = value["children"] if isinstance(value, Mapping) else value.children
        level = value["level"] if isinstance(value, Mapping) else value.level
        return {"level": level, "path": path,
                "children": [node(c, f"{path}.children[{i}]") for i, c in enumerate(children)]}

    return node(topology.to_dict()["tree"], "tree")


def link_rows(topology: Topology, targets: Mapping[str, str], lag: Mapping[str, Any] | None,
              totals: Iterable[Mapping[str, Any]], now: datetime | None = None) -> list[dict[str, Any]]:
    """One row per link of the tree (effective target), worst state first, then by id.

    ``now``: when the page is drawn, for the links' replication windows (default: the current time).
    """
    now = now or datetime.now(UTC)
    rows_by_link: dict[str, list[Mapping[str, Any]]] = {}
    for row in (lag or {}).get("links", []):
        rows_by_link.setdefault(row["link_id"], []).append(row)
    failing: dict[str, list[Mapping[str, Any]]] = {}
    copied: dict[str, dict[str, Any]] = {}
    for t in totals:
        c = copied.setdefault(t["link"], {"records": 0, "bytes": 0, "last_success": None})
        c["records"] += int(t.get("records") or 0)
        c["bytes"] += int(t.get("bytes") or 0)
        if t.get("last_success") and (c["last_success"] is None or t["last_success"] > c["last_success"]):
            c["last_success"] = t["last_success"]
        if t.get("error"):
            failing.setdefault(t["link"], []).append(t)
    out = []
    for level in topology.levels:
        links = effective_links(topology, level, targets)
        closed = {c.link_id: c for c in split_by_window(topology, links, now)[1]}
        for link in links:
            out.append(_row(topology, link, rows_by_link.get(link.link_id), failing.get(link.link_id, []),
                            copied.get(link.link_id), closed.get(link.link_id)))
    out.sort(key=lambda r: (STATES.index(r["state"]), -(r["records"] or 0), r["id"]))
    return out


def _row(topology: Topology, link: Any, measured: list[Mapping[str, Any]] | None,
         failing: list[Mapping[str, Any]], copied: Mapping[str, Any] | None,
         closed: ClosedLink | None = None) -> dict[str, Any]:
    bound = topology.lag.link_bound(link.link_id)
    default = topology.link(link.link_id).default_target
    row: dict[str, Any] = {
        "id": link.link_id, "level": link.level, "source": link.source, "target": link.default_target,
        "default_target": default, "switched": link.default_target != default,
        "alternatives": [c for c in link.sibling_leaves if c != link.default_target],
        "records": None, "seconds": None, "partitions": 0, "lagging_partitions": 0,
        "sla": {"records": bound.records, "seconds": bound.seconds},
        "copied_records": (copied or {}).get("records", 0), "copied_bytes": (copied or {}).get("bytes", 0),
        "last_success": (copied or {}).get("last_success"),
        "problems": [], "over": [],
        # outside its replication window: when the next one opens (its pending records wait till then)
        "waiting_until": closed.next_open.isoformat() if closed else None,
        "windows": list(closed.windows) if closed else list(topology.link_settings(link.link_id).windows or []),
        "forms": [forms.switch_form(link.source, link.level, c, topology.namespace) for c in link.sibling_leaves
                  if c != link.default_target],
    }
    for t in failing:
        row["problems"].append(f"{t['topic']}[{t['partition']}]: {t['error']}")
    if measured:
        values = [r for r in measured if r.get("records") is not None]
        if values:
            row["records"] = sum(int(r["records"]) for r in values)
            row["seconds"] = max((float(r.get("seconds") or 0.0) for r in values), default=0.0)
            row["partitions"] = len(values)
            row["lagging_partitions"] = sum(1 for r in values if r["records"])
        for r in measured:
            where = "" if r.get("topic") == WHOLE else f"{r['topic']}[{r['partition']}]: "
            if r.get("error"):
                row["problems"].append(where + str(r["error"]))
            if r.get("gap"):
                row["problems"].append(f"{where}retention gap of {r['gap']} offsets")
            if r.get("truncated"):
                row["problems"].append(f"{where}source truncated or recreated")
            if r.get("checkpoint_missing"):
                row["problems"].append(f"{where}checkpoint gone")
            if r.get("held") and (r.get("open_transaction_s") or 0) >= OPEN_TRANSACTION_PROBLEM_S:
                row["problems"].append(f"{where}{r['held']} records wait behind a transaction open for "
                                       f"{float(r['open_transaction_s']):g}s on {r.get('source')} at offset "
                                       f"{r.get('end')}: no copy passes it until it ends")
            if r.get("records") is not None and r.get("topic") != WHOLE and closed is None:
                row["over"] += [where + p for p in bound.exceeded(int(r["records"]), float(r.get("seconds") or 0.0))]
    row["state"] = ("error" if row["problems"] else "breach" if row["over"] else "waiting" if closed is not None
                    else "unknown" if row["records"] is None else "lagging" if row["records"] else "ok")
    return row


def page(rows: list[dict[str, Any]], *, state: str | None = None, level: int | None = None, query: str = "",
         offset: int = 0, limit: int = 100) -> dict[str, Any]:
    """One page of ``rows`` filtered by state, level and a substring of id/source/target; with counts by state."""
    q = query.strip().lower()
    chosen = [r for r in rows if (state is None or r["state"] == state) and (level is None or r["level"] == level)
              and (not q or q in f"{r['id']} {r['source']} {r['target']}".lower())]
    counts = {s: 0 for s in STATES}
    for r in rows:
        counts[r["state"]] += 1
    return {"total": len(chosen), "offset": offset, "limit": limit, "counts": counts,
            "items": chosen[offset:offset + limit]}
