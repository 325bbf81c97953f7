"""The Kafka ACLs mirrorflow's principal needs, per cluster and role: derived, printed, applied.

``python -m mirrorflow.acls TOPOLOGY`` prints them as ``kafka-acls`` commands
(``--format json`` for automation); docs/security.md explains each one.
"""

from mirrorflow.acls.model import ROLES, Acl
from mirrorflow.acls.patterns import ResourcePattern, resource_pattern
from mirrorflow.acls.principal import principals
from mirrorflow.acls.render import as_commands, as_json
from mirrorflow.acls.rules import inexact_patterns, required_acls
from mirrorflow.kafka.principal import principal_of

__all__ = ["ROLES", "Acl", "ResourcePattern", "as_commands", "as_json", "inexact_patterns", "principal_of",
           "principals", "required_acls", "resource_pattern"]
