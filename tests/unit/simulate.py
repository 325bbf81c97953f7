"""A pure-Python model of tree distribution, to check the copy-flags rule.

A message is produced at one cluster; every distributor on every cluster that
holds a copy decides on it (with :func:`mirrorflow.copyflags.decide` unless a
test swaps in a broken rule) and, when it copies, delivers a new copy with the
rewritten headers to a target chosen by ``choose`` (any leaf of the sibling
subtree). The run is bounded: more copies than a correct run could ever make
means the rule loops, and the simulation stops and says so instead of hanging.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mirrorflow import copyflags
from mirrorflow.topology import Distributor

Choose = Callable[[Distributor], str]
Decide = Callable[[int, list], copyflags.Decision]


class LoopDetected(AssertionError):
    """The rule under test made more copies than any loop-free distribution can."""


@dataclass
class Run:
    received: Counter = field(default_factory=Counter)
    #: (source, link id, target, flags_out) per copy, in the order made
    copies: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: (node path, sibling path) -> how many copies entered that sibling subtree from that node
    entries: Counter = field(default_factory=Counter)


def default_target(dist: Distributor) -> str:
    return dist.default_target


def simulate(
    distributors: Mapping[str, Sequence[Distributor]],
    origin: str,
    *,
    choose: Choose = default_target,
    decide: Decide = copyflags.decide,
    headers: list | None = None,
    max_copies: int | None = None,
) -> Run:
    """Distribute one message produced at ``origin``; return who received what."""
    clusters = list(distributors)
    # A loop-free run makes exactly len(clusters) - 1 copies; allow generous slack
    # so a rule that duplicates is reported as duplicates, and only real loops trip this.
    limit = max_copies if max_copies is not None else 4 * len(clusters) ** 2
    run = Run()
    run.received[origin] += 1
    pending = deque([(origin, list(headers or []))])
    while pending:
        cluster, hdrs = pending.popleft()
        for dist in distributors[cluster]:
            decision = decide(dist.level, hdrs)
            if not decision.copy:
                continue
            target = choose(dist)
            assert dist.accepts(target), f"{dist.link_id}: chose {target}, not in {dist.sibling_leaves}"
            run.copies.append((cluster, dist.link_id, target, decision.flags_out))
            run.entries[(dist.node_path, dist.sibling_path)] += 1
            if len(run.copies) > limit:
                raise LoopDetected(f"more than {limit} copies of one message: the rule loops "
                                   f"(last copies: {run.copies[-6:]})")
            run.received[target] += 1
            pending.append((target, decision.headers_for_copy(hdrs)))
    return run


def exactly_once(run: Run, clusters: Sequence[str]) -> bool:
    return set(run.received) == set(clusters) and all(run.received[c] == 1 for c in clusters)
