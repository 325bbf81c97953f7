"""A portable position: where a consumer group stands, in terms any cluster can translate.

One record per (owner cluster, group, topic, partition) in the internal topic
``_mirrorflow.offsets`` (compacted, one partition, so each cluster holds the
latest record of every key). The record carries what both precisions need:

* ``timestamp_ms``: CreateTime of the last message the group consumed (Axual's
  rule subtracts a margin and looks it up with offsets-for-times elsewhere);
* ``frontier``: per origin partition (``cluster:topic:partition``), one past the
  highest origin offset among the messages the group consumed. Copies keep each
  origin's order and leave no gaps, so the consumed messages of an origin are
  exactly those below its frontier value, on every cluster (see
  :mod:`.frontier`).

``seq`` grows by one per publish of a key, so a reader can tell the newest
record even if an old one reaches it late (after a link target switch, say).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow import formats
from mirrorflow.errors import MirrorflowError
from mirrorflow.internal_names import OFFSETS_TOPIC

#: The positions' format (mirrorflow.formats holds every kept format's version).
FORMAT_VERSION = formats.FORMATS["positions"].version


@dataclass(frozen=True)
class Position:
    group: str
    topic: str
    partition: int
    #: The cluster where the group consumed (and committed ``offset``).
    owner: str
    #: The committed offset on the owner: the next message the group would read there.
    offset: int
    #: CreateTime (ms) of the last consumed message still retained; ``None`` if there is none.
    timestamp_ms: int | None
    #: Origin partition -> one past the highest consumed origin offset (see module doc).
    frontier: dict[str, int] = field(default_factory=dict)
    #: Owner offset up to which ``frontier`` was computed (normally ``offset``).
    frontier_offset: int = 0
    published_at_ms: int = 0
    seq: int = 0

    def key(self) -> bytes:
        return key_of(self.owner, self.group, self.topic, self.partition)

    def to_json(self) -> bytes:
        data = {"v": FORMAT_VERSION, **asdict(self)}
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str, where: str = f"topic {OFFSETS_TOPIC}") -> Position:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or "v" not in data:
                raise ValueError("not a position record (no format version)")
            # a newer format is refused by name (NewerFormat), never read as if it were this one
            formats.check_record("positions", data, where)
            if data.pop("v") != FORMAT_VERSION:
                raise ValueError(f"not a format-{FORMAT_VERSION} position record")
            data["frontier"] = {str(k): int(v) for k, v in dict(data.get("frontier") or {}).items()}
            pos = cls(**data)
            if not isinstance(pos.partition, int) or not isinstance(pos.offset, int) or pos.offset < 0:
                raise ValueError("partition and offset must be non-negative integers")
            return pos
        except (TypeError, ValueError) as exc:
            raise MirrorflowError(f"{OFFSETS_TOPIC}: malformed position record: {exc}") from None

    def summary(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "partition": self.partition, "owner": self.owner,
                "offset": self.offset, "timestamp_ms": self.timestamp_ms, "seq": self.seq}


def key_of(owner: str, group: str, topic: str, partition: int) -> bytes:
    # '|' cannot appear in cluster or topic names; group ids may contain anything, so it goes last but one
    # and the partition is parsed from the right.
    return f"{owner}|{topic}|{partition}|{group}".encode()
