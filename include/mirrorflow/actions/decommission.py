"""Decommissioning a cluster: take a leaf out of the tree without losing or duplicating a message.

Two kinds of links are affected:

- links that copy *into* the leaving cluster (it is their effective target):
  each moves to another leaf of the same sibling subtree with the exact cut of
  :func:`mirrorflow.actions.switch.switch_target` (the old target's checkpoint;
  the old target is fenced and marked, so no stale copy lands there again);
- the leaving cluster's *own* links: what reached it before the cuts (its own
  producers' messages and copies it has not passed on yet) must still leave
  it. The plan's ``drain`` step runs them up to the end captured after the
  switches, and refuses to finish while anything is left (unless forced).

Link ids must survive the change, because checkpoints are keyed by them: a
removal that would rename a remaining link (an n-ary node whose first leaf
leaves, or one that becomes binary) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.errors import MirrorflowError, TopologyError
from mirrorflow.topology import Topology, effective_links


class DecommissionRefused(MirrorflowError):
    """The cluster cannot leave now; nothing was changed."""


@dataclass
class Move:
    link_id: str
    source: str
    level: int
    old_target: str
    new_target: str


@dataclass
class DecommissionPlan:
    cluster: str
    moves: list[Move] = field(default_factory=list)
    #: The leaving cluster's own link ids, per level (drained before it leaves).
    drain: dict[int, list[str]] = field(default_factory=dict)
    #: The effective link targets after the change (written when the cluster leaves).
    targets: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["drain"] = {str(k): v for k, v in self.drain.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecommissionPlan:
        return cls(cluster=data["cluster"], moves=[Move(**m) for m in data["moves"]],
                   drain={int(k): list(v) for k, v in data["drain"].items()}, targets=dict(data["targets"]))


def plan_decommission(topology: Topology, cluster: str, targets: Mapping[str, str]) -> DecommissionPlan:
    """Where each link into ``cluster`` goes, which links drain, and the targets afterwards."""
    if cluster not in topology.clusters:
        raise DecommissionRefused(f"cluster {cluster!r} is not in the topology (clusters: "
                                  f"{', '.join(topology.clusters)})")
    try:
        after = topology.without_cluster(cluster)
    except TopologyError as exc:
        raise DecommissionRefused(f"{cluster} cannot leave: {exc}") from None
    old_links = {l.link_id: l for l in topology.all_links()}
    renamed = [l.link_id for l in after.all_links() if l.link_id not in old_links]
    if renamed:
        raise DecommissionRefused(f"removing {cluster} would rename link(s) {', '.join(renamed)}, and checkpoints "
                                  "are kept under link ids; edit the topology file instead (see docs/onboarding.md)")
    plan = DecommissionPlan(cluster)
    current = {l.link_id: l for level in topology.levels for l in effective_links(topology, level, targets)}
    for link_id, link in sorted(current.items()):
        if link.source == cluster:
            plan.drain.setdefault(link.level, []).append(link_id)
            continue
        if link_id not in {l.link_id for l in after.all_links()}:
            continue
        remaining = after.link(link_id)
        target = link.default_target
        if target == cluster:
            target = remaining.default_target
            plan.moves.append(Move(link_id, link.source, link.level, cluster, target))
        if target != remaining.default_target:
            plan.targets[link_id] = target
    return plan
