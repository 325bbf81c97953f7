"""A small strict parser of the Prometheus text exposition format: a line it cannot read fails the test."""

from __future__ import annotations

import re

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')


LABEL = re.compile(r'(?P<name>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\\n]|\\[\\"n])*)"(?:,|$)')


def unescape(value: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, dict[str, str], str]]]:
    """``({family: {"help": ..., "type": ...}}, [(name, labels, value), ...])``, strictly: a bad line fails."""
    assert text.endswith("\n")
    families: dict[str, dict[str, str]] = {}
    samples: list[tuple[str, dict[str, str], str]] = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"second HELP for {name}"
            families[name] = {"help": help_text}
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert set(families.get(name, {})) == {"help"}, f"TYPE of {name} without its HELP just before"
            families[name]["type"] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels: dict[str, str] = {}
            rest = m.group("labels") or ""
            while rest:
                lm = LABEL.match(rest)
                assert lm, f"bad labels in {line!r} at {rest!r}"
                assert lm.group("name") not in labels
                labels[lm.group("name")] = unescape(lm.group("value"))
                rest = rest[lm.end():]
            assert m.group("name") in families and "type" in families[m.group("name")], f"{line!r} before its TYPE"
            float(m.group("value").replace("+Inf", "inf"))
            samples.append((m.group("name"), labels, m.group("value")))
    return families, samples
