"""Names per cluster: the logical name people see, and the physical name each cluster stores it under.

A cluster names what it holds with a format: a template such as
``{tenant}-{instance}-{environment}-{topic}``. One placeholder is the logical name
(``{topic}`` for topics and schema subjects, ``{group}`` for consumer groups) and
must occur exactly once; every other placeholder is filled from the cluster's
``values``. With the values filled in, a format is a fixed prefix and suffix around
the logical name, so it renders one-to-one and parses back unambiguously even when
the logical name holds the separator: ``acme-main-prod-orders`` is ``orders`` under
``{tenant}-{instance}-{environment}-{topic}`` and renders as ``acme-prod-orders``
under ``{tenant}-{environment}-{topic}``. A subject's ``-key``/``-value`` suffix of
the topic-name strategy travels inside the logical part. A plain prefix ``p`` is the
format ``p{topic}``; the identity ``{topic}`` is every cluster's default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

TOPIC = "topic"
GROUP = "group"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What Kafka accepts in a topic name (and at most 249 of them).
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]*")


def format_problems(template: str, values: Mapping[str, str], logical: str = TOPIC) -> list[str]:
    """What is wrong with ``template`` given ``values`` (empty when it is usable)."""
    problems: list[str] = []
    names = _PLACEHOLDER.findall(template)
    stray = _PLACEHOLDER.sub("", template)
    if "{" in stray or "}" in stray:
        problems.append(f"unbalanced braces in {template!r}")
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        problems.append(f"placeholder names must be identifiers, got {', '.join(repr(n) for n in bad)}")
    count = names.count(logical)
    if count != 1:
        problems.append(f"{{{logical}}} must occur exactly once in {template!r}, found {count}")
    missing = sorted({n for n in names if n != logical and _NAME.fullmatch(n)} - set(values))
    if missing:
        problems.append(f"no value for {', '.join('{' + n + '}' for n in missing)} (set them in values)")
    if logical in values:
        problems.append(f"values must not set {logical!r}: it is the part that is translated")
    braces = sorted(k for k, v in values.items() if "{" in v or "}" in v)
    if braces:
        problems.append(f"values must not hold braces: {', '.join(braces)}")
    return problems


def topic_name_problems(fmt: NameFormat) -> list[str]:
    """What of a topic format's fixed parts Kafka would refuse in a topic name."""
    fixed = fmt.prefix + fmt.suffix
    if not _TOPIC_CHARS.fullmatch(fixed):
        bad = sorted(set(_TOPIC_CHARS.sub("", fixed)))
        return [f"{fmt.template!r} puts {''.join(bad)!r} in topic names (Kafka allows letters, digits, '.', '_', '-')"]
    return []


@dataclass(frozen=True)
class NameFormat:
    """One cluster's naming of one kind of name, with its placeholder values bound."""

    template: str
    prefix: str
    suffix: str

    @classmethod
    def of(cls, template: str, values: Mapping[str, str] | None = None, logical: str = TOPIC) -> NameFormat:
        values = dict(values or {})
        problems = format_problems(template, values, logical)
        if problems:
            raise ValueError(f"name format {template!r}: {'; '.join(problems)}")
        head, _, tail = template.partition("{" + logical + "}")
        fill = lambda text: _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)  # noqa: E731
        return cls(template, fill(head), fill(tail))

    @classmethod
    def identity(cls, logical: str = TOPIC) -> NameFormat:
        return cls("{" + logical + "}", "", "")

    @property
    def is_identity(self) -> bool:
        return not self.prefix and not self.suffix

    def parse(self, name: str) -> str | None:
        """The logical part of ``name``, or ``None`` when ``name`` is not in this format."""
        if len(name) <= len(self.prefix) + len(self.suffix):
            return None
        if not (name.startswith(self.prefix) and name.endswith(self.suffix)):
            return None
        return name[len(self.prefix):len(name) - len(self.suffix)]

    def render(self, logical: str) -> str:
        return f"{self.prefix}{logical}{self.suffix}"

    def to_dict(self) -> dict[str, str]:
        """Plain JSON, for job specs: executors translate without the topology."""
        return {"template": self.template, "prefix": self.prefix, "suffix": self.suffix}

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> NameFormat:
        if not isinstance(data, Mapping) or not all(isinstance(data.get(k), str)
                                                    for k in ("template", "prefix", "suffix")):
            raise ValueError(f"a name format is an object of strings template, prefix and suffix, got {data!r}")
        return cls(data["template"], data["prefix"], data["suffix"])


def translate(name: str, source: NameFormat, target: NameFormat) -> str | None:
    """``name`` from the source's naming into the target's, or ``None`` if it does not parse."""
    logical = source.parse(name)
    return None if logical is None else target.render(logical)
