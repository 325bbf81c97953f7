"""The Kafka clients a copy thread uses, kept from one partition range to the next.

Why they are kept: when ranges are small, setting up a range's clients cost
more than copying it (docs/benchmarks.md): a fresh consumer first has to find
the group coordinator before it can read the link's checkpoint, and a fresh
reader's first question goes to a bootstrap connection that librdkafka drops
once it knows the real brokers. A
Spark task copies its ranges one after the other on each copy thread, so each
thread keeps, from a range that ended cleanly, for its next range:

- the *reader* (source consumer), per (source cluster, link). It never jumps
  (``auto.offset.reset=error``: records deleted under a copy stop it, by name). It is unassigned
  between ranges, and it long-polls at most ``READER_FETCH_WAIT_MS`` (every range reader's,
  :mod:`mirrorflow.kafka.ranges` says why): the broker answers one request per connection
  at a time, so the next range's first request waits behind the previous range's last, idle fetch;
- the *checkpoint consumer* (the link's group on the target), per (target, link);
- at least once, the *producer*, per (target, the target topic's size limit). It compresses
  its copies with the target cluster's codec (:mod:`mirrorflow.kafka.compression`).

What is never kept:

- an exactly-once producer. Its ``transactional.id`` names one transaction
  group of (link, topic) (see :data:`~mirrorflow.copy.txn_groups.TXN_GROUPS`): that is what
  fences the group's zombie copies, so each group gets its own producer and its
  own ``init_transactions``;
- any client of a range that ended with an error or an exception. It is
  closed, and the next range starts with new ones, as if nothing had been kept.

A pool belongs to one thread; nothing here is locked.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer

from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import transactional_id
from mirrorflow.internal_names import link_reader_group as reader_group
from mirrorflow.kafka import READER_FETCH_WAIT_MS, ClusterClient, codec_settings, copy_codec, size_settings

#: How much one fetch may bring of one partition (librdkafka's default is 1 MiB). librdkafka
#: has one fetch in flight per broker, so a small answer stalls a one-partition copy between
#: fetches (docs/benchmarks.md); the raw client loop it is measured against uses 10 MiB as well.
READER_PARTITION_FETCH_BYTES = 10 * 1024 * 1024

#: How much the reader may hold fetched ahead of the copy (librdkafka's default is 64 MiB). The
#: copy stops reading while it commits; with room for about a second of fetches the source keeps
#: being read meanwhile, so reading and writing overlap instead of taking turns (docs/benchmarks.md).
READER_QUEUE_KBYTES = 128 * 1024


def _unless_set(settings: Any, **defaults: Any) -> dict[str, Any]:
    """``defaults`` the cluster's own settings (its ``config`` in the topology) do not set."""
    return {k: v for k, v in defaults.items() if k not in settings}


def new_producer(task: PartitionTask, target: ClusterClient) -> Producer:
    """The producer of one range: transactional (exactly once) or idempotent (at least once)."""
    # Connect to the brokers as soon as they are known. With librdkafka's sparse default,
    # acquiring the producer id waited for a connection made on a later timer tick, which
    # made init_transactions slow and erratic (docs/benchmarks.md).
    # A cluster's own ``config`` may set it back (then one connection per broker per producer).
    conf: dict[str, Any] = {"linger.ms": 5, **_unless_set(target.settings, **{"enable.sparse.connections": False}),
                            # Report failed deliveries only: the copier needs nothing from a success, and a
                            # report per copy (a Python call each) costs CPU that small messages feel.
                            "delivery.report.only.error": True,
                            # A copy never creates its target topic: a broker with auto.create.topics.enable (Kafka's
                            # default) would make one with its own defaults, not in the source's shape. A target
                            # topic gone during a copy fails that partition by name; the next run's planner
                            # creates it again as the source is (mirrorflow.kafka.topics).
                            "allow.auto.create.topics": False}
    if task.exactly_once:
        conf["transactional.id"] = target.own(transactional_id(task.link_id, task.topic, task.partition))
        conf["transaction.timeout.ms"] = 60000
    else:
        conf["enable.idempotence"] = True  # no duplicates from the producer's own retries, at least
    # Copies are compressed (the target cluster's codec, else COPY_CODEC): uncompressed, a compressed
    # source took many times its bytes on the target. Batches fit the target topic's limit, which
    # applies to whole record batches as stored, that is compressed (mirrorflow.kafka.compression).
    conf.update(codec_settings(target.settings))
    conf.update(size_settings(copy_codec(target.settings), task.max_message_bytes))
    return Producer(target.producer(**conf))


class CopyClients:
    """One copy thread's clients between ranges: take them with the getters, give them back with :meth:`release`."""

    def __init__(self) -> None:
        self._readers: dict[tuple[str, str], Consumer] = {}
        self._checkpoints: dict[tuple[str, str], Consumer] = {}
        self._producers: dict[tuple[str, int | None], Producer] = {}

    def kept(self) -> dict[str, int]:
        """How many clients wait for a next range, by kind."""
        return {"readers": len(self._readers), "checkpoints": len(self._checkpoints),
                "producers": len(self._producers)}

    def reader(self, task: PartitionTask, source: ClusterClient) -> tuple[Consumer, bool]:
        """The source consumer, and whether it was kept (so it may still hold another range's messages)."""
        kept = self._readers.pop((source.name, task.link_id), None)
        if kept is not None:
            return kept, True
        return Consumer(source.consumer(source.own(reader_group(task.link_id)), **{
            "enable.partition.eof": True,
            # Never jump: records deleted under a copy are a gap, decided by the copy (on_gap), not skipped
            # by librdkafka (mirrorflow.copy.state.checkpoints.moved_under_copy). Not a cluster's to change.
            "auto.offset.reset": "error",
            **_unless_set(source.settings, **{"fetch.wait.max.ms": READER_FETCH_WAIT_MS,
                                              "max.partition.fetch.bytes": READER_PARTITION_FETCH_BYTES,
                                              "queued.max.messages.kbytes": READER_QUEUE_KBYTES}),
        })), False

    def checkpoint(self, task: PartitionTask, target: ClusterClient) -> Consumer:
        kept = self._checkpoints.pop((target.name, task.link_id), None)
        # Read uncommitted: it reads no records, and its end-offset query (the audit's target
        # span) must give the high watermark, not the last stable offset, which lags behind
        # the transaction markers a commit writes after it returns. Its offset fetch is therefore not
        # "require stable"; it needs not be: a copy reads its checkpoint after its own init_transactions,
        # which ends any earlier transaction holding offsets of these partitions.
        return kept if kept is not None else Consumer(target.consumer(target.own(checkpoint_group(task.link_id)),
                                                                      **{"isolation.level": "read_uncommitted"}))

    def producer(self, task: PartitionTask, target: ClusterClient) -> Producer:
        kept = None if task.exactly_once else self._producers.pop((target.name, task.max_message_bytes), None)
        return kept if kept is not None else new_producer(task, target)

    def release(self, task: PartitionTask, source: ClusterClient, target: ClusterClient, *, reader: Consumer,
                checkpoint: Consumer, producer: Producer, clean: bool, abandoned: bool) -> None:
        """Keep a cleanly finished range's clients for the next range; close everything else.

        ``abandoned``: a producer call is still blocked in a helper thread, so the
        producer must not be touched at all (not even flushed).
        """
        if clean:
            reader.unassign()
            _keep(self._readers, (source.name, task.link_id), reader)
            _keep(self._checkpoints, (target.name, task.link_id), checkpoint)
        else:
            reader.close()
            checkpoint.close()
        if abandoned:
            return
        if clean and not task.exactly_once:
            _keep(self._producers, (target.name, task.max_message_bytes), producer)
            return
        _flush_quietly(producer)

    def close(self) -> None:
        for consumer in [*self._readers.values(), *self._checkpoints.values()]:
            consumer.close()
        for producer in self._producers.values():
            _flush_quietly(producer)
        self._readers.clear()
        self._checkpoints.clear()
        self._producers.clear()


def _keep(pool: dict, key: tuple, client: Any) -> None:
    old = pool.pop(key, None)  # only if a pool were shared by two ranges at once; never leak a client then
    if isinstance(old, Consumer):
        old.close()
    elif old is not None:
        _flush_quietly(old)
    pool[key] = client


def _flush_quietly(producer: Producer) -> None:
    try:
        producer.flush(5)
    except KafkaException:
        pass  # a fenced or fatal producer reports again here; the range's result already holds the error
