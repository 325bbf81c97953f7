"""Admin queries the planner and the checks need, with errors that name the cluster.

confluent-kafka reports trouble as ``KafkaException`` wrapping a ``KafkaError``;
here every such failure becomes a :class:`~mirrorflow.errors.KafkaOperationError`
carrying the cluster name, the operation and the Kafka error code, so a task log
says *which* cluster failed at *what*.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from mirrorflow.errors import ClusterLoginFailed, ClusterUnreachable, KafkaOperationError
from mirrorflow.internal_names import WATERMARKS_GROUP
from mirrorflow.kafka.codes import LEADERLESS, LEADERSHIP_MOVING, RETRIABLE_COORDINATOR
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.deadline import CallAbandoned, within
from mirrorflow.kafka.handshake import HandshakeWatch, plaintext_at_tls_port
from mirrorflow.kafka.kept import KeptClients, active
from mirrorflow.kafka.refusals import CLUSTER_RESOURCE, Need, call_failed, refusal
from mirrorflow.kafka.shared import admin_for, adopt, discard


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    cluster_id: str
    brokers: int
    controller_id: int | None


def probe(client: ClusterClient, timeout: float = 10.0) -> ClusterInfo:
    """Check that a cluster answers, and say which cluster it is.

    A refused login or TLS handshake ends the probe at the first attempt, as
    :class:`~mirrorflow.errors.ClusterLoginFailed` naming the cause (handshake.py);
    a cluster that is down is waited for until ``timeout``.
    """
    watch = HandshakeWatch(client.settings)
    admin_client = AdminClient(client.admin(error_cb=watch))  # kept referenced: a collected client cancels
    future = admin_client.describe_cluster(request_timeout=timeout)
    deadline = time.monotonic() + timeout + 5
    asked_port = False
    while not future.done() and watch.reason is None and time.monotonic() < deadline:
        admin_client.poll(0.05)  # serves the error callback
        if watch.all_down and not asked_port:
            asked_port = True
            watch.reason = plaintext_at_tls_port(client.settings)
    if watch.reason is not None:
        raise ClusterLoginFailed(client.name, client.bootstrap, watch.reason)
    try:
        desc = future.result(timeout=max(0.0, deadline - time.monotonic()))
    except Exception as exc:  # KafkaException, or a future timing out (concurrent.futures.TimeoutError)
        detail = str(exc.args[0]) if isinstance(exc, KafkaException) else f"{type(exc).__name__}: {exc}"
        raise ClusterUnreachable(client.name, client.bootstrap, detail) from exc
    controller = desc.controller.id if desc.controller is not None else None
    adopt(client, admin_client)  # connected: a sharing scope's questions go through it
    return ClusterInfo(client.name, desc.cluster_id, len(desc.nodes), controller)


def list_topics(client: ClusterClient, timeout: float = 10.0) -> dict[str, int]:
    """Every topic on the cluster with its partition count (internal ones included)."""
    admin_client = admin_for(client)
    try:
        metadata = admin_client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnreachable(client.name, client.bootstrap, str(exc.args[0])) from exc
    topics: dict[str, int] = {}
    for name, topic in metadata.topics.items():
        if topic.error is not None:
            raise call_failed(client, f"describe topic {name}", topic.error, Need("TOPIC", name, "DESCRIBE"))
        topics[name] = len(topic.partitions)
    return topics


def mirrored_topics(client: ClusterClient, timeout: float = 10.0) -> dict[str, int]:
    """The cluster's topics in its topic format, by logical name, with their partition counts (internal ones
    as they are; a topic outside the format is the cluster's own, not mirrored, and left out)."""
    return {logical: n for name, n in list_topics(client, timeout).items()
            if (logical := client.logical(name)) is not None}


#: Kafka's default ``offsets.retention.minutes`` (7 days), assumed where a broker's setting cannot be read.
DEFAULT_OFFSETS_RETENTION_S = 7 * 24 * 3600.0


def offsets_retention_s(client: ClusterClient, timeout: float = 10.0) -> tuple[float, str | None]:
    """How long the cluster keeps a memberless group's committed offsets after their last commit (seconds).

    Read from a broker's ``offsets.retention.minutes``. Returns the value and, when it
    could not be read (no ``DescribeConfigs`` permission, say), Kafka's default and why.
    """
    admin_client = admin_for(client)
    try:
        brokers = admin_client.list_topics(timeout=timeout).brokers
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        configs = admin_client.describe_configs([resource], request_timeout=timeout)[resource].result(
            timeout=timeout + 5)
        return float(configs["offsets.retention.minutes"].value) * 60, None
    except Exception as exc:  # any failure: fall back to Kafka's default, and say so
        refused = refusal(client.name, client.settings, exc.args[0], "reading offsets.retention.minutes",
                          Need("CLUSTER", CLUSTER_RESOURCE, "DESCRIBE_CONFIGS")) \
            if isinstance(exc, KafkaException) and exc.args else None
        return DEFAULT_OFFSETS_RETENTION_S, str(refused) if refused else f"{type(exc).__name__}: {exc}"


def group_ids(client: ClusterClient, prefix: str, timeout: float = 10.0) -> list[str]:
    """The ids of the cluster's consumer groups that start with ``prefix``, sorted."""
    admin_client = admin_for(client)
    try:
        listing = admin_client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 5)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, "list consumer groups", exc.args[0]) from exc
    return sorted(g.group_id for g in listing.valid if g.group_id.startswith(prefix))


def topic_ids(client: ClusterClient, names: list[str], timeout: float = 10.0) -> dict[str, str]:
    """Kafka's id of each named topic that exists (one request): a recreated topic gets a new one."""
    if not names:
        return {}
    admin_client = admin_for(client)  # referenced until its futures are done
    try:
        futures = admin_client.describe_topics(TopicCollection(sorted(set(names))), request_timeout=timeout)
    except KafkaException as exc:
        raise call_failed(client, "describe topics", exc.args[0],
                          Need("TOPIC", ", ".join(sorted(set(names))), "DESCRIBE")) from exc
    out: dict[str, str] = {}
    for name, future in futures.items():
        try:
            out[name] = str(future.result(timeout=timeout + 5).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise call_failed(client, f"describe topic {name}", exc.args[0], Need("TOPIC", name, "DESCRIBE")) from exc
    return out


def watermarks(client: ClusterClient, topic: str, partitions: int, timeout: float = 10.0) -> list[tuple[int, int]]:
    """(low, high) offsets of each partition, in partition order."""
    consumer = Consumer(client.consumer(group_id=WATERMARKS_GROUP))
    try:
        result = []
        for p in range(partitions):
            try:
                result.append(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False))
            except KafkaException as exc:
                raise call_failed(client, f"watermarks {topic}[{p}]", exc.args[0],
                                  Need("TOPIC", topic, "DESCRIBE")) from exc
        return result
    finally:
        consumer.close()


_pause = threading.Event()  # never set: .wait(t) is a back-off between retries

Key = tuple[str, int]


#: Partitions per ListOffsets call. librdkafka 2.16's cost for one call grows faster than its partitions, so a
#: large read goes out as several calls, all at once (docs/benchmarks.md, "The watcher's poll, asking less").
OFFSETS_CHUNK = 500


def _offsets(admin_client: AdminClient, cluster: str, keys: list[Key], spec: OffsetSpec,
             isolation: IsolationLevel, timeout: float, settle: float | None = None) -> dict[Key, int | KafkaError]:
    """One offset (or the error that stood for it) per partition, within ``timeout``.

    A partition whose leadership is moving (:data:`LEADERSHIP_MOVING`: a topic
    just created, a broker restarting) is asked again until the deadline, or for
    ``settle`` seconds when given (a reader that reports such a partition alone). The
    whole call runs under :func:`~mirrorflow.kafka.deadline.within`: librdkafka's
    ListOffsets was once seen spinning in its leader lookup, and a read must fail
    by name rather than hang its task. A refusal of the request as a whole is
    raised (``KafkaException``), and so is :class:`CallAbandoned`; the admin
    client is then not to be used again.
    """
    deadline = time.monotonic() + timeout
    settled = deadline if settle is None else min(deadline, time.monotonic() + settle)
    answer: dict[Key, int | KafkaError] = {}
    todo = list(keys)
    while True:
        left = max(1.0, deadline - time.monotonic())

        def ask(todo: list[Key] = todo, left: float = left) -> dict[Key, int | KafkaError]:
            futures = {}
            for i in range(0, len(todo), OFFSETS_CHUNK):  # all asked at once, see OFFSETS_CHUNK
                chunk = {TopicPartition(t, p): spec for t, p in todo[i:i + OFFSETS_CHUNK]}
                futures.update(admin_client.list_offsets(chunk, isolation_level=isolation, request_timeout=left))
            got: dict[Key, int | KafkaError] = {}
            for tp, future in futures.items():
                try:
                    got[(tp.topic, tp.partition)] = future.result(timeout=left + 5).offset
                except KafkaException as exc:
                    got[(tp.topic, tp.partition)] = exc.args[0]
                except Exception as exc:  # a future timing out raises concurrent.futures.TimeoutError
                    got[(tp.topic, tp.partition)] = KafkaError(KafkaError._TIMED_OUT, f"{type(exc).__name__}: {exc}")
            return got

        try:
            answer.update(within(ask, left, f"list offsets on cluster {cluster}"))
        except CallAbandoned:
            discard(admin_client)  # its call may still run: no later caller gets it
            raise
        todo = [k for k in todo if _moving(answer[k])]
        if not todo or time.monotonic() >= settled:
            return answer
        _pause.wait(0.2)


def earliest_and_stable(source: ClusterClient, tps: list[TopicPartition], timeout: float = 30.0
                        ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Earliest offsets and last stable offsets (the end a read_committed reader can reach) of ``tps``."""
    admin_client = admin_for(source)  # referenced until its futures are done
    keys = [(tp.topic, tp.partition) for tp in tps]
    out: list[dict[Key, int]] = []
    for spec, isolation in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                            (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)):
        try:
            answer = _offsets(admin_client, source.name, keys, spec, isolation, timeout)
            failed = next((v for v in answer.values() if isinstance(v, KafkaError)), None)
            if failed is not None:
                raise KafkaException(failed)
        except KafkaException as exc:
            raise call_failed(source, "list offsets", exc.args[0],
                              Need("TOPIC", ", ".join(sorted({tp.topic for tp in tps})), "DESCRIBE")) from exc
        out.append({k: int(v) for k, v in answer.items()})
    return out[0], out[1]


def logical_earliest_and_stable(client: ClusterClient, tps: Iterable[TopicPartition], timeout: float = 30.0
                                ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """:func:`earliest_and_stable` of logical topic-partitions, asked under the cluster's names, keyed by logical."""
    lows, ends = earliest_and_stable(client, client.on_cluster(tps), timeout)
    return client.by_logical(lows), client.by_logical(ends)


#: How long a planner waits for a partition without a leader before it plans the others without it: a leader
#: moves in seconds where there are replicas; a partition whose only replica is down fails alone, by name.
LEADER_WAIT_S = 10.0


def settled_watermarks(consumer: Consumer, tp: TopicPartition, timeout: float,
                       settle: float = LEADER_WAIT_S) -> tuple[int, int]:
    """``consumer.get_watermark_offsets(tp)`` from the broker, asked again for up to ``settle`` seconds while the
    partition has no leader in the client's metadata.

    librdkafka answers ``_UNKNOWN_PARTITION`` at once when its metadata lacks the partition: a topic created
    moments ago, a leader moving. The partition was planned from fresher metadata, so a refresh answers
    (seen once in a CI run: a copy failed on its source's offsets right after the topic was created); one
    still without a leader after ``settle`` raises as it is, and its copy stops by name.
    """
    deadline = time.monotonic() + settle
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in LEADERLESS or time.monotonic() >= deadline:
                raise
        try:
            consumer.list_topics(tp.topic, timeout=min(5.0, timeout))  # refreshes the client's metadata
        except KafkaException:
            pass  # the next answer says whether it helped
        _pause.wait(0.2)


def earliest_and_stable_or_leaderless(source: ClusterClient, tps: list[TopicPartition], timeout: float = 30.0,
                                      leader_wait: float = LEADER_WAIT_S
                                      ) -> tuple[dict[Key, int], dict[Key, int], dict[Key, KafkaError]]:
    """:func:`earliest_and_stable`, but a partition still without a leader after ``leader_wait`` comes back apart.

    Returns the earliest and last stable offsets of the partitions that answered, and
    the error of each leaderless one (:data:`~mirrorflow.kafka.codes.LEADERLESS`), so a
    planner stops that partition alone and copies the rest. Any other error fails the
    call as in :func:`earliest_and_stable`, naming the cluster and the permission.
    """
    admin_client = admin_for(source)  # referenced until its futures are done
    keys = [(tp.topic, tp.partition) for tp in tps]
    # librdkafka fails a whole ListOffsets request when one partition has no leader (_NOENT, "No leaders
    # found"): the leaderless ones are left out first, from the cluster's metadata
    leaderless = _without_leader(admin_client, source, keys, timeout)
    out: list[dict[Key, int]] = []
    for spec, isolation in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                            (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)):
        asked = [k for k in keys if k not in leaderless]
        try:
            answer = _offsets(admin_client, source.name, asked, spec, isolation, timeout,
                              settle=leader_wait) if asked else {}
            for key, value in answer.items():
                if isinstance(value, KafkaError) and value.code() in LEADERLESS:
                    leaderless[key] = value
            failed = next((v for k, v in answer.items() if isinstance(v, KafkaError) and k not in leaderless), None)
            if failed is not None:
                raise KafkaException(failed)
        except KafkaException as exc:
            raise call_failed(source, "list offsets", exc.args[0],
                              Need("TOPIC", ", ".join(sorted({tp.topic for tp in tps})), "DESCRIBE")) from exc
        out.append({k: int(v) for k, v in answer.items() if k not in leaderless})
    lows, ends = out
    return ({k: v for k, v in lows.items() if k not in leaderless},
            {k: v for k, v in ends.items() if k not in leaderless}, leaderless)


def _without_leader(admin_client: AdminClient, source: ClusterClient, keys: list[Key], timeout: float
                    ) -> dict[Key, KafkaError]:
    """The partitions among ``keys`` that the cluster's metadata shows without a leader, with why."""
    try:
        metadata = admin_client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnreachable(source.name, source.bootstrap, str(exc.args[0])) from exc
    out: dict[Key, KafkaError] = {}
    for topic, partition in keys:
        found = metadata.topics.get(topic)
        meta = found.partitions.get(partition) if found is not None else None
        if meta is None:
            continue  # unknown here: the offsets request names it
        if meta.error is not None and meta.error.code() in LEADERLESS:
            out[(topic, partition)] = meta.error
        elif meta.leader < 0:
            out[(topic, partition)] = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "no leader in the metadata")
    return out


#: The offsets a reader may ask of each partition: where its log starts, the end a read_committed reader can
#: reach (the last stable offset), and the end of what is written (the high watermark).
OFFSET_KINDS = {"earliest": (OffsetSpec.earliest, IsolationLevel.READ_UNCOMMITTED),
                "stable": (OffsetSpec.latest, IsolationLevel.READ_COMMITTED),
                "high": (OffsetSpec.latest, IsolationLevel.READ_UNCOMMITTED)}


#: The kinds a poller's kept read_committed consumer answers by timestamp (``offsets_for_times``): -1 is the
#: end (the last stable offset, for such a consumer), -2 the start.
_BY_TIMESTAMP = {"stable": -1, "earliest": -2}


def _offsets_by_timestamp(consumer: Consumer, keys: list[Key], timestamp: int, deadline: float
                          ) -> dict[Key, int | KafkaError]:
    """One kind of offsets read with a consumer's ``offsets_for_times``, :data:`OFFSETS_CHUNK` partitions a call.

    The admin client's ``list_offsets`` answers with a future per partition, and making and
    settling them is most of a large read's time; this answers with one list. Only a
    kept consumer asks this way: whatever it does not answer cleanly is asked again the
    admin client's way, with its retries and its errors (:func:`offsets_or_errors`).
    """
    out: dict[Key, int | KafkaError] = {}
    for i in range(0, len(keys), OFFSETS_CHUNK):
        asked = [TopicPartition(t, p, timestamp) for t, p in keys[i:i + OFFSETS_CHUNK]]
        left = deadline - time.monotonic()
        if left <= 0:
            break  # the rest is asked the admin client's way
        for tp in consumer.offsets_for_times(asked, timeout=left):
            out[(tp.topic, tp.partition)] = tp.error if tp.error is not None or tp.offset < 0 else tp.offset
    return out


def offsets_or_errors(client: ClusterClient, tps: list[tuple[str, int]], kinds: tuple[str, ...],
                      timeout: float = 30.0) -> dict[tuple[str, int], tuple[int, ...] | str]:
    """The ``kinds`` of :data:`OFFSET_KINDS` per partition, in that order, or the error text of one not read.

    For readers that report per partition (the lag monitor, the ``on_data`` watcher): a
    partition whose answer failed or timed out gets its error (``"NAME: description"``)
    instead of failing the whole cluster; a request refused as a whole gives every
    partition its error. A poller with kept clients asks the stable ends and the starts
    with its kept consumer first (:func:`_offsets_by_timestamp`).
    """
    out: dict[tuple[str, int], tuple[int, ...] | str] = {}
    if not tps:
        return out
    admin_client = admin_for(client)  # referenced until every future below is done
    kept = active()
    answers: list[dict[Key, int | str]] = []
    for kind in kinds:
        spec, isolation = OFFSET_KINDS[kind]
        deadline = time.monotonic() + timeout  # for both ways together
        try:
            found = _kept_consumers_answer(kept, client, list(tps), kind, deadline)
            again = [k for k in tps if not isinstance(found.get(k), int)]
            if again:
                found.update(_offsets(admin_client, client.name, again, spec(), isolation,
                                      max(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            err = exc.args[0]
            if kept is not None:
                kept.drop(admin_client, err.name())
            return {k: f"{err.name()}: {err.str()}" for k in tps}
        answers.append({k: f"{v.name()}: {v.str()}" if isinstance(v, KafkaError) else v for k, v in found.items()})
    for key in tps:
        got = [answer.get(key, "no answer") for answer in answers]
        failed = next((a for a in got if isinstance(a, str)), None)
        out[key] = failed if failed is not None else tuple(int(a) for a in got)
    return out


def _kept_consumers_answer(kept: KeptClients | None, client: ClusterClient, keys: list[Key], kind: str,
                           deadline: float) -> dict[Key, int | KafkaError]:
    """What a poller's kept consumer answers of ``kind`` (nothing without one, or for a kind it cannot ask).

    It has half the time to ``deadline``: the other half is for asking again what it did not answer.
    """
    if kept is None or kind not in _BY_TIMESTAMP:
        return {}
    consumer = kept.consumer(client, WATERMARKS_GROUP)
    try:
        return _offsets_by_timestamp(consumer, keys, _BY_TIMESTAMP[kind],
                                     time.monotonic() + (deadline - time.monotonic()) / 2)
    except KafkaException as exc:  # asked again the admin client's way, which names what failed
        kept.drop(consumer, exc.args[0].name())
        return {}


def earliest_and_stable_or_errors(client: ClusterClient, tps: list[tuple[str, int]], timeout: float = 30.0
                                  ) -> dict[tuple[str, int], tuple[int, int, int] | str]:
    """``(earliest offset, last stable offset, high watermark)`` per partition, or the error text of one not read.

    :func:`offsets_or_errors` of all three kinds (what waits behind an open
    transaction lies between the last two).
    """
    out: dict[tuple[str, int], tuple[int, int, int] | str] = {}
    for key, found in offsets_or_errors(client, tps, ("earliest", "stable", "high"), timeout).items():
        out[key] = found if isinstance(found, str) else (found[0], found[1], max(found[1], found[2]))
    return out


def _moving(answer: int | KafkaError) -> bool:
    return isinstance(answer, KafkaError) and answer.code() in LEADERSHIP_MOVING


#: Partitions per OffsetFetch. As with ListOffsets (:data:`OFFSETS_CHUNK`), librdkafka's cost for one request
#: grows faster than its partitions (docs/benchmarks.md, "The watcher's poll, asking less").
COMMITTED_CHUNK = 500


def _committed_at_once(consumer: Consumer, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
    """``consumer.committed(tps)`` in requests of at most :data:`COMMITTED_CHUNK`, all in flight together.

    One consumer serves them all: librdkafka sends each as its own OffsetFetch to the
    group's coordinator, and the binding lets go of the GIL while it waits. The first
    failure is raised, as one request's would be.
    """
    chunks = [tps[i:i + COMMITTED_CHUNK] for i in range(0, len(tps), COMMITTED_CHUNK)]
    if len(chunks) <= 1:
        return consumer.committed(tps, timeout=timeout)
    with ThreadPoolExecutor(min(len(chunks), 8), thread_name_prefix="committed") as pool:
        return [tp for part in pool.map(lambda chunk: consumer.committed(chunk, timeout=timeout), chunks)
                for tp in part]


def committed_offsets(client: ClusterClient, group: str, tps: list[TopicPartition], what: str,
                      timeout: float = 30.0) -> list[TopicPartition]:
    """The committed offsets (and metadata) of ``group`` for ``tps``; offset < 0 where there is none.

    Read with a consumer's ``committed()`` (OffsetFetch), not
    ``AdminClient.list_consumer_group_offsets``: librdkafka 2.16 crashes the process
    (SIGSEGV in ``rd_kafka_cgrp_op``) when an admin client's OffsetFetch answer carries a
    coordinator error, as it does while a fresh cluster loads ``__consumer_offsets``.
    Coordinator errors are retried until ``timeout``; ``what`` names the read in errors.
    More than :data:`COMMITTED_CHUNK` partitions are asked as several requests at once.
    """
    kept = active()  # a poller's kept consumer (mirrorflow.kafka.kept), or one of its own, closed after
    consumer = kept.consumer(client, group) if kept is not None else Consumer(client.consumer(group))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                answer = _committed_at_once(consumer, list(tps), timeout)
                break
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() and err.code() not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                    if kept is not None:
                        kept.drop(consumer, f"{err.name()}")
                    raise call_failed(client, f"read {what}", err, Need("GROUP", group, "DESCRIBE"),
                                      Need("TOPIC", ", ".join(sorted({tp.topic for tp in tps})), "DESCRIBE")) from exc
                _pause.wait(0.2)  # back-off while the group coordinator moves or loads
    finally:
        if kept is None:
            consumer.close()
    for tp in answer:
        if tp.error is not None:
            raise call_failed(client, f"read {what} for {tp.topic}[{tp.partition}]", tp.error,
                              Need("GROUP", group, "DESCRIBE"), Need("TOPIC", tp.topic, "DESCRIBE"))
    return answer
