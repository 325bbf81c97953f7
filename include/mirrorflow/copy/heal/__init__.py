"""Healing a retention gap from the S3 archive, in place of the Kafka records the source lost.

- :mod:`~mirrorflow.copy.heal.archive`: what the source's own archive restores of a
  gap, and what it lacks (``on_gap: restore``, ``mirror_resolve_gap``'s ``restore``);
- :mod:`~mirrorflow.copy.heal.origin`: the rest, found in other clusters' archives by
  provenance, proven per origin.

The archive's readers (boto3, pyarrow) are imported only where a heal reads one.
Import from here: these names are the room's face.
"""

from __future__ import annotations

from mirrorflow.copy.heal.archive import Heal, heal_plans, plan_heal, unavailable
from mirrorflow.copy.heal.origin import NotProven, origin_source

__all__ = [
    "Heal",
    "NotProven",
    "heal_plans",
    "origin_source",
    "plan_heal",
    "unavailable",
]
