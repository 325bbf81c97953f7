"""Where a cluster's audit state lives: the compacted topic ``_mirrorflow.audit`` on that cluster.

Three kinds of record, JSON values, the latest per key being the state, each key
led by the window length (``w600|...``): another window length is another set of
tallies, counted from the start, and the old one is simply no longer read.

- ``w<s>|pos|<topic>|<partition>``: the next offset to read (everything below it
  is counted) and the topic's id when it was read (a recreated topic starts over);
- ``w<s>|cell|<topic>|<origin>|<window ms>``: the tally of one cell (count, hash sum);
- ``w<s>|horizon|<topic>``: the timestamp before which this cluster was never
  counted (its oldest retained record when it was first audited);
- ``w<s>|verdict|<topic>|<origin>|<window ms>``: how this cluster's cell compared
  with its origin's when last judged (expected, held, complete), written when it
  changes: the history a status page shows;
- ``w<s>|proven|<topic>|<window ms>``: the ledger of the windows proven complete on this
  cluster (:mod:`mirrorflow.completeness.proven`), in two steps, so each is announced
  once: ``{"at", "messages", "announced": false}`` when proven (its event not yet
  seen in Airflow), ``{"at", "announced": true}`` once a later run saw the event
  (a record without ``announced``, from before the two steps, is announced);
- ``w<s>|audited``: ``{"at"}``, when a run last audited every cluster (kept to
  within an hour): how long proofs have been blocked when one is not audited.

Every value carries its format, ``"v"`` (values without it are format 1, from
before it was marked); a newer format or an unknown kind of record stops the
audit by name (:mod:`mirrorflow.formats`), so that no proof rests on state this
code cannot read.

A run writes the new positions and the changed cells of its topics in Kafka
transactions, a topic never split between two (:class:`StateWriter`), so a run
killed half way counts nothing twice: the next one starts from the positions
that went with the tallies. The history of the tallies stays
in the topic (compaction keeps the latest per cell), for the status page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaException, Producer

from mirrorflow import formats
from mirrorflow.completeness.tally import DEFAULT_WINDOW_S, Tallies, Tally, WindowKey
from mirrorflow.formats import NewerFormat
from mirrorflow.internal_names import AUDIT_READER_GROUP, AUDIT_TOPIC
from mirrorflow.kafka import ClusterClient, Need, call_failed, ensure_compacted, read_whole

TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"}
#: The values' format (``"v"``; mirrorflow.formats), and the kinds of record it has.
FORMAT = formats.FORMATS["audit"].version
_KINDS = ("pos", "cell", "horizon", "verdict", "proven", "audited")
#: Topics whose state one transaction carries at most. A first audit of a large cluster keeps what it
#: counted every this many topics, instead of once at its end, and pays a transaction per batch instead
#: of a producer and a transaction per topic (docs/benchmarks.md, "A first audit").
TOPICS_PER_WRITE = 100


@dataclass(frozen=True)
class Position:
    """Where the audit of one partition stands: ``next`` is the first offset not counted yet."""

    next: int
    topic_id: str | None = None


@dataclass
class AuditState:
    """One cluster's audit state, as stored."""

    window_s: int = DEFAULT_WINDOW_S
    positions: dict[tuple[str, int], Position] = field(default_factory=dict)
    tallies: Tallies = field(default_factory=Tallies)
    horizons: dict[str, int] = field(default_factory=dict)
    #: The last verdict stored per cell (``Verdict.to_dict()``).
    verdicts: dict[WindowKey, dict[str, Any]] = field(default_factory=dict)
    #: The windows in the ledger of proven windows here, announced or not: (topic, window ms).
    proven: set[tuple[str, int]] = field(default_factory=set)
    #: The windows of the ledger whose event was not seen yet: (topic, window ms) -> the stored value.
    unannounced: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    #: When a run last audited every cluster (epoch ms), if one ever did since the record was kept.
    audited_at: int | None = None


def read_state(client: ClusterClient, window_s: int = DEFAULT_WINDOW_S, timeout: float = 30.0) -> AuditState:
    """The audit state kept on ``client``'s cluster for ``window_s`` windows (empty before its first audit)."""
    state = AuditState(window_s, tallies=Tallies(window_s))
    prefix = f"w{window_s}|"
    for msg in read_whole(client, client.own(AUDIT_TOPIC), AUDIT_READER_GROUP, timeout):
        key = msg.key().decode()
        if not key.startswith(prefix):
            continue  # another window length
        value = None if msg.value() is None else json.loads(msg.value())
        kind, _, rest = key[len(prefix):].partition("|")
        where = f"topic {client.own(AUDIT_TOPIC)} on {client.name}, key {key}"
        if kind not in _KINDS:  # a kind of record a newer mirrorflow keeps: its proofs may depend on it
            raise NewerFormat("audit", f"record kind {kind!r}", where)
        if isinstance(value, dict):  # format 1 before it was marked (0.1.0); a newer one stops the audit by name
            formats.check_record("audit", value, where, missing=1)
            value.pop("v", None)
        if kind == "pos":
            topic, _, partition = rest.rpartition("|")
            if value is None:
                state.positions.pop((topic, int(partition)), None)
            else:
                state.positions[(topic, int(partition))] = Position(int(value["next"]), value.get("topic_id"))
        elif kind == "cell":
            cell = WindowKey.decode(rest)
            if value is None:
                state.tallies.cells.pop(cell, None)
            else:
                state.tallies.cells[cell] = Tally.from_dict(value)
        elif kind == "horizon":
            if value is None:
                state.horizons.pop(rest, None)
            else:
                state.horizons[rest] = int(value["ms"])
        elif kind == "verdict":
            if value is None:
                state.verdicts.pop(WindowKey.decode(rest), None)
            else:
                state.verdicts[WindowKey.decode(rest)] = dict(value)
        elif kind == "proven":
            topic, _, window = rest.rpartition("|")
            proven = (topic, int(window))
            (state.proven.discard if value is None else state.proven.add)(proven)
            if value is not None and value.get("announced") is False:
                state.unannounced[proven] = dict(value)
            else:
                state.unannounced.pop(proven, None)
        elif kind == "audited":
            state.audited_at = None if value is None else int(value["at"])
    return state


def proven_entry(at: int, messages: int) -> dict[str, Any]:
    """The ledger's value for a window proven at ``at`` (epoch ms) whose event is not seen yet."""
    return {"at": at, "messages": messages, "announced": False}


def announced_entry(at: int) -> dict[str, Any]:
    """The ledger's value for a window whose event Airflow holds."""
    return {"at": at, "announced": True}


def write_verdicts(client: ClusterClient, window_s: int, verdicts: Mapping[WindowKey, Mapping[str, Any]],
                   timeout: float = 30.0, proven: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
                   audited_at: int | None = None) -> int:
    """Store the changed verdicts of ``client``'s cells, the ledger's new entries ``proven`` there
    ((topic, window ms) -> :func:`proven_entry` or :func:`announced_entry`) and when every cluster was
    audited, in one transaction; returns how many verdicts."""
    if not verdicts and not proven and audited_at is None:
        return 0
    ensure_compacted(client, client.own(AUDIT_TOPIC), TOPIC_CONFIG, timeout)
    records: list[tuple[str, dict | None]] = [(f"w{window_s}|verdict|{cell.encode()}", dict(v))
                                               for cell, v in sorted(verdicts.items())]
    records += [(f"w{window_s}|proven|{topic}|{window}", dict(entry))
                for (topic, window), entry in sorted((proven or {}).items())]
    if audited_at is not None:
        records.append((f"w{window_s}|audited", {"at": audited_at}))
    _write(client, f"{client.own(AUDIT_TOPIC)}-verdicts.{client.name}", records, timeout, "the audit's verdicts")
    return len(verdicts)


class StateWriter:
    """Writes counted topics' new positions, changed cells and horizons, a batch of topics per transaction.

    One transactional producer per cluster and run (``<audit topic>.<cluster>``), made
    and initialised at the first write: before, every topic paid a producer of its
    own, its ``init_transactions`` and a transaction (docs/benchmarks.md, "A first audit").
    :meth:`add` keeps a topic's records; they are written when ``topics_per_write``
    topics wait, and by :meth:`flush` (leaving the ``with`` block without an error
    flushes). A batch is one transaction, so a topic's positions always go with its
    cells. A second audit of the same cluster fences the first (its next write fails
    by name) instead of both writing.
    """

    def __init__(self, client: ClusterClient, window_s: int, timeout: float = 30.0, *,
                 topics_per_write: int | None = None) -> None:
        self.client, self.window_s, self.timeout = client, window_s, timeout
        self.topics_per_write = topics_per_write or TOPICS_PER_WRITE
        self.transactional_id = f"{client.own(AUDIT_TOPIC)}.{client.name}"
        self._producer: Producer | None = None
        self._records: list[tuple[str, dict | None]] = []
        self._topics: list[str] = []

    def add(self, topic: str, positions: Mapping[int, Position], cells: Mapping[WindowKey, Tally],
            horizon: int | None, *, dropped: Iterable[WindowKey] = ()) -> int:
        """Keep one topic's new positions, changed cells (``dropped``: cells to delete, a recreated topic's
        earlier ones) and horizon for the next write; returns how many records."""
        w = f"w{self.window_s}"
        records: list[tuple[str, dict | None]] = [
            (f"{w}|pos|{topic}|{p}", {"next": pos.next, "topic_id": pos.topic_id}) for p, pos in positions.items()]
        records += [(f"{w}|cell|{cell.encode()}", None) for cell in sorted(dropped)]
        records += [(f"{w}|cell|{cell.encode()}", tally.to_dict()) for cell, tally in sorted(cells.items())]
        if horizon is not None:
            records.append((f"{w}|horizon|{topic}", {"ms": horizon}))
        self._records += records
        self._topics.append(topic)
        if len(self._topics) >= self.topics_per_write:
            self.flush()
        return len(records)

    def flush(self) -> None:
        """Write what waits, in one transaction."""
        if not self._records:
            return
        topics, self._topics = self._topics, []
        records, self._records = self._records, []
        what = f"the audit state of {topics[0]}" if len(topics) == 1 else (
            f"the audit state of {len(topics)} topics ({', '.join(topics[:3])}{', ...' if len(topics) > 3 else ''})")
        if self._producer is None:
            ensure_compacted(self.client, self.client.own(AUDIT_TOPIC), TOPIC_CONFIG, self.timeout)
            self._producer = _producer(self.client, self.transactional_id)
            _transact(self.client, self._producer, self.transactional_id, None, self.timeout, what)
        _transact(self.client, self._producer, self.transactional_id, records, self.timeout, what)

    def __enter__(self) -> StateWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.flush()


def _producer(client: ClusterClient, transactional_id: str) -> Producer:
    return Producer(client.producer(**{"transactional.id": transactional_id, "linger.ms": 5}))


def _write(client: ClusterClient, transactional_id: str, records: list[tuple[str, dict | None]], timeout: float,
           what: str) -> None:
    """``records`` (key, JSON value or tombstone) to the audit topic in one transaction of a producer of its own."""
    producer = _producer(client, transactional_id)
    _transact(client, producer, transactional_id, None, timeout, what)
    _transact(client, producer, transactional_id, records, timeout, what)


def _transact(client: ClusterClient, producer: Producer, transactional_id: str,
              records: list[tuple[str, dict | None]] | None, timeout: float, what: str) -> None:
    """``records`` to the audit topic in one transaction of ``producer``; ``None``: initialise its transactions."""
    try:
        if records is None:
            producer.init_transactions(timeout)
            return
        producer.begin_transaction()
        for key, value in records:
            producer.produce(client.own(AUDIT_TOPIC), key=key.encode(), partition=0,
                             value=None if value is None else json.dumps({**value, "v": FORMAT},
                                                                         sort_keys=True).encode())
            producer.poll(0)
        producer.commit_transaction(timeout)
    except KafkaException as exc:
        topic = client.own(AUDIT_TOPIC)
        raise call_failed(client, f"write {what} to {topic}", exc.args[0], Need("TOPIC", topic, "WRITE"),
                          Need("TRANSACTIONAL_ID", transactional_id, "WRITE")) from exc
