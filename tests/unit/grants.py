"""ACL bindings as the grant-sync tests write them: :func:`grant` with every field defaulted."""

from __future__ import annotations

from mirrorflow.cluster_sync import Grant


def grant(name="orders", principal="User:alice", operation="READ", kind="TOPIC", pattern="LITERAL",
          permission="ALLOW") -> Grant:
    return Grant(kind, name, pattern, principal, "*", operation, permission)
