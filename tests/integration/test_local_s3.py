"""The local S3 server (S3Proxy from Maven Central) speaks S3 to boto3 over HTTP, and checks signatures."""

from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from mirrorflow_dev.s3 import LocalS3, S3ServerError


def _client(server: LocalS3, secret: str | None = None):
    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint_url, region_name=server.region,
        aws_access_key_id=server.access_key, aws_secret_access_key=secret or server.secret_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def test_put_get_list_overwrite_delete(s3_server):
    s3 = _client(s3_server)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    key = "mirrorflow/data/cluster=c1/topic=t/partition=0/date=2024-05-01/00000000000000000000.parquet"
    s3.put_object(Bucket=bucket, Key=key, Body=b"first")
    s3.put_object(Bucket=bucket, Key="mirrorflow/other.json", Body=b"{}")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"first"

    # a PUT replaces the object whole: what makes a repeated archive run idempotent
    s3.put_object(Bucket=bucket, Key=key, Body=b"second, longer")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"second, longer"

    listed = s3.list_objects_v2(Bucket=bucket, Prefix="mirrorflow/data/")
    assert [o["Key"] for o in listed["Contents"]] == [key]  # no directory placeholders
    assert listed["Contents"][0]["Size"] == len(b"second, longer")
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) == [key, "mirrorflow/other.json"]

    s3.delete_object(Bucket=bucket, Key=key)
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=bucket, Key=key)
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="mirrorflow/data/")["KeyCount"] == 0


def test_wrong_secret_is_refused(s3_server):
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    _client(s3_server).create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as refused:
        _client(s3_server, secret="not-the-secret").put_object(Bucket=bucket, Key="k", Body=b"x")
    error = refused.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Error"]["Code"] == "SignatureDoesNotMatch"
    assert _client(s3_server).list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_repr_hides_the_secret(s3_server):
    assert s3_server.secret_key not in repr(s3_server)
    assert s3_server.endpoint_url.startswith("http://127.0.0.1:")
    assert s3_server.region == "us-east-1"


def test_a_server_that_dies_at_start_says_why(tmp_path):
    # S3Proxy refuses an empty identity and exits: the error quotes the tail of its log
    broken = LocalS3(None, tmp_path / "data", access_key="", secret_key="s", run_dir=tmp_path / "run")
    with pytest.raises(S3ServerError, match=r"exited with 1 during start-up") as failed:
        broken.start(timeout=60)
    assert "Must provide both identity and credential" in str(failed.value)
    assert str(broken.log_path) in str(failed.value)
    assert not broken.is_running()


def test_a_taken_port_is_refused_before_starting(s3_server, tmp_path):
    # otherwise the readiness probe would be answered by the server already on that port
    with pytest.raises(S3ServerError, match=rf"127.0.0.1:{s3_server.port}: the port is already in use"):
        LocalS3(s3_server.port, tmp_path / "data", "k", "s", run_dir=tmp_path / "run").start()
    assert s3_server.ready()
