"""What the page links to: task logs and runs in the Airflow UI, and the operator forms pre-filled.

One home for the UI's URL shapes, so a change of Airflow's routes is one edit.
The form DAG ids and their param names are contracts (docs/architecture.md); a
form of one of several trees names that tree's DAG (``ns``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from mirrorflow.topology import in_tree

FAILOVER_DAG = "mirror_failover_consumer_group"
SWITCH_DAG = "mirror_switch_target"
RESOLVE_GAP_DAG = "mirror_resolve_gap"


def task_log_url(base: str, dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance page (its log) of ``task_id`` in run ``run_id``."""
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"


def run_url(base: str, dag_id: str, run_id: str) -> str:
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def dag_url(base: str, dag_id: str) -> str:
    return f"{base}/dags/{quote(dag_id, safe='')}"


def form(dag_id: str, title: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A DAG's trigger form, pre-filled: the page shows ``params`` for review and triggers the DAG with them.

    Airflow 3.3's UI reads no params from a URL, so the page itself opens the form
    and posts the run through Airflow's REST API (as the UI's own form does); the
    DAG validates the params as for any trigger. Every one of these DAGs has a
    ``dry_run`` param, offered as a tick box.
    """
    return {"dag_id": dag_id, "title": title, "conf": dict(params), "url": dag_url("", dag_id)}


def failover_form(group: str, from_cluster: str, to_cluster: str, ns: str = "") -> dict[str, Any]:
    return form(in_tree(ns, FAILOVER_DAG), f"Fail group {group} over from {from_cluster} to {to_cluster}",
                {"groups": [group], "from_cluster": from_cluster, "to_cluster": to_cluster})


def switch_form(source: str, level: int, target: str, ns: str = "") -> dict[str, Any]:
    return form(in_tree(ns, SWITCH_DAG), f"Switch the level-{level} link of {source} to {target}",
                {"source_cluster": source, "level": level, "target": target})


def resolve_gap_form(link: str, topic: str, partition: int, ns: str = "") -> dict[str, Any]:
    return form(in_tree(ns, RESOLVE_GAP_DAG), f"Resolve the gap of {link} on {topic}[{partition}]",
                {"link": link, "topic": topic, "partition": partition})

