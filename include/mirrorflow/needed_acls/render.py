"""The ACL set as ``kafka-acls`` commands an operator can run, or as JSON for automation."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from mirrorflow.needed_acls.model import OPERATION_FLAGS, RESOURCE_FLAGS, Acl
from mirrorflow.needed_acls.patterns import ResourcePattern


def as_json(acls: list[Acl]) -> str:
    return json.dumps([a.to_dict() for a in acls], indent=2)


def as_commands(acls: list[Acl], bootstraps: Mapping[str, str | None], *, tool: str = "kafka-acls.sh",
                inexact: list[ResourcePattern] | None = None) -> str:
    """One ``kafka-acls --add`` per cluster and resource, every operation it needs on one line."""
    lines = ["#!/bin/sh",
             "# ACLs mirrorflow's principal needs (python -m mirrorflow.acls; docs/security.md explains each).",
             "# KAFKA_ADMIN_CONFIG: a client properties file of a principal allowed to alter ACLs.",
             "set -eu"]
    for pattern in inexact or []:
        lines.append(f"# NOTE: {pattern.source!r} is not expressible as an ACL; granted as {pattern.pattern_type} "
                     f"{pattern.name!r}, which covers more names than the topology selects")
    by_resource: dict[tuple[str, str, str, str], list[Acl]] = {}
    for acl in acls:
        by_resource.setdefault((acl.cluster, acl.resource_type, acl.pattern_type, acl.name), []).append(acl)
    cluster_seen: set[str] = set()
    for (cluster, resource_type, pattern_type, name), group in by_resource.items():
        principal = group[0].principal
        if cluster not in cluster_seen:
            cluster_seen.add(cluster)
            lines.append("")
            lines.append(f"# cluster {cluster}: principal {principal or 'unknown: set MIRRORFLOW_PRINCIPAL'}")
        bootstrap = bootstraps.get(cluster)
        roles = sorted({r for a in group for r in a.roles})
        lines.append(f"# {resource_type} {name} ({pattern_type}): {', '.join(roles)}")
        command = [tool, "--bootstrap-server", shlex.quote(bootstrap) if bootstrap else f'"$BOOTSTRAP_{cluster}"',
                   "--command-config", '"$KAFKA_ADMIN_CONFIG"', "--add", "--allow-principal",
                   shlex.quote(principal) if principal else '"$MIRRORFLOW_PRINCIPAL"']
        for acl in group:
            command += ["--operation", OPERATION_FLAGS[acl.operation]]
        flag = RESOURCE_FLAGS[resource_type]
        command += [flag] if resource_type == "CLUSTER" else [flag, shlex.quote(name)]
        command += ["--resource-pattern-type", pattern_type]
        lines.append(" ".join(command))
    return "\n".join(lines) + "\n"
