"""What a refused call must name: whether an error text names a refusal a given ACL covers (secured clusters)."""

from __future__ import annotations

#: What an ACL grants besides its own operation: a call refused one of these names the operation it needed (a
#: source's config read names DESCRIBE_CONFIGS where the cluster, a target too, holds ALTER_CONFIGS).
IMPLIED = {"ALTER_CONFIGS": ("DESCRIBE_CONFIGS",)}


def covers(acl, text: str) -> bool:
    """Whether ``text`` names a refusal of ``acl``: its cluster, principal, operation and a resource it covers."""
    heads = [f"cluster {acl.cluster} refused {acl.principal} {op} on {acl.resource_type} "
             for op in (acl.operation, *IMPLIED.get(acl.operation, ()))]
    head = next((h for h in heads if h in text), None)
    if head is None:
        return False
    name = text.split(head, 1)[1].split(": ", 1)[0]
    if acl.pattern_type == "prefixed":
        return all(n.startswith(acl.name) for n in name.split(", "))
    return name == acl.name
