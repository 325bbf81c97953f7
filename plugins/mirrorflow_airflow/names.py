"""Each live cluster held to the names it stores mirrored topics and groups under (docs/naming.md).

A changed ``clusters.<c>.names`` on a cluster that is already in the tree would
make every run that touches it act under the new names: a level run would copy
the whole history again, an offsets run commit positions on groups and topics
that are not there. So the level, offsets and failover runs first compare each
cluster's names with what the runs recorded (Variable ``mirrorflow_cluster_names``)
and change nothing when they differ; the error says both formats and the two
ways on. A cluster seen for the first time is recorded as it is.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology, renamed_live
from mirrorflow_airflow.state import record_names, recorded_names


class NamesChanged(MirrorflowError, AirflowFailException):
    """A live cluster's ``names`` changed in the topology; the run changes nothing."""


def hold_names(topology: Topology, clusters: list[str], unchanged: str) -> None:
    """Refuse the run (``unchanged``: what it therefore did not do) when a cluster's names changed; record new ones."""
    recorded = recorded_names(topology.namespace)
    now = {c: topology.cluster(c).names.filled() for c in clusters}
    problems = renamed_live(recorded, now)
    if problems:
        raise NamesChanged(f"{unchanged}:\n  " + "\n  ".join(problems))
    new = {c: formats for c, formats in now.items() if c not in recorded}
    if new:
        record_names(topology.namespace, new)
