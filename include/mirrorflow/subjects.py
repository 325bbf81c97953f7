"""Subject names per cluster: parse with one cluster's format, render with another's.

A format is a template such as ``{tenant}-{instance}-{environment}-{topic}``.
``{topic}`` is the logical part users see and must occur exactly once; every
other placeholder is filled from the cluster's ``values``. With the values
filled in, a format becomes a fixed prefix and suffix around ``{topic}``, so
parsing is unambiguous even when the topic itself contains dashes, and the
``-key``/``-value`` suffix of the topic-name strategy travels inside
``{topic}``: ``acme-prod-eu-orders-value`` parses as topic ``orders-value``
under ``{tenant}-{instance}-{environment}-{topic}`` and renders as
``acme-eu-orders-value`` under ``{tenant}-{environment}-{topic}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

TOPIC = "topic"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_problems(template: str, values: Mapping[str, str]) -> list[str]:
    """What is wrong with ``template`` given ``values`` (empty when it is usable)."""
    problems: list[str] = []
    names = _PLACEHOLDER.findall(template)
    stray = _PLACEHOLDER.sub("", template)
    if "{" in stray or "}" in stray:
        problems.append(f"unbalanced braces in {template!r}")
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        problems.append(f"placeholder names must be identifiers, got {', '.join(repr(n) for n in bad)}")
    count = names.count(TOPIC)
    if count != 1:
        problems.append(f"{{topic}} must occur exactly once in {template!r}, found {count}")
    missing = sorted({n for n in names if n != TOPIC and _NAME.fullmatch(n)} - set(values))
    if missing:
        problems.append(f"no value for {', '.join('{' + n + '}' for n in missing)} (set them in values)")
    if TOPIC in values:
        problems.append("values must not set 'topic': it is the part that is translated")
    return problems


@dataclass(frozen=True)
class SubjectFormat:
    """One cluster's subject naming, with its placeholder values bound."""

    template: str
    prefix: str
    suffix: str

    @classmethod
    def of(cls, template: str, values: Mapping[str, str] | None = None) -> SubjectFormat:
        values = dict(values or {})
        problems = format_problems(template, values)
        if problems:
            raise ValueError(f"subject format {template!r}: {'; '.join(problems)}")
        head, _, tail = template.partition("{" + TOPIC + "}")
        fill = lambda text: _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)  # noqa: E731
        return cls(template, fill(head), fill(tail))

    def parse(self, subject: str) -> str | None:
        """The logical topic part of ``subject``, or ``None`` when the subject is not in this format."""
        if len(subject) <= len(self.prefix) + len(self.suffix):
            return None
        if not (subject.startswith(self.prefix) and subject.endswith(self.suffix)):
            return None
        return subject[len(self.prefix):len(subject) - len(self.suffix)]

    def render(self, topic: str) -> str:
        return f"{self.prefix}{topic}{self.suffix}"


def translate(subject: str, source: SubjectFormat, target: SubjectFormat) -> str | None:
    """``subject`` from the source's naming into the target's, or ``None`` if it does not parse."""
    topic = source.parse(subject)
    return None if topic is None else target.render(topic)
