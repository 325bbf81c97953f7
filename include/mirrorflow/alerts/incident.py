"""What an incident is: something a person must look at, with a key that stays the same while it lasts.

An :class:`Incident` is built from what a DAG already produced (the lag snapshot,
a level run's result, an audit summary); :class:`Findings` is every incident one
run of one source saw, and what that run looked at, so that an incident it could
not see (a link it did not copy, a cluster it did not reach) is not taken for
resolved. :data:`GUIDES` says, per kind, what to do (docs/alerts.md has the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.topology.alerts import KINDS

#: The scope of an incident about the task itself (it failed before it produced anything to read).
TASK_SCOPE = "task"


@dataclass(frozen=True)
class Incident:
    """One thing wrong, for one subject, as one source (a DAG) sees it.

    ``key`` is stable while the incident lasts (``<source>:<what>:<subject ids>``),
    so the same subject seen by the next run is the same incident: one message,
    not one per run. ``scopes`` are the links or clusters the subject belongs to:
    a run that did not look at one of them cannot say the incident is over.
    """

    key: str
    kind: str
    source: str
    subject: str
    summary: str
    details: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown incident kind {self.kind!r} (kinds: {', '.join(KINDS)})")


@dataclass(frozen=True)
class Findings:
    """What one run of ``source`` saw: its incidents, and the scopes it looked at (``None``: everything)."""

    source: str
    incidents: tuple[Incident, ...] = ()
    examined: frozenset[str] | None = None

    def saw(self, scopes: tuple[str, ...] | list[str]) -> bool:
        """Whether this run looked at every one of ``scopes`` (and so would have seen an incident there)."""
        return self.examined is None or all(s in self.examined for s in scopes)


@dataclass(frozen=True)
class Guide:
    """What to do about one kind of incident: a sentence for the message, and the section of docs/alerts.md."""

    title: str
    action: str
    anchor: str


GUIDES: dict[str, Guide] = {
    "lag": Guide(
        "lag over the SLA",
        "Check that the link's level DAG (mirror_level_<L>) is not paused, runs and succeeds, and is not held by a "
        "replication window or a per-run limit; for a consumer group, check its consumers.", "lag"),
    "unreachable": Guide(
        "cluster unreachable",
        "Check the cluster's brokers and the address and credentials of its Airflow connection; nothing is copied "
        "to or from it until it answers.", "unreachable"),
    "gap": Guide(
        "retention gap",
        "The source deleted offsets the link had not copied; the partition is stopped. Decide with "
        "mirror_resolve_gap: restore them from the archive, or skip them with a recorded loss.", "gap"),
    "truncated": Guide(
        "source truncated",
        "The source partition was truncated or recreated under the link; the partition is stopped. Check what the "
        "source lost, then rewind with mirror_resolve_gap (action rewind).", "truncated"),
    "checkpoint": Guide(
        "checkpoint lost",
        "The link's checkpoint on its target is gone. The next level run recovers it from the target's copies or "
        "refuses and says where to resume (mirror_resolve_gap, action resume_from).", "checkpoint"),
    "partition": Guide(
        "partition failed",
        "A partition of a level run failed; every other partition was copied and the next run tries it again. Read "
        "the error in the task log and fix its cause (ACLs, a message the target refuses, topic settings).",
        "partition"),
    "declined": Guide(
        "change declined",
        "A sync declined to make a change on its own because it would delete data or widen access (a follower's own "
        "longer retention, an ACL that covers topics that are not mirrored, ...). Nothing is wrong yet: decide. "
        "Either change the cluster by hand, or allow it in the topology with the key the message names.",
        "declined"),
    "audit": Guide(
        "messages missing or duplicated",
        "The completeness audit found a window that differs from its origin's: read the messages it names in the "
        "task log and check the links into that cluster.", "audit"),
    "proofs": Guide(
        "proven windows dropped",
        "A cluster has not been audited for so long that windows leave the audit's day-long horizon before they "
        "can be proven anywhere: bring the cluster back (see its unreachable incident) or take it out of the "
        "topology; the windows dropped are never announced.", "proofs"),
    "task": Guide(
        "task failed without a result",
        "The task failed before it could say what went wrong (Spark did not start, a connection is missing, ...): "
        "read the task log.", "task"),
}



def task_failed(source: str, task_id: str, error: str) -> Findings:
    """A task that failed without a result to read: one incident for the task; nothing else can be judged."""
    subject = f"task {task_id} of {source}"
    summary = f"{subject} failed without a result: {error}" if error else f"{subject} failed without a result"
    return Findings(source, (Incident(f"{source}:task:{task_id}", "task", source, subject, summary, (),
                                      (TASK_SCOPE,)),), examined=frozenset())
