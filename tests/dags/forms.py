"""The run confs of the operator DAGs' forms, as the UI submits them: the failover's and the onboarding's."""

from __future__ import annotations


def failover_conf(**kw):
    conf = {"groups": [], "from_cluster": "c1", "to_cluster": "c4", "mode": "planned", "precision": "exact",
            "dry_run": False, "force": False}
    conf.update(kw)
    return conf


def onboard_form(kafka_clusters, **extra):
    return {"cluster": "c4", "bootstrap": kafka_clusters["c4"].bootstrap, "conn_id": None, "sibling_of": "c3",
            "level": 1, "topics": [], "backfill": "retained", "since": None, "schemas": True, "adopt": False,
            "dry_run": False, **extra}
