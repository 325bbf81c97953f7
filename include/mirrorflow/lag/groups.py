"""Consumer-group lag: how far each selected group's committed offsets are behind, per cluster.

The same two numbers as for links, from the group's committed offset instead of
a checkpoint. mirrorflow's own groups (``_mirrorflow.*``) are never reported.
The group's state and member count are a courtesy: a group that cannot be
described is still measured.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.kafka import ClusterClient, committed_offsets, earliest_and_stable_or_errors
from mirrorflow.lag.ages import epoch_ms, fill_ages
from mirrorflow.lag.reach import DEFAULT_TIMEOUT, Clusters
from mirrorflow.lag.rows import WHOLE, GroupPartitionLag
from mirrorflow.topology import is_internal_topic
from mirrorflow.topology.offsets import is_internal_group

# one logger for the whole package: its lines keep the name they had before lag became a package
log = logging.getLogger("mirrorflow.lag")


def group_lag(clients: Mapping[str, ClusterClient] | Clusters, groups: Callable[[str], bool] | None = None,
              now: datetime | None = None, *, clusters: Iterable[str] | None = None,
              topics: Callable[[str], bool] | None = None, timeout: float = DEFAULT_TIMEOUT) -> list[GroupPartitionLag]:
    """Lag of every selected consumer group on every cluster, per topic-partition it committed on.

    ``groups`` selects group ids (e.g. ``topology.offsets.selects``); mirrorflow's
    own groups (``_mirrorflow.*``) are never reported. ``clusters`` defaults to
    every cluster with a client; ``topics`` narrows the topics looked at
    (default: every topic but internal ones). Records count from
    the committed offset (or the first offset still on the cluster, if later) to
    the last stable offset; partitions without a committed offset are left out,
    and a group with none at all gets one ``topic == "*"`` row with its state.
    """
    now_ms = epoch_ms(now)
    reach = Clusters.of(clients, timeout)
    names = sorted(clusters if clusters is not None else reach.clients)
    reach.probe(names)
    rows: list[GroupPartitionLag] = []
    pending: list[GroupPartitionLag] = []
    for cluster in names:
        reason = reach.down(cluster)
        if reason is not None:
            rows.append(GroupPartitionLag(cluster, WHOLE, WHOLE, None, None,
                                          error=f"consumer groups not measured: cluster {cluster} {reason}"))
            continue
        client = reach.clients[cluster]
        try:
            described = _groups(client, groups, timeout)
        except MirrorflowError as exc:
            rows.append(GroupPartitionLag(cluster, WHOLE, WHOLE, None, None, error=str(exc)))
            continue
        tps = [(t, p) for t, n in sorted(reach.topics(cluster).items())
               if not is_internal_topic(t) and (topics is None or topics(t)) for p in range(n)]
        # one offset fetch per group (a group's offsets live on its own coordinator); a few at a time
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mirrorflow-lag-groups") as pool:
            answers = pool.map(functools.partial(_committed_or_error, client, tps=tps, timeout=timeout), described)
            committed = dict(zip(described, answers))
        used = sorted({k for c in committed.values() if isinstance(c, dict) for k in c})
        offsets = earliest_and_stable_or_errors(client, used, timeout) if used else {}
        for group, (state, members) in described.items():
            found = committed[group]
            if isinstance(found, str):
                rows.append(GroupPartitionLag(cluster, group, WHOLE, None, None, state=state, members=members,
                                              error=f"committed offsets not read: {found}"))
                continue
            if not found:
                rows.append(GroupPartitionLag(cluster, group, WHOLE, None, None, state=state, members=members,
                                              note="no committed offset on the measured topics"))
                continue
            for (topic, partition), offset in sorted(found.items()):
                row = GroupPartitionLag(cluster, group, topic, partition, None, committed=offset, state=state,
                                        members=members)
                bounds = offsets[(topic, partition)]
                if isinstance(bounds, str):
                    row.error = f"offsets not read: {bounds}"
                    rows.append(row)
                    continue
                low, end, _ = bounds
                start = max(offset, low)
                if offset < low:
                    row.note = f"committed offset {offset} is below the first offset {low} still on the cluster"
                row.end = end
                row.records = max(0, end - start)
                row.seconds = 0.0 if row.records == 0 else None
                rows.append(row)
                if row.records:
                    pending.append(row)
    fill_ages(reach, pending, lambda r: r.cluster, lambda r: r.end - r.records, now_ms, timeout)
    return rows


def _groups(client: ClusterClient, selector: Callable[[str], bool] | None, timeout: float
            ) -> dict[str, tuple[str | None, int | None]]:
    """Selected groups of a cluster with their state and member count (sorted by id).

    Not :func:`mirrorflow.offsets.groups.describe_groups`: that one raises when a
    group cannot be described, where lag only warns and measures the group anyway.
    """
    admin_client = AdminClient(client.admin())  # referenced until every future below is done
    try:
        listing = admin_client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 5)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, "list consumer groups", exc.args[0]) from exc
    for err in listing.errors or []:
        log.warning("cluster %s: listing consumer groups: %s", client.name, err)
    logical = {g.group_id: name for g in listing.valid  # by logical name; a group outside the cluster's names
               if not is_internal_group(g.group_id) and (name := client.logical_group(g.group_id)) is not None}
    ids = sorted(g for g, name in logical.items() if selector is None or selector(name))
    out: dict[str, tuple[str | None, int | None]] = {logical[g]: (None, None) for g in ids}
    if ids:
        futures = admin_client.describe_consumer_groups(ids, request_timeout=timeout)
        for group, future in futures.items():
            try:
                desc = future.result(timeout=timeout + 5)
                out[logical[group]] = (desc.state.name.lower() if desc.state is not None else None,
                                       len(desc.members))
            except Exception as exc:  # the state is a courtesy: offsets are still measured
                log.warning("cluster %s: describing group %s: %s", client.name, group, exc)
    return dict(sorted(out.items()))


def _committed_or_error(client: ClusterClient, group: str, *, tps: list[tuple[str, int]], timeout: float
                        ) -> dict[tuple[str, int], int] | str:
    """The group's committed offsets among ``tps`` (absent where it never committed), or why they were not read.

    :func:`mirrorflow.kafka.admin.committed_offsets` fails the whole read on any
    error; here that failure becomes the group's row, so other groups are still measured.
    """
    if not tps:
        return {}
    try:
        name = client.physical_group(group)  # logical names in, asked under the cluster's
        answer = committed_offsets(client, name, client.on_cluster(TopicPartition(t, p) for t, p in tps),
                                   f"committed offsets of group {name}", timeout)
    except MirrorflowError as exc:
        return str(exc)
    return {(client.logical(tp.topic) or tp.topic, tp.partition): tp.offset for tp in answer if tp.offset >= 0}
