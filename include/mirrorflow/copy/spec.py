"""A level run's job: the spec the driver is given (plain JSON) and the results it returns.

The job is described by a :class:`JobSpec`, plain JSON, so the same job runs
from Airflow (through ``spark-submit``), by hand, and in-process in tests. The
spec carries each cluster's resolved client settings, which may hold secrets:
it travels in the ``MIRRORFLOW_JOB`` environment variable of ``spark-submit``
and in memory, never in a file, and its ``repr`` hides them.

:func:`build_spec` makes a spec from the topology and the links a run copies
(already switched and window-filtered: :mod:`mirrorflow.topology.routes`); it is
pure, so tests and dry runs can ask what a run would do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.cluster_sync import ConfigOwnership, GrantRules
from mirrorflow.copy.task import OnGap
from mirrorflow.copyflags import OnMalformed
from mirrorflow.defaults import DEFAULT_COPY_THREADS, DEFAULT_ON_GAP
from mirrorflow.naming import NameFormat
from mirrorflow.spark import SparkJobResult, SparkJobSpec
from mirrorflow.topology import Distributor, Topology
from mirrorflow.topology.windows import Window

#: Environment variable that carries the job spec into ``spark-submit``.
JOB_ENV = "MIRRORFLOW_JOB"


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class LinkJob:
    """One link to copy in this run, with its effective target and settings."""

    link_id: str
    level: int
    source: str
    target: str
    max_bytes_per_second: int | None = None
    max_records_per_run: int | None = None
    max_bytes_per_run: int | None = None
    txn_records: int | None = None
    #: ``False``: at-least-once copies (``replication`` key ``exactly_once: false``).
    exactly_once: bool = True
    #: What a copy does when the source lost offsets the link has not copied (``replication`` key ``on_gap``).
    on_gap: OnGap = DEFAULT_ON_GAP
    #: The target is not the link's default one (a switch or an onboarding pin): its copies of the
    #: source's messages may have come through other links too (mirrorflow.copy.state.recovery).
    switched: bool = False
    #: The link's replication windows as the topology writes them (mirrorflow.topology.windows); the
    #: copy stops taking records when the one it runs in closes. Empty: copy all day.
    windows: tuple[str, ...] = ()

    def parsed_windows(self) -> list[Window]:
        return [Window.parse(w) for w in self.windows]


@dataclass(frozen=True)
class JobSpec(SparkJobSpec, env=JOB_ENV, kind="mirrorflow job spec", passed_by="the level DAG"):
    level: int
    run_id: str
    #: The topology's topic patterns (full match; internal topics never selected).
    topics: tuple[str, ...]
    links: tuple[LinkJob, ...]
    #: Cluster name -> librdkafka settings (``bootstrap.servers`` and any credentials).
    clusters: Mapping[str, Mapping[str, Any]] = field(repr=False)
    #: Spark tasks to pack the work into; ``None``: Spark's default parallelism.
    slots: int | None = None
    #: Whether the target's travelling topic configs are realigned to the source's.
    align_configs: bool = False
    #: Partitions each Spark task copies at the same time (``replication.copy_threads``).
    copy_threads: int = DEFAULT_COPY_THREADS
    #: The S3 archive (``ArchiveLocation.to_dict()``, credentials included: hidden), for links with
    #: ``on_gap: restore``; ``None``: no link heals from it in this run.
    archive: Mapping[str, Any] | None = field(default=None, repr=False)
    #: The archived clusters (topology key ``archive.clusters``).
    archived: tuple[str, ...] = ()
    #: A copy-flags header mirrorflow did not write: ``fresh`` or ``fail`` (``replication.on_malformed``).
    on_malformed: OnMalformed = "fresh"
    #: Whose travelling topic configs the targets follow (``ConfigOwnership.to_dict()``, topology key
    #: ``topic_configs``); ``None``: configs are only reported, as ``align_configs`` says.
    topic_configs: Mapping[str, Any] | None = None
    #: Which topic ACLs travel and as what (``GrantRules.to_dict()``, topology key ``acl_sync``); ``None``: none.
    acl_sync: Mapping[str, Any] | None = None
    #: Cluster -> its topic format (``NameFormat.to_dict()``, topology key ``clusters.<c>.names``), for the
    #: clusters that rename; the others store every topic under its logical name.
    names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: The namespace of the tree whose own names the copies use on shared clusters (:meth:`ClusterClient.own`);
    #: ``""``: the only tree.
    namespace: str = ""

    def config_ownership(self) -> ConfigOwnership | None:
        """Whose topic configs the targets follow (``topic_configs``); ``None``: none."""
        return ConfigOwnership.from_dict(self.topic_configs) if self.topic_configs is not None else None

    def grant_rules(self) -> GrantRules | None:
        """Which topic ACLs travel (``acl_sync``); ``None``: none."""
        return GrantRules.from_dict(self.acl_sync) if self.acl_sync is not None else None

    def __repr__(self) -> str:
        links = ", ".join(f"{l.link_id}->{l.target}" for l in self.links)
        return (f"JobSpec(level={self.level}, run_id={self.run_id!r}, links=[{links}], "
                f"clusters=<{len(self.clusters)} hidden>)")

    @classmethod
    def from_dict(cls, data: Any) -> JobSpec:
        try:
            if not isinstance(data, dict):
                raise TypeError(f"expected a JSON object, got {type(data).__name__}")
            topics, clusters, slots = data["topics"], data["clusters"], data.get("slots")
            if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
                raise TypeError("topics must be a list of strings")
            if not isinstance(clusters, dict) or not all(isinstance(v, dict) for v in clusters.values()):
                raise TypeError("clusters must map cluster names to client settings")
            if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
                raise TypeError("slots must be a positive integer or null")
            threads = data.get("copy_threads", DEFAULT_COPY_THREADS)
            if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
                raise TypeError("copy_threads must be a positive integer")
            return cls(
                level=int(data["level"]),
                run_id=str(data["run_id"]),
                topics=tuple(topics),
                links=tuple(LinkJob(**{**link, "windows": tuple(link.get("windows") or ())}) for link in data["links"]),
                clusters={k: dict(v) for k, v in clusters.items()},
                slots=slots,
                align_configs=bool(data.get("align_configs", False)),
                copy_threads=threads,
                archive=_archive(data.get("archive")),
                archived=tuple(str(c) for c in data.get("archived") or ()),
                topic_configs=_checked(data.get("topic_configs"), ConfigOwnership.from_dict, "topic_configs"),
                acl_sync=_checked(data.get("acl_sync"), GrantRules.from_dict, "acl_sync"),
                names=_names(data.get("names")),
                namespace=str(data.get("namespace") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise cls.invalid(problem) from None


def _checked(value: Any, parse: Callable[[Mapping[str, Any]], Any], what: str) -> dict[str, Any] | None:
    """``value`` when ``parse`` takes it: refused here, naming the problem, rather than in the middle of a plan."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be an object or null")
    parse(value)
    return value


def _names(value: Any) -> dict[str, dict[str, str]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError("names must map cluster names to name formats")
    try:
        return {str(c): NameFormat.from_dict(f).to_dict() for c, f in value.items()}
    except ValueError as exc:
        raise ValueError(f"names: {exc}") from None


def _archive(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise TypeError("archive must be an archive location object or null")
    return value



# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PartitionError:
    link: str
    source: str
    target: str
    topic: str
    partition: int | None
    offset: int | None
    error: str

    def __str__(self) -> str:
        where = self.topic if self.partition is None else f"{self.topic}[{self.partition}]"
        at = "" if self.offset is None else f" at source offset {self.offset}"
        return f"{self.link} ({self.source} -> {self.target}) {where}{at}: {self.error}"


@dataclass
class LinkReport:
    link: str
    source: str
    target: str
    partitions: int = 0
    #: The source topics the link selected in this run (what it read and wrote, records or not: its lineage).
    topics: list[str] = field(default_factory=list)
    planned_records: int = 0
    copied: int = 0
    skipped: int = 0
    bytes: int = 0
    created_topics: list[str] = field(default_factory=list)
    partitions_added: dict[str, int] = field(default_factory=dict)
    deleted_on_source: list[str] = field(default_factory=list)
    #: Topic -> the config keys aligned with the topic's owner on the target in this run.
    configs_aligned: dict[str, list[str]] = field(default_factory=dict)
    #: Configs that could not be aligned, and follower values left as they are and reported (named; the copy
    #: went on).
    config_problems: list[str] = field(default_factory=list)
    #: ACL bindings created and deleted on the target as on their owner (``acl_sync``), and what failed.
    acls_created: list[str] = field(default_factory=list)
    acls_deleted: list[str] = field(default_factory=list)
    acl_problems: list[str] = field(default_factory=list)
    #: Changes a sync declined to make on the target (:class:`mirrorflow.declined.Declined` as dicts):
    #: reported every run, never applied unless the topology allows them.
    declined: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    #: Seconds of each planning step (target shapes, source topics, checkpoints, offsets, topic ids): a slow
    #: plan says where it waited (rare slow plans were seen in benchmarks; docs/benchmarks.md).
    plan_steps: dict[str, float] = field(default_factory=dict)


@dataclass
class JobResult(SparkJobResult):
    level: int
    run_id: str
    links: list[LinkReport] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[PartitionError] = field(default_factory=list)
    plan_s: float = 0.0
    copy_s: float = 0.0
    tasks: int = 0
    #: Wall clock (epoch seconds) when every partition's copy had ended, its last commit
    #: on the target included: where the benchmarks' clock stops (Spark's stop comes after).
    finished_at: float = 0.0

    @property
    def copied(self) -> int:
        return sum(link.copied for link in self.links)

    def summary(self) -> dict[str, Any]:
        """What the DAG run returns: totals, per link, and every error named in full."""
        return {
            "level": self.level,
            "run_id": self.run_id,
            "ok": self.ok,
            "links": [asdict(link) for link in self.links],
            "copied": self.copied,
            "skipped": sum(link.skipped for link in self.links),
            "bytes": sum(link.bytes for link in self.links),
            "partitions_copied": sum(1 for p in self.partitions if p["copied"] or p["skipped"]),
            "spark_tasks": self.tasks,
            "plan_s": round(self.plan_s, 3),
            "copy_s": round(self.copy_s, 3),
            "errors": [str(e) for e in self.errors],
            "error_details": [asdict(e) for e in self.errors],
        }

    def details(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "finished_at": self.finished_at}


def link_fields(link: LinkJob) -> dict[str, Any]:
    """How journal lines name a link."""
    return {"id": link.link_id, "source": link.source, "level": link.level, "target": link.target}


# --------------------------------------------------------------------------- from the topology


def link_job(topology: Topology, link: Distributor) -> LinkJob:
    settings = topology.link_settings(link.link_id)
    return LinkJob(
        link_id=link.link_id, level=link.level, source=link.source, target=link.default_target,
        max_bytes_per_second=settings.max_bytes_per_second,
        max_records_per_run=settings.max_records_per_run,
        max_bytes_per_run=settings.max_bytes_per_run,
        txn_records=settings.txn_records,
        exactly_once=settings.exactly_once is not False,
        on_gap=settings.on_gap or DEFAULT_ON_GAP,
        switched=link.default_target != topology.link(link.link_id).default_target,
        windows=tuple(settings.windows or ()),
    )


def heals_from_archive(topology: Topology, links: list[Distributor]) -> bool:
    """Whether any of ``links`` heals a gap from the archive (``on_gap: restore``): its job needs the location."""
    return any(topology.link_settings(link.link_id).on_gap == "restore" for link in links)


def spec_clusters(topology: Topology, links: list[Distributor]) -> list[str]:
    """The clusters whose client settings :func:`build_spec` needs: the links', and the owners of topic configs
    and ACLs (none without links: nothing is shaped)."""
    if not links:
        return []
    ownership, grants = topology.config_ownership(), topology.grant_rules()
    return sorted({c for link in links for c in (link.source, link.default_target)}
                  | (ownership.clusters() if ownership is not None else set())
                  | ({grants.owner} if grants is not None and grants.sync else set()))


def build_spec(topology: Topology, level: int, run_id: str, links: list[Distributor],
               clusters: Mapping[str, Mapping[str, Any]], slots: int | None = None,
               archive: Mapping[str, Any] | None = None) -> JobSpec:
    """The job spec for ``links`` (already switched and window-filtered); ``clusters`` holds client settings.

    ``archive``: the archive's location (``ArchiveLocation.to_dict()``), for links with ``on_gap: restore``.
    """
    needed = spec_clusters(topology, links)
    missing = [c for c in needed if c not in clusters]
    if missing:
        raise ValueError(f"no client settings for cluster(s) {', '.join(missing)} (links' clusters and the "
                         "owners of topic configs, topic_configs)")
    ownership = topology.config_ownership()
    return JobSpec(
        level=level, run_id=run_id, topics=tuple(topology.topics),
        links=tuple(link_job(topology, link) for link in links),
        clusters={c: dict(clusters[c]) for c in needed}, slots=slots,
        copy_threads=topology.replication.copy_threads,
        on_malformed=topology.replication.on_malformed,
        archive=dict(archive) if archive is not None else None,
        archived=tuple(topology.archive.archived(topology.leaves)) if archive is not None else (),
        topic_configs=ownership.to_dict() if ownership is not None else None,
        acl_sync=grants.to_dict() if (grants := topology.grant_rules()) is not None else None,
        names=topology.topic_formats(needed),
        namespace=topology.namespace,
    )
