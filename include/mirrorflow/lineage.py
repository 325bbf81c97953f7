"""What a copy read and wrote, as lineage datasets: per link, the source topic in, the target topic out. Pure.

OpenLineage names a Kafka topic by namespace ``kafka://<host>:<port>`` (a broker of
the cluster) and name ``<topic>``; mirrorflow takes the first address of the
cluster's ``bootstrap.servers``, as its arrival assets do (:mod:`mirrorflow.assets`),
so a topic's lineage dataset and its asset name the same thing. An archive read by
a restore is ``s3://<bucket>`` and ``<prefix>/data/cluster=<source>/topic=<topic>``.

A level run's datasets come from its link reports (every topic each link selected
this run, records or not); a backfill's from its plan's topics. Each output says which
links wrote it, from which source, and how many records and bytes arrived. The
Airflow side (``mirrorflow_airflow.lineage``) turns :class:`Lineage` into the
OpenLineage provider's objects; docs/lineage.md says what a receiver gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.archive import topic_prefix
from mirrorflow.assets import first_address
from mirrorflow.naming import NameFormat


def kafka_namespace(bootstrap_servers: str) -> str:
    """The OpenLineage namespace of the cluster at ``bootstrap_servers``: ``kafka://<first host:port>``."""
    address = first_address(bootstrap_servers)
    if not address:
        raise ValueError(f"a Kafka lineage namespace needs a bootstrap address, got {bootstrap_servers!r}")
    return f"kafka://{address}"


@dataclass(frozen=True)
class Edge:
    """One link copied ``topic`` from ``source`` to ``target`` (cluster names) in this run."""

    link_id: str
    source: str
    target: str
    topic: str


@dataclass(frozen=True)
class DatasetRef:
    """A lineage dataset: where (namespace), what (name), and which mirrorflow cluster it is."""

    namespace: str
    name: str
    cluster: str


@dataclass(frozen=True)
class Output(DatasetRef):
    """A written dataset, with the links that wrote it, their sources and what arrived."""

    links: tuple[str, ...] = ()
    sources: tuple[DatasetRef, ...] = ()
    records: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class Lineage:
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[Output, ...] = ()
    #: Clusters an edge named but ``bootstraps`` did not: left out, named so a caller can say so.
    unknown_clusters: tuple[str, ...] = field(default=())


def level_edges(links: Iterable[Mapping[str, Any]]) -> list[Edge]:
    """The edges of a level run, from its link reports (``JobResult.summary()["links"]``)."""
    return [Edge(link["link"], link["source"], link["target"], topic)
            for link in links for topic in link.get("topics") or ()]


def copy_lineage(edges: Iterable[Edge], bootstraps: Mapping[str, str],
                 partitions: Iterable[Mapping[str, Any]] = (), *,
                 archive: tuple[str, str] | None = None, names: Mapping[str, NameFormat] | None = None) -> Lineage:
    """The datasets of one copy: each source topic once as an input, each target topic once as an output.

    ``bootstraps``: cluster -> its ``bootstrap.servers``. ``partitions``: the copy's
    per-partition results, for the records and bytes each output got. ``archive``: the
    bucket and prefix of the archive a restore read: the source topic's archived data is
    an input too wherever a partition says ``restored``. ``names``: the topic format of each cluster
    that renames: its datasets name the topic as the cluster does (the archive's keep the logical name).
    """
    names = names or {}
    totals: dict[tuple[str, str], list[int]] = {}
    restored: set[tuple[str, str]] = set()
    for p in partitions:
        counts = totals.setdefault((p["target"], p["topic"]), [0, 0])
        counts[0] += int(p.get("copied") or 0)  # restored records are among the copied ones
        counts[1] += int(p.get("bytes") or 0)
        if p.get("restored"):
            restored.add((p["source"], p["topic"]))
    unknown: set[str] = set()

    def ref(cluster: str, topic: str) -> DatasetRef | None:
        if cluster not in bootstraps:
            unknown.add(cluster)
            return None
        name = names[cluster].render(topic) if cluster in names else topic
        return DatasetRef(kafka_namespace(bootstraps[cluster]), name, cluster)

    inputs: dict[tuple[str, str], DatasetRef] = {}
    writers: dict[tuple[str, str], tuple[DatasetRef, set[str], dict[tuple[str, str], DatasetRef]]] = {}
    logical: dict[tuple[str, str], str] = {}  # (cluster, dataset name) -> the logical topic, for the totals
    for edge in edges:
        source, target = ref(edge.source, edge.topic), ref(edge.target, edge.topic)
        if source is None or target is None:
            continue
        inputs.setdefault((source.namespace, source.name), source)
        _, links, sources = writers.setdefault((target.namespace, target.name), (target, set(), {}))
        logical[(target.cluster, target.name)] = edge.topic
        links.add(edge.link_id)
        sources[(source.namespace, source.name)] = source
    if archive is not None:
        bucket, prefix = archive
        for cluster, topic in sorted(restored):
            data = DatasetRef(f"s3://{bucket}", topic_prefix(prefix, cluster, topic), cluster)
            inputs[(data.namespace, data.name)] = data
    outputs = []
    for key, (target, links, sources) in sorted(writers.items()):
        records, size = totals.get((target.cluster, logical[(target.cluster, target.name)]), [0, 0])
        outputs.append(Output(target.namespace, target.name, target.cluster, links=tuple(sorted(links)),
                              sources=tuple(v for _, v in sorted(sources.items())), records=records, bytes=size))
    return Lineage(tuple(v for _, v in sorted(inputs.items())), tuple(outputs), tuple(sorted(unknown)))
