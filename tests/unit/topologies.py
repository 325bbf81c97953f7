"""Topologies as plain data for the unit tests, and how a test checks that a topology is refused.

``four()`` is the four-cluster tree of docs/architecture.md (two topic patterns);
``four_with_lag()`` the same tree with one topic and, if given, a ``lag`` section;
``BASE`` the same tree on other ports, one topic (the ACL-sync, guard and approvals
tests add their section to it).
"""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology

PYDANTIC_NOISE = ("validation error", "pydantic", "Input should", "For further information", "type=")


def four() -> dict:
    """The four-cluster tree of docs/architecture.md, Contracts as plain data."""
    return {
        "clusters": {f"c{i}": {"bootstrap": f"127.0.0.1:{19091 + i}"} for i in range(1, 5)},
        "tree": {
            "level": 3,
            "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}],
        },
        "topics": ["orders", "payments\\..*"],
    }


def refuse(data) -> TopologyError:
    """Parse ``data`` expecting a TopologyError; check it reads like one."""
    with pytest.raises(TopologyError) as info:
        Topology.parse(data)
    assert_readable(info.value)
    return info.value


def assert_readable(err: TopologyError) -> None:
    text = str(err)
    for noise in PYDANTIC_NOISE:
        assert noise not in text, f"pydantic leaks into the message: {text}"
    assert err.problems and all(path and problem for path, problem in err.problems)


def has_problem(err: TopologyError, path: str, *words: str) -> bool:
    return any(p == path and all(w in m for w in words) for p, m in err.problems)


def four_with_lag(lag=None) -> dict:
    data = {
        "clusters": {f"c{i}": {"bootstrap": f"127.0.0.1:{19091 + i}"} for i in range(1, 5)},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["orders"],
    }
    if lag is not None:
        data["lag"] = lag
    return data


BASE = {"clusters": {c: {"bootstrap": f"127.0.0.1:{9000 + i}"} for i, c in enumerate(["c1", "c2", "c3", "c4"])},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["orders"]}
