"""A DAG object registered as the dag-processor registers a parsed file.

``dag.test()`` runs a DAG object that no file was parsed into, so Airflow knows
neither the DAG nor its assets, and the asset events of its outlets are not
registered. The tests that check asset events, and the benchmark of what a task
costs, register their DAG first with :func:`parsed`.
"""

from __future__ import annotations

from typing import Any


def parsed(dag: Any) -> Any:
    """``dag`` written to the metadata database as the dag-processor writes a parsed file; returns ``dag``."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    with create_session() as session:
        update_dag_parsing_results_in_db("dags-folder", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(),
                                         session=session)
    return dag
