"""Validated models of the topology file (a contract: docs/architecture.md, "Contracts").

The file has four keys: ``name`` (optional), ``clusters``, ``tree`` and
``topics``, and optional sections (``namespace``: one of several trees in one
Airflow). Every model forbids unknown keys, so a typo is an error instead of
a silently ignored setting. Structural problems (wrong types, unknown or
missing keys) are found by pydantic; the rules that span keys (every tree leaf
is a defined cluster, levels grow towards the root, ...) are checked by
:func:`mirrorflow.topology.tree.check_tree` once the structure is sound. Either
way the user sees one :class:`~mirrorflow.errors.TopologyError` listing every
problem as ``key.path: what is wrong``, never a pydantic dump.

Adding a setting later is one line: an optional field with a default on the
model it belongs to (``Topology`` for global ones, ``ClusterConfig`` for
per-cluster ones). Unknown-key suggestions and error paths pick it up
automatically.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mirrorflow.cluster_sync import ConfigOwnership, GrantRules
from mirrorflow.copyflags import LEVEL_MAX, LEVEL_MIN
from mirrorflow.errors import TopologyError, UnknownClusterError, UnknownLinkError
from mirrorflow.internal_names import is_internal_topic
from mirrorflow.kafka import CODEC_KEYS, CODECS
from mirrorflow.naming import NameFormat
from mirrorflow.secrets import is_secret_config
from mirrorflow.topology import tree as _tree
from mirrorflow.topology.acl_sync import AclSyncConfig
from mirrorflow.topology.alerts import AlertsConfig
from mirrorflow.topology.approvals import ApprovalsConfig
from mirrorflow.topology.archive import ArchiveConfig
from mirrorflow.topology.audit import AuditConfig, plain_name
from mirrorflow.topology.base import Model
from mirrorflow.topology.lag import LagConfig
from mirrorflow.topology.names import ClusterNames
from mirrorflow.topology.offsets import OffsetsConfig
from mirrorflow.topology.replication import LinkSettings, ReplicationConfig
from mirrorflow.topology.schemas import SchemasConfig
from mirrorflow.topology.topic_configs import TopicConfigsConfig
from mirrorflow.topology.tree import Distributor

#: Cluster (and topology) names: safe in Airflow task ids, Kafka client ids and paths.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_NAME_RE = re.compile(NAME_PATTERN)


class TopicSelector:
    """The topic rule: a full match of any pattern, and never an internal topic.

    Separate from :class:`Topology` so a Spark driver can select topics from the
    patterns alone (the job spec carries the patterns, not the topology).
    """

    def __init__(self, patterns: Iterable[str | re.Pattern[str]]) -> None:
        self._patterns = tuple(p if isinstance(p, re.Pattern) else re.compile(p) for p in patterns)

    def selects(self, topic: str) -> bool:
        return not is_internal_topic(topic) and any(p.fullmatch(topic) for p in self._patterns)



# --------------------------------------------------------------------------- value checks


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise PydanticCustomError(
            "bad_name",
            "invalid name '{name}': use letters, digits, '_', '.', '-' and start with a letter or digit",
            {"name": value},
        )
    return value


#: A cluster or topology name: a string (YAML ``1`` or ``no`` must be quoted) of the allowed characters.
Name = Annotated[str, Field(strict=True), AfterValidator(_check_name)]


def _config_value(value: Any) -> Any:
    if isinstance(value, (str, int, bool)):
        return value
    raise PydanticCustomError(
        "config_value",
        "a client setting must be a string, an integer or a boolean, got {kind}",
        {"kind": _kind(value)},
    )


ConfigValue = Annotated[bool | int | str, BeforeValidator(_config_value)]


_Model = Model


# --------------------------------------------------------------------------- clusters


class ClusterConfig(_Model):
    """One Kafka cluster: where to reach it, and optional non-secret client settings.

    Exactly one of ``bootstrap`` (``host:port[,host:port...]``) and ``conn_id``
    (an Airflow connection holding ``bootstrap.servers`` and any credentials).
    ``config`` adds librdkafka settings for every client of this cluster; secrets
    are refused there so they can only live in the connection.
    """

    bootstrap: str | None = Field(default=None, strict=True)
    conn_id: str | None = Field(default=None, strict=True)
    config: dict[str, ConfigValue] = Field(default_factory=dict)
    #: How this cluster names mirrored topics and consumer groups (see names.py); the logical names by default.
    names: ClusterNames = Field(default_factory=ClusterNames)

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap_format(cls, value: str | None) -> str | None:
        if value is None:
            return value
        servers = [s.strip() for s in value.split(",")]
        for server in servers:
            host, sep, port = server.rpartition(":")
            host = host.split("://", 1)[-1]  # librdkafka accepts an optional PROTOCOL:// prefix
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise PydanticCustomError(
                    "bootstrap",
                    "bootstrap must be host:port[,host:port...], got '{value}' (bad entry '{entry}')",
                    {"value": value, "entry": server},
                )
        return ",".join(servers)

    @field_validator("conn_id")
    @classmethod
    def _conn_id_format(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(ch.isspace() for ch in value)):
            raise PydanticCustomError("conn_id", "conn_id must be a non-empty Airflow connection id without spaces", {})
        return value

    @field_validator("config")
    @classmethod
    def _config_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        secret = sorted(k for k in value if is_secret_config(k))
        if secret:
            raise PydanticCustomError(
                "secret_in_file",
                "secrets never go in the topology file: move {keys} to the Airflow connection named by conn_id",
                {"keys": ", ".join(secret)},
            )
        if "bootstrap.servers" in value:
            raise PydanticCustomError(
                "bootstrap_in_config", "set the address with the cluster's bootstrap (or conn_id), not config", {}
            )
        for key in CODEC_KEYS:  # the codec of copies to this cluster (mirrorflow.kafka.compression)
            if key in value and value[key] not in CODECS:
                raise PydanticCustomError(
                    "codec", "{key} must be one of {codecs}, got '{value}'",
                    {"key": key, "codecs": ", ".join(CODECS), "value": value[key]},
                )
        return value

    @model_validator(mode="after")
    def _one_endpoint(self) -> ClusterConfig:
        if (self.bootstrap is None) == (self.conn_id is None):
            got = "both" if self.bootstrap is not None else "neither"
            raise PydanticCustomError(
                "endpoint", "give exactly one of bootstrap or conn_id, got {got}", {"got": got}
            )
        return self


# --------------------------------------------------------------------------- tree


def _child_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "<leaf>"
    if isinstance(value, (Mapping, TreeNode)):
        return "<node>"
    return None  # reported as a ``tree_child`` error, see _problem_text


class TreeNode(_Model):
    """An inner node of the distribution tree: a level and at least two children.

    A child is either a cluster name (a leaf) or another inner node. The level
    names the distributors that cross between this node's children; it must be
    larger than every level below it (checked in :func:`tree.check_tree`).
    """

    level: StrictInt
    children: list[TreeChild]


TreeChild = Annotated[
    Annotated[TreeNode, Tag("<node>")] | Annotated[str, Tag("<leaf>")],
    Discriminator(
        _child_kind,
        custom_error_type="tree_child",
        custom_error_message="expected a cluster name or a mapping with level and children",
    ),
]
TreeNode.model_rebuild()


# --------------------------------------------------------------------------- topology


class Topology(_Model):
    """The whole topology: clusters, the distribution tree, and the topics to mirror.

    Build it with :meth:`parse` (or :func:`mirrorflow.topology.load_topology`):
    every problem becomes a :class:`TopologyError`. The derived structure
    (leaves, levels, distributors) is computed once at validation time.
    """

    name: Name = "mirrorflow"
    #: Several trees in one Airflow: what this tree's DAG ids, Variables and own names on clusters start with
    #: (``<namespace>.``, ``_mirrorflow.<namespace>.``); ``""``, the default, keeps them as they are (trees.py).
    namespace: Annotated[str, Field(strict=True, pattern=r"^([A-Za-z0-9][A-Za-z0-9_-]{0,39})?$")] = ""
    clusters: dict[Name, ClusterConfig]
    tree: TreeNode
    topics: list[Annotated[str, Field(strict=True)]] = Field(min_length=1)
    #: Schedules, windows, throttles and per-run limits (all optional; see replication.py).
    replication: ReplicationConfig = Field(default_factory=ReplicationConfig)
    #: Which consumer groups travel, and how precisely (see offsets.py).
    offsets: OffsetsConfig = Field(default_factory=OffsetsConfig)
    #: Lag service levels for mirror_lag_monitor (see lag.py).
    lag: LagConfig = Field(default_factory=LagConfig)
    #: Schema registry sync from one primary (see schemas.py).
    schemas: SchemasConfig = Field(default_factory=SchemasConfig)
    #: S3 archive of the mirrored topics (see archive.py).
    archive: ArchiveConfig = Field(default_factory=ArchiveConfig)
    #: The completeness audit, mirror_audit (see audit.py).
    audit: AuditConfig = Field(default_factory=AuditConfig)
    #: Who is told, by e-mail or webhook, when mirroring needs a person (see alerts.py); ``None``: nobody.
    alerts: AlertsConfig | None = None
    #: Whose topic configs every cluster follows after creation (see topic_configs.py).
    topic_configs: TopicConfigsConfig = Field(default_factory=TopicConfigsConfig)
    #: Whether topic ACLs travel from one cluster to the others (see acl_sync.py); off by default.
    acl_sync: AclSyncConfig = Field(default_factory=AclSyncConfig)
    #: Whether failovers, target switches and decommissions wait for an approval (see approvals.py); off by default.
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)

    _patterns: tuple[re.Pattern[str], ...] = PrivateAttr(default=())
    _leaves: tuple[str, ...] = PrivateAttr(default=())
    _levels: tuple[int, ...] = PrivateAttr(default=())
    _distributors: dict[str, tuple[Distributor, ...]] = PrivateAttr(default_factory=dict)
    _links: dict[str, Distributor] = PrivateAttr(default_factory=dict)

    # ----------------------------------------------------------------- construction

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise TopologyError(problems_from_validation_error(exc)) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Topology:
        if not isinstance(obj, (Mapping, Topology)):
            raise TopologyError(
                "<top level>", f"expected a mapping with keys clusters, tree and topics, got {_kind(obj)}"
            )
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise TopologyError(problems_from_validation_error(exc)) from None

    @classmethod
    def parse(cls, data: Any, *, source: str | None = None) -> Topology:
        """Validate a mapping (e.g. loaded YAML); any problem raises :class:`TopologyError`.

        ``source`` (a file name) is only used in the error message.
        """
        try:
            return cls.model_validate(data)
        except TopologyError as exc:
            raise (exc.with_source(source) if source else exc) from None

    @model_validator(mode="after")
    def _semantics(self) -> Topology:
        problems: list[tuple[str, str]] = []
        patterns: list[re.Pattern[str]] = []
        for i, pattern in enumerate(self.topics):
            path = f"topics[{i}]"
            if not pattern:
                problems.append((path, "empty topic pattern"))
                continue
            try:
                patterns.append(re.compile(pattern))
            except re.error as exc:
                problems.append((path, f"bad regular expression {pattern!r}: {exc}"))
                continue
            if re.fullmatch(r"[A-Za-z0-9_-]+", pattern) and is_internal_topic(pattern):
                problems.append((path, f"{pattern!r} is an internal topic; internal topics are never mirrored"))
        problems += _tree.check_tree(self.tree, self.clusters, LEVEL_MIN, LEVEL_MAX)
        if not problems:
            distributors = _tree.build_distributors(self.tree)
            links: dict[str, Distributor] = {}
            for dist in (d for ds in distributors.values() for d in ds):
                if dist.link_id in links:
                    problems.append(("clusters", f"cluster names make link id {dist.link_id!r} ambiguous; rename one"))
                links[dist.link_id] = dist
            for level in self.replication.levels:
                if level not in {node.level for _, node in _tree.iter_nodes(self.tree)}:
                    problems.append((f"replication.levels.{level}", "no inner node of the tree has this level"))
            for link_id in self.replication.links:
                if link_id not in links:
                    close = difflib.get_close_matches(link_id, list(links), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    problems.append((f"replication.links.{link_id}",
                                     f"unknown link id{hint} (links: {', '.join(links)})"))
            for link_id in self.lag.links:
                if link_id not in links:
                    problems.append((f"lag.links.{link_id}", f"unknown link id (links: {', '.join(links)})"))
        known = ", ".join(self.clusters)
        if self.schemas.primary is not None and self.schemas.primary not in self.clusters:
            problems.append(("schemas.primary", f"unknown cluster {self.schemas.primary!r} (clusters: {known})"))
        for name, registry in self.schemas.clusters.items():
            if name not in self.clusters:
                problems.append((f"schemas.clusters.{name}", f"unknown cluster (clusters: {known})"))
            if TopicSelector(patterns).selects(registry.topic):
                problems.append((f"schemas.clusters.{name}.topic",
                                 f"the registry's storage topic {registry.topic!r} matches topics: it would be "
                                 "mirrored as data; name it in no pattern"))
        owners = {"topic_configs.owner": self.topic_configs.owner} if self.topic_configs.owner is not None else {}
        owners.update({f"topic_configs.owners.{p}": c for p, c in self.topic_configs.owners.items()})
        if self.acl_sync.owner is not None:
            owners["acl_sync.owner"] = self.acl_sync.owner
        owners.update({f"acl_sync.principals.{c}": c for c in self.acl_sync.principals})
        owners.update({f"acl_sync.unmapped.{c}": c for c in self.acl_sync.unmapped})
        owners.update({f"acl_sync.read_only[{i}]": c for i, c in enumerate(self.acl_sync.read_only)})
        for path, name in owners.items():
            if name not in self.clusters:
                problems.append((path, f"unknown cluster {name!r} (clusters: {known})"))
        grants_owner = self.acl_sync.owner or self.topic_configs.owner or next(iter(self.clusters), None)
        if self.acl_sync.enabled and grants_owner in self.acl_sync.read_only:
            problems.append((f"acl_sync.read_only[{self.acl_sync.read_only.index(grants_owner)}]",
                             f"{grants_owner!r} is the owner of the synced ACLs: the guard's denies there would "
                             "travel to every cluster; make another cluster the owner (acl_sync.owner)"))
        for i, name in enumerate(self.audit.assets):
            if not TopicSelector(patterns).selects(name):
                problems.append((f"audit.assets[{i}]", f"{name!r} is not a mirrored topic: no entry of topics "
                                                        "selects it"))
        for i, name in enumerate(self.archive.clusters or []):
            if name not in self.clusters:
                problems.append((f"archive.clusters[{i}]", f"unknown cluster {name!r} (clusters: {known})"))
        if problems:
            raise TopologyError(problems)
        self._patterns = tuple(patterns)
        self._leaves = tuple(_tree.iter_leaves(self.tree))
        self._levels = tuple(sorted({node.level for _, node in _tree.iter_nodes(self.tree)}))
        self._distributors = distributors
        self._links = links
        return self

    # ----------------------------------------------------------------- queries

    @property
    def levels(self) -> list[int]:
        """Every level of the tree, ascending (one ``mirror_level_<L>`` DAG each)."""
        return list(self._levels)

    @property
    def leaves(self) -> list[str]:
        """The clusters in tree (document) order."""
        return list(self._leaves)

    def topic_naming(self, cluster: str) -> NameFormat:
        """How ``cluster`` names a mirrored topic (its physical name from the logical one, and back)."""
        return self.cluster(cluster).names.topic_naming()

    def topic_formats(self, clusters: Iterable[str]) -> dict[str, dict[str, str]]:
        """``NameFormat.to_dict()`` of each of ``clusters`` that renames its topics: what a Spark job's spec carries."""
        return {c: naming.to_dict() for c in clusters if not (naming := self.topic_naming(c)).is_identity}

    def group_naming(self, cluster: str) -> NameFormat:
        """How ``cluster`` names a consumer group that travels."""
        return self.cluster(cluster).names.group_naming()

    def subject_naming(self, cluster: str) -> NameFormat:
        """How ``cluster``'s registry names subjects: its ``subject_format`` when set, else its topic names."""
        registry = self.schemas.registry(cluster)
        if "subject_format" in registry.model_fields_set:
            return registry.subject_naming()
        return self.topic_naming(cluster)

    def cluster(self, name: str) -> ClusterConfig:
        try:
            return self.clusters[name]
        except KeyError:
            raise UnknownClusterError(name, self.clusters) from None

    def distributors(self, cluster: str) -> list[Distributor]:
        """The distributors running on ``cluster``: one per level above it and sibling subtree.

        Ordered by level (ascending), then by the sibling subtree's position.
        """
        try:
            return list(self._distributors[cluster])
        except KeyError:
            raise UnknownClusterError(cluster, self.clusters) from None

    def links(self, level: int) -> list[Distributor]:
        """All distributors of ``level`` across clusters, in tree order (empty for an unknown level)."""
        return [d for leaf in self._leaves for d in self._distributors[leaf] if d.level == level]

    def all_links(self) -> list[Distributor]:
        """Every distributor of the topology, by level, then tree order."""
        return [d for level in self._levels for d in self.links(level)]

    def link(self, link_id: str) -> Distributor:
        """The distributor with this :attr:`Distributor.link_id`."""
        try:
            return self._links[link_id]
        except KeyError:
            raise UnknownLinkError(link_id, self._links) from None

    def link_settings(self, link_id: str) -> LinkSettings:
        """The link's effective copy settings: ``replication.defaults`` overridden by ``replication.links.<id>``."""
        self.link(link_id)
        return self.replication.link_settings(link_id)

    def config_ownership(self) -> ConfigOwnership | None:
        """Whose configs each mirrored topic follows (``topic_configs``; the first cluster listed by default);
        ``None`` when ``topic_configs.sync`` is off."""
        return self.topic_configs.ownership(next(iter(self.clusters)))

    def grant_rules(self) -> GrantRules | None:
        """Which topic ACLs travel and as what, and which clusters are read-only (``acl_sync``); ``None``: neither."""
        sync = self.acl_sync
        if not sync.enabled and not sync.read_only:
            return None
        return GrantRules(owner=sync.owner or self.topic_configs.owner or next(iter(self.clusters)),
                          topics=tuple(self.topics), groups=tuple(sync.groups),
                          principals={c: dict(m) for c, m in sync.principals.items()}, write=sync.write,
                          sync=sync.enabled, read_only=tuple(sync.read_only), unmapped=dict(sync.unmapped),
                          max_delete_share=float(sync.max_delete_share), topic_names=self.topic_formats(self.clusters),
                          group_names={c: f.to_dict() for c in self.clusters
                                       if not (f := self.group_naming(c)).is_identity})

    def asset_topics(self) -> list[str]:
        """The topics whose proven windows are Airflow assets: every plain name in ``topics``, and ``audit.assets``."""
        return sorted({n for p in self.topics if (n := plain_name(p)) is not None} | set(self.audit.assets))

    def selects(self, topic: str) -> bool:
        """Whether ``topic`` is mirrored: it full-matches an entry of ``topics`` and is not internal."""
        return TopicSelector(self._patterns).selects(topic)

    # ----------------------------------------------------------------- changes

    def to_dict(self) -> dict[str, Any]:
        """The topology as plain data, in the file's shape (``Topology.parse`` reads it back)."""
        data = self.model_dump(mode="python", exclude_none=True)
        if not self.namespace:
            data.pop("namespace")
        for name, cluster in data["clusters"].items():
            if not cluster.get("config"):
                cluster.pop("config", None)
            names = self.clusters[name].names.model_dump(mode="python", exclude_defaults=True)
            if names:
                cluster["names"] = names
            else:
                cluster.pop("names", None)
        for section in ("replication", "offsets", "lag", "schemas", "archive", "topic_configs", "acl_sync",
                        "approvals"):
            settings = getattr(self, section).model_dump(mode="python", exclude_defaults=True)
            if settings:
                data[section] = settings
            else:
                data.pop(section, None)
        if self.alerts is not None:
            data["alerts"] = self.alerts.model_dump(mode="python", exclude_defaults=True)
        return data

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)

    def with_cluster(self, name: str, cluster: ClusterConfig | Mapping[str, Any], *, sibling_of: str,
                     level: int) -> Topology:
        """A new, validated topology with ``name`` added next to ``sibling_of`` at ``level`` (:func:`tree.add_leaf`)."""
        if name in self.clusters:
            raise TopologyError(f"clusters.{name}", "cluster already exists")
        self.cluster(sibling_of)
        data = self.to_dict()
        config = cluster.model_dump(exclude_none=True) if isinstance(cluster, ClusterConfig) else dict(cluster)
        data["clusters"][name] = config
        data["tree"] = _tree.add_leaf(data["tree"], name, sibling_of=sibling_of, level=level)
        return Topology.parse(data)

    def without_cluster(self, name: str) -> Topology:
        """A new topology without cluster ``name`` (a parent left with one child is folded away)."""
        self.cluster(name)
        data = self.to_dict()
        del data["clusters"][name]
        links = data.get("replication", {}).get("links", {})
        for link_id in [l for l in links if l.startswith(f"{name}.L")]:
            del links[link_id]  # settings of the removed cluster's own links go with it
        if self.schemas.primary == name:
            raise TopologyError("schemas.primary", f"{name!r} is the schema registry primary; choose another first")
        data.get("schemas", {}).get("clusters", {}).pop(name, None)
        owned = [p for p, c in {"owner": self.topic_configs.owner, **{f"owners.{p}": c for p, c in
                                                                      self.topic_configs.owners.items()}}.items()
                 if c == name]
        if owned:
            raise TopologyError(f"topic_configs.{owned[0]}",
                                f"{name!r} owns topic configs; name another owner first")
        if self.acl_sync.owner == name:
            raise TopologyError("acl_sync.owner", f"{name!r} owns the synced ACLs; name another owner first")
        data.get("acl_sync", {}).get("principals", {}).pop(name, None)
        data.get("acl_sync", {}).get("unmapped", {}).pop(name, None)
        if name in self.acl_sync.read_only:
            data["acl_sync"]["read_only"].remove(name)
        archived = data.get("archive", {}).get("clusters")
        if archived is not None and name in archived:
            archived.remove(name)
            if not archived:
                raise TopologyError("archive.clusters", f"{name!r} is the only archived cluster; archive another first")
        data["tree"] = _tree.remove_leaf(data["tree"], name)
        if _tree.is_leaf(data["tree"]):
            raise TopologyError("tree", f"removing {name!r} would leave a single cluster; a topology needs two")
        return Topology.parse(data)


# --------------------------------------------------------------------------- errors


def problems_from_validation_error(exc: ValidationError) -> list[tuple[str, str]]:
    """pydantic's errors as ``(key path, problem)`` pairs a user can act on."""
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        problem = _problem_text(err, loc)
        item = (format_path(loc), problem)
        if item not in problems:
            problems.append(item)
    return problems


#: Mappings whose keys are integers (levels): their keys print as ``.3``, not as list positions ``[3]``.
_INT_KEYED = frozenset({"levels"})


def format_path(loc: tuple[Any, ...]) -> str:
    """``('tree', 'children', 1, '<node>', 'level')`` -> ``tree.children[1].level``."""
    out = ""
    previous: Any = None
    for part in loc:
        if part in ("<node>", "<leaf>", "[key]"):
            continue
        if isinstance(part, int) and previous in _INT_KEYED:
            out += f".{part}"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        previous = part
    return out or "<top level>"


def _problem_text(err: Mapping[str, Any], loc: tuple[Any, ...]) -> str:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if loc and loc[-1] == "[key]":
        if kind == "string_type":
            return f"names must be strings, got {_kind(value)}; quote it in YAML"
        if kind in ("int_type", "int_parsing", "int_from_float"):
            return f"keys here are levels (integers), got {_kind(value)}"
        return err["msg"]
    if kind == "extra_forbidden":
        return "unknown key" + _suggest(loc)
    if kind == "missing":
        return "required key is missing"
    if kind == "tree_child":
        quoting = value is None or isinstance(value, bool)
        hint = "; quote cluster names such as yes/no/on/off/null in YAML" if quoting else ""
        return f"expected a cluster name or a mapping with level and children, got {_kind(value)}{hint}"
    if kind in ("string_type",):
        return f"expected a string, got {_kind(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected an integer, got {_kind(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {_kind(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {_kind(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping, got {_kind(value)}"
    if kind in ("greater_than", "greater_than_equal"):
        return f"must be a positive integer, got {_kind(value)}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {_kind(value)}"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s), got {ctx.get('actual_length', 0)}"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _suggest(loc: tuple[Any, ...]) -> str:
    model = _model_at(loc[:-1])
    if model is None:
        return ""
    allowed = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (allowed: {', '.join(allowed)})"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping found at ``loc`` (for unknown-key hints)."""
    tp: Any = Topology
    for part in loc:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            tp = field.annotation
            continue
        origin = get_origin(tp)
        if origin in (list, tuple, set, frozenset):
            tp = get_args(tp)[0]
        elif origin is dict:
            tp = get_args(tp)[1]
        elif origin in (Union, types.UnionType):
            tp = next((m for m in get_args(tp) if _tag(m) == part), None)
            if tp is None:
                return None
        else:
            return None
    tp = _strip(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _strip(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        members = [m for m in get_args(tp) if m is not type(None)]
        if len(members) == 1:
            return _strip(members[0])
    return tp


def _tag(tp: Any) -> str | None:
    if get_origin(tp) is Annotated:
        for meta in get_args(tp)[1:]:
            if isinstance(meta, Tag):
                return meta.tag
    return None


def _kind(value: Any) -> str:
    """How a YAML user would describe ``value``."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__
