"""``python -m mirrorflow.acls TOPOLOGY``: the ACLs mirrorflow's principal needs, as commands or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mirrorflow.errors import MirrorflowError
from mirrorflow.needed_acls.model import ROLES
from mirrorflow.needed_acls.principal import bootstrap_of, principals
from mirrorflow.needed_acls.render import as_commands, as_json
from mirrorflow.needed_acls.rules import inexact_patterns, required_acls
from mirrorflow.topology import load_topology


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mirrorflow.acls",
        description="Print the Kafka ACLs mirrorflow's principal needs for a topology (docs/security.md).")
    parser.add_argument("topology", help="the topology file")
    parser.add_argument("--format", choices=("commands", "json"), default="commands",
                        help="kafka-acls commands (default) or a JSON list for automation")
    parser.add_argument("--principal", help="the principal on every cluster (User:NAME); default: from each "
                        "cluster's connection (AIRFLOW_CONN_<ID>) where it can be known")
    parser.add_argument("--role", action="append", choices=ROLES, metavar="ROLE",
                        help=f"only what these roles need (repeatable; default all: {', '.join(ROLES)})")
    parser.add_argument("--cluster", action="append", metavar="NAME", help="only these clusters (repeatable)")
    parser.add_argument("--tool", default="kafka-acls.sh", help="the kafka-acls command to print")
    args = parser.parse_args(argv)
    try:
        topology = load_topology(args.topology)
        unknown = sorted(set(args.cluster or ()) - set(topology.clusters))
        if unknown:
            raise MirrorflowError(f"--cluster {', '.join(unknown)}: not in the topology "
                                  f"(clusters: {', '.join(sorted(topology.clusters))})")
        acls = required_acls(topology, principals(topology, args.principal), args.role)
    except MirrorflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.cluster:
        acls = [a for a in acls if a.cluster in args.cluster]
    inexact = inexact_patterns(topology)
    for pattern in inexact:
        print(f"warning: {pattern.source!r} cannot be an ACL pattern; granted as {pattern.pattern_type} "
              f"{pattern.name!r}, which covers more names than the topology selects", file=sys.stderr)
    if args.format == "json":
        print(as_json(acls))
    else:
        bootstraps = {name: bootstrap_of(topology, name) for name in topology.clusters}
        sys.stdout.write(as_commands(acls, bootstraps, tool=args.tool, inexact=inexact))
    return 0


if __name__ == "__main__":
    sys.exit(main())
