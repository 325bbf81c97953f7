"""The Spark harness runs executors on this interpreter, with the core importable."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.spark


def _probe(_):
    import confluent_kafka  # version() is the client version string in 2.16

    import mirrorflow

    yield (sys.executable, confluent_kafka.version(), mirrorflow.__version__)


def test_executors_use_this_interpreter_and_import_the_core(spark):
    rows = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_probe).collect()
    assert len(rows) == 4
    executables = {row[0] for row in rows}
    assert executables == {sys.executable}, executables
    assert {row[1] for row in rows} == {"2.16.1"}


def test_pyspark_is_the_pinned_full_distribution():
    """pyspark-client (pulled in by the Spark provider) must not shadow pyspark 4.3."""
    import pyspark

    assert pyspark.__version__ == "4.3.0"
