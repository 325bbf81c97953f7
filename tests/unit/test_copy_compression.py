"""The codec of copies and the producer's size settings that go with it (docs/topics.md, "Compression of copies")."""

from __future__ import annotations

import pytest

from mirrorflow.kafka.compression import (
    COPY_CODEC,
    LIBRDKAFKA_MAX_MESSAGE_BYTES,
    codec_settings,
    copy_codec,
    size_settings,
)
from mirrorflow.topology.model import Topology
from tests.unit.topologies import four, has_problem, refuse


def test_copies_are_compressed_with_zstd_unless_the_target_cluster_names_a_codec():
    assert COPY_CODEC == "zstd"
    assert copy_codec({"bootstrap.servers": "b:9092"}) == "zstd"
    assert codec_settings({"bootstrap.servers": "b:9092"}) == {"compression.type": "zstd"}
    for key in ("compression.type", "compression.codec"):
        assert copy_codec({key: "lz4"}) == "lz4"
        assert codec_settings({key: "lz4"}) == {}  # the cluster's own setting reaches the producer as it is


def test_compressed_copies_leave_the_records_size_to_the_broker_and_keep_batches_within_the_limit():
    assert size_settings("zstd", 1_053_783) == {"message.max.bytes": LIBRDKAFKA_MAX_MESSAGE_BYTES,
                                                "batch.size": 1_053_783}
    assert size_settings("lz4", None) == {"message.max.bytes": LIBRDKAFKA_MAX_MESSAGE_BYTES}


def test_uncompressed_copies_are_checked_by_the_producer_against_the_limit():
    assert size_settings("none", 1_053_783) == {"message.max.bytes": 1_053_783, "batch.size": 1_053_783}
    assert size_settings("none", 10) == {"message.max.bytes": 1000, "batch.size": 1000}  # librdkafka's minimum
    assert size_settings("none", None) == {}


@pytest.mark.parametrize("key", ["compression.type", "compression.codec"])
def test_an_unknown_codec_in_a_clusters_config_is_refused_by_its_key(key):
    data = four()
    data["clusters"]["c4"]["config"] = {key: "zstd2"}
    assert has_problem(refuse(data), "clusters.c4.config",
                       f"{key} must be one of none, gzip, snappy, lz4, zstd, got 'zstd2'")
    data["clusters"]["c4"]["config"] = {key: "lz4"}
    assert Topology.parse(data).clusters["c4"].config == {key: "lz4"}
