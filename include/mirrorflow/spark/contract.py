"""What a mirrorflow Spark job promises whoever runs it: its spec in, its result out.

Three jobs run on Spark (the level copy, the onboarding backfill, the archive
run) and two callers run them: the entry points in ``spark_jobs/`` under
``spark-submit`` (:func:`mirrorflow.spark.entry.run_entry`) and the Airflow
operator, which may run the job's driver in its own task on a Spark Connect
server. Both deal with a job only through this contract:

- :class:`SparkJobSpec`, the job's input, plain JSON. It travels in one
  environment variable (``env``) because it carries each cluster's client
  settings, credentials included; :meth:`~SparkJobSpec.from_env` reads and
  checks it, naming the variable in every error, and
  :meth:`~SparkJobSpec.client` gives one cluster's client;
- :class:`SparkJobResult`, the job's output: ``ok``, ``errors`` (each names one
  failure in full) and ``to_json``, what the result file and the task's return
  value hold.

Each job's spec and result are dataclasses that derive from these and add their
own fields; their JSON is theirs (the tests hold each one to its shape).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient
from mirrorflow.naming import NameFormat


class SparkJobSpec:
    """A Spark job's spec: a frozen dataclass with ``clusters`` (cluster name -> client settings).

    A job's spec class names its variable, what it is called and who passes it,
    ``class ArchiveSpec(SparkJobSpec, env=..., kind="archive spec", passed_by="the
    archive DAG")``, and implements :meth:`from_dict`; :meth:`to_dict` is the
    dataclass's fields unless the job says otherwise.
    """

    #: The environment variable that carries the spec into ``spark-submit``.
    env: ClassVar[str]
    #: What the spec is called in errors ("archive spec").
    kind: ClassVar[str]
    #: Who sets ``env`` (for the error when it is not set).
    passed_by: ClassVar[str]

    #: Cluster name -> librdkafka settings (``bootstrap.servers`` and any credentials).
    clusters: Mapping[str, Mapping[str, Any]]

    def __init_subclass__(cls, *, env: str, kind: str, passed_by: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.env, cls.kind, cls.passed_by = env, kind, passed_by

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The spec in ``env`` of ``environ`` (default: this process's environment)."""
        text = (os.environ if environ is None else environ).get(cls.env)
        if not text:
            raise MirrorflowError(f"{cls.env} is not set: {cls.passed_by} passes the {cls.kind} in this variable "
                                  "(see spark_jobs/README.md to run a job by hand)")
        return cls.from_json(text)

    @classmethod
    def from_json(cls, text: str) -> Self:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise cls.invalid(f"not JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """The spec from parsed JSON; raises :meth:`invalid` naming what is wrong."""
        raise NotImplementedError

    @classmethod
    def invalid(cls, problem: str) -> MirrorflowError:
        """The error for a spec that does not parse: it names the variable, as every spec error does."""
        return MirrorflowError(f"{cls.env}: not a valid {cls.kind}: {problem}")

    def to_dict(self) -> dict[str, Any]:
        if not dataclasses.is_dataclass(self) or isinstance(self, type):
            raise TypeError(f"{type(self).__name__} is not a dataclass: it says its own to_dict")
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def namings(self) -> dict[str, NameFormat]:
        """The topic format of each cluster of the spec that renames (``names``, when the spec carries it)."""
        return {c: NameFormat.from_dict(f) for c, f in (getattr(self, "names", None) or {}).items()}

    def client(self, cluster: str) -> ClusterClient:
        """The client of ``cluster``, from the settings the spec carries, with the cluster's topic names."""
        settings = self.clusters.get(cluster)
        if settings is None:
            raise MirrorflowError(f"{self.kind} has no client settings for cluster {cluster!r}")
        return ClusterClient(cluster, dict(settings), self.namings().get(cluster, NameFormat.identity()),
                             namespace=getattr(self, "namespace", ""))


class SparkJobResult:
    """A Spark job's result: a dataclass with ``errors``, a :meth:`summary` and the :meth:`details` beyond it."""

    #: One entry per failure (partition, link, cluster), each naming it in full when made a string.
    errors: Sequence[object]

    @property
    def ok(self) -> bool:
        """Whether everything planned was done (the entry point's exit code 0, else 2)."""
        return not self.errors

    def summary(self) -> dict[str, Any]:
        """Totals and every error named: what the Airflow task returns."""
        raise NotImplementedError

    def details(self) -> dict[str, Any]:
        """What the result file carries besides the summary (per-partition results)."""
        return {}

    def to_json(self) -> str:
        return json.dumps({**self.summary(), **self.details()}, sort_keys=True, default=str)
