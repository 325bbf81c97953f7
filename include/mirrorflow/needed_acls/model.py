"""One ACL the mirrorflow principal needs, and why (the roles that need it)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Kafka's operation names, as ``kafka-acls --operation`` spells them.
OPERATION_FLAGS = {
    "READ": "Read", "WRITE": "Write", "CREATE": "Create", "DELETE": "Delete", "ALTER": "Alter",
    "DESCRIBE": "Describe", "DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "AlterConfigs",
    "IDEMPOTENT_WRITE": "IdempotentWrite", "CLUSTER_ACTION": "ClusterAction",
}

#: Kafka's resource type names and the ``kafka-acls`` option that names one.
RESOURCE_FLAGS = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id",
                  "CLUSTER": "--cluster"}

#: The roles a cluster plays for mirrorflow, in the order docs/security.md lists them.
ROLES = ("source", "target", "switch", "offsets", "failover", "schemas", "lag", "onboarding", "decommission",
         "archive", "audit")


@dataclass(frozen=True, order=True)
class Acl:
    """ALLOW ``operation`` on one resource pattern of ``cluster`` for mirrorflow's principal."""

    cluster: str
    resource_type: str
    pattern_type: str
    name: str
    operation: str
    principal: str | None = field(default=None, compare=False)
    roles: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, str | None]:
        """The JSON form: exactly the keys automation applies (``roles`` stay in the text form)."""
        return {"cluster": self.cluster, "principal": self.principal, "resource_type": self.resource_type,
                "pattern_type": self.pattern_type, "name": self.name, "operation": self.operation}
