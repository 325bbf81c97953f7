"""Names mirrorflow gives its own topics and consumer groups.

A module of its own so that code on Spark executors can name them without
importing the topology package (its validated models pull in pydantic, which
every Python worker would pay for at its start).
"""

#: Prefix of every topic (and consumer group) mirrorflow creates for itself.
INTERNAL_TOPIC_PREFIX = "_mirrorflow"

#: Topics that are never selected for mirroring, whatever ``topics`` says.
INTERNAL_TOPIC_NAMES = frozenset({"_schemas"})
INTERNAL_TOPIC_PREFIXES = ("__", INTERNAL_TOPIC_PREFIX)


def is_internal_topic(topic: str) -> bool:
    """Kafka's own topics (``__*``), the schema registry's ``_schemas`` and mirrorflow's ``_mirrorflow*``."""
    return topic in INTERNAL_TOPIC_NAMES or topic.startswith(INTERNAL_TOPIC_PREFIXES)


# --------------------------------------------------------------------------- consumer groups and topics
# Every name below is on real clusters (committed offsets, ACLs, topics): its value never changes.

#: Prefix of every consumer group mirrorflow uses itself (link checkpoints, readers): never distributed
#: nor reported as a consumer group's lag.
INTERNAL_GROUP_PREFIX = f"{INTERNAL_TOPIC_PREFIX}."


def is_internal_group(group: str) -> bool:
    return group.startswith(INTERNAL_GROUP_PREFIX)


#: Portable consumer positions (:mod:`mirrorflow.offsets`): compacted, one partition, on every cluster.
OFFSETS_TOPIC = f"{INTERNAL_GROUP_PREFIX}offsets"
#: A cluster's completeness audit state (:mod:`mirrorflow.completeness.store`).
AUDIT_TOPIC = f"{INTERNAL_GROUP_PREFIX}audit"

# The groups of mirrorflow's readers. librdkafka wants a ``group.id``; they assign partitions and never join
# or commit, except the link groups, whose committed offsets are the links' checkpoints.
#: Reads ``_mirrorflow.offsets``.
OFFSETS_READER_GROUP = f"{OFFSETS_TOPIC}.reader"
#: Looks offsets up by timestamp when a position is translated to another cluster.
OFFSETS_TRANSLATE_GROUP = f"{OFFSETS_TOPIC}.resolver"
#: Scans partitions for the origins of their messages (:mod:`mirrorflow.offsets.frontier`).
POSITION_SCAN_GROUP = f"{INTERNAL_GROUP_PREFIX}scan"
#: Reads ``_mirrorflow.audit``, and the records an audit counts.
AUDIT_READER_GROUP = f"{AUDIT_TOPIC}.reader"
#: Looks up where an audit's window starts when a difference is drilled into.
AUDIT_DRILL_GROUP = f"{AUDIT_TOPIC}.drill"
#: Reads the schema registry's topic.
SCHEMAS_READER_GROUP = f"{INTERNAL_GROUP_PREFIX}schemas.reader"
#: Reads the first pending message of a link or group for its age.
LAG_READER_GROUP = f"{INTERNAL_GROUP_PREFIX}lag-reader"
#: Reads a new cluster and its peer to compare them (onboarding).
VERIFY_GROUP = f"{INTERNAL_GROUP_PREFIX}verify"
#: Looks up where a backfill ``since`` a time starts.
BACKFILL_SINCE_GROUP = f"{INTERNAL_GROUP_PREFIX}backfill-since"
#: Reads partitions' watermarks (a dash, not a dot: :func:`is_internal_group` does not know it; it never commits).
WATERMARKS_GROUP = f"{INTERNAL_TOPIC_PREFIX}-watermarks"
#: Reads a target's copies for their provenance (the copy engine's scans).
COPY_SCAN_GROUP = f"{INTERNAL_GROUP_PREFIX}copy-scan"
#: Reads a source's records again to see whether its history changed (a truncated source).
HISTORY_GROUP = f"{INTERNAL_GROUP_PREFIX}history"
#: What mirrorflow last applied of each topic's configs on a cluster (:mod:`mirrorflow.cluster_sync.config_memory`).
TOPIC_CONFIGS_TOPIC = f"{INTERNAL_GROUP_PREFIX}topic-configs"
#: Reads ``_mirrorflow.topic-configs``.
TOPIC_CONFIGS_READER_GROUP = f"{TOPIC_CONFIGS_TOPIC}.reader"
#: The ACL bindings mirrorflow made on a cluster (:mod:`mirrorflow.cluster_sync.acl_sync`).
ACL_GRANTS_TOPIC = f"{INTERNAL_GROUP_PREFIX}acl-grants"
#: Reads ``_mirrorflow.acl-grants``.
ACL_GRANTS_READER_GROUP = f"{ACL_GRANTS_TOPIC}.reader"


def checkpoint_group(link_id: str) -> str:
    """The group whose committed offsets on the target are link ``link_id``'s checkpoints."""
    return f"{INTERNAL_GROUP_PREFIX}link.{link_id}"


def link_reader_group(link_id: str) -> str:
    """The group of link ``link_id``'s source readers."""
    return f"{INTERNAL_GROUP_PREFIX}reader.{link_id}"


def archive_reader_group(cluster: str) -> str:
    """The group of the archive's readers of ``cluster``."""
    return f"{INTERNAL_GROUP_PREFIX}archive.{cluster}"


# --------------------------------------------------------------------------- several trees on one cluster


def in_namespace(name: str, namespace: str) -> str:
    """mirrorflow's own ``name`` as a tree with ``namespace`` keeps it: ``_mirrorflow.<namespace>.<rest>``.

    Two trees loaded into one Airflow may share a cluster; their checkpoints, transactional
    ids and stores must not meet there, so each tree's own names carry its name. A
    deployment with one topology has namespace ``""`` and keeps every name as it always
    was (they are on real clusters). Names outside ``_mirrorflow.`` (the watermark
    reader's) never commit and stay shared.
    """
    if not namespace or not name.startswith(INTERNAL_GROUP_PREFIX):
        return name
    return f"{INTERNAL_GROUP_PREFIX}{namespace}.{name[len(INTERNAL_GROUP_PREFIX):]}"
