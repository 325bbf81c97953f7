"""What a target holds and where a link stands: the copy room's memory, kept on the target cluster.

- :mod:`~mirrorflow.copy.state.checkpoints`: a link's checkpoint (the group
  ``_mirrorflow.link.<link id>``), how it is read, and where a copy starts from it
  (:func:`copy_start`, the one rule every copy path and the planner use);
- :mod:`~mirrorflow.copy.state.copies`: what a target already holds of a source, from its copies' provenance;
- :mod:`~mirrorflow.copy.state.history`: whether the source still holds the history a link copied;
- :mod:`~mirrorflow.copy.state.held`: what a target holds already after the link's source topic was recreated;
- :mod:`~mirrorflow.copy.state.recovery`: where a link whose checkpoint vanished stopped, proven from its copies.

Nothing here copies: the engine (:mod:`mirrorflow.copy.engine`) reads and writes
these through its transactions. Import from here: these names are the room's face.
"""

from __future__ import annotations

from mirrorflow.copy.state.checkpoints import (
    EARLIEST,
    CheckpointMeta,
    LinkSwitchedAway,
    carried_to,
    carry_mark,
    checkpoint_group,
    copy_start,
    moved_under_copy,
    read_checkpoints,
    read_positions,
    record_move,
    record_start,
    source_recreated,
    switch_mark,
    switched_to,
    task_start,
    trusted_last,
)
from mirrorflow.copy.state.copies import CopyScanner, ScanStalled, find_copies
from mirrorflow.copy.state.held import Held, HeldUnknown, held_at_start, skipping_held
from mirrorflow.copy.state.history import Difference, LastRead, first_difference, last_read, verify
from mirrorflow.copy.state.recovery import range_copies, recover_position

__all__ = [
    "EARLIEST",
    "CheckpointMeta",
    "CopyScanner",
    "Difference",
    "Held",
    "HeldUnknown",
    "LastRead",
    "LinkSwitchedAway",
    "ScanStalled",
    "carried_to",
    "carry_mark",
    "checkpoint_group",
    "copy_start",
    "find_copies",
    "first_difference",
    "held_at_start",
    "last_read",
    "moved_under_copy",
    "range_copies",
    "read_checkpoints",
    "read_positions",
    "record_move",
    "record_start",
    "recover_position",
    "skipping_held",
    "source_recreated",
    "switch_mark",
    "switched_to",
    "task_start",
    "trusted_last",
    "verify",
]
