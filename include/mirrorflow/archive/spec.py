"""An archive run's job: the spec the driver is given (plain JSON) and the result it returns.

The spec is plain JSON in ``MIRRORFLOW_ARCHIVE_JOB`` (it carries cluster
credentials and maybe S3 keys: in memory and the environment, never a file),
and its ``repr`` hides them. Both derive from the Spark-job contract
(:mod:`mirrorflow.spark.contract`); the run itself is :mod:`mirrorflow.archive.job`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.writer import DEFAULT_ROWS_PER_OBJECT
from mirrorflow.errors import MirrorflowError
from mirrorflow.naming import NameFormat
from mirrorflow.spark import SparkJobResult, SparkJobSpec

#: Environment variable that carries the spec into ``spark-submit``.
ARCHIVE_ENV = "MIRRORFLOW_ARCHIVE_JOB"


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class ArchiveSpec(SparkJobSpec, env=ARCHIVE_ENV, kind="archive spec", passed_by="the archive DAG"):
    run_id: str
    #: Cluster name -> librdkafka settings (``bootstrap.servers`` and any credentials).
    clusters: Mapping[str, Mapping[str, Any]] = field(repr=False)
    #: The clusters whose topics are archived (each has its own progress and manifests).
    archived: tuple[str, ...]
    #: Topic patterns (full match; internal topics never selected), as the topology's ``topics``.
    topics: tuple[str, ...]
    location: ArchiveLocation
    #: Spark tasks to pack the work into; ``None``: Spark's default parallelism.
    slots: int | None = None
    #: At most this many records per partition per run (bounds a run's time and memory).
    max_records_per_run: int | None = None
    rows_per_object: int = DEFAULT_ROWS_PER_OBJECT
    #: Cluster -> its topic format (``NameFormat.to_dict()``), for the archived clusters that rename: the
    #: archive keeps logical names, so that a restore works into any cluster's names.
    names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"ArchiveSpec(run_id={self.run_id!r}, archived={list(self.archived)}, topics={list(self.topics)}, "
                f"location={self.location!r}, clusters=<{len(self.clusters)} hidden>)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "clusters": {k: dict(v) for k, v in self.clusters.items()},
            "archived": list(self.archived),
            "topics": list(self.topics),
            "location": self.location.to_dict(),
            "slots": self.slots,
            "max_records_per_run": self.max_records_per_run,
            "rows_per_object": self.rows_per_object,
            "names": {c: dict(f) for c, f in self.names.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> ArchiveSpec:
        def bad(key: str, problem: str) -> MirrorflowError:
            return cls.invalid(f"{key}: {problem}")

        if not isinstance(data, dict):
            raise bad("(top)", f"expected a JSON object, got {type(data).__name__}")
        for key in ("run_id", "clusters", "archived", "topics", "location"):
            if key not in data:
                raise bad(key, "missing")
        clusters = data["clusters"]
        if not isinstance(clusters, dict) or not all(isinstance(v, dict) for v in clusters.values()):
            raise bad("clusters", "must map cluster names to client settings")
        for key in ("archived", "topics"):
            if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
                raise bad(key, "must be a list of strings")
        unknown = [c for c in data["archived"] if c not in clusters]
        if unknown:
            raise bad("archived", f"no client settings for {', '.join(unknown)} (clusters: {', '.join(clusters)})")
        for key in ("slots", "max_records_per_run", "rows_per_object"):
            value = data.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise bad(key, f"must be a positive integer{'' if key == 'rows_per_object' else ' or null'}, "
                               f"got {value!r}")
        extra = sorted(set(data) - {"run_id", "clusters", "archived", "topics", "location", "slots",
                                    "max_records_per_run", "rows_per_object", "names"})
        if extra:
            raise bad(", ".join(extra), "unknown key(s)")
        try:
            location = ArchiveLocation.from_dict(data["location"], where="location")
        except MirrorflowError as exc:
            raise bad("location", str(exc)) from None
        return cls(
            run_id=str(data["run_id"]),
            clusters={k: dict(v) for k, v in clusters.items()},
            archived=tuple(data["archived"]),
            topics=tuple(data["topics"]),
            location=location,
            slots=data.get("slots"),
            max_records_per_run=data.get("max_records_per_run"),
            rows_per_object=data.get("rows_per_object") or DEFAULT_ROWS_PER_OBJECT,
            names=_names(data.get("names"), bad),
        )


def _names(value: Any, bad: Callable[[str, str], MirrorflowError]) -> dict[str, dict[str, str]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad("names", "must map cluster names to name formats")
    try:
        return {str(c): NameFormat.from_dict(f).to_dict() for c, f in value.items()}
    except ValueError as exc:
        raise bad("names", str(exc)) from None


# --------------------------------------------------------------------------- results


@dataclass
class ArchiveResult(SparkJobResult):
    run_id: str
    #: One manifest entry per partition that archived, lost or failed something, with ``cluster``.
    partitions: list[dict[str, Any]] = field(default_factory=list)
    #: Cluster -> key of the manifest this run wrote.
    manifests: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    plan_s: float = 0.0
    archive_s: float = 0.0
    tasks: int = 0

    @property
    def count(self) -> int:
        return sum(p["count"] for p in self.partitions if not p["error"])

    @property
    def lost(self) -> list[dict[str, Any]]:
        return [{"cluster": p["cluster"], "topic": p["topic"], "partition": p["partition"], "lost": p["lost"]}
                for p in self.partitions if p["lost"]]

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "archived": self.count,
            "objects": sum(len(p["objects"]) for p in self.partitions if not p["error"]),
            "partitions": len(self.partitions),
            "lost": self.lost,
            "manifests": self.manifests,
            "spark_tasks": self.tasks,
            "plan_s": round(self.plan_s, 3),
            "archive_s": round(self.archive_s, 3),
            "errors": list(self.errors),
        }

    def details(self) -> dict[str, Any]:
        return {"partition_details": self.partitions}
