"""Typed cluster connection settings that render librdkafka config dicts.

A topology cluster is either a bootstrap address (plus optional non-secret
librdkafka settings from the file) or an Airflow connection id. The core never
talks to Airflow: whoever resolves a ``conn_id`` (the Airflow plugin) passes the
connection's settings in. Secrets therefore only ever live in memory, and the
``repr`` of a :class:`ClusterClient` hides them so they cannot leak into logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mirrorflow.errors import MirrorflowError
from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX, in_namespace, is_internal_topic
from mirrorflow.naming import GROUP, NameFormat
from mirrorflow.secrets import is_secret_config, remember

if TYPE_CHECKING:
    from confluent_kafka import TopicPartition

V = TypeVar("V")

# Safe defaults for every client mirrorflow creates; callers may override.
_COMMON = {"socket.keepalive.enable": True, "client.dns.lookup": "use_all_dns_ips"}

#: Defaults for every consumer, below the cluster's own ``config``. When a partition's local
#: queue holds ``queued.min.messages`` (100,000 by default: 10 MB of 100 B records, one fetch)
#: librdkafka stops fetching it and looks again only after ``fetch.queue.backoff.ms``, 1 s by
#: default; a copy drains that queue in a fraction of it, then waits out the rest, once per
#: fetch. Looking again after 10 ms keeps the same memory bound without the stall
#: (docs/benchmarks.md, "Small records").
_CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": 10}


#: How long one ``consume()`` call waits to fill its batch. librdkafka hands a batch
#: back only when it is full or this time is up, even after the partition's end was
#: reached, so this is what every bounded read loses at its end: short, so that many
#: partition ranges in a row do not add up to a wait.
CONSUME_WAIT_S = 0.1

@dataclass(frozen=True)
class ClusterClient:
    """Everything needed to open a client to one cluster of the topology, and how it names what is mirrored.

    ``topics`` and ``groups`` are the cluster's formats (``clusters.<c>.names``). The rule
    (docs/naming.md): a function given a ``ClusterClient`` takes and returns logical names
    and translates them itself where it asks the broker (:meth:`physical`, :meth:`logical`,
    :meth:`physical_group`, :meth:`logical_group`); one given a raw librdkafka client, and
    this package's broker calls, speak the broker's names.
    """

    name: str
    settings: Mapping[str, Any] = field(repr=False)
    topics: NameFormat = field(default_factory=NameFormat.identity)
    groups: NameFormat = field(default_factory=lambda: NameFormat.identity(GROUP))
    #: The namespace of the tree this client works for when one Airflow runs several (``""``: the only tree).
    namespace: str = ""

    def __post_init__(self) -> None:
        if not self.settings.get("bootstrap.servers"):
            raise MirrorflowError(f"clusters.{self.name}: no bootstrap.servers resolved for this cluster")
        remember(self.settings)  # scrubbed from journal lines and job logs from now on

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret_config(k) else v) for k, v in self.settings.items()}
        return f"ClusterClient(name={self.name!r}, settings={shown!r})"

    @property
    def bootstrap(self) -> str:
        return str(self.settings["bootstrap.servers"])

    def physical(self, topic: str) -> str:
        """The name the logical ``topic`` has on this cluster (mirrorflow's and Kafka's own topics keep theirs)."""
        return topic if is_internal_topic(topic) else self.topics.render(topic)

    def renamed(self, topic: str) -> str | None:
        """The logical ``topic``'s name here when it differs (what a copy task carries), else ``None``."""
        name = self.physical(topic)
        return name if name != topic else None

    def logical(self, topic: str) -> str | None:
        """The logical name of this cluster's ``topic``; ``None``: not in the cluster's format, so not mirrored."""
        return topic if is_internal_topic(topic) else self.topics.parse(topic)

    def own(self, name: str) -> str:
        """mirrorflow's own topic, group or transactional id ``name`` as this client's tree keeps it here.

        Checkpoint groups, transactional ids and mirrorflow's stores pass through it, so two
        trees sharing this cluster never read or fence each other's (docs/naming.md).
        """
        return in_namespace(name, self.namespace)

    def physical_group(self, group: str) -> str:
        """The name the logical consumer ``group`` has on this cluster (mirrorflow's own groups keep theirs)."""
        return group if group.startswith(INTERNAL_TOPIC_PREFIX) else self.groups.render(group)

    def logical_group(self, group: str) -> str | None:
        """The logical name of this cluster's consumer ``group``; ``None``: not in the cluster's format."""
        return group if group.startswith(INTERNAL_TOPIC_PREFIX) else self.groups.parse(group)

    def on_cluster(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Logical topic-partitions as this cluster names them, offsets and commit metadata kept."""
        from confluent_kafka import TopicPartition  # this module stays free of it: DAG files parse without it

        return [TopicPartition(self.physical(tp.topic), tp.partition, tp.offset,
                               **({"metadata": tp.metadata} if tp.metadata is not None else {})) for tp in tps]

    def by_logical(self, found: Mapping[tuple[str, int], V]) -> dict[tuple[str, int], V]:
        """An answer keyed by this cluster's (topic, partition), keyed by the logical names again."""
        if self.topics.is_identity:
            return dict(found)
        return {(self.topics.parse(t) or t, p): v for (t, p), v in found.items()}

    @classmethod
    def from_cluster_config(cls, name: str, cluster: Any, connection: Mapping[str, Any] | None = None, *,
                            namespace: str = "") -> ClusterClient:
        """Build from a topology ``ClusterConfig``.

        ``connection`` holds librdkafka settings resolved from the cluster's
        ``conn_id`` (it must contain ``bootstrap.servers``); the file's own
        ``config`` is applied on top, so per-cluster tuning stays in the file and
        credentials stay in the connection.
        """
        settings: dict[str, Any] = {}
        if getattr(cluster, "conn_id", None):
            if connection is None:
                raise MirrorflowError(
                    f"clusters.{name}.conn_id: connection {cluster.conn_id!r} must be resolved by the caller "
                    "(the Airflow plugin does this); the core cannot read Airflow connections"
                )
            settings.update(connection)
        else:
            settings["bootstrap.servers"] = cluster.bootstrap
        settings.update(dict(getattr(cluster, "config", None) or {}))
        names = getattr(cluster, "names", None)
        if names is None:
            return cls(name=name, settings=settings, namespace=namespace)
        return cls(name=name, settings=settings, topics=names.topic_naming(), groups=names.group_naming(),
                   namespace=namespace)

    def _base(self, overrides: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        conf = dict(_COMMON)
        conf.update(defaults or {})
        conf.update(self.settings)
        conf.update(overrides)
        return conf

    def admin(self, **overrides: Any) -> dict[str, Any]:
        return self._base({"client.id": f"mirrorflow-admin-{self.name}", **overrides})

    def consumer(self, group_id: str, **overrides: Any) -> dict[str, Any]:
        """A consumer that never commits on its own and sees committed data only."""
        return self._base({
            "group.id": group_id,
            "client.id": f"mirrorflow-consumer-{self.name}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **overrides,
        }, _CONSUMER_DEFAULTS)

    def producer(self, **overrides: Any) -> dict[str, Any]:
        """An idempotent producer with acks=all: no loss, no duplicate on retry."""
        return self._base({
            "client.id": f"mirrorflow-producer-{self.name}",
            "enable.idempotence": True,
            "acks": "all",
            **overrides,
        })
