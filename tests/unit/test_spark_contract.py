"""The Spark-job contract (mirrorflow.spark): the level copy, the backfill and the archive keep it alike.

Each job's own JSON is tested with the job (test_job_spec.py, test_archive_layout.py);
here only what the contract promises of every one: the spec from its variable,
errors that name the variable, a named error for a cluster the spec lacks, and a
result's ``ok``, ``errors`` and JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.spec import ArchiveResult, ArchiveSpec
from mirrorflow.copy import JobResult, JobSpec, LinkJob, PartitionError
from mirrorflow.errors import MirrorflowError
from mirrorflow.onboard.backfill import BackfillResult, BackfillSpec
from mirrorflow.spark import SparkJobResult, SparkJobSpec

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = {"c1": {"bootstrap.servers": "h1:9092", "sasl.password": "pw"}, "c4": {"bootstrap.servers": "h4:9092"}}
LOCATION = ArchiveLocation("my-bucket", "arch", access_key_id="AKID", secret_access_key="s3cr3t")

SPECS = {
    "level": JobSpec(level=3, run_id="r1", topics=("orders",), links=(LinkJob("c1.L3", 3, "c1", "c4"),),
                     clusters=CLUSTERS),
    "backfill": BackfillSpec(run_id="r1", link_id="c1.L3", level=3, source="c1", target="c4", mode="retained",
                             bits=4, topics={"orders": 2}, clusters=CLUSTERS),
    "archive": ArchiveSpec(run_id="r1", clusters=CLUSTERS, archived=("c1",), topics=("orders",), location=LOCATION),
}
RESULTS = {
    "level": JobResult(3, "r1", errors=[PartitionError("c1.L3", "c1", "c4", "orders", 0, 7, "boom")]),
    "backfill": BackfillResult("r1", "c1.L3", "c1", "c4", "retained", errors=["c1.L3 orders[0]: boom"]),
    "archive": ArchiveResult("r1", errors=["c1 orders[0]: boom"]),
}


@pytest.fixture(params=sorted(SPECS))
def spec(request) -> SparkJobSpec:
    return SPECS[request.param]


def test_every_job_keeps_the_contract():
    assert all(isinstance(s, SparkJobSpec) for s in SPECS.values())
    assert all(isinstance(r, SparkJobResult) for r in RESULTS.values())
    assert len({type(s).env for s in SPECS.values()}) == 3  # one variable each


def test_the_spec_comes_back_from_its_variable(spec, monkeypatch):
    cls = type(spec)
    assert cls.from_env({spec.env: spec.to_json(), "OTHER": "x"}) == spec
    monkeypatch.setenv(spec.env, spec.to_json())
    assert cls.from_env() == spec


@pytest.mark.parametrize("environ", [{}, {"MIRRORFLOW_OTHER": "{}"}], ids=["nothing", "another variable"])
def test_an_unset_variable_is_named(spec, environ):
    for env in (environ, {**environ, spec.env: ""}):
        with pytest.raises(MirrorflowError) as info:
            type(spec).from_env(env)
        assert str(info.value).startswith(f"{spec.env} is not set: ")


@pytest.mark.parametrize("text", ["not json", "{'run_id': 1}", '{"run_id": "r1",'])
def test_text_that_is_not_json_is_named(spec, text):
    with pytest.raises(MirrorflowError) as info:
        type(spec).from_env({spec.env: text})
    assert str(info.value).startswith(f"{spec.env}: not a valid {spec.kind}: not JSON: ")


@pytest.mark.parametrize("text", ["[]", "null", "{}", '{"run_id": "r1"}'])
def test_json_that_is_not_a_spec_is_named(spec, text):
    with pytest.raises(MirrorflowError) as info:
        type(spec).from_env({spec.env: text})
    assert str(info.value).startswith(f"{spec.env}: not a valid {spec.kind}: ")


def test_a_cluster_the_spec_lacks_is_named(spec):
    assert spec.client("c1").settings["bootstrap.servers"] == "h1:9092"
    with pytest.raises(MirrorflowError, match=f"^{spec.kind} has no client settings for cluster 'c9'$"):
        spec.client("c9")


@pytest.mark.parametrize("job", sorted(RESULTS))
def test_a_result_says_ok_and_names_its_errors(job):
    result = RESULTS[job]
    assert not result.ok
    data = json.loads(result.to_json())
    assert data["ok"] is False and data["errors"] == [str(e) for e in result.errors]
    assert set(result.summary()) | set(result.details()) == set(data)
    result = type(result)(**{**result.__dict__, "errors": []})
    assert result.ok and json.loads(result.to_json())["ok"] is True


def test_the_face_imports_no_pyspark():
    # Airflow tasks and Spark executors import the face; pyspark is imported where a job starts Spark.
    code = ("import sys\nimport mirrorflow.spark\nfrom mirrorflow.spark import run_bins, run_entry, session\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/",
                         env={"PYTHONPATH": str(REPO / "include"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_job_whose_connect_server_went_away_says_so_and_one_that_failed_does_not():
    """The two read differently to an operator: one is the server's matter, the other the job's."""
    from mirrorflow.spark import job_failure, server_lost

    class PySparkRuntimeError(Exception):
        pass

    # What the Connect client raised when the platform test killed the server under a copy.
    restarted = PySparkRuntimeError("[RESPONSE_ALREADY_RECEIVED] INVALID_HANDLE.SESSION_NOT_FOUND on the server but "
                                    "responses were already received from it.")
    url = "sc://127.0.0.1:15002/;token=s3cret"
    lost = job_failure("mirrorflow-level-1", url, "spark_default", restarted)
    assert server_lost(restarted)
    assert "stopped or restarted during the job" in str(lost) and "sc://127.0.0.1:15002" in str(lost)
    assert "s3cret" not in str(lost)
    # ... and when the kill landed between two calls of the job (seen on CI).
    assert server_lost(PySparkRuntimeError("[NO_ACTIVE_SESSION] No active Spark session found."))
    failed = job_failure("mirrorflow-level-1", url, "spark_default", ValueError("bad spec"))
    assert not server_lost(ValueError("bad spec"))
    assert str(failed).endswith("(connection spark_default): ValueError: bad spec")
