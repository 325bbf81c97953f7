"""Real consumer groups for offset tests: consume and commit a known prefix, read on from a committed position.

Also a bare commit retried while the coordinator is not ready (:func:`commit`), and a
live member of a group (:class:`Member`) for the tests that must find a group active.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow.kafka.codes import RETRIABLE_COORDINATOR
from tests.integration.kafka_io import client_conf, stable_end_offsets


def consume_and_commit(bootstrap: str | Mapping[str, Any], topic: str, group: str, count: int,
                       timeout: float = 60.0) -> list[str]:
    """Join ``group``, consume exactly ``count`` messages, commit them, leave. Returns their values.

    Messages fetched beyond ``count`` are not committed: they count as not consumed.
    """
    consumer = Consumer({**client_conf(bootstrap), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    taken: list[str] = []
    nexts: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(taken) < count:
            assert time.monotonic() < deadline, f"{group}: consumed only {len(taken)} of {count} on {bootstrap}"
            for msg in consumer.consume(num_messages=count - len(taken), timeout=1.0):
                if msg.error():
                    continue
                taken.append(msg.value().decode())
                nexts[msg.partition()] = msg.offset() + 1
        # a partition with nothing taken and no commit yet gets offset 0, so the test knows where each stands
        never = [tp.partition for tp in consumer.committed(consumer.assignment(), timeout=30)
                 if tp.offset < 0 and tp.partition not in nexts]
        nexts.update({p: 0 for p in never})
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(nexts.items())], asynchronous=False)
    finally:
        consumer.close()  # leaves the group: no members remain
    return taken


def read_from_committed(bootstrap: str | Mapping[str, Any], topic: str, group: str, partitions: int,
                        timeout: float = 60.0) -> list[str]:
    """What ``group`` would read on this cluster from its committed offsets up to the stable end.

    A partition without a committed offset is an error: the test must know where the group stands.
    """
    ends = stable_end_offsets(bootstrap, topic, partitions)
    consumer = Consumer({**client_conf(bootstrap), "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "error"})
    try:
        positions = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        missing = [tp.partition for tp in positions if tp.offset < 0]
        assert not missing, f"{group} has no committed offset on {bootstrap} for {topic} partitions {missing}"
        todo = {tp.partition for tp in positions if tp.offset < ends[tp.partition]}
        consumer.assign(positions)
        values: list[str] = []
        deadline = time.monotonic() + timeout
        while todo:
            assert time.monotonic() < deadline, f"{group}: reading {topic} on {bootstrap} stalled"
            for msg in consumer.consume(500, timeout=0.05):  # a partial batch waits the whole timeout
                p = msg.partition()
                if msg.error():
                    if msg.offset() >= ends[p]:
                        todo.discard(p)
                    continue
                if msg.offset() < ends[p]:
                    values.append(msg.value().decode())
                if msg.offset() + 1 >= ends[p]:
                    todo.discard(p)
        return values
    finally:
        consumer.close()


def committed_offsets(bootstrap: str | Mapping[str, Any], topic: str, group: str, partitions: int) -> list[int]:
    consumer = Consumer({**client_conf(bootstrap), "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                         timeout=30)]
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, offsets: list[TopicPartition], timeout: float = 30.0) -> None:
    """Commit ``offsets`` for ``group``, retried while the group coordinator loads or moves (fresh clusters)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                    raise
    finally:
        consumer.close()


class Member:
    """A live member of a group (subscribed and polling) until stopped."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                   "auto.offset.reset": "latest"})
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self.assigned = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.2)
            if self._consumer.assignment():
                self.assigned.set()
        self._consumer.close()

    def wait_joined(self, where: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.assigned.is_set():
            assert time.monotonic() < deadline, f"the member never joined on {where}"
            self.assigned.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def offsets_round(topo, clients: Mapping[str, Any], owners: Mapping[str, str],
                  precision: tuple[str, float] = ("exact", 60.0)) -> dict:
    """One mirror_offsets pass by hand: publish on the owners, distribute, commit everywhere else.

    ``clients``: cluster -> ``ClusterClient`` (``ClusterClient.from_cluster_config`` for a topology whose
    clusters rename); ``owners``: group (logical name) -> the cluster that owns it.
    """
    from mirrorflow.offsets.distribute import distribute
    from mirrorflow.offsets.groups import describe
    from mirrorflow.offsets.sync import commit_positions, publish_owned
    from mirrorflow.offsets.topic import ensure_topic
    from mirrorflow.topology.routes import effective_links

    for c in clients.values():
        ensure_topic(c)
    for cluster in set(owners.values()):
        publish_owned(clients[cluster], [g for g, o in owners.items() if o == cluster], topo.selects)
    report = distribute({lvl: effective_links(topo, lvl) for lvl in topo.levels}, clients)
    assert not report.errors, report.errors
    out = {}
    for name, c in clients.items():
        infos = describe(c, list(owners))
        out[name] = commit_positions(c, owners, lambda g, i=infos: not i[g].active, lambda _g: precision)
    return out
