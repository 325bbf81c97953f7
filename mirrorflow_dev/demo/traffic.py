"""The demo's sample traffic and its check: a fresh batch on every cluster, then every cluster read back.

Each message's value is its id, ``<origin>|<key>|<tag>-<seq>``: it names where it
came from and which start produced it (a second start on the same state adds a
new batch instead of colliding). The check reads ``orders`` from every cluster
(read_committed, up to the last stable offsets) and prints a per-cluster table.
A cluster that names topics its own way (``clusters.<c>.names``, docs/naming.md)
gets and gives ``orders`` under its name for it.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow.topology import Topology
from mirrorflow_dev.demo.secured import demo_clients
from mirrorflow_dev.demo.settings import KEYS, RUN_HEADER, TOPIC, TOPIC_PARTITIONS, DemoSettings, say

_pause = threading.Event()  # never set: .wait(t) is a back-off, not synchronisation

# --------------------------------------------------------------------------- sample traffic


def topic_on(topology: Topology, name: str) -> str:
    """``orders`` as cluster ``name`` names it."""
    return topology.topic_naming(name).render(TOPIC)


def ensure_topic(name: str, client: dict, topic: str = TOPIC) -> None:
    """Create ``orders`` on one cluster unless it exists (a second start finds it from the first)."""
    admin = AdminClient(dict(client))
    future = admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)], request_timeout=30)[topic]
    try:
        future.result(timeout=60)
        say(f"{name}: created topic {topic} ({TOPIC_PARTITIONS} partitions, replication factor 1)")
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise SystemExit(f"mirrorflow demo: {name}: cannot create topic {topic}: {exc.args[0].str()}") from None
        say(f"{name}: topic {topic} already exists")


def batch_tag() -> str:
    """Tells this start's messages from an earlier start's: every id of a batch carries it."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2)


def produce_batch(origin: str, client: dict, tag: str, count: int, topic: str = TOPIC) -> list[str]:
    """Produce ``count`` unique messages on ``origin``; returns their values, which are their ids.

    A value reads ``<origin>|<key>|<tag>-<seq>``, so any copy names where it came
    from. Every delivery report is checked: an unacknowledged message would later
    look like a mirroring loss.
    """
    producer = Producer({**client, "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"{msg.value().decode()}: {err.name()}: {err.str()}")

    now_ms = int(time.time() * 1000)
    ids = []
    for seq in range(count):
        key = f"k{seq % KEYS}"
        value = f"{origin}|{key}|{tag}-{seq:05d}"
        producer.produce(topic, key=key.encode(), value=value.encode(), headers=[(RUN_HEADER, tag.encode())],
                         timestamp=now_ms, on_delivery=delivered)
        producer.poll(0)
        ids.append(value)
    unacknowledged = producer.flush(120)
    if failures or unacknowledged:
        raise SystemExit(f"mirrorflow demo: {origin}: {len(failures)} messages failed, {unacknowledged} "
                         f"unacknowledged; first failures: {failures[:3]}")
    return ids


def produce_traffic(demo: DemoSettings, topology: Topology, tag: str) -> list[str]:
    """The topic on every cluster, then one batch per cluster; returns every id produced."""
    clients = demo_clients(demo, topology)
    for name, client in clients.items():
        ensure_topic(name, client, topic_on(topology, name))
    produced = []
    for name, client in clients.items():
        produced += produce_batch(name, client, tag, demo.messages, topic_on(topology, name))
        say(f"{name}: produced {demo.messages} messages to {topic_on(topology, name)} (batch {tag})")
    return produced


# --------------------------------------------------------------------------- the check


def stable_ends(admin: AdminClient, tps: list[TopicPartition], timeout: float = 60.0) -> list[int]:
    """Each partition's last stable offset, once it has caught up with the high watermark.

    A committed transaction's markers reach the partitions just after the commit
    returns; waiting for LSO == high watermark (with a deadline) lets them land.
    If it never does (a transaction left open), the LSO still bounds what is committed.
    """
    deadline = time.monotonic() + timeout
    while True:
        lso = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15)
        hwm = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                 isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=15)
        lso_v = [lso[tp].result().offset for tp in tps]
        hwm_v = [hwm[tp].result().offset for tp in tps]
        if lso_v == hwm_v:
            return lso_v
        if time.monotonic() > deadline:
            say(f"  note: last stable offsets {lso_v} below high watermarks {hwm_v}: an open transaction")
            return lso_v
        _pause.wait(0.1)


def read_topic(name: str, client: dict, topic: str = TOPIC, timeout: float = 180.0) -> list[str]:
    """Every committed value of ``orders`` on one cluster, read_committed up to the last stable offsets.

    ``enable.partition.eof`` marks a partition done when its last offsets are
    transaction markers rather than messages.
    """
    admin = AdminClient(dict(client))
    meta = admin.list_topics(topic=topic, timeout=30).topics.get(topic)
    if meta is None or meta.error is not None:
        raise SystemExit(f"mirrorflow demo: {name}: topic {topic} is missing")
    tps = [TopicPartition(topic, p) for p in sorted(meta.partitions)]
    ends = dict(zip((tp.partition for tp in tps), stable_ends(admin, tps)))
    consumer = Consumer({**client, "group.id": "mirrorflow-demo-check",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    done = {p for p, end in ends.items() if end == 0}
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise SystemExit(f"mirrorflow demo: {name}: read {len(values)} messages of {topic} in "
                                 f"{timeout:.0f}s; partitions not finished: {sorted(set(ends) - done)}")
            for msg in consumer.consume(500, timeout=0.05):  # a partial batch waits the whole timeout
                p = msg.partition()
                if p not in ends:  # a client-level event (e.g. a transient connection error)
                    continue
                if msg.error() is None:
                    if msg.offset() < ends[p]:
                        values.append(msg.value().decode(errors="replace"))
                    next_offset = msg.offset() + 1
                else:  # partition EOF: its offset is where the partition ends
                    next_offset = msg.offset()
                if next_offset >= ends[p]:
                    done.add(p)
    finally:
        consumer.close()
    return values


def origin_of(value: str) -> str:
    return value.split("|", 1)[0]


def print_table(header: list[str], rows: list[list]) -> None:
    """A plain ``|``-separated table: readable, and parsed by the end-to-end test."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells) -> str:
        return " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
    sys.stdout.flush()


def report(demo: DemoSettings, topology: Topology, produced: list[str], tag: str) -> bool:
    """Print the per-cluster table; True if every cluster holds every message exactly once.

    "Every message" is this batch plus whatever earlier starts produced: the union
    of what any cluster holds and what this start produced, so a second start on
    the same state checks the old batches too.
    """
    say(f"Reading {TOPIC} back from every cluster (read_committed, up to the last stable offsets)")
    held = {name: Counter(read_topic(name, client, topic_on(topology, name)))
            for name, client in demo_clients(demo, topology).items()}
    expected = set(produced).union(*held.values())
    say(f"Expected on every cluster: {len(expected)} messages ({len(produced)} from this start, batch {tag}; "
        f"{len(expected) - len(produced)} from earlier starts)")
    origins = list(topology.clusters) + sorted({origin_of(v) for v in expected} - set(topology.clusters))
    header = ["cluster", "messages", "distinct", "duplicates", "missing"] + [f"from {o}" for o in origins]
    rows, bad = [], []
    for name, counts in held.items():
        total, distinct = sum(counts.values()), len(counts)
        missing = len(expected - set(counts))
        per_origin = Counter(origin_of(v) for v in counts.elements())
        rows.append([name, total, distinct, total - distinct, missing] + [per_origin[o] for o in origins])
        if total != distinct or missing:
            bad.append(f"{name} has {total - distinct} duplicates and misses {missing}")
    print_table(header, rows)
    if bad:
        say(f"Result: NOT exactly once: {'; '.join(bad)}")
        return False
    say(f"Result: every cluster holds every message exactly once ({len(expected)} messages on each of "
        f"{', '.join(held)})")
    return True


def held_once(demo: DemoSettings, topology: Topology, produced: list[str]) -> dict[str, str]:
    """Per cluster, what is wrong with its copy of ``produced`` (empty when every cluster holds each once)."""
    wrong = {}
    for name, client in demo_clients(demo, topology).items():
        counts = Counter(v for v in read_topic(name, client, topic_on(topology, name)) if v in set(produced))
        missing = len(set(produced) - set(counts))
        doubled = sum(n - 1 for n in counts.values() if n > 1)
        if missing or doubled:
            wrong[name] = f"{missing} missing, {doubled} duplicates"
    return wrong
