"""The stack the tests of this package share: one ``airflow standalone`` on the session's four-cluster tree.

Starting ``airflow standalone`` and letting its dag-processor list this repo's
DAGs takes two to six minutes on the two-core CI machine, so the end-to-end
tests that need a standalone on the session clusters c1..c4 (the failover form
in Chromium, the scheduler on the audit's proven asset, the levels started by
data) share one (``conftest.py`` here: package-scoped fixtures, torn down once
the package's last test ends; ``tests/fixtures/workers.py`` keeps every
end-to-end test on one worker).

The standalone runs two trees (docs/naming.md, "Several trees"): that one, and a
second tree with the namespace ``b`` on c3 and c4, which share them under the
topic prefix ``b-``. The levels started by data run both side by side.

Each test keeps to its own topic (the topology selects all of them) and its own
DAGs: it unpauses what it runs through :func:`unpaused`, which pauses them again
when it ends, so the tests pass in any order and one that fails leaves the next
a paused stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mirrorflow.topology import Topology, parse_topology
from mirrorflow_dev.process import wait_until
from tests.fixtures.standalone import ApiError, Standalone
from tests.integration.mirroring import FOUR

CLUSTERS = ("c1", "c2", "c3", "c4")
FAILOVER_DAG = "mirror_failover_consumer_group"
LEVEL_DAGS = ("mirror_level_1", "mirror_level_3")
#: A second tree in the same Airflow (docs/naming.md, "Several trees"): c3 and c4 again, under the namespace ``b``
#: and the topic prefix ``b-`` there; its clusters are called c3 and c4 too, as two teams' trees would.
SECOND_NAMESPACE, SECOND_PREFIX, SECOND_CLUSTERS = "b", "b-", ("c3", "c4")
SECOND_LEVEL_DAG = f"{SECOND_NAMESPACE}.mirror_level_1"
#: A user's DAG scheduled on the audit's proven asset of c4 (docs/assets.md), next to this repo's DAG files.
USER_DAG = "orders_proven_on_c4"
USER_DAG_FILE = '''\
"""A user's DAG: one run per window of {topic} proven complete on c4 (docs/assets.md)."""
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from mirrorflow_airflow.assets import proven

with DAG("{dag_id}", schedule=PartitionedAssetTimetable(assets=proven("c4", "{topic}")), catchup=False):

    @task
    def load(**context):
        return context["partition_key"]

    load()
'''


@dataclass(frozen=True)
class Topics:
    """One topic per test of the package, all selected by the shared topology."""

    failover: str = field(default_factory=lambda: f"ui-orders-{uuid.uuid4().hex[:8]}")
    assets: str = field(default_factory=lambda: f"ui-assets-{uuid.uuid4().hex[:8]}")
    data: str = field(default_factory=lambda: f"on-data-{uuid.uuid4().hex[:8]}")
    #: The second tree's topic (logical name; ``b-<name>`` on c3 and c4).
    second: str = field(default_factory=lambda: f"tree-b-{uuid.uuid4().hex[:8]}")


def topology_text(bootstraps: dict[str, str], topics: Topics) -> str:
    """The four-cluster tree on the given clusters, its levels started by data, approvals on, 10-minute audit windows.

    What each test needs of it: the failover form asks for approvals; the audit proves
    10-minute windows after a minute's grace; the level DAGs are ``on_data`` (the
    watcher polls every second, a run at most every 3 s). Nothing else differs from the
    defaults, and each of these applies to its own DAGs only (a level DAG has no
    approval, the failover no schedule).
    """
    lines = ["name: e2e-standalone", "clusters:"]
    lines += [f'  {n}: {{bootstrap: "{bootstraps[n]}"}}' for n in CLUSTERS]
    text = "\n".join(lines) + f"\ntree:{FOUR}topics: [\"{topics.failover}\", \"{topics.assets}\", \"{topics.data}\"]\n"
    text += "approvals: {enabled: true, timeout_minutes: 30}\naudit: {window_minutes: 10, grace_minutes: 1}\n"
    text += "replication: {schedule: on_data, on_data: {poll: 1s, floor: 3s}}\n"
    return text


def second_topology_text(bootstraps: dict[str, str], topics: Topics) -> str:
    """The second tree: level 1 between c3 and c4 of the first, namespace ``b``, its topic stored as ``b-<name>``.

    It carries no consumer groups: the first tree carries every group on c3 and c4 under its own names.
    """
    lines = ["name: second-tree", f"namespace: {SECOND_NAMESPACE}", "clusters:"]
    lines += [f'  {n}: {{bootstrap: "{bootstraps[n]}", names: {{topic_prefix: "{SECOND_PREFIX}"}}}}'
              for n in SECOND_CLUSTERS]
    return "\n".join(lines) + (f"\ntree: {{level: 1, children: [{', '.join(SECOND_CLUSTERS)}]}}\n"
                               f"topics: [\"{topics.second}\"]\noffsets: {{groups: []}}\n"
                               "replication: {schedule: on_data, on_data: {poll: 1s, floor: 3s}}\n")


@dataclass(frozen=True)
class Stack:
    """The shared stack's topologies (the files and the first parsed) and topics; the standalone is the fixture's."""

    path: Path
    topology: Topology
    topics: Topics
    #: The second tree's file: ``MIRROR_TOPOLOGY`` names both (:attr:`trees`).
    second: Path

    @property
    def trees(self) -> str:
        return f"{self.path}:{self.second}"

    @classmethod
    def write(cls, directory: Path, bootstraps: dict[str, str]) -> Stack:
        topics = Topics()
        path, second = directory / "topology.yaml", directory / "second.yaml"
        text = topology_text(bootstraps, topics)
        path.write_text(text)
        second.write_text(second_topology_text(bootstraps, topics))
        return cls(path, parse_topology(text, source=str(path)), topics, second)


@contextmanager
def unpaused(standalone: Standalone, dag_ids: Iterable[str]) -> Iterator[None]:
    """The DAGs unpaused for the block (the scheduler starts their runs), paused again after it, pass or fail.

    Their files are parsed again right after each change, as a user would with "Reparse Dag": the stack parses
    files every ten minutes only, and Airflow starts and stops an ``on_data`` level's watcher at a parse
    (docs/levels.md).
    """
    dag_ids = tuple(dag_ids)
    for dag_id in dag_ids:
        standalone.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
    standalone.reparse(dag_ids)
    try:
        yield
    finally:
        for dag_id in dag_ids:
            wait_until(f"{dag_id} to be paused again", lambda dag_id=dag_id: _paused(standalone, dag_id), 120, 2,
                       standalone.log_tail)
        standalone.reparse(dag_ids)


def _paused(standalone: Standalone, dag_id: str) -> bool:
    try:
        return standalone.api("PATCH", f"/dags/{dag_id}", {"is_paused": True})["is_paused"] is True
    except ApiError:  # the API server stalls under load now and then: ask again, the deadline decides
        return False
