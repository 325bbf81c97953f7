"""The topology as DAG files see it: loaded from ``MIRROR_TOPOLOGY`` at parse time.

A broken file makes the DAG file fail to import, so the error (which names the
key) shows up in the Airflow UI's import errors before anything is copied.
"""

from __future__ import annotations

from mirrorflow.topology import Topology, load_topology_from_env


def current_topology() -> Topology:
    return load_topology_from_env()
