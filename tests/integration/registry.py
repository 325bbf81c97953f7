"""Registrations on the primary, written into its storage topic as a Confluent-compatible registry writes them.

No Confluent Schema Registry or Karapace can be installed on this machine (see
docs/schemas.md), so for the storage-topic path the tests play the primary
registry's writer: the same keys, byte for byte, and values with the same
fields a registry appends for a registration, a soft or hard delete, a
config or a mode change; ids assigned the way a registry assigns them (a
schema already known under any subject keeps its id, otherwise max + 1).
Everything downstream (the sync, the targets' topics, the level copy) is the
real thing on real clusters.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from confluent_kafka import Producer

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.schemas.records import CONFIG, MODE, SCHEMA, Key, RegistryState, content
from mirrorflow.schemas.topic_store import TopicStore
from tests.integration.kafka_io import client_conf


@dataclass
class PrimaryRegistry:
    bootstrap: str | Mapping[str, Any]  # an address, or a whole client config (secured clusters)
    topic: str
    ids: dict[Any, int] = field(default_factory=dict)
    versions: dict[str, dict[int, dict]] = field(default_factory=dict)

    def _put(self, key: Key, value: dict | None) -> None:
        producer = Producer({**client_conf(self.bootstrap), "enable.idempotence": True})
        producer.produce(self.topic, key=key.to_bytes(),
                         value=None if value is None else json.dumps(value).encode(), partition=0)
        assert producer.flush(30) == 0

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict] | None = None) -> tuple[int, int]:
        value: dict[str, Any] = {"subject": subject, "schema": schema}
        if schema_type != "AVRO":
            value["schemaType"] = schema_type
        if references:
            value["references"] = references
        ident = content({**value, "id": 0})
        for existing in self.versions.get(subject, {}).values():
            if content(existing) == ident and not existing.get("deleted"):
                return existing["id"], existing["version"]
        sid = self.ids.setdefault(ident, max(self.ids.values(), default=0) + 1)
        version = max(self.versions.get(subject, {}), default=0) + 1
        value.update(version=version, id=sid, deleted=False)
        self.versions.setdefault(subject, {})[version] = value
        self._put(Key(SCHEMA, subject, version), value)
        return sid, version

    def soft_delete(self, subject: str, version: int) -> None:
        value = dict(self.versions[subject][version], deleted=True)
        self.versions[subject][version] = value
        self._put(Key(SCHEMA, subject, version), value)

    def hard_delete(self, subject: str, version: int) -> None:
        assert self.versions[subject][version]["deleted"], "a registry hard-deletes only soft-deleted versions"
        del self.versions[subject][version]
        self._put(Key(SCHEMA, subject, version), None)

    def set_config(self, subject: str | None, level: str) -> None:
        self._put(Key(CONFIG, subject), {"compatibilityLevel": level})

    def set_mode(self, subject: str | None, mode: str | None) -> None:
        self._put(Key(MODE, subject), None if mode is None else {"mode": mode})


def registry_state(bootstrap: str | Mapping[str, Any], name: str, topic: str) -> RegistryState:
    return TopicStore(ClusterClient(name, client_conf(bootstrap)), topic).read()


def encode_avro(schema_id: int, schema: str, record: dict) -> bytes:
    """Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary."""
    import fastavro

    out = BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema)), record)
    return out.getvalue()


def decode_avro(payload: bytes, state: RegistryState) -> dict:
    """Decode with nothing but ``state``: the schema comes from the id in the message."""
    import fastavro

    magic, schema_id = struct.unpack(">bI", payload[:5])
    assert magic == 0, f"not the Confluent wire format (magic {magic})"
    registration = state.by_id().get(schema_id)
    assert registration is not None, f"schema id {schema_id} is unknown to this registry"
    schema = fastavro.parse_schema(json.loads(registration["schema"]))
    return fastavro.schemaless_reader(BytesIO(payload[5:]), schema)
