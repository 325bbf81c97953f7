"""The Kafka ACLs mirrorflow's own principal needs, per cluster and role: derived, printed, applied.

Not to be confused with the topic ACLs mirrorflow carries between clusters
(:mod:`mirrorflow.cluster_sync`, topology key ``acl_sync``): these are what
mirrorflow itself must be granted to do its work. ``python -m mirrorflow.acls
TOPOLOGY`` (the operators' command, forwarded here; ``python -m
mirrorflow.needed_acls`` is the same) prints them as ``kafka-acls`` commands
(``--format json`` for automation); docs/security.md explains each one.

- :mod:`~mirrorflow.needed_acls.model`: an ACL and the roles a cluster plays;
- :mod:`~mirrorflow.needed_acls.rules`: what each role needs (:func:`required_acls`);
- :mod:`~mirrorflow.needed_acls.patterns`: a topology's selector as an ACL pattern;
- :mod:`~mirrorflow.needed_acls.principal`: whom the ACLs are for, on each cluster;
- :mod:`~mirrorflow.needed_acls.render`: the ACLs as commands or JSON.
"""

from mirrorflow.kafka import principal_of
from mirrorflow.needed_acls.model import ROLES, Acl
from mirrorflow.needed_acls.patterns import ResourcePattern, resource_pattern
from mirrorflow.needed_acls.principal import principals
from mirrorflow.needed_acls.render import as_commands, as_json
from mirrorflow.needed_acls.rules import inexact_patterns, required_acls

__all__ = ["ROLES", "Acl", "ResourcePattern", "as_commands", "as_json", "inexact_patterns", "principal_of",
           "principals", "required_acls", "resource_pattern"]
