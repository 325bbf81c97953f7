"""Verify a new cluster against its peer: per topic-partition, by origin, counts and checksums.

Messages are compared by identity, not by offset (offsets differ between
clusters): a message's identity is its provenance origin (cluster, topic,
partition, offset), or, for a message produced on the cluster itself, that
cluster and its own offset. Along every path of the tree one origin's messages
arrive in origin-offset order, so on any cluster each origin's messages form an
ordered run. While producers keep writing, the peer and the new cluster each
hold a prefix of every origin's run; they must agree on the part both have:

- *duplicates*: an identity twice on the new cluster (never allowed);
- *missing*: an identity the peer holds, up to what the new cluster has reached
  for that origin, that the new cluster lacks;
- *unexpected*: an identity on the new cluster, within the peer's range for
  that origin, that the peer lacks;
- *checksum*: CRC-32 of keys and values, in origin order, over the common part.

History the new cluster holds before the peer's first retained message (an
archive restore, or retention on the peer since the backfill) is counted, not
an error. Each partition is read up to its last stable offset at the start.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow import provenance
from mirrorflow.internal_names import VERIFY_GROUP
from mirrorflow.kafka import ClusterClient, RangeReader, logical_earliest_and_stable, read_headers

log = logging.getLogger(__name__)

#: origin key ("cluster:topic:partition") -> {origin offset: crc32 of key and value}
Identities = dict[str, dict[int, int]]


@dataclass
class PartitionCheck:
    topic: str
    partition: int
    peer_records: int = 0
    new_records: int = 0
    compared: int = 0
    history_only_on_new: int = 0
    duplicates: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    checksum_mismatch: list[str] = field(default_factory=list)
    #: origin -> [count, crc32] over the compared part
    origins: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected or self.checksum_mismatch)


@dataclass
class VerifyReport:
    peer: str
    new: str
    partitions: list[PartitionCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions)

    def problems(self) -> list[str]:
        out = []
        for p in self.partitions:
            where = f"{p.topic}[{p.partition}]"
            for kind in ("duplicates", "missing", "unexpected", "checksum_mismatch"):
                items = getattr(p, kind)
                if items:
                    shown = ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
                    out.append(f"{where}: {len(items)} {kind.replace('_', ' ')} on {self.new}: {shown}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"peer": self.peer, "new": self.new, "ok": self.ok, "problems": self.problems(),
                "partitions": [asdict(p) for p in self.partitions]}


def read_identities(client: ClusterClient, topic: str, partition: int, low: int, end: int,
                    timeout: float = 30.0) -> tuple[Identities, list[str], int]:
    """``(identities, duplicate identities, records read)`` of ``[low, end)`` with read_committed."""
    out: Identities = {}
    dups: list[str] = []
    count = 0
    if end <= low:
        return out, dups, 0
    here = f"{client.name}:{topic}:{partition}"
    with RangeReader.open(client, VERIFY_GROUP, timeout=timeout, doing="verify read") as reader:
        for msg in reader.range(client.physical(topic), partition, low, end):  # ``topic``: the logical name
            origin = provenance.find(read_headers(msg, client.name), topic, partition)
            key, offset = (f"{origin.cluster}:{origin.topic}:{origin.partition}", origin.offset) if origin \
                else (here, msg.offset())
            crc = zlib.crc32(msg.value() or b"", zlib.crc32(msg.key() or b""))
            seen = out.setdefault(key, {})
            if offset in seen:
                dups.append(f"{key}@{offset}")
            seen[offset] = crc
            count += 1
    return out, dups, count


def compare(topic: str, partition: int, peer: Identities, new: Identities) -> PartitionCheck:
    """The checks above, for one partition (pure: tests feed it hand-made identities)."""
    check = PartitionCheck(topic, partition)
    for key in sorted(set(peer) | set(new)):
        p, n = peer.get(key, {}), new.get(key, {})
        if not p:
            continue  # only on the new cluster: its own messages, or history the peer no longer holds
        p_first, p_last = min(p), max(p)
        n_last = max(n) if n else -1
        check.history_only_on_new += sum(1 for o in n if o < p_first)
        upto = min(p_last, n_last)
        check.missing += [f"{key}@{o}" for o in sorted(p) if o <= n_last and o not in n]
        check.unexpected += [f"{key}@{o}" for o in sorted(n) if p_first <= o <= p_last and o not in p]
        common = [o for o in sorted(p) if o <= upto and o in n]
        crc_p = crc_n = 0
        for o in common:
            crc_p = zlib.crc32(p[o].to_bytes(4, "big"), crc_p)
            crc_n = zlib.crc32(n[o].to_bytes(4, "big"), crc_n)
        if crc_p != crc_n:
            check.checksum_mismatch.append(f"{key} over {len(common)} messages")
        check.compared += len(common)
        check.origins[key] = [len(common), crc_n]
    return check


def verify(peer: ClusterClient, new: ClusterClient, topics: dict[str, int], timeout: float = 30.0) -> VerifyReport:
    """Compare every partition of ``topics`` (name -> partitions) on ``peer`` and ``new``."""
    report = VerifyReport(peer.name, new.name)
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    if not tps:
        return report
    p_low, p_end = logical_earliest_and_stable(peer, tps, timeout)
    n_low, n_end = logical_earliest_and_stable(new, tps, timeout)
    for tp in tps:
        key = (tp.topic, tp.partition)
        p_ids, p_dups, p_count = read_identities(peer, tp.topic, tp.partition, p_low[key], p_end[key], timeout)
        n_ids, n_dups, n_count = read_identities(new, tp.topic, tp.partition, n_low[key], n_end[key], timeout)
        check = compare(tp.topic, tp.partition, p_ids, n_ids)
        check.peer_records, check.new_records = p_count, n_count
        check.duplicates = n_dups
        if p_dups:
            log.warning("%s[%d]: the peer %s itself holds %d duplicate identities (e.g. %s)", tp.topic,
                        tp.partition, peer.name, len(p_dups), p_dups[0])
        report.partitions.append(check)
        log.info("verify %s[%d]: %s %d records, %s %d records, %d compared by origin, %d history only on %s: %s",
                 tp.topic, tp.partition, peer.name, p_count, new.name, n_count, check.compared,
                 check.history_only_on_new, new.name, "ok" if check.ok else "MISMATCH")
    return report


def summarize(checks: Iterable[PartitionCheck]) -> dict[str, int]:
    checks = list(checks)
    return {"partitions": len(checks), "compared": sum(c.compared for c in checks),
            "history_only_on_new": sum(c.history_only_on_new for c in checks),
            "failed_partitions": sum(1 for c in checks if not c.ok)}
