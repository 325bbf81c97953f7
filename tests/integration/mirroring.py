"""Helpers for whole-tree mirroring tests: topologies on the session clusters, unique traffic, convergence, checks.

Every message a test produces is uniquely identified by its value
``<origin cluster>|<key>|<sequence>``; :func:`assert_exactly_once` reads every
cluster back and checks that each one holds each message exactly once, with the
per-origin order within a key preserved.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobResult, build_spec
from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.kafka.codes import RETRIABLE_COORDINATOR
from mirrorflow.topology import Topology, parse_topology
from mirrorflow.topology.routes import effective_links
from tests.integration.kafka_io import produce, read_all

FOUR = """
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - {level: 1, children: [c3, c4]}
"""
#: FOUR with its levels renumbered (1, 3 -> 2, 4): every link gets a new id.
RENUMBERED = """
  level: 4
  children:
    - {level: 2, children: [c1, c2]}
    - {level: 2, children: [c3, c4]}
"""
#: Three clusters: c1 and c2 paired at level 1, c3 across at level 3 (where onboarding adds c4 next to c3).
THREE = """
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - c3
"""
UNBALANCED = """
  level: 3
  children:
    - level: 2
      children:
        - c1
        - {level: 1, children: [c2, c3]}
    - {level: 1, children: [c4, c5]}
"""


def topology(kafka_clusters, tree: str, topics: Iterable[str], names: Iterable[str] = ("c1", "c2", "c3", "c4"),
             extra: str = "") -> Topology:
    clusters = "\n".join(f'  {n}: {{bootstrap: "{kafka_clusters[n].bootstrap}"}}' for n in names)
    patterns = ", ".join(f'"{t}"' for t in topics)
    return parse_topology(f"clusters:\n{clusters}\ntree:{tree}\ntopics: [{patterns}]\n{extra}", source="test")


def topic_everywhere(make_topic, names: Iterable[str] = ("c1", "c2", "c3", "c4"), partitions: int = 2,
                     config: Mapping[str, str] | None = None) -> str:
    """One new topic, created with the same name and partition count on every named cluster."""
    names = list(names)
    topic = make_topic(names[0], partitions=partitions, config=config)
    for name in names[1:]:
        make_topic(name, partitions=partitions, name=topic, config=config)
    return topic


def clients(kafka_clusters, topology: Topology) -> dict[str, dict]:
    return {n: {"bootstrap.servers": kafka_clusters[n].bootstrap} for n in topology.clusters}


def traffic(kafka_clusters, origin: str, topic: str, count: int, keys: int = 5, start: int = 0,
            tag: str = "", now_ms: int | None = None) -> list[str]:
    """Produce ``count`` unique messages on ``origin``; returns their values (the ids).

    ``now_ms`` dates them (an hour back makes their audit windows final at once).
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    records, ids = [], []
    for i in range(start, start + count):
        key = f"{origin}-k{i % keys}"
        value = f"{origin}|{key}|{i:06d}{tag}"
        ids.append(value)
        records.append((key.encode(), value.encode(), [("test.id", value.encode())], now - 1000 + i % 1000))
    produce(kafka_clusters[origin].client_config(), topic, records)
    return ids


def partitions_of(kafka_clusters, cluster: str, topic: str) -> int:
    md = AdminClient(kafka_clusters[cluster].client_config()).list_topics(topic=topic, timeout=10)
    tm = md.topics.get(topic)
    return 0 if tm is None or tm.error is not None else len(tm.partitions)


def run_level(topology: Topology, level: int, cluster_settings: Mapping[str, Mapping], spark=None,
              targets: Mapping[str, str] | None = None, archive: Mapping | None = None) -> JobResult:
    """One run of ``level``; ``archive``: the archive's location, for links with ``on_gap: restore``."""
    links = effective_links(topology, level, targets)
    spec = build_spec(topology, level, f"test-{uuid.uuid4().hex[:8]}", links, cluster_settings, archive=archive)
    return run_job(spec, spark)


def converge(topology: Topology, cluster_settings: Mapping[str, Mapping], spark=None,
             targets: Mapping[str, str] | None = None, max_rounds: int = 8,
             runner: Callable[[int], JobResult] | None = None, archive: Mapping | None = None) -> list[JobResult]:
    """Run every level, lowest first, round after round, until a whole round copies nothing."""
    results: list[JobResult] = []
    for _ in range(max_rounds):
        copied = 0
        for level in topology.levels:
            result = (runner(level) if runner
                      else run_level(topology, level, cluster_settings, spark, targets, archive=archive))
            assert result.ok, result.summary()["errors"]
            results.append(result)
            copied += result.copied
        if copied == 0:
            return results
    raise AssertionError(f"not quiescent after {max_rounds} rounds")


def assert_exactly_once(kafka_clusters, clusters: Iterable[str], topic: str, expected: Iterable[str]) -> dict:
    """Every cluster holds every expected message exactly once, per-origin key order kept; returns counts."""
    expected = list(expected)
    wanted = Counter(expected)
    assert all(n == 1 for n in wanted.values()), "test bug: expected ids are not unique"
    table = {}
    for cluster in clusters:
        partitions = partitions_of(kafka_clusters, cluster, topic)
        assert partitions > 0, f"{cluster}: topic {topic} is missing"
        records = read_all(kafka_clusters[cluster].client_config(), topic, partitions)
        got = Counter(r.value.decode() for r in records)
        missing = sorted(set(wanted) - set(got))
        extra = sorted(set(got) - set(wanted))
        dupes = sorted(v for v, n in got.items() if n > 1)
        assert not (missing or extra or dupes), (
            f"{cluster}/{topic}: {len(missing)} missing {missing[:5]}, {len(extra)} unexpected {extra[:5]}, "
            f"{len(dupes)} duplicated {dupes[:5]}")
        order: dict[str, list[str]] = defaultdict(list)
        for r in records:  # read_all sorts by partition and offset: the log order
            origin, key, seq = r.value.decode().split("|")
            order[f"{origin}|{key}"].append(seq)
        for k, seqs in order.items():
            assert seqs == sorted(seqs), f"{cluster}/{topic}: order of {k} not preserved: {seqs[:20]}"
        table[cluster] = len(records)
    return table


class Traffic:
    """Producers that keep writing unique messages on some clusters until stopped (traffic that flows)."""

    def __init__(self, kafka_clusters, topic: str, origins: Iterable[str], batch: int = 20,
                 interval: float = 0.0) -> None:
        import threading

        self._kafka = kafka_clusters
        self._topic = topic
        self._origins = list(origins)
        self._batch = batch
        self._interval = interval  # pause between rounds of batches: a steady rate instead of a flood
        self._stop = threading.Event()
        self.ids: list[str] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        seq = 100000
        try:
            while not self._stop.is_set():
                for origin in self._origins:
                    self.ids += traffic(self._kafka, origin, self._topic, self._batch, start=seq, tag="t")
                seq += self._batch
                self._stop.wait(self._interval)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ids) < count:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, f"traffic produced only {len(self.ids)} of {count}"
            self._stop.wait(0.05)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(60)
        assert self.error is None, self.error
        return self.ids

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)


class LevelRuns:
    """Every level's run, round after round in a thread, as the scheduler would run them meanwhile.

    ``current()`` returns the topology and effective targets to use for the next
    round, as each scheduled run would see them (operator changes included).
    """

    def __init__(self, current: Callable[[], tuple[Topology, Mapping[str, str]]],
                 settings: Mapping[str, Mapping]) -> None:
        import threading

        self.current, self.settings = current, settings
        self.stop_ = threading.Event()
        self.rounds = self.stale = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop_.is_set():
                topo, targets = self.current()
                for level in topo.levels:
                    result = run_level(topo, level, self.settings, targets=targets)
                    errors = result.summary()["errors"]
                    # a run planned just before an operator switched one of its links is fenced or
                    # refuses to copy to the old target, as a scheduled run would; the next run uses the new one
                    assert all("was switched from" in e or "fenced" in e for e in errors), errors
                    self.stale += len(errors)
                self.rounds += 1
        except BaseException as exc:  # reported on exit
            self.error = exc

    def __enter__(self) -> LevelRuns:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_.set()
        self.thread.join(120)
        assert self.error is None, self.error


def checkpointed(bootstrap: str, link_id: str, topic: str, partitions: int, wait: float = 0.0,
                 stable: bool = True) -> int:
    """Sum of the link's checkpoints.

    With ``wait`` 0, a retriable answer (coordinator loading or moving, or an open
    transaction's offsets not yet stable) counts as 0, for polling loops; otherwise
    it is retried until ``wait`` seconds have passed. A killed producer's open
    transaction keeps its offsets unstable until the broker times it out (60 s);
    ``stable=False`` asks without waiting for that: the committed checkpoints, not
    what the open transaction would commit.
    """
    deadline = time.monotonic() + wait
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": checkpoint_group(link_id),
                         "isolation.level": "read_committed" if stable else "read_uncommitted"})
    try:
        while True:
            try:
                tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
                return sum(max(0, tp.offset) for tp in tps)
            except KafkaException as exc:
                if not (exc.args[0].retriable() or exc.args[0].code() in RETRIABLE_COORDINATOR):
                    raise
                if time.monotonic() >= deadline:
                    if wait:
                        raise
                    return 0
                _poll_pause.wait(0.5)
    finally:
        consumer.close()


_poll_pause = threading.Event()  # never set: .wait(t) paces checkpointed()'s retries
