"""A registry reached through its storage topic (``_schemas`` by default) on its Kafka cluster.

This is how the Axual distributor works: read the primary registry's topic,
write the translated records into each target registry's topic, and let the
registry there pick them up on its own, as it does with its own writes. It
needs no registry process on the target while syncing, only the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mirrorflow.errors import MirrorflowError
from mirrorflow.internal_names import SCHEMAS_READER_GROUP as READER_GROUP
from mirrorflow.kafka import ClusterClient, ensure_compacted, read_whole, write_all
from mirrorflow.schemas.plan import Write
from mirrorflow.schemas.records import Key, RecordError, RegistryState, decode_value, encode_value

DEFAULT_TOPIC = "_schemas"
#: What Confluent Schema Registry and Karapace create their storage topic with.
TOPIC_CONFIG = {"cleanup.policy": "compact"}


class SchemaStorageError(MirrorflowError):
    """A storage-topic record that cannot be understood: nothing is synced from a state read wrongly."""

    def __init__(self, cluster: str, topic: str, offset: int, problem: str) -> None:
        self.cluster, self.topic, self.offset, self.problem = cluster, topic, offset, problem
        super().__init__(f"cluster {cluster}: {topic}@{offset}: {problem}")

    def __reduce__(self):
        return (SchemaStorageError, (self.cluster, self.topic, self.offset, self.problem))


class TopicStore:
    """Read and write one registry's state as records of its storage topic."""

    via = "topic"
    #: Every record type of the storage topic (``None``: no restriction for the plan).
    keytypes = None

    def __init__(self, client: ClusterClient, topic: str = DEFAULT_TOPIC, timeout: float = 30.0) -> None:
        self.client = client
        self.topic = topic
        self.timeout = timeout

    @property
    def cluster(self) -> str:
        return self.client.name

    def describe(self) -> str:
        return f"topic {self.topic} on cluster {self.cluster}"

    def read(self) -> RegistryState:
        state = RegistryState()
        for msg in read_whole(self.client, self.topic, READER_GROUP, self.timeout):
            try:
                key = Key.from_bytes(msg.key())
                if key.kept:
                    state.entries[key] = decode_value(key, msg.value())
            except RecordError as exc:
                raise SchemaStorageError(self.cluster, self.topic, msg.offset(), str(exc)) from None
        return state

    def apply(self, writes: Sequence[Write], written: Callable[[Write], None],
              state: RegistryState | None = None) -> list:
        """Append the records in order; ``written`` is called for each one the cluster acknowledged.

        All or nothing per call as far as errors go: a failure raises (naming
        the cluster and topic), and a rerun writes what is still missing.
        """
        if not writes:
            return []
        ensure_compacted(self.client, self.topic, TOPIC_CONFIG, self.timeout)
        write_all(self.client, self.topic, ((w.key.to_bytes(), encode_value(w.value)) for w in writes),
                  on_written=lambda i: written(writes[i]), timeout=self.timeout)
        return []
