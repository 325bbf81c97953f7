"""``mirror_resolve_gap``: decide for a partition a level run stopped on (manual, with a form).

A level run stops a partition instead of guessing when its source lost offsets the
link had not copied (``on_gap: fail``): the run fails naming link, topic,
partition and the lost range. This DAG is the operator's answer. ``skip`` moves
the link past the gap to the source's first offset and records the loss;
``resume_from`` moves it to a given offset, refused if that would drop what the
source still holds or copy again what the target already holds. ``rewind``
answers a truncated source (the run names it ``truncated source``): it moves the
link back to the first offset whose record is no longer the one copied. ``restore``
copies a retention gap from the source cluster's S3 archive through the link's own
transactions, or is refused naming the offsets no archive holds; ``restore_and_skip``
restores what the archive holds and steps over only those offsets. The checkpoint
moves fenced, like a copy; a dry run shows the decision and changes nothing.
Every decision is a journal line (``gap_resolved``).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.actions import ACTIONS
from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.assets import ARRIVALS, finish_with_arrivals
from mirrorflow_airflow.factories.announce import announce_task
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.steps.resolve_gap import run_resolve

DAG_ID = "mirror_resolve_gap"


def build_resolve_gap_dag(topology: Topology) -> DAG:
    links = sorted(d.link_id for d in topology.all_links())
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description=("Resolve a partition a level run stopped on: skip or restore a retention gap, resume from "
                     "an offset, rewind after a truncation"),
        schedule=None,
        tags=("operations",),
        doc_md=__doc__,
        params={
            "link": Param(links[0], type="string", enum=links, title="Link", description="The link's id"),
            "topic": Param("", type="string", title="Topic", description="The source topic"),
            "partition": Param(0, type="integer", minimum=0, title="Partition"),
            "action": Param("skip", type="string", enum=list(ACTIONS), title="Action",
                            description="skip: past the gap to the source's first offset; "
                                        "resume_from: to the offset below; rewind: after a truncated source, "
                                        "back to the first offset that differs from what was copied; "
                                        "restore: copy the gap from the source's S3 archive; "
                                        "restore_and_skip: restore what the archive holds, skip only the rest"),
            "offset": Param(None, type=["null", "integer"], title="Offset",
                            description="For resume_from; for rewind, optional: the offset its dry run names"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the decision, change nothing"),
        },
    ) as dag:

        @task(outlets=[ARRIVALS])
        def resolve(params: dict | None = None) -> dict:
            """Move the link's checkpoint as decided, fenced, and log a journal line (a restore: an asset event)."""
            p = params or {}
            offset = p.get("offset")
            context = get_current_context()
            result = run_resolve(topology, p["link"], p["topic"], int(p["partition"]), p["action"],
                                 offset=None if offset is None else int(offset), dry_run=bool(p.get("dry_run")),
                                 outlet_events=context["outlet_events"])
            return finish_with_arrivals(context, result, result.pop("announce", []))

        resolve() >> announce_task("resolve")
    return dag
