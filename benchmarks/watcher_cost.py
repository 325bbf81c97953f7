"""What the ``on_data`` watcher costs when idle, at 1,000 partitions per level: connections opened and ms per poll.

Two local clusters, one topic of ``--partitions`` partitions on both, the level-1
pair of links between them (each source's partitions measured against its link's
checkpoints): the watcher's measurement (:func:`mirrorflow_airflow.triggers.data.measure_level`)
polled ``--polls`` times back to back, nothing waiting, two ways:

- ``kept``: the clients kept across polls, as the watcher runs now (the sources'
  stable ends alone, asked by timestamp with a kept consumer, 500 partitions a
  request; the checkpoints 500 a request, all at once; sources and links side by side);
- ``kept, 3 reads``: the same clients asking what the poll asked until 2026-11-30:
  three whole reads of offsets per source (earliest, stable, high), each in one
  request (``--ways`` to choose; the lag monitor's measurement with nothing waiting,
  ``OFFSETS_CHUNK`` unbounded);
- ``before``: the same clients asking as in the 2026-11-30 record: offsets with the
  admin client (a future per partition), each link's checkpoints in one OffsetFetch
  (the links' reads overlap in both ways);
- ``fresh``: a new admin client per cluster and per source and a consumer per link
  at every poll, as it ran before 2026-11-28.

Connections are counted by the kernel (mirrorflow_dev.sockets: this process's
TCP connections to the brokers, sampled every 2 ms, so a lower bound), after a
first poll that makes the kept clients. Prints per way: ms per poll (median and
p95), connections opened per poll and per minute at one poll a second::

    python -m benchmarks.watcher_cost --partitions 1000 --polls 60
    python -m benchmarks.watcher_cost --partitions 10000 --topics 10 --polls 20 --ways kept,before
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator

from benchmarks.common import REPO, create_topic, local_clusters

sys.path.insert(0, str(REPO / "plugins"))  # the watcher's module, as benchmarks/mirrorflow_copy.py does
from mirrorflow.kafka import KeptClients
from mirrorflow.kafka import admin as kafka_admin
from mirrorflow.lag import links as lag_links
from mirrorflow.topology import parse_topology  # noqa: E402
from mirrorflow_airflow.triggers.base import CheckContext  # noqa: E402
from mirrorflow_airflow.triggers.data import measure_level  # noqa: E402
from mirrorflow_dev.sockets import ConnectionWatch, own_connections  # noqa: E402


def _polls(level_context: CheckContext, kept: KeptClients | None, polls: int, ports: set[int]
           ) -> tuple[list[float], int]:
    measure_level(1, level_context, kept=kept)  # the first poll makes what is kept
    before = own_connections(ports)
    took = []
    with ConnectionWatch(ports) as watch:
        for _ in range(polls):
            started = time.perf_counter()
            found = measure_level(1, level_context, kept=kept)
            took.append((time.perf_counter() - started) * 1000)
            assert found.total == 0, found
    return took, len(watch.opened_since(before))


@contextlib.contextmanager
def three_reads() -> Iterator[None]:
    """The poll as it was until 2026-11-30: all three kinds of offsets of every partition, each in one request."""
    import mirrorflow_airflow.triggers.data as data

    chunk, link_lag = kafka_admin.OFFSETS_CHUNK, data.link_lag
    kafka_admin.OFFSETS_CHUNK = 10**9
    data.link_lag = lambda *a, **kw: lag_links.link_lag(*a, **{**kw, "ages": True})  # nothing waits: no age read
    try:
        yield
    finally:
        kafka_admin.OFFSETS_CHUNK, data.link_lag = chunk, link_lag


@contextlib.contextmanager
def before() -> Iterator[None]:
    """The poll of the 2026-11-30 record: the admin client's offsets, each link's checkpoints in one OffsetFetch."""
    chunk, by_timestamp = kafka_admin.COMMITTED_CHUNK, kafka_admin._BY_TIMESTAMP
    kafka_admin.COMMITTED_CHUNK, kafka_admin._BY_TIMESTAMP = 10**9, {}
    try:
        yield
    finally:
        kafka_admin.COMMITTED_CHUNK, kafka_admin._BY_TIMESTAMP = chunk, by_timestamp


WAYS = {"kept": (True, contextlib.nullcontext), "3reads": (True, three_reads), "before": (True, before),
        "fresh": (False, contextlib.nullcontext)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=1, help="the partitions spread over this many topics")
    parser.add_argument("--polls", type=int, default=60)
    parser.add_argument("--ways", default="kept,fresh", help=f"comma-separated, of {', '.join(WAYS)}")
    args = parser.parse_args()
    with local_clusters("mirrorflow-watcher-", ("c1", "c2")) as kafka:
        c1, c2 = kafka["c1"].bootstrap, kafka["c2"].bootstrap
        each = args.partitions // args.topics
        topics = [create_topic(c1, each) for _ in range(args.topics)]
        for topic in topics:
            create_topic(c2, each, name=topic)
        topology = parse_topology(f"clusters: {{c1: {{bootstrap: '{c1}'}}, c2: {{bootstrap: '{c2}'}}}}\n"
                                  f"tree: {{level: 1, children: [c1, c2]}}\ntopics: {topics}\n"
                                  "replication: {schedule: on_data}\n", source="benchmark")
        context = CheckContext(topology)
        context.link_targets = lambda: {}  # type: ignore[method-assign]  # no Airflow here: no target switches
        ports = {int(b.rsplit(":", 1)[1]) for b in (c1, c2)}
        print(f"watcher, level 1: 2 links, {each * args.topics} partitions per source in {args.topics} "
              f"topic(s), {args.polls} idle polls")
        for way in args.ways.split(","):
            keeps, how = WAYS[way]
            kept = KeptClients() if keeps else None
            with how():
                took, opened = _polls(context, kept, args.polls, ports)
            p95 = sorted(took)[int(len(took) * 0.95) - 1]
            print(f"  {way:6}: {statistics.median(took):7.1f} ms per poll (p95 {p95:.1f}), "
                  f"{opened / args.polls:5.2f} connections opened per poll, "
                  f"{opened / args.polls * 60:6.0f} per minute at one poll a second"
                  + (f"; {kept.opened} clients made in all" if kept is not None else ""))
            if kept is not None:
                kept.close()


if __name__ == "__main__":
    main()
