"""The copy engine: what runs a copy, on a Spark executor or in this process.

- :mod:`~mirrorflow.copy.engine.executor`: the ranges of one Spark task on a few
  threads, and :func:`execute`, which hands a driver's bins of tasks to Spark;
- :mod:`~mirrorflow.copy.engine.partition`: one partition range, exactly once;
- :mod:`~mirrorflow.copy.engine.group`: the ranges of one transaction group in shared transactions;
- :mod:`~mirrorflow.copy.engine.transactions`: how copies and checkpoints are made durable together;
- :mod:`~mirrorflow.copy.engine.clients`: the clients a copy thread keeps between ranges;
- :mod:`~mirrorflow.copy.engine.fencing`: fencing a link's copies, and a new attempt's
  read of its checkpoints past a dead attempt's open transaction;
- :mod:`~mirrorflow.copy.engine.throttle`, :mod:`~mirrorflow.copy.engine.spans`,
  :mod:`~mirrorflow.copy.engine.access`: the byte-rate cap, the target span an audit
  line reports, and which permission each stage of a copy needs.

Spark workers import this room and what it imports only: no topology, no pydantic,
no Airflow. Import from here: these names are the room's face.
"""

from __future__ import annotations

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.executor import copy_tasks, execute, passed
from mirrorflow.copy.engine.fencing import attempt_checkpoints, fence
from mirrorflow.copy.engine.group import copy_group
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.engine.transactions import fenced_commit

__all__ = [
    "CopyClients",
    "attempt_checkpoints",
    "copy_group",
    "copy_partition",
    "copy_tasks",
    "execute",
    "fence",
    "fenced_commit",
    "passed",
]
