"""Consumer groups on one cluster: who is active, what they committed, and committing for them.

Committed offsets are read with a consumer's ``committed()`` (one OffsetFetch),
not ``AdminClient.list_consumer_group_offsets``, which crashes librdkafka 2.16
when the coordinator answers with an error (see ``copy.checkpoints.read_checkpoints``).
Offsets are committed by a consumer that never joins the group: the broker
accepts such a commit only while the group has no members, which is exactly
the rule (never alter an active group), enforced by Kafka itself as well as
checked here first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX
from mirrorflow.kafka import RETRIABLE_COORDINATOR, ClusterClient, Need, call_failed, committed_offsets

#: Commit metadata mirrorflow writes, so the next commit knows where it left the group.
CUT_MARK = "mirrorflow:cut"

_pause = threading.Event()  # never set: .wait(t) is a back-off between retries


@dataclass(frozen=True)
class GroupInfo:
    group: str
    state: str
    members: int

    @property
    def active(self) -> bool:
        return self.members > 0


class GroupActiveError(MirrorflowError):
    """A group has members where mirrorflow was asked to change it."""

    def __init__(self, cluster: str, group: str, members: int) -> None:
        self.cluster, self.group, self.members = cluster, group, members
        super().__init__(f"consumer group {group} has {members} active member(s) on {cluster}; "
                         f"stop its consumers there first")


def describe_groups(client: ClusterClient, selects: Callable[[str], bool], timeout: float = 30.0
                    ) -> dict[str, GroupInfo]:
    """The selected groups known to the cluster, with their state and member count."""
    admin = AdminClient(client.admin())  # referenced until the futures are done
    try:
        listing = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 5)
    except KafkaException as exc:
        raise ClusterUnreachable(client.name, client.bootstrap, str(exc.args[0])) from exc
    except Exception as exc:  # concurrent.futures.TimeoutError
        raise ClusterUnreachable(client.name, client.bootstrap, f"{type(exc).__name__}: {exc}") from exc
    names = sorted(logical for g in listing.valid
                   if (logical := client.logical_group(g.group_id)) is not None and selects(logical))
    return describe(client, names, timeout, admin=admin)


#: A group name no one uses, described to learn whether this principal may describe every group.
VISIBILITY_PROBE = "mirrorflow-visibility-probe"


def describe_every_group(client: ClusterClient, timeout: float = 30.0) -> dict[str, GroupInfo]:
    """Every consumer group of the cluster (mirrorflow's own aside), or an error naming the ACL that hides some.

    Kafka lists only the groups a principal may describe, without a word about
    the others: a decommission checking for active groups would find none. A
    made-up group name is described first; without DESCRIBE on every group
    (``GROUP *``) the cluster refuses it, and so does this.
    """
    admin = AdminClient(client.admin())
    try:
        desc = admin.describe_consumer_groups([VISIBILITY_PROBE], request_timeout=timeout)[VISIBILITY_PROBE]
        desc.result(timeout=timeout + 5)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() != KafkaError.GROUP_ID_NOT_FOUND:
            raise call_failed(client, "listing every consumer group to find the active ones", err,
                              Need("GROUP", "*", "DESCRIBE")) from exc
    return describe_groups(client, lambda g: not g.startswith(INTERNAL_TOPIC_PREFIX), timeout)


def describe(client: ClusterClient, groups: Iterable[str], timeout: float = 30.0,
             admin: AdminClient | None = None) -> dict[str, GroupInfo]:
    """State and member count of ``groups`` (a group unknown to the cluster is reported as ``DEAD``, 0 members).

    ``groups`` are logical names, asked under the cluster's names, and the answer is keyed by the logical ones.
    """
    logical = {client.physical_group(g): g for g in groups}
    names = list(logical)
    if not names:
        return {}
    admin = admin or AdminClient(client.admin())
    out: dict[str, GroupInfo] = {}
    deadline = time.monotonic() + timeout
    pending = names
    while pending:
        futures = admin.describe_consumer_groups(pending, request_timeout=timeout)
        retry = []
        for name, future in futures.items():
            try:
                desc = future.result(timeout=timeout + 5)
                out[logical[name]] = GroupInfo(logical[name], desc.state.name, len(desc.members))
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.GROUP_ID_NOT_FOUND:  # never used here (new consumer protocol says so)
                    out[logical[name]] = GroupInfo(logical[name], "DEAD", 0)
                elif err.code() in RETRIABLE_COORDINATOR and time.monotonic() < deadline:
                    retry.append(name)
                else:
                    raise call_failed(client, f"describe consumer group {name}", err,
                                      Need("GROUP", name, "DESCRIBE")) from exc
        pending = retry
        if pending:
            _pause.wait(0.3)
    return out


def committed(client: ClusterClient, group: str, tps: list[TopicPartition], timeout: float = 30.0
              ) -> dict[tuple[str, int], tuple[int, str]]:
    """``(topic, partition) -> (offset, metadata)`` for the partitions where ``group`` has committed."""
    if not tps:
        return {}
    name = client.physical_group(group)
    answer = committed_offsets(client, name, client.on_cluster(tps), f"offsets of group {name}", timeout)
    return {(client.logical(tp.topic) or tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in answer if tp.offset >= 0}


def commit(client: ClusterClient, group: str, offsets: Mapping[tuple[str, int], tuple[int, str]],
           timeout: float = 30.0) -> None:
    """Commit ``offsets`` for ``group``, which must have no members on this cluster (logical names, committed
    under the cluster's)."""
    if not offsets:
        return
    [info] = describe(client, [group], timeout).values()
    group = client.physical_group(group)
    if info.active:
        raise GroupActiveError(client.name, group, info.members)
    consumer = Consumer(client.consumer(group))
    deadline = time.monotonic() + timeout
    try:
        tps = [TopicPartition(client.physical(t), p, off, metadata=meta)
               for (t, p), (off, meta) in sorted(offsets.items())]
        while True:
            try:
                answer = consumer.commit(offsets=tps, asynchronous=False)
                break
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                    raise call_failed(client, f"commit offsets of group {group}", err, Need("GROUP", group, "READ"),
                                      *(Need("TOPIC", t, "READ") for t in sorted({tp.topic for tp in tps}))) from exc
                _pause.wait(0.2)
        for tp in answer or []:
            if tp.error is not None:
                raise call_failed(client, f"commit offset of group {group} for {tp.topic}[{tp.partition}]",
                                  tp.error, Need("TOPIC", tp.topic, "READ"), Need("GROUP", group, "READ"))
    finally:
        consumer.close()


def cut_metadata(owner: str, owner_offset: int) -> str:
    return f"{CUT_MARK} owner={owner} offset={owner_offset}"


def parse_cut_metadata(metadata: str) -> tuple[str, int] | None:
    """(owner, owner offset) of a commit mirrorflow made, else ``None``."""
    if not metadata.startswith(CUT_MARK):
        return None
    try:
        fields = dict(part.split("=", 1) for part in metadata[len(CUT_MARK):].split())
        return fields["owner"], int(fields["offset"])
    except (KeyError, ValueError):
        return None
