"""What an operator does to links, above the copy engine: each action a manual DAG's core.

- :mod:`~mirrorflow.actions.gap`: moving a stopped partition's checkpoint past a
  retention gap, back to where a truncated source first differs, or healing it from
  the archive (``mirror_resolve_gap``);
- :mod:`~mirrorflow.actions.switch`: moving a link to another leaf of its subtree
  with an exact cut (``mirror_switch_target``);
- :mod:`~mirrorflow.actions.renumber`: carrying checkpoints to new link ids when the
  levels are renumbered (``mirror_carry_checkpoints``);
- :mod:`~mirrorflow.actions.decommission`: taking a leaf out of the tree (``mirror_decommission_cluster``);
- :mod:`~mirrorflow.actions.cut`: what a switch and a carry share: fencing a link's copies and
  marking its checkpoints so that no copy of the old owner moves them again.

Every action is fenced like a copy and refuses what would drop or duplicate a
message. Import from here: these names are the package's public face.
"""

from __future__ import annotations

from mirrorflow.actions.decommission import DecommissionPlan, DecommissionRefused, Move, plan_decommission
from mirrorflow.actions.gap import ACTIONS, Decision, ResolveRefused, decide, resolve
from mirrorflow.actions.renumber import CarryRefused, carry_checkpoints, parse_level_map
from mirrorflow.actions.switch import SwitchError, switch_target

__all__ = [
    "ACTIONS",
    "CarryRefused",
    "Decision",
    "DecommissionPlan",
    "DecommissionRefused",
    "Move",
    "ResolveRefused",
    "SwitchError",
    "carry_checkpoints",
    "decide",
    "parse_level_map",
    "plan_decommission",
    "resolve",
    "switch_target",
]
