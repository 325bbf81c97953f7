"""The whole status document the page and its JSON API serve (format: docs/status.md).

Links are many (a big tree has thousands): the document carries the counts by
state and only the first page of links, worst first; :func:`links_page` serves
the rest, filtered. Everything else is small enough to send whole.
"""

from __future__ import annotations

from typing import Any

from mirrorflow.status import sections
from mirrorflow.status.inputs import StatusInputs
from mirrorflow.status.links import STATES, link_rows, page, tree_picture
from mirrorflow.status.problems import open_problems
from mirrorflow.topology import Topology

#: Links in the first page of the document.
FIRST_PAGE = 100
#: Links the picture may draw (worst first); a bigger tree draws only what is not ok anyway.
EDGES = 2000


def totals_rows(inputs: StatusInputs) -> list[dict[str, Any]]:
    return list((inputs.totals.get("partitions") or {}).values())


def all_links(topology: Topology, inputs: StatusInputs) -> list[dict[str, Any]]:
    return link_rows(topology, inputs.targets, inputs.lag, totals_rows(inputs), inputs.now)


def links_page(topology: Topology, inputs: StatusInputs, **filters: Any) -> dict[str, Any]:
    return page(all_links(topology, inputs), **filters)


def _renames(topology: Topology, cluster: str) -> bool:
    return topology.cluster(cluster).names.renames


def build_status(topology: Topology, inputs: StatusInputs) -> dict[str, Any]:
    links = all_links(topology, inputs)
    lag = inputs.lag or {}
    unreachable = lag.get("unreachable") or {}
    per_cluster: dict[str, dict[str, Any]] = {
        name: {"name": name, "reachable": None if not lag else name not in unreachable,
               "reason": unreachable.get(name), "worst": "unknown",
               # how the cluster names a mirrored topic and group (the page's rows say logical names)
               "topic_names": topology.topic_naming(name).render("{topic}") if _renames(topology, name) else None,
               "group_names": topology.group_naming(name).render("{group}") if _renames(topology, name) else None}
        for name in sorted(topology.clusters)}
    for row in links:  # a cluster shows the worst state of the links into it
        c = per_cluster.get(row["target"])
        if c is not None and STATES.index(row["state"]) < STATES.index(c["worst"]):
            c["worst"] = row["state"]
    for name, reason in unreachable.items():
        if name in per_cluster:
            per_cluster[name]["worst"] = "error"
    return {
        "topology": topology.name,
        # the tree's namespace when one Airflow runs several (docs/naming.md), else ""
        "namespace": topology.namespace,
        "generated_at": inputs.now.isoformat(),
        "base_url": inputs.base_url,
        "lag": {"taken_at": lag.get("taken_at"), "ok": lag.get("ok"), "sla": lag.get("sla") or {},
                "totals": lag.get("totals") or {}, "schedule": topology.lag.schedule},
        "tree": tree_picture(topology),
        "clusters": list(per_cluster.values()),
        "links": {**page(links, limit=FIRST_PAGE), "all_edges": [
            {"id": r["id"], "source": r["source"], "target": r["target"], "level": r["level"], "state": r["state"],
             "records": r["records"], "seconds": r["seconds"]} for r in links[:EDGES]]},
        "levels": sections.levels(topology, inputs),
        "groups": sections.groups(topology, inputs),
        "schemas": sections.schemas(topology, inputs),
        "audit": sections.audit(inputs),
        "problems": open_problems(topology, inputs, totals_rows(inputs), links),
        "running": sections.running(inputs),
    }
