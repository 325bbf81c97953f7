"""From a topology's name patterns (full-match regular expressions) to Kafka ACL resource patterns.

Kafka ACLs name a resource literally, by prefix, or as ``*``; the topology
selects topics and groups by regular expression. A plain name becomes a literal
ACL, ``<name>.*`` a prefixed one, ``.*`` the literal ``*``. Anything else is
granted on its longest literal head: broader than the selection, and
:attr:`ResourcePattern.exact` says so, so that the tool can tell the operator.
A cluster that stores mirrored names its own way gets the pattern in its names
(:func:`on_cluster`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.naming import NameFormat

_META = set(".^$*+?{}[]|()")
_DROPS_PREVIOUS = set("*?{")  # quantifiers that allow the character before them to be absent


@dataclass(frozen=True)
class ResourcePattern:
    """One ACL resource pattern: ``pattern_type`` is ``literal`` or ``prefixed``."""

    pattern_type: str
    name: str
    #: Whether the pattern grants exactly what the regular expression selects.
    exact: bool
    source: str


def resource_pattern(regex: str) -> ResourcePattern:
    """The narrowest ACL pattern that covers every name ``regex`` matches in full."""
    if regex in (".*", ".+"):
        return ResourcePattern("literal", "*", True, regex)
    head: list[str] = []
    i = 0
    while i < len(regex):
        char = regex[i]
        if char == "\\" and i + 1 < len(regex) and not regex[i + 1].isalnum():
            head.append(regex[i + 1])
            i += 2
            continue
        if char == "\\" or char in _META:
            break
        head.append(char)
        i += 1
    rest = regex[i:]
    literal = "".join(head)
    if not rest:
        return ResourcePattern("literal", literal, True, regex)
    if rest[0] in _DROPS_PREVIOUS and literal:
        literal = literal[:-1]
    exact = rest in (".*",)
    if not literal:
        return ResourcePattern("literal", "*", False, regex)
    return ResourcePattern("prefixed", literal, exact, regex)


def on_cluster(pattern: ResourcePattern, naming: NameFormat) -> ResourcePattern:
    """``pattern`` (over logical names) as a cluster that stores those names under ``naming`` needs it.

    A literal name is rendered; anything wider becomes a prefix behind the format's fixed
    start, exact only when the format has no suffix (the suffix it cannot say).
    """
    if naming.is_identity:
        return pattern
    if pattern.pattern_type == "literal" and pattern.name != "*":
        return ResourcePattern("literal", naming.render(pattern.name), pattern.exact, pattern.source)
    head = naming.prefix + ("" if pattern.pattern_type == "literal" else pattern.name)
    if not head:
        return ResourcePattern("literal", "*", False, pattern.source)
    return ResourcePattern("prefixed", head, pattern.exact and not naming.suffix, pattern.source)
