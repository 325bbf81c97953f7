"""Incidents of a level run (``mirror_level_<L>``): one per failed link-topic-partition of its copy result.

Read from the copy task's result (:meth:`mirrorflow.copy.spec.JobResult.summary`,
pushed as its XCom even when the task fails): ``error_details`` names link,
source, target, topic, partition, offset and error of each failure. A failure
whose error says so is a retention ``gap`` or a ``truncated`` source (the
sentences of :mod:`mirrorflow.copy.state.checkpoints` and :mod:`mirrorflow.copy.state.history`),
a lost ``checkpoint`` the planner refused to guess (:mod:`mirrorflow.copy.plan`), a
cluster that did not answer is ``unreachable``; every other is a failed
``partition``. A link whose planning failed (topic ``*``) was not copied at all:
the incidents of its partitions are not taken for resolved while it lasts. A
change a sync declined to make (``links[].declined``, :mod:`mirrorflow.declined`)
is a ``declined`` incident for as long as runs keep declining it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorflow.alerts.incident import TASK_SCOPE, Findings, Incident

WHOLE_LINK = "*"


def error_kind(error: str) -> str:
    """The kind of incident a copy error is, from the words the copier uses for it."""
    if "retention gap" in error:
        return "gap"
    if "truncated source" in error:
        return "truncated"
    if "the link has no checkpoint on" in error:
        return "checkpoint"
    if " is unreachable" in error:
        return "unreachable"
    return "partition"


def partition_incidents(result: Mapping[str, Any], source: str) -> Findings:
    """Every failed partition of one level run's result; it looked at the links it reports and planned."""
    incidents = []
    planned = {str(l["link"]) for l in result.get("links") or []}
    not_copied = set()
    for e in result.get("error_details") or []:
        link, topic, partition = str(e["link"]), str(e["topic"]), e.get("partition")
        route = f"{e['source']} -> {e['target']}"
        at = "" if e.get("offset") is None else f" at source offset {e['offset']}"
        if topic == WHOLE_LINK:
            not_copied.add(link)
            key, subject = f"{source}:link:{link}", f"link {link} {route}"
        elif partition is None:
            key, subject = f"{source}:topic:{link}:{topic}", f"link {link} {route} topic {topic}"
        else:
            key, subject = f"{source}:partition:{link}:{topic}:{partition}", f"link {link} {route} {topic}[{partition}]"
        text = f"{subject}{at}: {e['error']}"
        incidents.append(Incident(key, error_kind(str(e["error"])), source, subject, text, (text,), (link,)))
    for link in result.get("links") or []:
        for d in link.get("declined") or []:
            subject = f"{d['area']} on {d['cluster']}: {d['subject']}"
            incidents.append(Incident(f"{source}:declined:{d['area']}:{d['cluster']}:{d['subject']}", "declined",
                                      source, subject, str(d["message"]), (str(d["message"]),), (str(link["link"]),)))
    examined = frozenset(planned - not_copied) | {TASK_SCOPE}
    return Findings(source, tuple(incidents), examined)

