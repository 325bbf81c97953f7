"""Which ACLs each role needs on which cluster: the least-privilege set, derived from a topology.

One rule per role, each written down from what that role's code asks of Kafka
(docs/security.md has the table and the reasons). Operations that Kafka
implies are left out: READ, WRITE, DELETE and ALTER each imply DESCRIBE on the
same resource, and ALTER_CONFIGS implies DESCRIBE_CONFIGS.

Names the code gives its own resources come from the modules that make them
(checkpoint groups, transactional ids, internal topics), so a renamed resource
renames its ACL too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mirrorflow.completeness.store import AUDIT_TOPIC
from mirrorflow.copy import transactional_id_prefix
from mirrorflow.copy.state import checkpoint_group
from mirrorflow.errors import MirrorflowError
from mirrorflow.internal_names import ACL_GRANTS_TOPIC, INTERNAL_TOPIC_PREFIX, TOPIC_CONFIGS_TOPIC, in_namespace
from mirrorflow.kafka import CLUSTER_RESOURCE
from mirrorflow.needed_acls.model import ROLES, Acl
from mirrorflow.needed_acls.patterns import ResourcePattern, on_cluster, resource_pattern
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.onboard.plan import preflight_transactional_id
from mirrorflow.topology import Topology

_Key = tuple[str, str, str, str, str]


class _Grants:
    def __init__(self, wanted_roles: Iterable[str] | None, topology: Topology) -> None:
        self.topology = topology
        self.wanted = set(wanted_roles) if wanted_roles is not None else set(ROLES)
        unknown = self.wanted - set(ROLES)
        if unknown:
            raise MirrorflowError(f"unknown role(s) {sorted(unknown)}; the roles are {', '.join(ROLES)}")
        self.roles: dict[_Key, set[str]] = {}

    def add(self, role: str, cluster: str, resource_type: str, pattern: ResourcePattern | tuple[str, str],
            *operations: str) -> None:
        if role not in self.wanted:
            return
        pattern_type, name = (pattern.pattern_type, pattern.name) if isinstance(pattern, ResourcePattern) \
            else pattern
        for operation in operations:
            self.roles.setdefault((cluster, resource_type, pattern_type, name, operation), set()).add(role)

    def topics(self, role: str, cluster: str, patterns: list[ResourcePattern], *operations: str) -> None:
        """Mirrored topics, as ``cluster`` names them (``clusters.<c>.names``)."""
        naming = self.topology.topic_naming(cluster)
        for pattern in patterns:
            self.add(role, cluster, "TOPIC", on_cluster(pattern, naming), *operations)

    def groups(self, role: str, cluster: str, patterns: list[ResourcePattern], *operations: str) -> None:
        """Consumer groups that travel, as ``cluster`` names them."""
        naming = self.topology.group_naming(cluster)
        for pattern in patterns:
            self.add(role, cluster, "GROUP", on_cluster(pattern, naming), *operations)


def required_acls(topology: Topology, principals: Mapping[str, str | None] | None = None,
                  roles: Iterable[str] | None = None) -> list[Acl]:
    """Every ACL mirrorflow's principal needs for ``topology`` (restricted to ``roles`` when given)."""
    principals = principals or {}
    topics = [resource_pattern(p) for p in topology.topics]
    groups = [resource_pattern(p) for p in topology.offsets.groups]
    internal_groups = ("prefixed", INTERNAL_TOPIC_PREFIX)
    def own(name: str) -> str:  # the tree's own names (several trees in one Airflow: docs/naming.md)
        return in_namespace(name, topology.namespace)

    offsets_topic = ("literal", own(OFFSETS_TOPIC))
    g = _Grants(roles, topology)

    for link in topology.all_links():
        checkpoints = ("literal", own(checkpoint_group(link.link_id)))
        producers = ("prefixed", own(transactional_id_prefix(link.link_id)))
        # A source is read, and its topics' configurations travel with them.
        g.topics("source", link.source, topics, "READ", "DESCRIBE_CONFIGS")
        g.add("source", link.source, "GROUP", internal_groups, "DESCRIBE")
        # The offsets positions travel along every link, copied like a topic of the link's.
        for role in ("offsets", "failover"):
            g.add(role, link.source, "TOPIC", offsets_topic, "READ")
        # Any leaf of the sibling subtree may be the target (an operator may switch to it).
        for target in link.sibling_leaves:
            g.topics("target", target, topics, "CREATE", "ALTER", "WRITE", "READ", "DESCRIBE_CONFIGS")
            g.add("target", target, "GROUP", checkpoints, "READ")
            g.add("target", target, "TRANSACTIONAL_ID", producers, "WRITE")
            g.add("target", target, "GROUP", internal_groups, "DESCRIBE")
            g.add("target", target, "CLUSTER", ("literal", CLUSTER_RESOURCE), "DESCRIBE_CONFIGS")
            g.add("switch", target, "GROUP", checkpoints, "DELETE", "READ")
            g.add("switch", target, "TRANSACTIONAL_ID", producers, "WRITE")
            for role in ("offsets", "failover"):
                g.add(role, target, "TOPIC", offsets_topic, "WRITE", "READ")
                g.add(role, target, "GROUP", checkpoints, "READ")
                g.add(role, target, "TRANSACTIONAL_ID", producers, "WRITE")

    # Topic configs follow their owner (topic_configs): read there, altered on every follower, and what the sync
    # last saw remembered on the follower under every policy (without it no follower value can be told apart
    # from an owner's change: kafka.ownership).
    ownership = topology.config_ownership()
    if ownership is not None:
        for owner in sorted(ownership.clusters()):
            g.topics("source", owner, topics, "DESCRIBE_CONFIGS")
        for link in topology.all_links():
            for target in link.sibling_leaves:
                g.topics("target", target, topics, "ALTER_CONFIGS")
                g.add("target", target, "TOPIC", ("literal", own(TOPIC_CONFIGS_TOPIC)), "CREATE", "READ", "WRITE")

    # Topic ACLs travel from their owner (acl_sync): read there, created and deleted elsewhere, and what
    # mirrorflow made remembered where it made it.
    # A read-only cluster's guard is kept by the level runs that target it, and moved by failovers.
    grants = topology.grant_rules()
    if grants is not None:
        guarded = [(role, c) for c in grants.read_only for role in ("target", "failover")]
        if grants.sync:
            g.add("source", grants.owner, "CLUSTER", ("literal", CLUSTER_RESOURCE), "DESCRIBE")
            guarded += [("target", c) for c in topology.leaves if c != grants.owner]
        for role, cluster in guarded:
            g.add(role, cluster, "CLUSTER", ("literal", CLUSTER_RESOURCE), "ALTER")
            g.add(role, cluster, "TOPIC", ("literal", own(ACL_GRANTS_TOPIC)), "CREATE", "READ", "WRITE")

    for cluster in topology.leaves:
        for role in ("offsets", "failover"):
            g.add(role, cluster, "TOPIC", offsets_topic, "CREATE", "READ", "WRITE")
            g.topics(role, cluster, topics, "READ")
            g.groups(role, cluster, groups, "READ")
            g.add(role, cluster, "GROUP", internal_groups, "DESCRIBE")
        g.topics("lag", cluster, topics, "READ")
        g.groups("lag", cluster, groups, "DESCRIBE")
        g.add("lag", cluster, "GROUP", internal_groups, "DESCRIBE")
        g.topics("onboarding", cluster, topics, "CREATE", "ALTER", "ALTER_CONFIGS", "READ")
        g.add("onboarding", cluster, "TOPIC", offsets_topic, "CREATE", "READ", "WRITE")
        g.add("onboarding", cluster, "TRANSACTIONAL_ID", ("literal", preflight_transactional_id(cluster)), "WRITE")
        g.add("onboarding", cluster, "GROUP", internal_groups, "DESCRIBE")
        g.add("decommission", cluster, "GROUP", ("literal", "*"), "DESCRIBE")
        g.add("audit", cluster, "TOPIC", ("literal", own(AUDIT_TOPIC)), "CREATE", "READ", "WRITE")
        g.add("audit", cluster, "TRANSACTIONAL_ID", ("prefixed", own(AUDIT_TOPIC)), "WRITE")
        g.topics("audit", cluster, topics, "READ")
        g.add("audit", cluster, "GROUP", internal_groups, "DESCRIBE")

    for cluster in topology.archive.archived(list(topology.leaves)):
        g.topics("archive", cluster, topics, "READ")
        g.add("archive", cluster, "GROUP", internal_groups, "DESCRIBE")

    if topology.schemas.enabled:
        for cluster in topology.leaves:
            registry = topology.schemas.registry(cluster)
            if registry.via != "topic":
                continue  # reached over REST: no Kafka ACL
            storage = ("literal", registry.topic)
            if cluster == topology.schemas.primary:
                g.add("schemas", cluster, "TOPIC", storage, "READ")
            else:
                g.add("schemas", cluster, "TOPIC", storage, "CREATE", "READ", "WRITE")
            g.add("schemas", cluster, "GROUP", internal_groups, "DESCRIBE")

    collapsed = _without_implied(g.roles)
    return sorted(Acl(*key, principal=principals.get(key[0]), roles=tuple(r for r in ROLES if r in found))
                  for key, found in collapsed.items())


#: Operations Kafka grants along with another on the same resource (the implied one, then what implies it).
_IMPLIED = {"DESCRIBE": ("READ", "WRITE", "DELETE", "ALTER"), "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",)}


def _without_implied(roles: dict[_Key, set[str]]) -> dict[_Key, set[str]]:
    """The set without operations another of its entries implies; their roles move to the implying entry."""
    out = {key: set(found) for key, found in roles.items()}
    for key in list(out):
        *resource, operation = key
        for implying in _IMPLIED.get(operation, ()):
            stronger = (*resource, implying)
            if stronger in out:
                out[stronger] |= out.pop(key)
                break
    return out


def inexact_patterns(topology: Topology) -> list[ResourcePattern]:
    """The topic and group patterns whose ACL grants more than the topology selects."""
    return [p for p in (resource_pattern(r) for r in [*topology.topics, *topology.offsets.groups]) if not p.exact]
