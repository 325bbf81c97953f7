"""One sync run: read the primary once, then bring every other registry to its state.

Targets are independent: an unreachable cluster or a refused write is that
target's error, a conflict is that subject's error, and everything else still
syncs. The run as a whole fails afterwards, listing every problem, so nothing
is hidden behind a green task.

Every record written is one ``schema_write`` journal line: cluster, primary
subject, target subject, version, id and kind (schema, config, mode, delete).
A rerun reads the targets again and writes only what is still missing, which
is also how a run killed halfway completes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient
from mirrorflow.naming import NameFormat
from mirrorflow.schemas.plan import Conflict, Write, plan_target
from mirrorflow.schemas.records import RegistryState
from mirrorflow.schemas.rest_store import RegistryAccessError, RestStore
from mirrorflow.schemas.topic_store import TopicStore

log = logging.getLogger(__name__)


class Store(Protocol):
    # read-only members: a store may answer them with a class attribute or a property
    @property
    def cluster(self) -> str: ...
    @property
    def via(self) -> str: ...
    @property
    def keytypes(self) -> frozenset[str] | None: ...  # the record types this store can hold (None: all)

    def describe(self) -> str: ...
    def read(self) -> RegistryState: ...
    def apply(self, writes: Sequence[Write], written: Any, state: RegistryState | None = None) -> list: ...


class SchemaSyncFailed(MirrorflowError):
    """The run synced what it could; these subjects or clusters were not synced."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(f"schema sync incomplete, {len(self.problems)} problem(s):\n"
                         + "\n".join(f"  - {p}" for p in self.problems))

    def __reduce__(self):
        return (SchemaSyncFailed, (self.problems,))


@dataclass
class TargetResult:
    cluster: str
    via: str
    subjects: int = 0
    planned: int = 0
    written: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    error: str | None = None
    #: The error will not go away by trying again (a refused login, an untrusted certificate).
    final: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "via": self.via, "subjects": self.subjects, "planned": self.planned,
                "written": len(self.written), "conflicts": [c.to_dict() for c in self.conflicts],
                "error": self.error}


@dataclass
class SyncResult:
    primary: str
    dry_run: bool = False
    subjects: int = 0
    unparsable: list[str] = field(default_factory=list)
    targets: list[TargetResult] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        out: list[str] = []
        for t in self.targets:
            if t.error:
                out.append(f"cluster {t.cluster}: {t.error}")
            out.extend(str(c) for c in t.conflicts)
        return out

    @property
    def written(self) -> int:
        return sum(len(t.written) for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        return {"primary": self.primary, "dry_run": self.dry_run, "subjects": self.subjects,
                "unparsable": self.unparsable, "written": self.written,
                "targets": [t.to_dict() for t in self.targets], "problems": self.problems}

    def raise_for_problems(self) -> None:
        if self.problems:
            raise SchemaSyncFailed(self.problems)


def sync(primary: Store, primary_format: NameFormat, targets: Sequence[tuple[Store, NameFormat]],
         *, dry_run: bool = False) -> SyncResult:
    """Bring every target to the primary's state; see the module doc for what fails how."""
    state = primary.read()
    result = SyncResult(primary.cluster, dry_run)
    log.info("primary %s: %d records, %d subjects", primary.describe(), len(state.entries), len(state.subjects()))
    for store, naming in targets:
        target = TargetResult(store.cluster, store.via)
        result.targets.append(target)
        try:
            current = store.read()
            plan = plan_target(store.cluster, state, current, primary_format, naming, store.keytypes)
        except RegistryAccessError as exc:  # names the registry already
            target.error, target.final = str(exc), True
            log.error("%s", target.error)
            continue
        except Exception as exc:  # one target's trouble never stops the others
            target.error = f"reading {store.describe()} failed: {exc}"
            log.error("%s", target.error)
            continue
        result.subjects = plan.subjects
        result.unparsable = plan.unparsable
        target.subjects, target.planned, target.conflicts = plan.subjects, len(plan.writes), list(plan.conflicts)
        for conflict in plan.conflicts:
            log.error("conflict: %s", conflict)
        log.info("%s: %d subjects, %d records to write, %d conflicts%s", store.describe(), plan.subjects,
                 len(plan.writes), len(plan.conflicts), " (dry run: nothing written)" if dry_run else "")
        if dry_run:
            for w in plan.writes:
                log.info("would write %s", _fields(store, w))
            continue
        try:
            target.conflicts += store.apply(plan.writes, lambda w, t=target, s=store: _written(t, s, w), current)
        except Exception as exc:
            target.error = f"writing to {store.describe()} failed after {len(target.written)} records: {exc}"
            log.error("%s", target.error)
    if result.unparsable:
        log.warning("%d primary subjects do not match the primary's subject format and were left alone: %s",
                    len(result.unparsable), ", ".join(result.unparsable))
    return result


def _fields(store: Store, w: Write) -> dict[str, Any]:
    return {"cluster": store.cluster, "via": store.via, "primary_subject": w.primary_subject,
            "target_subject": w.key.subject, "version": w.key.version, "id": w.schema_id, "kind": w.kind,
            "record": w.key.keytype}


def _written(target: TargetResult, store: Store, w: Write) -> None:
    target.written.append(journal_entry("schema_write", **_fields(store, w)))


def build_store(cluster: str, registry: Any, client: ClusterClient | None,
                rest_conf: Mapping[str, Any] | None = None) -> Store:
    """The store for one cluster's registry settings (``topology.schemas.registry(cluster)``).

    ``rest_conf`` is the schema registry client configuration for ``via: rest``
    (``url`` and any ``basic.auth.user.info``), resolved by the caller from the
    topology's url or Airflow connection so secrets never pass through here.
    """
    if registry.via == "rest":
        conf = dict(rest_conf or {})
        conf.setdefault("url", registry.url)
        if not conf.get("url"):
            raise MirrorflowError(f"cluster {cluster}: schemas via rest has no registry URL")
        return RestStore(cluster, conf)
    if client is None:
        raise MirrorflowError(f"cluster {cluster}: schemas via topic needs the cluster's client settings")
    return TopicStore(client, registry.topic)


def stores_for(topology: Any, client_settings: Mapping[str, Mapping[str, Any]],
               rest_confs: Mapping[str, Mapping[str, Any]] | None = None,
               ) -> tuple[Store, NameFormat, list[tuple[Store, NameFormat]]]:
    """The primary's store and naming, and every other cluster's, from ``topology.schemas``.

    ``client_settings`` maps cluster names to librdkafka settings (as the level
    jobs get them); ``rest_confs`` maps clusters synced ``via: rest`` to their
    registry client configuration.
    """
    config = topology.schemas
    if config.primary is None:
        raise MirrorflowError("schemas.primary is not set: there is no primary registry to sync from")
    rest_confs = rest_confs or {}

    def store(name: str) -> tuple[Store, NameFormat]:
        registry = config.registry(name)
        settings = client_settings.get(name)
        client = ClusterClient(name, dict(settings)) if settings is not None else None
        return build_store(name, registry, client, rest_confs.get(name)), topology.subject_naming(name)

    primary, naming = store(config.primary)
    return primary, naming, [store(name) for name in topology.clusters if name != config.primary]
