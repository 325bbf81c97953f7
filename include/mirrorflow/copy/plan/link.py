"""One link's plan: what it copies in this run, cut into the copier's partition tasks.

uReplicator's controller/worker split without a consumer group: the driver (the
Spark job's main process, or any Python process for tests and dry runs) does
every admin call. Once its target is shaped (:mod:`~mirrorflow.copy.plan.shapes`),
a link's plan only reads, so links are planned side by side. Each step's seconds
go on the link's report (``plan_steps``): a slow plan says where it waited.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mirrorflow.copy.plan.reads import read_link
from mirrorflow.copy.plan.shapes import Shaped, tell_shape
from mirrorflow.copy.plan.starts import start_partitions
from mirrorflow.copy.plan.tasks import link_tasks
from mirrorflow.copy.spec import JobSpec, LinkJob, LinkReport, PartitionError
from mirrorflow.copy.task import PartitionTask
from mirrorflow.defaults import DEFAULT_TXN_RECORDS
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology.model import TopicSelector
from mirrorflow.work import PartitionWork

log = logging.getLogger(__name__)


@dataclass
class LinkPlan:
    """One link's plan: its report, the ranges it copies and their tasks, and what it stops by name."""

    link: LinkJob
    report: LinkReport
    tasks: list[PartitionTask] = field(default_factory=list)
    works: list[PartitionWork] = field(default_factory=list)
    errors: list[PartitionError] = field(default_factory=list)

    @classmethod
    def failed(cls, link: LinkJob, exc: MirrorflowError) -> LinkPlan:
        """A link whose plan failed as a whole: reported, nothing of it copied; the other links are planned."""
        report = LinkReport(link.link_id, link.source, link.target, error=str(exc))
        log.error("%s: planning failed: %s", link.link_id, exc)
        return cls(link, report, errors=[
            PartitionError(link.link_id, link.source, link.target, "*", None, None, f"planning failed: {exc}")])


def plan_link(spec: JobSpec, link: LinkJob, selector: TopicSelector, slots: int | Callable[[], int],
              shaped: Shaped, retention: dict[str, tuple[float, str | None]] | None = None,
              timeout: float = 30.0) -> LinkPlan:
    """Tell the target's shaping, read checkpoints and end offsets, and cut the link's work into tasks.

    ``shaped``: the target's shaping and its seconds; ``retention``: each target's
    ``offsets.retention.minutes`` read so far in this run, shared by its links.
    """
    plan = LinkPlan(link, LinkReport(link.link_id, link.source, link.target))
    if not link.exactly_once:
        log.warning("%s: copies AT LEAST ONCE (replication exactly_once: false): a copy that fails or is killed "
                    "duplicates up to %d messages per partition on %s", link.link_id,
                    link.txn_records or DEFAULT_TXN_RECORDS, link.target)
    step = _timer(plan.report, time.monotonic() - shaped.seconds)

    tell_shape(spec, link, shaped, plan.report, plan.errors, timeout)
    step("target_shapes")
    read = read_link(spec, link, selector, shaped.blocked, {} if retention is None else retention, plan.report,
                     plan.errors, step, timeout)
    if read is None:
        return plan
    starts = start_partitions(spec, link, read, plan.errors, step, timeout)
    plan.works = starts.works
    plan.report.planned_records = sum(w.records for w in plan.works)
    plan.tasks = link_tasks(spec, link, starts, read.ids, shaped, slots)
    return plan


def _timer(report: LinkReport, started: float) -> Callable[[str], None]:
    """``step(name)`` writes the seconds since the step before (or ``started``) as the step's, on the report."""
    clock = [started]

    def step(name: str) -> None:
        now = time.monotonic()
        report.plan_steps[name] = round(now - clock[0], 3)
        clock[0] = now

    return step
