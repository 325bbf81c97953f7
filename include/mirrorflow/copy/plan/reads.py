"""What a link's plan reads of its clusters: one request per question, asked side by side, each timed on the
link's report.

The source's selected topics and partitions; the link's checkpoints on the target
(read past a dead attempt's open transaction: :mod:`mirrorflow.copy.engine.fencing`);
each source partition's earliest and last stable offset, the run's planned end, so
that a run is a bounded batch; both sides' topic ids (a recreated topic has a new
one); and the target's ``offsets.retention.minutes``, read once per target and run.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow.copy.engine.fencing import attempt_checkpoints
from mirrorflow.copy.plan.refusals import leaderless_source
from mirrorflow.copy.spec import JobSpec, LinkJob, LinkReport, PartitionError
from mirrorflow.copy.state.checkpoints import carried_to, switched_to
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import (
    ClusterClient,
    earliest_and_stable_or_leaderless,
    mirrored_topics,
    offsets_retention_s,
    topic_ids,
)
from mirrorflow.topology.model import TopicSelector

log = logging.getLogger(__name__)

Key = tuple[str, int]


@dataclass(frozen=True)
class LinkReads:
    """What the plan read of one link's clusters."""

    #: The partitions to plan: the selected source partitions, but those without a leader.
    tps: list[TopicPartition]
    #: The link's checkpoint on the target per partition: the committed offset and its metadata.
    checkpoints: dict[Key, tuple[int | None, str]]
    lows: dict[Key, int]
    ends: dict[Key, int]
    #: ``"source"`` and ``"target"``: each topic's id there.
    ids: dict[str, dict[str, str]]
    #: How long the target keeps an idle checkpoint (seconds).
    retention_s: float


def read_link(spec: JobSpec, link: LinkJob, selector: TopicSelector, blocked: Collection[str],
              retention: dict[str, tuple[float, str | None]], report: LinkReport, errors: list[PartitionError],
              step: Callable[[str], None], timeout: float) -> LinkReads | None:
    """Read what the link's plan needs; ``None``: the source has no partition to copy.

    ``blocked``: topics shaping blocked, not read; ``retention``: each target's offsets retention read so
    far in this run, shared by its links. A source partition without a leader is an error of its own.
    """
    source, target = spec.client(link.source), spec.client(link.target)
    topics = {t: n for t, n in mirrored_topics(source, timeout).items() if selector.selects(t) and t not in blocked}
    step("source_topics")
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    report.partitions = len(tps)
    report.topics = sorted(topics)
    if not tps:
        return None
    asked = side_by_side(report, {
        "checkpoints": lambda: attempt_checkpoints(target, link.link_id, tps, timeout),
        "source_offsets": lambda: earliest_and_stable_or_leaderless(source, source.on_cluster(tps), timeout),
        "topic_ids": lambda: {"source": _ids(source, topics, timeout), "target": _ids(target, topics, timeout)},
        "offsets_retention": lambda: _retention(target, retention, timeout),
    })
    step("reads")
    checkpoints = asked["checkpoints"]
    _refuse_moved(link, checkpoints)
    lows, ends, leaderless = (source.by_logical(found) for found in asked["source_offsets"])
    for key, error in sorted(leaderless.items()):  # stopped alone, as a target partition without a leader is
        errors.append(leaderless_source(link, key, error))
    tps = [tp for tp in tps if (tp.topic, tp.partition) not in leaderless]
    ids = asked["topic_ids"]
    retention_s, unread = asked["offsets_retention"]
    if unread is not None:
        log.warning("%s: offsets.retention.minutes of %s could not be read (%s); idle checkpoints are committed "
                    "again as if it were Kafka's default of %.0f minutes", link.link_id, link.target, unread,
                    retention_s / 60)
    return LinkReads(tps, checkpoints, lows, ends, ids, retention_s)


def side_by_side(report: LinkReport, reads: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Every read at once, each timed on the report under its name; the first failure, in order, is raised.

    They are independent questions, mostly of different clusters: one after another,
    a far cluster's round trips add up (docs/benchmarks.md, "Distance").
    """
    def timed(name: str, read: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            return read()
        finally:
            report.plan_steps[name] = round(time.monotonic() - started, 3)

    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="plan-read") as pool:
        futures = {name: pool.submit(contextvars.copy_context().run, timed, name, read)  # a poller's kept clients
                   for name, read in reads.items()}
    return {name: future.result() for name, future in futures.items()}


def _retention(target: ClusterClient, retention: dict[str, tuple[float, str | None]],
               timeout: float) -> tuple[float, str | None]:
    """The target's offsets retention, read once per run however many of its links ask."""
    if target.name not in retention:
        retention[target.name] = offsets_retention_s(target, timeout)
    return retention[target.name]


def _ids(client: ClusterClient, topics: Collection[str], timeout: float) -> dict[str, str]:
    """Each logical topic's id on ``client``'s cluster, asked under its name there."""
    found = topic_ids(client, [client.physical(t) for t in topics], timeout)
    return {t: found[client.physical(t)] for t in topics if client.physical(t) in found}


def _refuse_moved(link: LinkJob, checkpoints: dict[Key, tuple[int | None, str]]) -> None:
    """Nothing is copied when the checkpoints say the link moved on: switched to another target, or carried
    to another link id (the levels were renumbered); this run's topology is stale."""
    moved = {new for _, meta in checkpoints.values() if (new := switched_to(meta)) is not None}
    if moved:
        raise MirrorflowError(f"link {link.link_id} was switched from {link.target} to {', '.join(sorted(moved))}; "
                              f"this run still aims at {link.target} (stale effective target): nothing copied")
    renamed = {new for _, meta in checkpoints.values() if (new := carried_to(meta)) is not None}
    if renamed:
        raise MirrorflowError(f"the checkpoints of link {link.link_id} on {link.target} were carried to "
                              f"{', '.join(sorted(renamed))} (the levels were renumbered); this run uses the old "
                              f"topology: nothing copied")
