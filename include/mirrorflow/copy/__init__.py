"""Copying a link's partitions exactly once: the copy room, in rooms by role (docs/exactly-once.md).

From the bottom up; a room imports the rooms below it, never one above:

1. here, the vocabulary every room shares: :mod:`~mirrorflow.copy.task` (what the
   planner hands a copier and gets back), :mod:`~mirrorflow.copy.txn_groups` (which
   partitions share a ``transactional.id``), :mod:`~mirrorflow.copy.headers` (the
   headers a copy is produced with);
2. :mod:`mirrorflow.copy.state`: what a target holds and where a link stands
   (checkpoints, copies, history, held, recovery);
3. :mod:`mirrorflow.copy.heal`: a retention gap healed from the archive;
4. :mod:`mirrorflow.copy.engine`: what runs a copy (executor, partition, group,
   transactions, clients);
5. the driver, here: :mod:`~mirrorflow.copy.spec` (the job spec and its results),
   :mod:`~mirrorflow.copy.plan` (what each link copies in a run),
   :mod:`~mirrorflow.copy.job` (:func:`run_job`: plan, copy, write the journal).

What an operator does to links (resolve a gap, switch a target, carry checkpoints)
is :mod:`mirrorflow.actions`, above this room. Outside ``copy/`` import from the
faces only (this one and each room's). The driver's names are loaded on first
use: they pull in the topology's models (pydantic), which a Spark worker, which
imports the engine, never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.copy.task import OnGap, PartitionResult, PartitionTask
from mirrorflow.copy.txn_groups import TXN_GROUPS, transactional_id, transactional_id_prefix, txn_group, txn_unit
from mirrorflow.faces import on_first_use

if TYPE_CHECKING:
    from mirrorflow.copy.job import run_job
    from mirrorflow.copy.spec import (
        JOB_ENV,
        JobResult,
        JobSpec,
        LinkJob,
        LinkReport,
        PartitionError,
        build_spec,
        heals_from_archive,
        link_job,
        spec_clusters,
    )

#: The driver's names, and the module of this package each comes from.
_DRIVER = {
    "JOB_ENV": "spec", "JobResult": "spec", "JobSpec": "spec", "LinkJob": "spec", "LinkReport": "spec",
    "PartitionError": "spec", "build_spec": "spec", "heals_from_archive": "spec", "link_job": "spec",
    "spec_clusters": "spec", "run_job": "job",
}


__getattr__ = on_first_use(__name__, _DRIVER)


__all__ = [
    "JOB_ENV",
    "TXN_GROUPS",
    "CopyHeaders",
    "JobResult",
    "JobSpec",
    "LinkJob",
    "LinkReport",
    "OnGap",
    "PartitionError",
    "PartitionResult",
    "PartitionTask",
    "build_spec",
    "heals_from_archive",
    "link_job",
    "run_job",
    "spec_clusters",
    "transactional_id",
    "transactional_id_prefix",
    "txn_group",
    "txn_unit",
]
