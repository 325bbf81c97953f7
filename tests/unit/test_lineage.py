"""A copy's lineage (mirrorflow.lineage) and its OpenLineage form (mirrorflow_airflow.lineage). Pure.

Through the OpenLineage provider to a real HTTP receiver: tests/dags/test_topology_everywhere.py.
"""

from __future__ import annotations

import json

import pytest

from mirrorflow.lineage import DatasetRef, Edge, copy_lineage, kafka_namespace, level_edges

BOOT = {"c1": "127.0.0.1:9101", "c2": "SASL_SSL://b2.example:9093,b3.example:9093", "c3": "127.0.0.1:9103"}


def _p(link, source, target, topic, partition, copied=0, size=0, restored=0):
    return {"link_id": link, "source": source, "target": target, "topic": topic, "partition": partition,
            "copied": copied, "bytes": size, "restored": restored}


def test_a_kafka_namespace_is_the_first_bootstrap_address():
    assert kafka_namespace("SASL_SSL://b2.example:9093,b3.example:9093") == "kafka://b2.example:9093"
    with pytest.raises(ValueError, match="bootstrap"):
        kafka_namespace("")


def test_every_link_topic_is_an_edge_whether_or_not_records_came():
    links = [{"link": "c1.L1", "source": "c1", "target": "c2", "topics": ["a", "b"]},
             {"link": "c2.L1", "source": "c2", "target": "c1", "topics": ["a"]},
             {"link": "c3.L2", "source": "c3", "target": "c1", "topics": []}]
    assert level_edges(links) == [Edge("c1.L1", "c1", "c2", "a"), Edge("c1.L1", "c1", "c2", "b"),
                                  Edge("c2.L1", "c2", "c1", "a")]


def test_each_source_topic_is_one_input_and_each_target_topic_one_output_with_its_writers_and_totals():
    edges = [Edge("c1.L1", "c1", "c2", "a"), Edge("c3.L2", "c3", "c2", "a"), Edge("c2.L1", "c2", "c1", "a"),
             Edge("c1.L2", "c1", "c3", "a")]
    parts = [_p("c1.L1", "c1", "c2", "a", 0, 5, 50), _p("c1.L1", "c1", "c2", "a", 1, 2, 20),
             _p("c3.L2", "c3", "c2", "a", 0, 1, 7), _p("c2.L1", "c2", "c1", "a", 0)]
    lineage = copy_lineage(edges, BOOT, parts)
    assert [(i.namespace, i.name, i.cluster) for i in lineage.inputs] == [
        ("kafka://127.0.0.1:9101", "a", "c1"), ("kafka://127.0.0.1:9103", "a", "c3"),
        ("kafka://b2.example:9093", "a", "c2")]
    out = {o.cluster: o for o in lineage.outputs}
    assert set(out) == {"c1", "c2", "c3"}
    assert out["c2"].namespace == "kafka://b2.example:9093"
    assert out["c2"].links == ("c1.L1", "c3.L2")
    assert [s.cluster for s in out["c2"].sources] == ["c1", "c3"]
    assert (out["c2"].records, out["c2"].bytes) == (8, 77)
    assert (out["c1"].records, out["c3"].records) == (0, 0)  # ran, nothing new: still an edge
    assert lineage.unknown_clusters == ()


def test_a_renaming_clusters_datasets_name_the_topic_as_it_does_and_still_count_their_records():
    from mirrorflow.naming import NameFormat

    edges = [Edge("c1.L1", "c1", "c2", "a"), Edge("c2.L1", "c2", "c1", "a")]
    parts = [_p("c1.L1", "c1", "c2", "a", 0, 5, 50), _p("c2.L1", "c2", "c1", "a", 0, 1, 9)]
    lineage = copy_lineage(edges, BOOT, parts, names={"c2": NameFormat.of("acme-{topic}")})
    assert [(i.name, i.cluster) for i in lineage.inputs] == [("a", "c1"), ("acme-a", "c2")]
    assert {(o.cluster, o.name, o.records) for o in lineage.outputs} == {("c2", "acme-a", 5), ("c1", "a", 1)}


def test_a_restore_names_the_archived_topic_as_an_input_and_counts_its_records_once():
    parts = [_p("c1.L1", "c1", "c4", "a", 0, copied=10, size=100, restored=4)]
    lineage = copy_lineage([Edge("c1.L1", "c1", "c4", "a")], {**BOOT, "c4": "127.0.0.1:9104"}, parts,
                           archive=("mirror-archive", "mf"))
    assert DatasetRef("s3://mirror-archive", "mf/data/cluster=c1/topic=a", "c1") in lineage.inputs
    assert lineage.outputs[0].records == 10
    # nothing restored: the archive is not an input
    assert len(copy_lineage([Edge("c1.L1", "c1", "c4", "a")], {**BOOT, "c4": "x:1"},
                            [_p("c1.L1", "c1", "c4", "a", 0, 3)], archive=("b", "p")).inputs) == 1


def test_a_cluster_without_an_address_is_left_out_and_named():
    lineage = copy_lineage([Edge("c1.L1", "c1", "c9", "a")], BOOT)
    assert (lineage.inputs, lineage.outputs, lineage.unknown_clusters) == ((), (), ("c9",))


def test_the_provider_objects_serialise_as_openlineage_datasets_with_the_copy_facets():
    from openlineage.client.serde import Serde

    from mirrorflow_airflow.lineage import COPY_FACET_SCHEMA, operator_lineage

    lineage = copy_lineage([Edge("c1.L1", "c1", "c2", "a")], BOOT, [_p("c1.L1", "c1", "c2", "a", 0, 3, 30)])
    ol = operator_lineage(lineage)
    (inp,), (out,) = [json.loads(Serde.to_json(d)) for d in ol.inputs], [json.loads(Serde.to_json(d)) for d in ol.outputs]
    assert (inp["namespace"], inp["name"]) == ("kafka://127.0.0.1:9101", "a")
    assert inp["facets"]["symlinks"]["identifiers"] == [{"namespace": "mirrorflow", "name": "c1/a", "type": "TOPIC"}]
    assert (out["namespace"], out["name"]) == ("kafka://b2.example:9093", "a")
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert out["outputFacets"]["outputStatistics"]["size"] == 30
    copy = out["outputFacets"]["mirrorflow_copy"]
    assert copy["links"] == ["c1.L1"]
    assert copy["sources"] == [{"namespace": "kafka://127.0.0.1:9101", "name": "a", "cluster": "c1"}]
    assert copy["_schemaURL"] == COPY_FACET_SCHEMA
